"""``SwiGLUFeedForward``: the gated feed-forward block of LLaMA-style models (Shazeer, 2020).

With ``D = d_model`` and ``F = d_ff``, for every position independently::

    hidden = swiglu(x, W_gate, W_up) = silu(x @ W_gate) * (x @ W_up)     (B, T, F)
    out    = hidden @ W_down                                             (B, T, D)

The first two products live in the op (``ops.swiglu``), the third is a ``Linear`` without bias
(``down``): ``3 D F`` parameters, no biases (the 2017 block's two layers have ``2 D F + F + D``), so at
equal parameters a SwiGLU block is ``2/3`` as wide.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from ..backend import get_default_dtype
from . import init
from .linear import Linear
from .module import Module


class SwiGLUFeedForward(Module):
    """``(B, T, d_model)`` -> ``(B, T, d_model)``. Parameters ``W_gate``, ``W_up`` ``(D, F)``; child ``down``."""

    def __init__(self, d_model: int, d_ff: int, *, rng: numpy.random.Generator, dtype: Any = None) -> None:
        super().__init__()
        dtype = dtype or get_default_dtype()
        self.add_param("W_gate", init.xavier_uniform(rng, d_model, d_ff, dtype))
        self.add_param("W_up", init.xavier_uniform(rng, d_model, d_ff, dtype))
        self.down = Linear(d_ff, d_model, rng=rng, dtype=dtype, bias=False)

    def forward(self, x: Any) -> Any:
        hidden, self._swiglu_cache = ops.current().swiglu_forward(x, self.W_gate, self.W_up)
        return self.down.forward(hidden)

    def backward(self, dout: Any) -> Any:
        dx, dW_gate, dW_up = ops.current().swiglu_backward(self.down.backward(dout), self._swiglu_cache)
        self.grad["W_gate"] += dW_gate
        self.grad["W_up"] += dW_up
        return dx
