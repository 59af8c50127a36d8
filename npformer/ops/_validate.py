"""Input checks shared by the ops.

Every check raises ``TypeError`` (wrong kind of object or dtype) or
``ValueError`` (wrong rank, shape or range) with a message of the form::

    <op>: <argument> must be <expected>, got <received>

The checks look at shapes and dtypes only (plus a min/max for token ids), so
they cost microseconds next to the matrix products they guard.
"""

from __future__ import annotations

from typing import Any

from ..backend import get_backend, xp


def check_array(op: str, name: str, value: Any) -> None:
    """``value`` must be an array of the active backend (not a list, not the other library's)."""
    if not isinstance(value, xp.ndarray):
        kind = type(value).__module__.split(".")[0] + "." + type(value).__name__
        raise TypeError(
            f"{op}: {name} must be a {get_backend()} array, got {kind}"
            + (
                " (move it with npformer.backend.asarray)"
                if hasattr(value, "shape")
                else ""
            )
        )


def check_float(op: str, name: str, value: Any) -> None:
    """``value`` must be a floating-point array."""
    check_array(op, name, value)
    if value.dtype.kind != "f":
        raise TypeError(
            f"{op}: {name} must have a floating dtype (float32 or float64), got {value.dtype}"
        )


def check_integer(op: str, name: str, value: Any) -> None:
    """``value`` must be an integer array (token ids, class targets)."""
    check_array(op, name, value)
    if value.dtype.kind not in "iu":
        raise TypeError(
            f"{op}: {name} must have an integer dtype (token ids), got {value.dtype}"
        )


def check_ndim(op: str, name: str, value: Any, ndim: int, layout: str) -> None:
    """``value`` must have exactly ``ndim`` axes; ``layout`` names them, e.g. "(B, H, T, Dh)"."""
    if value.ndim != ndim:
        raise ValueError(
            f"{op}: {name} must have {ndim} dimensions {layout}, "
            f"got {value.ndim} with shape {tuple(value.shape)}"
        )


def check_min_ndim(op: str, name: str, value: Any, ndim: int, layout: str) -> None:
    """``value`` must have at least ``ndim`` axes."""
    if value.ndim < ndim:
        raise ValueError(
            f"{op}: {name} must have at least {ndim} dimension(s) {layout}, "
            f"got shape {tuple(value.shape)}"
        )


def check_same_dtype(op: str, names: tuple[str, ...], values: tuple[Any, ...]) -> None:
    """Floating arguments must share one dtype: NumPy would silently upcast float32 to float64."""
    dtypes = [value.dtype for value in values]
    if any(dtype != dtypes[0] for dtype in dtypes):
        received = ", ".join(f"{n}={d}" for n, d in zip(names, dtypes))
        raise TypeError(
            f"{op}: {', '.join(names)} must share one floating dtype, got {received}"
        )


def check_ids_in_range(op: str, name: str, ids: Any, upper: int, what: str) -> None:
    """Every id must lie in [0, upper); ``what`` says where ``upper`` comes from."""
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= upper:
        raise ValueError(
            f"{op}: {name} must lie in [0, {upper}) ({what}), got values in [{low}, {high}]"
        )


def check_broadcastable(op: str, name: str, value: Any, target: tuple[int, ...], layout: str) -> None:
    """``value`` must broadcast to ``target`` without growing it (NumPy rules, aligned right)."""
    shape = tuple(value.shape)
    fits = len(shape) <= len(target) and all(
        size in (1, full) for size, full in zip(shape[::-1], target[::-1])
    )
    if not fits:
        raise ValueError(
            f"{op}: {name} must be broadcastable to {layout} = {target}, got shape {shape}"
        )
