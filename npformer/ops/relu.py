"""The rectifier ``relu(x) = max(x, 0)``, elementwise.

Backward: ``dx = dy * [x > 0]``. At exactly ``x = 0`` the derivative is taken
as 0 (PyTorch's convention). The cache keeps the boolean mask, one byte per
element, rather than ``x`` itself.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float


def relu_forward(x: Any) -> tuple[Any, dict]:
    """``max(x, 0)`` for ``x`` of any shape; returns ``(out, cache)``."""
    check_float("relu_forward", "x", x)
    out = xp.maximum(x, 0)
    return out, {"positive": out > 0}


def relu_backward(dout: Any, cache: dict) -> Any:
    """``dx = dout * [x > 0]``, the shape of ``x``."""
    return dout * cache["positive"]
