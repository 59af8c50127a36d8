"""Argument checks for the functions users call directly: the checks here and the course's grader.

Each check raises ``TypeError`` (a wrong kind of object) or ``ValueError`` (a wrong value, shape
or name) with one line of the form of ``npformer.ops._validate``, whose array checks it reuses::

    <function>: <argument> must be <expected>, got <received>

They run before any work starts, so a mistake is named where it was made rather than surfacing
later as an ``IndexError`` deep inside a finite difference, or not at all.
"""

from __future__ import annotations

import difflib
import inspect
import math
from typing import Any, Callable, Iterable

import numpy

from ..ops._validate import check_float


def received(value: Any) -> str:
    """A short description of ``value`` for an error message: an array's type, shape and dtype."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def check_callable(function: str, name: str, value: Any) -> None:
    """``value`` must be callable (a function, a lambda, a bound method)."""
    if not callable(value):
        raise TypeError(f"{function}: {name} must be a function, got {received(value)}")


def check_number(function: str, name: str, value: Any) -> None:
    """``value`` must be a finite real number ``> 0`` (a step, a tolerance)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, numpy.integer, numpy.floating)):
        raise TypeError(f"{function}: {name} must be a finite number > 0, got {received(value)}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{function}: {name} must be a finite number > 0, got {value!r}")


def check_int(function: str, name: str, value: Any, low: int = 0, optional: bool = False) -> None:
    """``value`` must be an int ``>= low`` (a seed: 0, a size or a count: 1); None too when ``optional``."""
    if optional and value is None:
        return
    expected = f"an int >= {low}" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
        raise TypeError(f"{function}: {name} must be {expected}, got {received(value)}")
    if value < low:
        raise ValueError(f"{function}: {name} must be {expected}, got {value!r}")


def check_type(function: str, name: str, value: Any, types: type | tuple, expected: str) -> None:
    """``value`` must be an instance of ``types``; ``expected`` says so in words."""
    if not isinstance(value, types):
        raise TypeError(f"{function}: {name} must be {expected}, got {received(value)}")


def check_known(function: str, name: str, value: Any, known: Iterable[str], error: type = ValueError) -> None:
    """``value`` must be one of ``known``; the message offers the close names, or lists them all."""
    known = list(known)
    if isinstance(value, str) and value in known:
        return
    close = difflib.get_close_matches(value, known, n=5) if isinstance(value, str) else []
    choices = f"the {len(known)} known names (closest: {', '.join(close)})" if close else ", ".join(known)
    raise error(f"{function}: {name} must be one of {choices}, got {value!r}")


def check_inputs(function: str, name: str, value: Any) -> None:
    """``value`` must be a dict of argument name -> value, with str keys and at least one entry."""
    check_type(function, name, value, dict, "a dict of argument name -> value")
    bad = [key for key in value if not isinstance(key, str)]
    if bad or not value:
        raise ValueError(f"{function}: {name} must map argument names (str) to values, got keys {list(value)}")


def check_fits(function: str, name: str, target: Callable, names: list[str], match_names: bool = True,
               keywords: Iterable[str] = ()) -> None:
    """``target(*values, **keywords)`` must accept one positional value per entry of ``names``.

    A wrong number of values, an unknown keyword or a required parameter left out is a
    ``TypeError``; with ``match_names``, so is a name that is another parameter of ``target``: the
    values are passed in order, so ``{"W": W, "x": x}`` would give ``W`` to ``x``. With
    ``match_names``, a name that is no parameter of ``target`` is a ``ValueError`` naming it (a
    typing mistake, or inputs meant for another function), unless its value lands in ``target``'s
    ``*args``. Targets without a signature are not checked.
    """
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return
    plain = signature.replace(parameters=[parameter.replace(annotation=inspect.Parameter.empty)
                                          for parameter in signature.parameters.values()],
                              return_annotation=inspect.Signature.empty)
    shown = f"{getattr(target, '__name__', type(target).__name__)}{plain}"
    given = list(names) + [f"{key}=" for key in keywords]
    try:
        bound = signature.bind(*names, **{key: key for key in keywords})
    except TypeError as error:
        raise TypeError(f"{function}: {name} must fit {shown}, got {len(given)} value(s) "
                        f"({', '.join(given)}): {error}") from None
    for parameter, value in bound.arguments.items():
        if not match_names or not isinstance(value, str) or value == parameter:
            continue  # a str value is one of ``names``; *args binds a tuple of them, any names allowed
        if value in signature.parameters:
            raise TypeError(f"{function}: {name} must list the arguments of {shown} in order, "
                            f"got {value!r} in the place of {parameter!r}")
        raise ValueError(f"{function}: {name} must name the arguments of {shown}, got {value!r}, "
                         f"which it does not take (in the place of {parameter!r})")


def check_shape(function: str, name: str, value: Any, shape: tuple, what: str) -> None:
    """``value`` must have ``shape`` (``what`` says whose shape it is)."""
    got = tuple(numpy.shape(value))
    if got != tuple(shape):
        raise ValueError(f"{function}: {name} must have {what} {tuple(shape)}, got shape {got}")


def check_float64(function: str, name: str, value: Any) -> None:
    """``value`` must be a writable float64 array of the active backend: the finite differences
    perturb it in place, which a read-only array would refuse."""
    check_float(function, name, value)
    if value.dtype != numpy.float64:
        raise TypeError(f"{function}: {name} must have dtype float64 (float32 rounds a finite "
                        f"difference away), got {value.dtype}")
    if not getattr(value.flags, "writeable", True):
        raise ValueError(f"{function}: {name} must be a writable array (it is perturbed in place; pass a "
                         f"copy, numpy.array(x)), got a read-only array")
