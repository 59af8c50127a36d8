"""The encoder: ``n_layers`` identical layers of self-attention and feed-forward.

``EncoderLayer``::

    x = residual(x, SelfAttention(x, x, source padding mask))   # norm1
    x = residual(x, FeedForward(x))                              # norm2

the list ``sublayers`` of two ``Residual`` entries (``nn/residual.py``), which forward, backward
and the cached step walk.

``Encoder`` stacks the layers and, in pre-norm models, ends with a LayerNorm
(``encoder.norm``): pre-norm residual streams are never normalised otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy

from .attention import SelfAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .layernorm import LayerNorm
from .layout import PADDED, Padded
from .module import Module, ModuleList
from .residual import LayerInputs, Residual, ResidualLayer


class EncoderLayer(ResidualLayer):
    """``(B, Ts, D)`` -> ``(B, Ts, D)``. Children: ``self_attn``, ``norm1``, ``ffn``, ``norm2``."""

    def __init__(self, d_model: int, *, n_heads: int, d_ff: int, dropout: float, dropout_rng: Any,
                 pre_norm: bool, activation: str, rng: numpy.random.Generator,
                 dtype: Any = None) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.self_attn = SelfAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, activation, rng=rng, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.drop1 = Dropout(dropout, dropout_rng)
        self.drop2 = Dropout(dropout, dropout_rng)
        self.sublayers = [Residual(self.self_attn, self.norm1, self.drop1, pre_norm, reads=("mask", "layout", "cache")),
                          Residual(self.ffn, self.norm2, self.drop2, pre_norm)]

    def forward(self, x: Any, mask: Any, layout: Padded = PADDED) -> Any:
        """``x (B, Ts, D)`` (``(1, N, D)`` in a packed ``layout``), ``mask`` broadcastable to ``(B, H, Ts, Ts)``."""
        return self.run(x, LayerInputs(mask=mask, layout=layout))

    def backward(self, dout: Any) -> Any:
        return self.run_backward(dout)[0]

    def step(self, x: Any, position: int, key_buffer: Any, value_buffer: Any) -> Any:
        """One new position ``x (B, 1, D)`` with causal self-attention over cached keys and
        values (the decoder-only language model's generation step; no backward)."""
        return self.run(x, LayerInputs(cache=(key_buffer, value_buffer, position)))


class Encoder(Module):
    """A stack of ``EncoderLayer``s (``layers``), plus ``norm`` when pre-norm."""

    def __init__(self, n_layers: int, d_model: int, *, pre_norm: bool, dtype: Any = None,
                 **layer_options: Any) -> None:
        """``layer_options``: the other keyword arguments of ``EncoderLayer``."""
        super().__init__()
        self.layers = ModuleList([
            EncoderLayer(d_model, pre_norm=pre_norm, dtype=dtype, **layer_options)
            for _ in range(n_layers)
        ])
        self.norm = LayerNorm(d_model, dtype=dtype) if pre_norm else None

    def forward(self, x: Any, mask: Any, layout: Padded = PADDED) -> Any:
        for layer in self.layers:
            x = layer.forward(x, mask, layout)
        return x if self.norm is None else self.norm.forward(x)

    def backward(self, dout: Any) -> Any:
        d = dout if self.norm is None else self.norm.backward(dout)
        for layer in reversed(self.layers):
            d = layer.backward(d)
        return d
