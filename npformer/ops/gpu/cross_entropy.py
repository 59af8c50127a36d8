"""GPU form of ``npformer.ops.cross_entropy``: one kernel per pass over the logits.

What changes: the textbook forward builds ``log p`` through a row maximum, a subtraction, an
exponential, a row sum and a logarithm, then gathers the targets and averages the rows (about ten
kernels over the ``(N, V)`` logits, the largest activation of a translator); here one block of
threads per row finds the maximum, the normaliser ``log sum exp``, the sum of the logits (for the
smoothing term), writes ``p`` (the cache's ``probs``) and the row's loss. The backward's
``(p - q) * weight``, with ``q`` the smoothed one-hot target, is one elementwise kernel that never
builds ``q``. Same equations, same cache keys.
"""

from __future__ import annotations

from typing import Any

import numpy

from ...backend import xp
from ...tokens import PAD_ID
from ..cross_entropy import check_cross_entropy_inputs
from .kernels import elementwise_kernel, launch_rows, row_kernel

SOURCE = r"""
extern "C" __global__ void cross_entropy_rows(const real* logits, const long long* target_ids, const bool* kept,
                                              const double smoothing, const int vocab, real* probs, double* row_loss) {
    __shared__ double shared[256];
    const long long start = (long long)blockIdx.x * vocab;
    double largest = minus_infinity(), total = 0.0;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        const double z = (double)logits[start + j];
        largest = fmax(largest, z);
        total += z;
    }
    largest = block_max(largest, shared);
    total = block_sum(total, shared);
    double sum = 0.0;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += exp((double)logits[start + j] - largest);
    sum = block_sum(sum, shared);
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        probs[start + j] = (real)(exp((double)logits[start + j] - largest) / sum);
    if (threadIdx.x == 0) {
        const double log_norm = largest + log(sum);                          // log sum_j exp(z_j)
        const double nll = log_norm - (double)logits[start + target_ids[blockIdx.x]];   // -log p_target
        const double uniform = log_norm - total / vocab;                     // -mean_j log p_j
        row_loss[blockIdx.x] = kept[blockIdx.x] ? (1.0 - smoothing) * nll + smoothing * uniform : 0.0;
    }
}
"""

# (in, out, body, name) of cupy.ElementwiseKernel: dlogits = (p - q) * weight, with
# q = eps / V + (1 - eps) [j == target], 0 where the target is not kept
GRADIENT = ("raw T probs, raw int64 target_ids, raw bool kept, float64 weight, float64 smoothing, int64 vocab",
            "T dlogits", """
    const long long row = i / vocab, column = i % vocab;
    const double q = smoothing / vocab + (column == target_ids[row] ? 1.0 - smoothing : 0.0);
    dlogits = kept[row] ? (T)(((double)probs[i] - q) * weight) : (T)0;
    """, "npformer_cross_entropy_gradient")


def cross_entropy_forward(
    logits: Any, targets: Any, ignore_index: int | None = PAD_ID, label_smoothing: float = 0.0
) -> tuple[Any, dict]:
    """See ``npformer.ops.cross_entropy.cross_entropy_forward``."""
    kept = check_cross_entropy_inputs(logits, targets, ignore_index, label_smoothing)
    vocab_size = logits.shape[-1]
    rows = xp.ascontiguousarray(logits.reshape(-1, vocab_size))                      # (N, V)
    target_ids = xp.ascontiguousarray(xp.where(kept, targets.reshape(-1), 0).astype(xp.int64))   # (N,)
    kept = xp.ascontiguousarray(kept)
    probs = xp.empty_like(rows)                                                      # (N, V)
    row_loss = xp.empty(rows.shape[0], dtype=xp.float64)                             # (N,)
    launch_rows(row_kernel(SOURCE, "cross_entropy_rows", rows.dtype), rows.shape[0], vocab_size,
                (rows, target_ids, kept, numpy.float64(label_smoothing), numpy.int32(vocab_size), probs, row_loss))
    n_kept = int(kept.sum())
    loss = (row_loss.sum() / max(n_kept, 1)).astype(logits.dtype)
    cache = {"probs": probs, "target_ids": target_ids, "kept": kept, "n_kept": n_kept,
             "label_smoothing": label_smoothing, "logits_shape": tuple(logits.shape)}
    return loss, cache


def cross_entropy_backward(dloss: Any, cache: dict) -> Any:
    """See ``npformer.ops.cross_entropy.cross_entropy_backward``."""
    probs = xp.ascontiguousarray(cache["probs"])
    weight = float(dloss) / max(cache["n_kept"], 1)
    dlogits = xp.empty_like(probs)
    elementwise_kernel(*GRADIENT)(probs, xp.ascontiguousarray(cache["target_ids"].astype(xp.int64, copy=False)),
                       xp.ascontiguousarray(cache["kept"]), weight, float(cache["label_smoothing"]),
                       probs.shape[-1], dlogits)
    return dlogits.reshape(cache["logits_shape"])
