"""Layer normalisation over the last axis (Ba, Kiros and Hinton, 2016).

Forward, for each row ``x`` of length ``D`` (biased variance, as in PyTorch)::

    mu    = mean(x)
    var   = mean((x - mu)^2)
    rstd  = 1 / sqrt(var + eps)
    x_hat = (x - mu) * rstd
    y     = gamma * x_hat + beta

Backward. ``dbeta`` and ``dgamma`` sum over every row. For ``dx``, write
``g = dy * gamma`` (the gradient with respect to ``x_hat``); ``mu`` and ``var``
depend on every entry of the row, and working the chain rule through them
collapses to the compact form::

    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))

The two means remove the parts of ``g`` that a shift of the row (first mean)
or a rescaling of it (second mean) cannot produce, because the normalisation
undoes both.
"""

from __future__ import annotations

from typing import Any

from .. import threads
from ..backend import xp
from ._validate import check_float, check_min_ndim, check_same_dtype


def layernorm_forward(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> tuple[Any, dict]:
    """Normalise the last axis of ``x`` and apply the learned scale and shift.

    Args:
        x: inputs, shape ``(..., D)``.
        gamma: scale, shape ``(D,)``.
        beta: shift, shape ``(D,)``.
        eps: added to the variance before the square root.

    Returns:
        ``y`` (the shape of ``x``) and the cache for ``layernorm_backward``.
    """
    op = "layernorm_forward"
    for name, value in (("x", x), ("gamma", gamma), ("beta", beta)):
        check_float(op, name, value)
    check_min_ndim(op, "x", x, 1, "(..., D)")
    d_model = x.shape[-1]
    for name, value in (("gamma", gamma), ("beta", beta)):
        if tuple(value.shape) != (d_model,):
            raise ValueError(
                f"{op}: {name} must have shape (D,) = ({d_model},) to match x "
                f"{tuple(x.shape)}, got {tuple(value.shape)}"
            )
    check_same_dtype(op, ("x", "gamma", "beta"), (x, gamma, beta))
    if not eps > 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")

    x_rows = x.reshape(-1, d_model)
    x_hat, y = xp.empty(x_rows.shape, dtype=x.dtype), xp.empty(x_rows.shape, dtype=x.dtype)
    rstd = xp.empty((x_rows.shape[0], 1), dtype=x.dtype)

    def normalise(rows: slice) -> None:  # rows are independent: one block per thread
        centered = xp.subtract(x_rows[rows], x_rows[rows].mean(axis=-1, keepdims=True), out=x_hat[rows])
        var = (centered * centered).mean(axis=-1, keepdims=True)
        rstd[rows] = 1.0 / xp.sqrt(var + eps)
        centered *= rstd[rows]  # now x_hat
        xp.multiply(centered, gamma, out=y[rows])
        y[rows] += beta

    threads.parallel_rows(normalise, x_rows.shape[0], row_size=d_model)
    cache = {"x_hat": x_hat.reshape(x.shape), "rstd": rstd.reshape(*x.shape[:-1], 1), "gamma": gamma}
    return y.reshape(x.shape), cache


def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dx, dgamma, dbeta)`` of ``layernorm_forward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    d_model = x_hat.shape[-1]
    dy_rows = xp.ascontiguousarray(dy).reshape(-1, d_model)
    x_hat_rows, rstd_rows = x_hat.reshape(-1, d_model), rstd.reshape(-1, 1)
    dx, dy_x_hat = xp.empty(dy_rows.shape, dtype=dy.dtype), xp.empty(dy_rows.shape, dtype=dy.dtype)

    def input_gradient(rows: slice) -> None:  # rows are independent: one block per thread
        xp.multiply(dy_rows[rows], x_hat_rows[rows], out=dy_x_hat[rows])  # for dgamma below
        g = dy_rows[rows] * gamma
        dx_block = xp.subtract(g, g.mean(axis=-1, keepdims=True), out=dx[rows])
        dx_block -= x_hat_rows[rows] * (g * x_hat_rows[rows]).mean(axis=-1, keepdims=True)
        dx_block *= rstd_rows[rows]

    threads.parallel_rows(input_gradient, dy_rows.shape[0], row_size=d_model)
    # The sums over rows as matrix-vector products (BLAS), like the bias gradient of linear.
    ones = xp.ones(dy_rows.shape[0], dtype=dy.dtype)
    return dx.reshape(dy.shape), ones @ dy_x_hat, ones @ dy_rows
