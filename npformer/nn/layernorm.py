"""``LayerNorm``: normalise the last axis, then scale by ``gamma`` (ones) and shift by ``beta`` (zeros)."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..backend import get_default_dtype
from . import init
from .module import Module


class LayerNorm(Module):
    """``(..., D)`` -> ``(..., D)``; see ``npformer.ops.layernorm`` for the equations."""

    def __init__(self, d_model: int, eps: float = 1e-5, *, dtype: Any = None) -> None:
        super().__init__()
        dtype = dtype or get_default_dtype()
        self.eps = eps
        self.add_param("gamma", init.ones((d_model,), dtype))
        self.add_param("beta", init.zeros((d_model,), dtype))

    def forward(self, x: Any) -> Any:
        y, self._cache = ops.current().layernorm_forward(x, self.gamma, self.beta, self.eps)
        return y

    def backward(self, dy: Any) -> Any:
        dx, dgamma, dbeta = ops.current().layernorm_backward(dy, self._cache)
        self.grad["gamma"] += dgamma
        self.grad["beta"] += dbeta
        return dx
