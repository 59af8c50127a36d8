"""``ModernBlock``: the decoder block of LLaMA-style models (Touvron et al., 2023).

Pre-norm, with RMSNorm in place of LayerNorm, rotary grouped-query self-attention and a SwiGLU
feed-forward network, no biases and no dropout::

    x = x + attn(norm1(x), causal mask)        (B, T, D)
    x = x + ffn(norm2(x))                      (B, T, D)

the list ``sublayers`` of two pre-norm ``Residual`` entries without dropout (``nn/layer.py``), which
forward, backward and the cached step walk. Backward follows the two arrows out of each ``x``: the
identity passes ``d`` straight through, the sub-layer path goes back through the sub-layer and its
norm, and the two are added.
"""

from __future__ import annotations

from typing import Any

import numpy

from .grouped_attention import GroupedQueryAttention
from .layer import LayerInputs, ResidualLayer
from .residual import Residual
from .rmsnorm import RMSNorm
from .swiglu import SwiGLUFeedForward


class ModernBlock(ResidualLayer):
    """``(B, T, D)`` -> ``(B, T, D)``. Children: ``norm1``, ``attn``, ``norm2``, ``ffn``."""

    def __init__(self, d_model: int, *, n_heads: int, n_kv_heads: int, d_ff: int, rope_base: float = 10000.0,
                 eps: float = 1e-5, rng: numpy.random.Generator, dtype: Any = None) -> None:
        super().__init__()
        self.norm1 = RMSNorm(d_model, eps, dtype=dtype)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, rope_base=rope_base, rng=rng, dtype=dtype)
        self.norm2 = RMSNorm(d_model, eps, dtype=dtype)
        self.ffn = SwiGLUFeedForward(d_model, d_ff, rng=rng, dtype=dtype)
        self.sublayers = [Residual(self.attn, self.norm1, None, pre_norm=True, reads=("mask", "cache")),
                          Residual(self.ffn, self.norm2, None, pre_norm=True)]

    def forward(self, x: Any, mask: Any) -> Any:
        """``x (B, T, D)``, ``mask`` broadcastable to ``(B, H, T, T)``."""
        return self.run(x, LayerInputs(mask=mask))

    def backward(self, dout: Any) -> Any:
        return self.run_backward(dout)[0]

    def step(self, x: Any, position: int, key_buffer: Any, value_buffer: Any) -> Any:
        """One new position ``x (B, 1, D)`` over the cached keys and values (no backward)."""
        return self.run(x, LayerInputs(cache=(key_buffer, value_buffer, position)))
