"""``RMSNorm``: divide the last axis by its root mean square, then scale by ``gamma`` (ones)."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..backend import get_default_dtype
from . import init
from .module import Module


class RMSNorm(Module):
    """``(..., D)`` -> ``(..., D)``; see ``npformer.ops.rmsnorm`` for the equations. Parameter ``gamma``."""

    def __init__(self, d_model: int, eps: float = 1e-5, *, dtype: Any = None) -> None:
        super().__init__()
        self.eps = eps
        self.add_param("gamma", init.ones((d_model,), dtype or get_default_dtype()))

    def forward(self, x: Any) -> Any:
        y, self._cache = ops.current().rmsnorm_forward(x, self.gamma, self.eps)
        return y

    def backward(self, dy: Any) -> Any:
        dx, dgamma = ops.current().rmsnorm_backward(dy, self._cache)
        self.grad["gamma"] += dgamma
        return dx
