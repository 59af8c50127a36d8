"""Fast form of ``npformer.ops.attention``: one block of the batch per thread, in place.

What changes: sequences never interact, so the batch is cut into one block per
thread (``threads.parallel_rows``); each block computes its scores into the
``weights`` array made before the split, masks them with ``copyto``, and turns
them into the softmax weights in place (no separate ``scores``, ``exps`` and
``weights`` arrays); the backward pass reuses ``dweights`` as ``dscores``. The
equations, the fully-masked-row rule and the cache keys are those of the twin.
"""

from __future__ import annotations

import math
from typing import Any

from ... import threads
from ...backend import xp
from ..attention import check_attention_inputs


def _batch_rows(mask: Any, rows: slice, batch: int) -> Any:
    """The part of a mask broadcastable to ``(B, H, Tq, Tk)`` that serves the batch rows ``rows``."""
    if mask.ndim == 4 and mask.shape[0] == batch:
        return mask[rows]
    return mask  # the same for every sequence


@threads.with_blas_on_one_thread  # BLAS on one thread while it runs, small products included
def attention_forward(q: Any, k: Any, v: Any, mask: Any = None) -> tuple[Any, dict]:
    """``softmax(q k^T / sqrt(Dh), masked) @ v``; see ``npformer.ops.attention.attention_forward``."""
    check_attention_inputs(q, k, v, mask)
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


@threads.with_blas_on_one_thread  # BLAS on one thread while it runs, small products included
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
