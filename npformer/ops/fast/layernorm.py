"""Fast form of ``npformer.ops.layernorm``: row blocks on threads, results written in place.

What changes: the rows are independent, so they are cut into one block per thread
(``threads.parallel_rows``); each block writes ``x_hat``, ``rstd`` and ``y`` into
arrays made before the split, and the sums over rows for ``dgamma`` and ``dbeta``
are matrix-vector products (BLAS). The equations are those of the twin, and the
cache has the same keys, so either backward accepts either forward's cache.
"""

from __future__ import annotations

from typing import Any

from ... import threads
from ...backend import xp
from ..layernorm import check_layernorm_inputs


def layernorm_forward(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> tuple[Any, dict]:
    """See ``npformer.ops.layernorm.layernorm_forward``."""
    check_layernorm_inputs(x, gamma, beta, eps)
    d_model = x.shape[-1]
    x_rows = x.reshape(-1, d_model)
    x_hat, y = xp.empty(x_rows.shape, dtype=x.dtype), xp.empty(x_rows.shape, dtype=x.dtype)
    rstd = xp.empty((x_rows.shape[0], 1), dtype=x.dtype)

    def normalise(rows: slice) -> None:
        centered = xp.subtract(x_rows[rows], x_rows[rows].mean(axis=-1, keepdims=True), out=x_hat[rows])
        var = (centered * centered).mean(axis=-1, keepdims=True)
        rstd[rows] = 1.0 / xp.sqrt(var + eps)
        xp.multiply(centered, rstd[rows], out=x_hat[rows])
        xp.multiply(x_hat[rows], gamma, out=y[rows])
        y[rows] += beta

    threads.parallel_rows(normalise, x_rows.shape[0], row_size=d_model)
    cache = {"x_hat": x_hat.reshape(x.shape), "rstd": rstd.reshape(*x.shape[:-1], 1), "gamma": gamma}
    return y.reshape(x.shape), cache


@threads.with_blas_on_one_thread  # BLAS on one thread while it runs: the two sums below are BLAS products
def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.layernorm.layernorm_backward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    d_model = x_hat.shape[-1]
    dy_rows = xp.ascontiguousarray(dy).reshape(-1, d_model)
    x_hat_rows, rstd_rows = x_hat.reshape(-1, d_model), rstd.reshape(-1, 1)
    dx, dy_x_hat = xp.empty(dy_rows.shape, dtype=dy.dtype), xp.empty(dy_rows.shape, dtype=dy.dtype)

    def input_gradient(rows: slice) -> None:
        xp.multiply(dy_rows[rows], x_hat_rows[rows], out=dy_x_hat[rows])  # for dgamma below
        g = dy_rows[rows] * gamma
        dx_block = xp.subtract(g, g.mean(axis=-1, keepdims=True), out=dx[rows])
        dx_block -= x_hat_rows[rows] * (g * x_hat_rows[rows]).mean(axis=-1, keepdims=True)
        dx_block *= rstd_rows[rows]

    threads.parallel_rows(input_gradient, dy_rows.shape[0], row_size=d_model)
    ones = xp.ones(dy_rows.shape[0], dtype=dy.dtype)
    return dx.reshape(dy.shape), ones @ dy_x_hat, ones @ dy_rows
