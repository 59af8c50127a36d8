"""Softmax along one axis, numerically stable.

Forward, along ``axis``::

    y_i = exp(x_i - m) / sum_j exp(x_j - m),   m = max_j x_j

Subtracting the row maximum changes nothing mathematically (softmax is
invariant to adding a constant) but keeps every ``exp`` at most 1, so large
inputs cannot overflow. Entries of ``-inf`` get probability exactly 0, as long
as each row has at least one finite entry.

Backward: the Jacobian is ``diag(y) - y y^T``, so without building it::

    dx = y * (dy - sum_j(dy_j * y_j))

Two helpers without a backward pass use the same shift: ``logsumexp(x)``, the log
normaliser ``m + log(sum_j exp(x_j - m))``, and ``log_softmax(x) = x - logsumexp(x)``.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_min_ndim


def softmax_forward(x: Any, axis: int = -1) -> tuple[Any, dict]:
    """Softmax of ``x`` along ``axis``; returns ``(y, cache)`` with ``y`` the shape of ``x``."""
    check_float("softmax_forward", "x", x)
    check_min_ndim("softmax_forward", "x", x, 1, "(..., N)")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"softmax_forward: axis must lie in [{-x.ndim}, {x.ndim}) for x of shape "
            f"{tuple(x.shape)}, got {axis}"
        )
    exps = xp.exp(x - x.max(axis=axis, keepdims=True))      # every entry <= 1: no overflow
    y = exps / exps.sum(axis=axis, keepdims=True)
    return y, {"y": y, "axis": axis}


def softmax_backward(dy: Any, cache: dict) -> Any:
    """``dx = y * (dy - sum(dy * y))`` along the softmax axis; the shape of ``x``."""
    y, axis = cache["y"], cache["axis"]
    dx = dy * y
    dx -= y * dx.sum(axis=axis, keepdims=True)
    return dx


def logsumexp(x: Any, axis: int = -1, keepdims: bool = True, dtype: Any = None) -> Any:
    """``log(sum_j exp(x_j))`` along ``axis``, without overflow: ``m + log(sum_j exp(x_j - m))``.

    ``x`` of any shape -> the same shape with ``axis`` kept at size 1 (``keepdims=True``) or
    dropped. ``m = max_j x_j``, so every ``exp`` is at most 1. ``dtype`` is the dtype the sum
    of exponentials accumulates in (None: that of ``x``); ``dtype=float64`` with float32 ``x``
    gives a float64 result. A helper without a backward pass, like ``log_softmax``: the log
    normaliser of a softmax, for when only a few entries of a row need their log probability,
    ``log p_j = x_j - logsumexp(x)``, and the whole ``log_softmax`` row would be wasted.
    """
    check_float("logsumexp", "x", x)
    row_max, _, log_norm = _shifted_and_log_norm(x, axis, dtype)
    total = row_max + log_norm
    return total if keepdims else total.squeeze(axis)


def log_softmax(x: Any, axis: int = -1) -> Any:
    """``log softmax(x)`` along ``axis``, never ``log(0)``: ``(x - m) - log(sum_j exp(x_j - m))``.

    ``x - logsumexp(x)``, with ``m = max_j x_j`` subtracted first so that the entries near the
    maximum keep their precision; the result has the shape of ``x``. A helper without a
    backward pass, for scoring sequences by their log probabilities. The loss fuses the same
    formula into ``cross_entropy_forward``, where it also keeps ``exp(x - m)`` for its gradient;
    beam search needs only each row's k best entries and their normaliser (``logsumexp``).
    """
    _, shifted, log_norm = _shifted_and_log_norm(x, axis, None)
    return shifted - log_norm


def _shifted_and_log_norm(x: Any, axis: int, dtype: Any) -> tuple[Any, Any, Any]:
    """``m = max_j x_j``, ``x - m`` and ``log(sum_j exp(x_j - m))`` (summed in ``dtype``), keeping ``axis``."""
    row_max = x.max(axis=axis, keepdims=True)
    shifted = x - row_max
    return row_max, shifted, xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True, dtype=dtype))
