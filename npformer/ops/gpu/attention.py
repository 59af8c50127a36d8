"""GPU form of ``npformer.ops.attention``: the softmax of a row of scores in one kernel.

What changes: the products ``q k^T``, ``weights v`` and the backward's four stay cuBLAS batched
products. Between them, the textbook's scale, mask, row maximum, guard for fully masked rows,
exponential, row sum and division (about eight kernels over the ``(B, H, Tq, Tk)`` scores) become
one kernel that fills the masked scores with ``-inf`` (broadcasting the mask as the textbook's
``where`` does) and one that does the rest, a block of threads per row; in backward,
``dscores = weights * (dweights - sum(dweights * weights))`` times the scale is one kernel. A fully
masked row gives zero weights, as in the twin. Same equations, same cache keys.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ...backend import xp
from ..attention import check_attention_inputs
from .kernels import elementwise_kernel, launch_rows, row_kernel

SOURCE = r"""
extern "C" __global__ void scaled_softmax_rows(const real* scores, const double scale, const int length,
                                               real* weights) {
    __shared__ double shared[256];
    const long long start = (long long)blockIdx.x * length;
    double largest = minus_infinity();
    for (int j = threadIdx.x; j < length; j += blockDim.x) largest = fmax(largest, (double)scores[start + j] * scale);
    largest = block_max(largest, shared);
    if (largest == minus_infinity()) {                   // every key masked (the same in every thread): zeros
        for (int j = threadIdx.x; j < length; j += blockDim.x) weights[start + j] = (real)0;
        return;
    }
    double sum = 0.0;
    for (int j = threadIdx.x; j < length; j += blockDim.x) sum += exp((double)scores[start + j] * scale - largest);
    sum = block_sum(sum, shared);
    for (int j = threadIdx.x; j < length; j += blockDim.x)
        weights[start + j] = (real)(exp((double)scores[start + j] * scale - largest) / sum);
}

extern "C" __global__ void softmax_backward_rows(const real* weights, const real* dweights, const double scale,
                                                 const int length, real* dscores) {
    __shared__ double shared[256];
    const long long start = (long long)blockIdx.x * length;
    double dot = 0.0;
    for (int j = threadIdx.x; j < length; j += blockDim.x) dot += (double)dweights[start + j] * (double)weights[start + j];
    dot = block_sum(dot, shared);
    for (int j = threadIdx.x; j < length; j += blockDim.x)
        dscores[start + j] = (real)(scale * (double)weights[start + j] * ((double)dweights[start + j] - dot));
}
"""

# (in, out, body, name) of cupy.ElementwiseKernel: scores = where(mask, scores, -inf) in place, the
# mask broadcast to the scores' shape
FILL_MASKED = ("bool allowed, T minus_infinity", "T score", "if (!allowed) score = minus_infinity",
               "npformer_attention_fill_masked")


def attention_forward(q: Any, k: Any, v: Any, mask: Any = None) -> tuple[Any, dict]:
    """See ``npformer.ops.attention.attention_forward``."""
    check_attention_inputs(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = xp.ascontiguousarray(q @ k.swapaxes(-1, -2))            # (B, H, Tq, Tk), unscaled
    if mask is not None:
        elementwise_kernel(*FILL_MASKED)(mask, scores.dtype.type(-numpy.inf), scores)
    weights = xp.empty_like(scores)                                  # (B, H, Tq, Tk)
    length = scores.shape[-1]
    launch_rows(row_kernel(SOURCE, "scaled_softmax_rows", scores.dtype), scores.size // max(length, 1), length,
                (scores, numpy.float64(scale), numpy.int32(length), weights))
    out = weights @ v                                                # (B, H, Tq, Dv)
    cache = {"q": q, "k": k, "v": v, "weights": weights, "scale": scale}
    return out, cache


def attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.attention.attention_backward``."""
    q, k, v = cache["q"], cache["k"], cache["v"]
    weights, scale = xp.ascontiguousarray(cache["weights"]), cache["scale"]
    dv = weights.swapaxes(-1, -2) @ dout                             # (B, H, Tk, Dv)
    dweights = xp.ascontiguousarray(dout @ v.swapaxes(-1, -2), dtype=weights.dtype)   # (B, H, Tq, Tk)
    dscores = xp.empty_like(dweights)                                # scale * d(scores) (B, H, Tq, Tk)
    length = weights.shape[-1]
    launch_rows(row_kernel(SOURCE, "softmax_backward_rows", weights.dtype), weights.size // max(length, 1), length,
                (weights, dweights, numpy.float64(scale), numpy.int32(length), dscores))
    dq = dscores @ k                                                 # (B, H, Tq, Dh)
    dk = dscores.swapaxes(-1, -2) @ q                                # (B, H, Tk, Dh)
    return dq, dk, dv
