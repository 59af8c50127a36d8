"""Scaled dot-product attention with a boolean mask (Vaswani et al., 2017, eq. 1).

Shapes: ``q (B, H, Tq, Dh)``, ``k (B, H, Tk, Dh)``, ``v (B, H, Tk, Dv)``
(``Dv = Dh`` in the Transformer), ``mask`` boolean and broadcastable to
``(B, H, Tq, Tk)`` with **True where a query may attend to a key**. Output
``(B, H, Tq, Dv)``.

Forward::

    scores  = q @ k^T / sqrt(Dh)                  (B, H, Tq, Tk)
    scores  = -inf where the mask is False
    weights = softmax(scores) over the keys       (B, H, Tq, Tk)
    out     = weights @ v                         (B, H, Tq, Dh)

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
entries and heads at once; on the CPU the batch is cut into one block per
thread (``threads.parallel_rows``), and each block runs these same lines.
"""

from __future__ import annotations

import math
from typing import Any

from .. import threads
from ..backend import xp
from ._validate import check_broadcastable, check_float, check_ndim, check_same_dtype


def _check_attention_inputs(q: Any, k: Any, v: Any, mask: Any) -> None:
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


def _batch_rows(mask: Any, rows: slice, batch: int) -> Any:
    """The part of a mask broadcastable to ``(B, H, Tq, Tk)`` that serves the batch rows ``rows``."""
    if mask.ndim == 4 and mask.shape[0] == batch:
        return mask[rows]
    return mask  # the same for every sequence


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
    _check_attention_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1])

    batch, heads, q_len, k_len = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    weights = xp.empty((batch, heads, q_len, k_len), dtype=q.dtype)
    out = xp.empty((batch, heads, q_len, v.shape[-1]), dtype=q.dtype)

    def attend(rows: slice) -> None:  # a block of the batch; sequences never interact
        scores = xp.matmul(q[rows], k[rows].swapaxes(-1, -2), out=weights[rows])
        scores *= scale
        if mask is not None:
            xp.copyto(scores, -xp.inf, where=~_batch_rows(mask, rows, batch))

        # Stable softmax over the keys, written out so that fully masked rows give 0.
        row_max = scores.max(axis=-1, keepdims=True)
        if mask is not None:
            row_max[~xp.isfinite(row_max)] = 0.0  # fully masked row: -inf - (-inf) would be NaN
        scores -= row_max
        xp.exp(scores, out=scores)
        row_sum = scores.sum(axis=-1, keepdims=True)
        row_sum[row_sum == 0] = 1.0  # only fully masked rows sum to 0; they stay all-zero
        scores /= row_sum  # now the weights

        xp.matmul(scores, v[rows], out=out[rows])

    threads.parallel_rows(attend, batch, row_size=heads * q_len * (k_len + v.shape[-1]))
    cache = {"q": q, "k": k, "v": v, "weights": weights, "scale": scale}
    return out, cache


def attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dq, dk, dv)`` of ``attention_forward``, shaped like ``q, k, v``."""
    q, k, v = cache["q"], cache["k"], cache["v"]
    weights, scale = cache["weights"], cache["scale"]

    dq, dk, dv = (xp.empty(array.shape, dtype=dout.dtype) for array in (q, k, v))

    def gradients(rows: slice) -> None:  # a block of the batch, as in the forward pass
        block_weights = weights[rows]
        xp.matmul(block_weights.swapaxes(-1, -2), dout[rows], out=dv[rows])
        dweights = dout[rows] @ v[rows].swapaxes(-1, -2)

        dscores = dweights
        dscores *= block_weights
        dscores -= block_weights * dscores.sum(axis=-1, keepdims=True)
        dscores *= scale

        xp.matmul(dscores, k[rows], out=dq[rows])
        xp.matmul(dscores.swapaxes(-1, -2), q[rows], out=dk[rows])

    batch, heads, q_len, k_len = weights.shape
    threads.parallel_rows(gradients, batch, row_size=heads * q_len * (k_len + v.shape[-1]))
    return dq, dk, dv
