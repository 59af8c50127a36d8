"""Root-mean-square layer normalisation (Zhang and Sennrich, 2019), over the last axis.

Layer norm without the mean: each row ``x`` of length ``D`` is divided by its root mean square
and scaled by a learned ``gamma`` (no shift, no centring). Epsilon sits inside the root, as in the
paper and in ``torch.nn.functional.rms_norm``::

    rstd  = 1 / sqrt(mean(x^2) + eps)          (..., 1)
    x_hat = x * rstd                           (..., D)
    y     = gamma * x_hat                       (..., D)

Backward. ``dgamma`` sums ``dy * x_hat`` over every row. For ``dx``, write ``g = dy * gamma`` (the
gradient of ``x_hat``). ``x_j`` reaches ``x_hat_i`` directly (when ``i = j``) and through
``rstd``, which depends on every entry: ``d rstd / d x_j = -rstd^3 x_j / D``. Collecting both::

    dx = rstd * (g - x_hat * mean(g * x_hat))

Layer norm's ``dx`` has one more term, ``- mean(g)``, which comes from the mean it subtracts;
RMSNorm subtracts none, so that term is absent. A row that is all zeros gives ``y = 0`` and
``dx = g / sqrt(eps)``: finite, because eps is inside the root.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_min_ndim, check_same_dtype


def check_rmsnorm_inputs(x: Any, gamma: Any, eps: float) -> None:
    """The checks of ``rmsnorm_forward``."""
    op = "rmsnorm_forward"
    check_float(op, "x", x)
    check_float(op, "gamma", gamma)
    check_min_ndim(op, "x", x, 1, "(..., D)")
    if tuple(gamma.shape) != (x.shape[-1],):
        raise ValueError(f"{op}: gamma must have shape (D,) = ({x.shape[-1]},) to match x {tuple(x.shape)}, "
                         f"got {tuple(gamma.shape)}")
    check_same_dtype(op, ("x", "gamma"), (x, gamma))
    if not eps > 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")


def rmsnorm_forward(x: Any, gamma: Any, eps: float = 1e-5) -> tuple[Any, dict]:
    """Divide each row of ``x`` by its root mean square and scale it by ``gamma``.

    Args:
        x: inputs, ``(..., D)``.
        gamma: learned scale, ``(D,)``.
        eps: added to the mean square inside the square root.

    Returns:
        ``y`` (the shape of ``x``) and the cache for ``rmsnorm_backward``.
    """
    check_rmsnorm_inputs(x, gamma, eps)
    rstd = 1.0 / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)   # (..., 1)
    x_hat = x * rstd                                                    # (..., D)
    y = gamma * x_hat                                                    # (..., D)
    return y, {"x_hat": x_hat, "rstd": rstd, "gamma": gamma}


def rmsnorm_backward(dy: Any, cache: dict) -> tuple[Any, Any]:
    """Gradients ``(dx, dgamma)`` of ``rmsnorm_forward``."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    g = dy * gamma                                                       # (..., D), the gradient of x_hat
    dx = rstd * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))  # (..., D)
    dgamma = (dy * x_hat).reshape(-1, x_hat.shape[-1]).sum(axis=0)       # (D,)
    return dx, dgamma
