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
undoes both. The fast form, ``npformer.ops.fast.layernorm``, splits the rows
over threads and writes into preallocated arrays.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_min_ndim, check_same_dtype


def check_layernorm_inputs(x: Any, gamma: Any, beta: Any, eps: float) -> None:
    """The checks of ``layernorm_forward``, shared with its fast twin."""
    op = "layernorm_forward"
    for name, value in (("x", x), ("gamma", gamma), ("beta", beta)):
        check_float(op, name, value)
    check_min_ndim(op, "x", x, 1, "(..., D)")
    for name, value in (("gamma", gamma), ("beta", beta)):
        if tuple(value.shape) != (x.shape[-1],):
            raise ValueError(
                f"{op}: {name} must have shape (D,) = ({x.shape[-1]},) to match x "
                f"{tuple(x.shape)}, got {tuple(value.shape)}"
            )
    check_same_dtype(op, ("x", "gamma", "beta"), (x, gamma, beta))
    if not eps > 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")


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
    check_layernorm_inputs(x, gamma, beta, eps)
    mu = x.mean(axis=-1, keepdims=True)                      # (..., 1)
    centered = x - mu                                        # (..., D)
    var = (centered ** 2).mean(axis=-1, keepdims=True)       # (..., 1)
    rstd = 1.0 / xp.sqrt(var + eps)                          # (..., 1)
    x_hat = centered * rstd                                  # (..., D)
    y = gamma * x_hat + beta                                 # (..., D)
    return y, {"x_hat": x_hat, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dx, dgamma, dbeta)`` of ``layernorm_forward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    d_model = x_hat.shape[-1]
    g = dy * gamma                                           # (..., D), the gradient of x_hat
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))   # (..., D)
    dgamma = (dy * x_hat).reshape(-1, d_model).sum(axis=0)   # (D,)
    dbeta = dy.reshape(-1, d_model).sum(axis=0)              # (D,)
    return dx, dgamma, dbeta
