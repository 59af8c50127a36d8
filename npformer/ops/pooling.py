"""Masked pooling over positions: one vector per sequence, ignoring padding.

Shapes: ``x (B, T, D)``, ``mask (B, T)`` boolean, True at real tokens -> ``(B, D)``.

Mean::

    out[b] = sum_t mask[b, t] x[b, t] / n[b],      n[b] = number of real tokens
    dx[b, t] = mask[b, t] dout[b] / n[b]

Max (per feature)::

    out[b, d] = max over real t of x[b, t, d]
    dx[b, t, d] = dout[b, d] where t is that maximum, else 0

A sequence with no real token pools to zeros and gets zero gradient, never NaN.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_ndim


def _check(op: str, x: Any, mask: Any) -> None:
    check_float(op, "x", x)
    check_ndim(op, "x", x, 3, "(B, T, D)")
    if not isinstance(mask, xp.ndarray) or mask.dtype != bool:
        raise TypeError(f"{op}: mask must be a boolean array (True = real token), got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if tuple(mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"{op}: mask must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")


def masked_mean_pool_forward(x: Any, mask: Any) -> tuple[Any, dict]:
    """Mean of ``x (B, T, D)`` over the positions where ``mask (B, T)`` is True."""
    _check("masked_mean_pool_forward", x, mask)
    weights = mask / xp.maximum(mask.sum(axis=1, keepdims=True), 1)  # (B, T): 1/n at real tokens
    weights = weights.astype(x.dtype)
    out = (weights[:, None, :] @ x)[:, 0]  # (B, 1, T) @ (B, T, D): one batched product
    return out, {"weights": weights}


def masked_mean_pool_backward(dout: Any, cache: dict) -> Any:
    """``dx[b, t] = weights[b, t] * dout[b]``, shape ``(B, T, D)``."""
    return cache["weights"][:, :, None] * dout[:, None, :]


def masked_max_pool_forward(x: Any, mask: Any) -> tuple[Any, dict]:
    """Feature-wise maximum of ``x (B, T, D)`` over the real positions."""
    _check("masked_max_pool_forward", x, mask)
    masked = xp.where(mask[:, :, None], x, -xp.inf)
    position = masked.argmax(axis=1)  # (B, D): where each maximum is (the first, on ties)
    out = xp.take_along_axis(x, position[:, None, :], axis=1)[:, 0]
    has_token = mask.any(axis=1)
    out *= has_token[:, None]  # an all-padding sequence pools to zeros
    return out, {"position": position, "has_token": has_token, "shape": tuple(x.shape), "dtype": x.dtype}


def masked_max_pool_backward(dout: Any, cache: dict) -> Any:
    """The gradient of each maximum goes to the position it came from."""
    batch, length, width = cache["shape"]
    dx = xp.zeros((batch, length, width), dtype=cache["dtype"])
    rows = xp.arange(batch)[:, None]
    features = xp.arange(width)[None, :]
    dx[rows, cache["position"], features] = dout * cache["has_token"][:, None]
    return dx
