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

    centered = x - x.mean(axis=-1, keepdims=True)
    var = (centered * centered).mean(axis=-1, keepdims=True)
    rstd = 1.0 / xp.sqrt(var + eps)
    x_hat = centered
    x_hat *= rstd
    y = x_hat * gamma + beta
    return y, {"x_hat": x_hat, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dx, dgamma, dbeta)`` of ``layernorm_forward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    d_model = x_hat.shape[-1]
    dy_rows = dy.reshape(-1, d_model)
    dbeta = dy_rows.sum(axis=0)
    dgamma = (dy_rows * x_hat.reshape(-1, d_model)).sum(axis=0)

    g = dy * gamma
    dx = g - g.mean(axis=-1, keepdims=True)
    dx -= x_hat * (g * x_hat).mean(axis=-1, keepdims=True)
    dx *= rstd
    return dx, dgamma, dbeta
