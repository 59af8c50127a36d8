"""Scaled dot-product attention with a boolean mask (Vaswani et al., 2017, eq. 1).

Shapes: ``q (B, H, Tq, Dh)``, ``k (B, H, Tk, Dh)``, ``v (B, H, Tk, Dv)``
(``Dv = Dh`` in the Transformer), ``mask`` boolean and broadcastable to
``(B, H, Tq, Tk)`` with **True where a query may attend to a key**. Output
``(B, H, Tq, Dv)``.

Forward::

    scores  = q @ k^T / sqrt(Dh)                  (B, H, Tq, Tk)
    scores  = -inf where the mask is False
    weights = softmax(scores) over the keys       (B, H, Tq, Tk)
    out     = weights @ v                         (B, H, Tq, Dv)

A masked key gets ``exp(-inf) = 0``: exactly zero weight. A query row whose
keys are all masked (a sequence that is all padding) would be ``0 / 0``; it
gets all-zero weights instead, so its output and its gradients are zero,
never NaN.

Backward, with ``s = 1 / sqrt(Dh)``::

    dv       = weights^T @ dout
    dweights = dout @ v^T
    dscores  = weights * (dweights - sum_keys(dweights * weights))   (softmax backward)
    dq       = s * dscores @ k
    dk       = s * dscores^T @ q

Masked entries have ``weights = 0`` and hence ``dscores = 0``: no gradient
flows to masked keys. Every product is one batched ``matmul`` over all batch
entries and heads at once. The fast form, ``npformer.ops.fast.attention``,
runs these lines on one block of the batch per thread, in place.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import xp
from ._validate import check_broadcastable, check_float, check_ndim, check_same_dtype


def check_attention_inputs(q: Any, k: Any, v: Any, mask: Any) -> None:
    """The checks of ``attention_forward``, shared with its fast twin."""
    op = "attention_forward"
    for name, value in (("q", q), ("k", k), ("v", v)):
        check_float(op, name, value)
        check_ndim(op, name, value, 4, "(B, H, T, Dh)")
    check_same_dtype(op, ("q", "k", "v"), (q, k, v))
    batch, heads, _, head_dim = q.shape
    if tuple(k.shape[:2]) != (batch, heads) or k.shape[3] != head_dim:
        raise ValueError(
            f"{op}: k must have shape (B, H, Tk, Dh) = ({batch}, {heads}, Tk, {head_dim}) "
            f"to match q {tuple(q.shape)}, got {tuple(k.shape)}"
        )
    if tuple(v.shape[:3]) != tuple(k.shape[:3]):
        expected = ", ".join(str(size) for size in k.shape[:3])
        raise ValueError(
            f"{op}: v must have shape (B, H, Tk, Dv) = ({expected}, Dv) to match k "
            f"{tuple(k.shape)}, got {tuple(v.shape)}"
        )
    if mask is not None:
        if not isinstance(mask, xp.ndarray) or mask.dtype != bool:
            received = getattr(mask, "dtype", type(mask).__name__)
            raise TypeError(
                f"{op}: mask must be a boolean array (True = may attend), got {received}"
            )
        target = (batch, heads, q.shape[2], k.shape[2])
        check_broadcastable(op, "mask", mask, target, "(B, H, Tq, Tk)")


def masked_softmax(scores: Any) -> Any:
    """Softmax over the last axis where masked scores are ``-inf``; a fully masked row gives zeros.

    The row maximum is subtracted first (stability). In a fully masked row it is ``-inf``,
    and ``-inf - (-inf)`` would be NaN, so such a row subtracts 0 and its sum of 0 is
    divided by 1 instead.
    """
    row_max = scores.max(axis=-1, keepdims=True)                     # (..., 1)
    row_max = xp.where(xp.isfinite(row_max), row_max, 0.0)
    exps = xp.exp(scores - row_max)                                  # (..., Tk), masked: 0
    row_sum = exps.sum(axis=-1, keepdims=True)                       # (..., 1)
    return exps / xp.where(row_sum > 0, row_sum, 1.0)


def attention_forward(q: Any, k: Any, v: Any, mask: Any = None) -> tuple[Any, dict]:
    """``softmax(q k^T / sqrt(Dh), masked) @ v``.

    Args:
        q: queries, ``(B, H, Tq, Dh)``.
        k: keys, ``(B, H, Tk, Dh)``.
        v: values, ``(B, H, Tk, Dv)``.
        mask: boolean, broadcastable to ``(B, H, Tq, Tk)``, True = may attend; None = all.

    Returns:
        ``out (B, H, Tq, Dv)`` and the cache; ``cache["weights"]`` is the
        ``(B, H, Tq, Tk)`` attention matrix (rows sum to 1, or to 0 when fully masked).
    """
    check_attention_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.swapaxes(-1, -2)) * scale                        # (B, H, Tq, Tk)
    if mask is not None:
        scores = xp.where(mask, scores, -xp.inf)
    weights = masked_softmax(scores)                                 # (B, H, Tq, Tk)
    out = weights @ v                                                # (B, H, Tq, Dv)
    cache = {"q": q, "k": k, "v": v, "weights": weights, "scale": scale}
    return out, cache


def attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dq, dk, dv)`` of ``attention_forward``, shaped like ``q, k, v``."""
    q, k, v = cache["q"], cache["k"], cache["v"]
    weights, scale = cache["weights"], cache["scale"]
    dv = weights.swapaxes(-1, -2) @ dout                             # (B, H, Tk, Dv)
    dweights = dout @ v.swapaxes(-1, -2)                             # (B, H, Tq, Tk)
    dscores = weights * (dweights - (dweights * weights).sum(axis=-1, keepdims=True))
    dq = (dscores @ k) * scale                                       # (B, H, Tq, Dh)
    dk = (dscores.swapaxes(-1, -2) @ q) * scale                      # (B, H, Tk, Dh)
    return dq, dk, dv
