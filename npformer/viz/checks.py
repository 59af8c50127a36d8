"""The argument checks every figure makes before Matplotlib is imported or anything is drawn.

A matrix has its documented number of axes, row and column labels are lists of tokens that fit it
(no more labels than rows or columns: a map may be longer, for padding, and is cut to its labels),
lists of maps agree with each other, and ``path`` is a file whose folder exists or can be created
(it is created when saving). A mistake raises ``ValueError`` or ``TypeError`` in one line:
function, argument, expected, got.
"""

from __future__ import annotations

import os
from typing import Any


def got(value: Any) -> str:
    """A short description of ``value``: an array's shape, else its type and a clipped repr."""
    if hasattr(value, "shape"):
        return f"{type(value).__name__} of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def check_array(function: str, name: str, value: Any, ndim: int, layout: str) -> Any:
    """``value`` as a host float array with ``ndim`` axes ``layout`` and no empty axis."""
    import numpy

    from .. import backend
    from ..ops._validate import check_ndim

    try:
        array = numpy.asarray(backend.to_numpy(value) if hasattr(value, "shape") else value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{function}: {name} must be an array of numbers {layout}, got {got(value)}") from None
    check_ndim(function, name, array, ndim, layout)
    if array.size == 0:
        raise ValueError(f"{function}: {name} must not be empty {layout}, got shape {array.shape}")
    return array


def check_labels(function: str, name: str, labels: Any, size: int | None = None, axis: str = "") -> None:
    """``labels`` must be a non-empty list of str tokens, at most ``size`` of them (the matrix's ``axis``)."""
    if isinstance(labels, str) or not isinstance(labels, (list, tuple)) or not all(isinstance(t, str) for t in labels):
        raise TypeError(f"{function}: {name} must be a list of str tokens, got {got(labels)}")
    if not labels or (size is not None and len(labels) > size):
        fit = f"between 1 and {size} tokens ({axis})" if size is not None else "at least 1 token"
        raise ValueError(f"{function}: {name} must hold {fit}, got {len(labels)}")


def check_maps(function: str, name: str, maps: Any, rows: Any, columns: Any,
                labels: tuple[str, str] = ("the row labels", "the column labels")) -> list:
    """``maps``: a non-empty list over layers of ``(H, Tq, Tk)`` arrays with one ``H``, and labels
    (named ``labels``) that fit every one of them: ``rows`` at most ``Tq``, ``columns`` at most
    ``Tk``. Returns the layers as host float arrays."""
    stacked = hasattr(maps, "ndim")  # one (L, H, Tq, Tk) array is a list over layers too
    if (stacked and maps.ndim != 4) or (not stacked and not isinstance(maps, (list, tuple))):
        raise TypeError(f"{function}: {name} must be a list over layers of (H, Tq, Tk) arrays, got {got(maps)}")
    if len(maps) == 0:
        raise ValueError(f"{function}: {name} must hold at least one layer, got none")
    layers = [check_array(function, f"{name}[{i}]", layer, 3, "(H, Tq, Tk)") for i, layer in enumerate(maps)]
    for i, layer in enumerate(layers):
        if layer.shape[0] != layers[0].shape[0]:
            raise ValueError(f"{function}: {name}[{i}] must have the heads of {name}[0], H = {layers[0].shape[0]}, "
                             f"got shape {layer.shape}")
        check_labels(function, labels[0], rows, layer.shape[1], f"Tq of {name}[{i}]")
        check_labels(function, labels[1], columns, layer.shape[2], f"Tk of {name}[{i}]")
    return layers


def check_count(function: str, name: str, value: Any, low: int = 1) -> None:
    """``value`` must be an int ``>= low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{function}: {name} must be an int >= {low}, got {got(value)}")


def is_number(value: Any) -> bool:
    """A real number (int, float or a NumPy scalar), not a bool."""
    import numbers

    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_text(function: str, name: str, value: Any) -> None:
    """``value`` must be a str (a title)."""
    if not isinstance(value, str):
        raise TypeError(f"{function}: {name} must be a str, got {got(value)}")


def check_path(function: str, path: Any) -> None:
    """``path`` (None or "": not saved) must name a file whose folder exists or can be created;
    an open binary file (anything with ``write``) is taken as it is."""
    if path is None or path == "" or hasattr(path, "write"):
        return
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{function}: path must be a str or os.PathLike file name, got {got(path)}")
    if os.path.isdir(path):
        raise ValueError(f"{function}: path must name a file, got the folder {os.fspath(path)!r}")
    folder = existing = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        problem = "a file" if not os.path.isdir(existing) else "a folder that is not writable"
        raise ValueError(f"{function}: path must be in a folder that exists or can be created, got "
                         f"{os.fspath(path)!r}, whose folder {folder!r} cannot be: {existing!r} is {problem}")


def make_folder(path: Any) -> None:
    """Create the folder of ``path`` (and its parents) when missing."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
