"""``SwiGLUFeedForward``: the gated feed-forward block of LLaMA-style models (Shazeer, 2020).

With ``D = d_model`` and ``F = d_ff``, for every position independently::

    gate = x @ W_gate                 (B, T, F)
    up   = x @ W_up                   (B, T, F)
    out  = swiglu(gate, up) @ W_down  (B, T, D),   swiglu(a, b) = silu(a) * b

Three ``Linear`` layers without biases, ``3 D F`` parameters (the 2017 block's two layers have
``2 D F + F + D``): at equal parameters a SwiGLU block is ``2/3`` as wide. ``x`` feeds both the gate
and the linear branch, so its gradient is the sum of the two paths.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from .linear import Linear
from .module import Module


class SwiGLUFeedForward(Module):
    """``(B, T, d_model)`` -> ``(B, T, d_model)``. Children ``gate``, ``up``, ``down``."""

    def __init__(self, d_model: int, d_ff: int, *, rng: numpy.random.Generator, dtype: Any = None) -> None:
        super().__init__()
        self.gate = Linear(d_model, d_ff, rng=rng, dtype=dtype, bias=False)
        self.up = Linear(d_model, d_ff, rng=rng, dtype=dtype, bias=False)
        self.down = Linear(d_ff, d_model, rng=rng, dtype=dtype, bias=False)

    def forward(self, x: Any) -> Any:
        hidden, self._swiglu_cache = ops.current().swiglu_forward(self.gate.forward(x), self.up.forward(x))
        return self.down.forward(hidden)

    def backward(self, dout: Any) -> Any:
        d_gate, d_up = ops.current().swiglu_backward(self.down.backward(dout), self._swiglu_cache)
        return self.gate.backward(d_gate) + self.up.backward(d_up)
