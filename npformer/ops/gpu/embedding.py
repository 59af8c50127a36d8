"""GPU form of ``npformer.ops.embedding``'s backward: sorted runs of ids, each summed in order.

What changes: the textbook ``add.at`` is, on a GPU, a scatter of atomic additions, whose order
changes from run to run: float32 sums in another order differ in the last bit, so two identical
training runs (a run and the same run resumed after Ctrl-C) drift apart. Here, as in the CPU fast
form, the ids are sorted (a stable sort: equal ids keep their order) and one block of threads per
distinct id sums that id's upstream rows, one thread per column, always in the same order. The
sum runs in double precision; the result equals the twin up to rounding and is the same on every
run.
"""

from __future__ import annotations

from typing import Any

import numpy

from ...backend import xp
from .kernels import launch_rows, row_kernel

SOURCE = r"""
extern "C" __global__ void embedding_backward_runs(const real* dout, const long long* order,
                                                   const long long* sorted_ids, const long long* run_starts,
                                                   const long long n_ids, const int d_model, real* dW) {
    const long long first = run_starts[blockIdx.x];
    const long long last = blockIdx.x + 1 < gridDim.x ? run_starts[blockIdx.x + 1] : n_ids;
    const long long token = sorted_ids[first];
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) {
        double sum = 0.0;
        for (long long k = first; k < last; ++k) sum += (double)dout[order[k] * d_model + j];
        dW[token * d_model + j] = (real)sum;
    }
}
"""


def embedding_backward(dout: Any, cache: dict) -> Any:
    """``dW (V, D)``; see ``npformer.ops.embedding.embedding_backward``."""
    vocab_size, d_model = cache["table_shape"]
    dW = xp.zeros((vocab_size, d_model), dtype=cache["dtype"])
    ids = cache["ids"].reshape(-1).astype(xp.int64, copy=False)      # (N,)
    if ids.size == 0:
        return dW
    order = xp.argsort(ids, kind="stable")                            # (N,) equal ids keep their order
    sorted_ids = xp.ascontiguousarray(ids[order])                     # (N,)
    run_starts = xp.flatnonzero(xp.concatenate([xp.ones(1, dtype=bool), sorted_ids[1:] != sorted_ids[:-1]]))
    rows = xp.ascontiguousarray(dout.reshape(-1, d_model).astype(dW.dtype, copy=False))   # (N, D)
    launch_rows(row_kernel(SOURCE, "embedding_backward_runs", dW.dtype), run_starts.size, d_model,
                (rows, order.astype(xp.int64), sorted_ids, run_starts.astype(xp.int64), numpy.int64(ids.size),
                 numpy.int32(d_model), dW))
    return dW
