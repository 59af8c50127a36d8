"""GPU form of ``npformer.ops.layernorm``: one kernel for the forward pass, one for ``dx``.

What changes: the textbook forward is eight array expressions (mean, centre, square, mean, add,
square root, divide, scale and shift), each one kernel over the whole batch; here one block of
threads per row computes ``mu``, ``rstd``, ``x_hat`` and ``y`` in one pass over the row. The
backward's ``dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))`` is likewise one kernel, and the
sums over rows for ``dgamma`` and ``dbeta`` stay CuPy reductions. Same equations, same cache keys.
"""

from __future__ import annotations

from typing import Any

import numpy

from ...backend import xp
from ..layernorm import check_layernorm_inputs
from .kernels import launch_rows, row_kernel

SOURCE = r"""
extern "C" __global__ void layernorm_forward(const real* x, const real* gamma, const real* beta, const double eps,
                                             const int d_model, real* y, real* x_hat, real* rstd) {
    __shared__ double shared[256];
    const long long start = (long long)blockIdx.x * d_model;
    double sum = 0.0;
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) sum += (double)x[start + j];
    const double mu = block_sum(sum, shared) / d_model;
    double squares = 0.0;
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) {
        const double centered = (double)x[start + j] - mu;
        squares += centered * centered;
    }
    const double row_rstd = 1.0 / sqrt(block_sum(squares, shared) / d_model + eps);   // biased variance
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) {
        const real normalised = (real)(((double)x[start + j] - mu) * row_rstd);
        x_hat[start + j] = normalised;
        y[start + j] = gamma[j] * normalised + beta[j];
    }
    if (threadIdx.x == 0) rstd[blockIdx.x] = (real)row_rstd;
}

extern "C" __global__ void layernorm_backward_dx(const real* dy, const real* x_hat, const real* rstd,
                                                 const real* gamma, const int d_model, real* dx) {
    __shared__ double shared[256];
    const long long start = (long long)blockIdx.x * d_model;
    double sum_g = 0.0, sum_g_x_hat = 0.0;          // g = dy * gamma, the gradient of x_hat
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) {
        const double g = (double)dy[start + j] * (double)gamma[j];
        sum_g += g;
        sum_g_x_hat += g * (double)x_hat[start + j];
    }
    const double mean_g = block_sum(sum_g, shared) / d_model;
    const double mean_g_x_hat = block_sum(sum_g_x_hat, shared) / d_model;
    const double row_rstd = (double)rstd[blockIdx.x];
    for (int j = threadIdx.x; j < d_model; j += blockDim.x) {
        const double g = (double)dy[start + j] * (double)gamma[j];
        dx[start + j] = (real)(row_rstd * (g - mean_g - (double)x_hat[start + j] * mean_g_x_hat));
    }
}
"""


def layernorm_forward(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> tuple[Any, dict]:
    """See ``npformer.ops.layernorm.layernorm_forward``."""
    check_layernorm_inputs(x, gamma, beta, eps)
    d_model = x.shape[-1]
    x = xp.ascontiguousarray(x)
    y, x_hat = xp.empty_like(x), xp.empty_like(x)
    rstd = xp.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    n_rows = x.size // d_model if d_model else 0
    launch_rows(row_kernel(SOURCE, "layernorm_forward", x.dtype), n_rows, d_model,
                (x, xp.ascontiguousarray(gamma), xp.ascontiguousarray(beta), numpy.float64(eps),
                 numpy.int32(d_model), y, x_hat, rstd))
    return y, {"x_hat": x_hat, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.layernorm.layernorm_backward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    d_model = x_hat.shape[-1]
    x_hat = xp.ascontiguousarray(x_hat)
    dy = xp.ascontiguousarray(dy, dtype=x_hat.dtype)          # the kernel reads both in x_hat's dtype
    dx = xp.empty_like(x_hat)
    launch_rows(row_kernel(SOURCE, "layernorm_backward_dx", x_hat.dtype), x_hat.size // d_model, d_model,
                (dy, x_hat, xp.ascontiguousarray(rstd), xp.ascontiguousarray(gamma), numpy.int32(d_model), dx))
    dgamma = (dy * x_hat).reshape(-1, d_model).sum(axis=0)   # (D,)
    dbeta = dy.reshape(-1, d_model).sum(axis=0)              # (D,)
    return dx, dgamma, dbeta
