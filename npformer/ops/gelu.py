"""The Gaussian error linear unit (Hendrycks and Gimpel, 2016), elementwise.

Exact form (the default, as in PyTorch's ``gelu(approximate="none")`` and BERT)::

    gelu(x)  = x * Phi(x),   Phi(x) = (1 + erf(x / sqrt(2))) / 2 = erfc(-x / sqrt(2)) / 2
    gelu'(x) = Phi(x) + x * phi(x),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)

Tanh approximation (``approximate="tanh"``, GPT-2's choice)::

    u = sqrt(2/pi) * (x + 0.044715 x^3)
    gelu(x)  = x * (1 + tanh(u)) / 2 = x * sigmoid(2u)
    gelu'(x) = s + x * 2 s (1 - s) * du/dx,   s = sigmoid(2u),
               du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)

Both are written so that nothing cancels for very negative ``x``: ``1 + erf``
and ``1 + tanh`` there are 1 minus almost 1, which loses most digits, while
``erfc`` and a sigmoid built from ``exp(-|z|)`` keep full relative accuracy.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import xp
from ._validate import check_float
from .special import erfc

_MINUS_INV_SQRT2 = -1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715
_APPROXIMATIONS = ("none", "tanh")


def _sigmoid(z: Any) -> Any:
    """``1 / (1 + exp(-z))`` from ``e = exp(-|z|) <= 1``: never overflows, never cancels."""
    e = xp.exp(-xp.abs(z))
    return xp.where(z >= 0, 1.0, e) / (1.0 + e)


def gelu_forward(x: Any, approximate: str = "none") -> tuple[Any, dict]:
    """GELU of ``x`` (any shape); ``approximate`` is "none" (exact erf) or "tanh"."""
    check_float("gelu_forward", "x", x)
    if approximate not in _APPROXIMATIONS:
        raise ValueError(
            f"gelu_forward: approximate must be one of {_APPROXIMATIONS}, got {approximate!r}"
        )
    if approximate == "tanh":
        gate = _sigmoid(2.0 * _SQRT_2_OVER_PI * (x + _TANH_CUBIC * x * x * x))
    else:
        gate = 0.5 * erfc(_MINUS_INV_SQRT2 * x)
    return x * gate, {"x": x, "approximate": approximate, "gate": gate}


def gelu_backward(dout: Any, cache: dict) -> Any:
    """``dx = dout * gelu'(x)``, the shape of ``x``."""
    x, gate = cache["x"], cache["gate"]
    if cache["approximate"] == "tanh":
        du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _TANH_CUBIC * x * x)
        slope = gate + x * (2.0 * gate * (1.0 - gate)) * du_dx
    else:
        slope = gate + x * (_INV_SQRT_2PI * xp.exp(-0.5 * x * x))
    return dout * slope
