"""Rotary position embedding, RoPE (Su et al., 2021, "RoFormer", eq. 13-15).

A position is not added to the vectors: the queries and keys of position ``p`` are *rotated* by
angles proportional to ``p``. The head dimension ``Dh`` (even) is cut into pairs of neighbouring
entries ``(x[2i], x[2i+1])``, ``i = 0 .. Dh/2 - 1``; pair ``i`` turns at its own frequency, the
sinusoid table's (lesson 5)::

    theta_i = base^(-2i / Dh)                          (Dh/2,)
    angle   = (offset + t) * theta_i                   (T, Dh/2), for the rows t = 0 .. T-1
    y[2i]   = x[2i] cos(angle) - x[2i+1] sin(angle)
    y[2i+1] = x[2i] sin(angle) + x[2i+1] cos(angle)

Why it helps attention: a rotation ``R(a)`` keeps dot products between vectors turned by the
same angle, so ``(R(m theta) q) . (R(n theta) k) = q . R((n - m) theta) k``. The score of a query
at position ``m`` and a key at ``n`` depends on their contents and on ``n - m`` only, never on
``m`` itself.

``offset`` is the position of the first row: ``0`` when a whole sequence is rotated, the number of
cached positions when a KV cache adds one new position (whose query and key are then turned by the
same angles as in the full forward pass; the cached keys were turned when they were written).

Backward. Each pair is multiplied by a rotation matrix ``R``, so its gradient is multiplied by
``R^T = R(-angle)``, the inverse rotation::

    dx[2i]   =  dy[2i] cos(angle) + dy[2i+1] sin(angle)
    dx[2i+1] = -dy[2i] sin(angle) + dy[2i+1] cos(angle)

Shapes: ``x (..., T, Dh)``, the positions on the second-to-last axis (``(B, H, T, Dh)`` for
heads). The angles do not depend on the input, so RoPE has no parameters.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..backend import xp
from ._validate import check_float, check_min_ndim


def rope_angles(length: int, head_dim: int, offset: int = 0, base: float = 10000.0) -> Any:
    """The ``(length, head_dim / 2)`` angles ``(offset + t) * base^(-2i / head_dim)``, in float64."""
    positions = xp.arange(int(offset), int(offset) + length, dtype=xp.float64)[:, None]        # (T, 1)
    frequencies = xp.exp(-math.log(base) * xp.arange(0, head_dim, 2, dtype=xp.float64) / head_dim)  # (Dh/2,)
    return positions * frequencies                                                    # (T, Dh/2)


def check_rope_inputs(x: Any, offset: int, base: float) -> None:
    """The checks of ``rope_forward``."""
    op = "rope_forward"
    check_float(op, "x", x)
    check_min_ndim(op, "x", x, 2, "(..., T, Dh)")
    if x.shape[-1] % 2:
        raise ValueError(f"{op}: the last axis of x (Dh) must be even, to pair its entries; got {x.shape[-1]}")
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral) or offset < 0:
        raise ValueError(f"{op}: offset must be an int >= 0, got {offset!r}")
    if not base > 1:
        raise ValueError(f"{op}: base must be > 1, got {base!r}")


def rope_forward(x: Any, offset: int = 0, base: float = 10000.0) -> tuple[Any, dict]:
    """Rotate each pair ``(x[2i], x[2i+1])`` of row ``t`` by ``(offset + t) * base^(-2i / Dh)``.

    Args:
        x: queries or keys, ``(..., T, Dh)`` with ``Dh`` even (``(B, H, T, Dh)`` in attention).
        offset: the position of row 0 (the number of cached positions in a KV-cached step).
        base: the frequency base (10000 as in the paper).

    Returns:
        ``y`` (the shape of ``x``) and the cache for ``rope_backward``.
    """
    check_rope_inputs(x, offset, base)
    angles = rope_angles(x.shape[-2], x.shape[-1], offset, base)
    cos, sin = xp.cos(angles).astype(x.dtype), xp.sin(angles).astype(x.dtype)    # (T, Dh/2) each
    even, odd = x[..., 0::2], x[..., 1::2]                                         # (..., T, Dh/2)
    y = xp.empty_like(x)
    y[..., 0::2] = even * cos - odd * sin
    y[..., 1::2] = even * sin + odd * cos
    return y, {"cos": cos, "sin": sin}


def rope_backward(dy: Any, cache: dict) -> Any:
    """``dx`` of ``rope_forward``: ``dy`` turned back by the same angles (the transposed rotation)."""
    cos, sin = cache["cos"], cache["sin"]
    d_even, d_odd = dy[..., 0::2], dy[..., 1::2]                                   # (..., T, Dh/2)
    dx = xp.empty_like(dy)
    dx[..., 0::2] = d_even * cos + d_odd * sin
    dx[..., 1::2] = -d_even * sin + d_odd * cos
    return dx
