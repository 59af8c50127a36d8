"""The encoder: ``n_layers`` identical layers of self-attention and feed-forward.

``EncoderLayer``::

    x = residual(x, SelfAttention(x, x, source padding mask))   # norm1
    x = residual(x, FeedForward(x))                              # norm2

the list ``sublayers`` of two ``Residual`` entries (``nn/layer.py``), which forward, backward and
the cached step walk.

``Encoder`` stacks the layers and, in pre-norm models, ends with a LayerNorm
(``encoder.norm``): pre-norm residual streams are never normalised otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy

from .attention import SelfAttention
from .feedforward import FeedForward
from .layer import LayerInputs, Stack, TransformerLayer, blocks_with_gradients
from .layout import PADDED, Layout
from .residual import rule


class EncoderLayer(TransformerLayer):
    """``(B, Ts, D)`` -> ``(B, Ts, D)``. Children: ``self_attn``, ``norm1``, ``ffn``, ``norm2``."""

    def __init__(self, d_model: int, *, n_heads: int, d_ff: int, activation: str, rng: numpy.random.Generator,
                 dtype: Any = None, **residual_options: Any) -> None:
        """``residual_options``: ``dropout``, ``dropout_rng``, ``pre_norm`` (``TransformerLayer``)."""
        super().__init__(d_model, dtype=dtype, **residual_options)
        self.add("self_attn", SelfAttention(d_model, n_heads, rng=rng, dtype=dtype), "norm1", "drop1",
                 reads=("mask", "layout", "cache"))
        self.add("ffn", FeedForward(d_model, d_ff, activation, rng=rng, dtype=dtype), "norm2", "drop2")

    def forward(self, x: Any, mask: Any, layout: Layout = PADDED) -> Any:
        """``x (B, Ts, D)`` (``(1, N, D)`` in a packed ``layout``), ``mask`` broadcastable to ``(B, H, Ts, Ts)``."""
        return self.run(x, LayerInputs(mask=mask, layout=layout))

    def backward(self, dout: Any) -> Any:
        walk = rule("encoder_layer_backward", None)  # a student's (lesson 9), if the set has one
        if walk is not None:
            return walk(dout, blocks_with_gradients(self.sublayers), self.pre_norm)[0]
        return self.run_backward(dout)[0]

    def step(self, x: Any, position: int, key_buffer: Any, value_buffer: Any) -> Any:
        """One new position ``x (B, 1, D)`` with causal self-attention over cached keys and
        values (the decoder-only language model's generation step; no backward)."""
        return self.run(x, LayerInputs(cache=(key_buffer, value_buffer, position)))


class Encoder(Stack):
    """A stack of ``EncoderLayer``s (``layers``), plus ``norm`` when pre-norm."""

    def __init__(self, n_layers: int, d_model: int, **options: Any) -> None:
        """``options``: ``pre_norm``, ``dtype`` and the other keyword arguments of ``EncoderLayer``."""
        super().__init__(EncoderLayer, n_layers, d_model, **options)

    def forward(self, x: Any, mask: Any, layout: Layout = PADDED) -> Any:
        for layer in self.layers:
            x = layer.forward(x, mask, layout)
        return x if self.norm is None else self.norm.forward(x)

    def backward(self, dout: Any) -> Any:
        d = dout if self.norm is None else self.norm.backward(dout)
        for layer in reversed(self.layers):
            d = layer.backward(d)
        return d
