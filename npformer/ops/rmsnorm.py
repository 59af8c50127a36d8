"""Root-mean-square layer normalisation (Zhang and Sennrich, 2019), over the last axis.

Layer norm without the mean: each row ``x`` of length ``D`` is divided by its root mean square
and scaled by a learned ``gain`` (no shift, no centring). Epsilon sits inside the root, as in the
paper and in ``torch.nn.functional.rms_norm``::

    rstd  = 1 / sqrt(mean(x^2) + eps)          (..., 1)
    x_hat = x * rstd                           (..., D)
    y     = gain * x_hat                       (..., D)

Backward. ``dgain`` sums ``dy * x_hat`` over every row. For ``dx``, write ``g = dy * gain`` (the
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


def check_rmsnorm_inputs(x: Any, gain: Any, eps: float) -> None:
    """The checks of ``rmsnorm_forward``."""
    op = "rmsnorm_forward"
    check_float(op, "x", x)
    check_float(op, "gain", gain)
    check_min_ndim(op, "x", x, 1, "(..., D)")
    if tuple(gain.shape) != (x.shape[-1],):
        raise ValueError(f"{op}: gain must have shape (D,) = ({x.shape[-1]},) to match x {tuple(x.shape)}, "
                         f"got {tuple(gain.shape)}")
    check_same_dtype(op, ("x", "gain"), (x, gain))
    if not eps > 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")


def rmsnorm_forward(x: Any, gain: Any, eps: float = 1e-6) -> tuple[Any, dict]:
    """Divide each row of ``x`` by its root mean square and scale it by ``gain``.

    Args:
        x: inputs, ``(..., D)``.
        gain: learned scale, ``(D,)``.
        eps: added to the mean square inside the square root.

    Returns:
        ``y`` (the shape of ``x``) and the cache for ``rmsnorm_backward``.
    """
    check_rmsnorm_inputs(x, gain, eps)
    rstd = 1.0 / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)   # (..., 1)
    x_hat = x * rstd                                                    # (..., D)
    y = gain * x_hat                                                    # (..., D)
    return y, {"x_hat": x_hat, "rstd": rstd, "gain": gain}


def rmsnorm_backward(dy: Any, cache: dict) -> tuple[Any, Any]:
    """Gradients ``(dx, dgain)`` of ``rmsnorm_forward``."""
    x_hat, rstd, gain = cache["x_hat"], cache["rstd"], cache["gain"]
    g = dy * gain                                                       # (..., D), the gradient of x_hat
    dx = rstd * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))  # (..., D)
    dgain = (dy * x_hat).reshape(-1, x_hat.shape[-1]).sum(axis=0)       # (D,)
    return dx, dgain
