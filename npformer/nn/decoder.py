"""The decoder: ``n_layers`` layers of masked self-attention, cross-attention and feed-forward.

``DecoderLayer``::

    x = residual(x, SelfAttention(x, x, causal & target padding mask))   # norm1
    x = residual(x, CrossAttention(x, memory, source padding mask))      # norm2
    x = residual(x, FeedForward(x))                                      # norm3

the list ``sublayers`` of three ``Residual`` entries (``nn/layer.py``), which forward, backward and
the cached step walk.

``memory`` is the encoder output. Every layer reads it, so its gradient is
the sum of the cross-attention gradients of all layers.

For generation, ``step`` runs one new position at a time: self-attention
reuses the keys and values of earlier positions from a cache, and
cross-attention uses keys and values of ``memory`` computed once per source.
``kv_buffers`` allocates the self-attention caches (the decoder-only language
model's generation uses it too).
"""

from __future__ import annotations

from typing import Any

import numpy

from ..backend import xp
from .attention import MultiHeadAttention, SelfAttention
from .feedforward import FeedForward
from .layer import LayerInputs, Stack, TransformerLayer, blocks_reading_memory
from .layout import PADDED, Layout
from .residual import rule, stack_backward_with_memory


class DecoderLayer(TransformerLayer):
    """Children: ``self_attn``, ``norm1``, ``cross_attn``, ``norm2``, ``ffn``, ``norm3``."""

    def __init__(self, d_model: int, *, n_heads: int, d_ff: int, activation: str, rng: numpy.random.Generator,
                 dtype: Any = None, **residual_options: Any) -> None:
        """``residual_options``: ``dropout``, ``dropout_rng``, ``pre_norm`` (``TransformerLayer``)."""
        super().__init__(d_model, dtype=dtype, **residual_options)
        self.add("self_attn", SelfAttention(d_model, n_heads, rng=rng, dtype=dtype), "norm1", "drop1",
                 reads=("mask", "layout", "cache"))
        self.add("cross_attn", MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype), "norm2", "drop2",
                 reads=("memory", "memory_mask", "layout", "memory_layout", "memory_heads"))
        self.add("ffn", FeedForward(d_model, d_ff, activation, rng=rng, dtype=dtype), "norm3", "drop3")

    def forward(self, x: Any, memory: Any, self_mask: Any, memory_mask: Any, layout: Layout = PADDED,
                memory_layout: Layout = PADDED) -> Any:
        """``x (B, Tt, D)``, ``memory (B, Ts, D)`` -> ``(B, Tt, D)`` (packed rows in packed layouts)."""
        return self.run(x, LayerInputs(mask=self_mask, layout=layout, memory=memory,
                                       memory_mask=memory_mask, memory_layout=memory_layout))

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """Returns ``(dx, d_memory)``."""
        return self.run_backward(dout)

    def step(self, x: Any, position: int, key_buffer: Any, value_buffer: Any,
             memory_keys: Any, memory_values: Any, memory_mask: Any) -> Any:
        """One new position ``x (B, 1, D)`` at ``position``, with cached keys and values."""
        return self.run(x, LayerInputs(cache=(key_buffer, value_buffer, position),
                                       memory_heads=(memory_keys, memory_values), memory_mask=memory_mask))


class Decoder(Stack):
    """A stack of ``DecoderLayer``s (``layers``), plus ``norm`` when pre-norm."""

    def __init__(self, n_layers: int, d_model: int, **options: Any) -> None:
        """``options``: ``pre_norm``, ``dtype`` and the other keyword arguments of ``DecoderLayer``."""
        super().__init__(DecoderLayer, n_layers, d_model, **options)

    def forward(self, x: Any, memory: Any, self_mask: Any, memory_mask: Any, layout: Layout = PADDED,
                memory_layout: Layout = PADDED) -> Any:
        for layer in self.layers:
            x = layer.forward(x, memory, self_mask, memory_mask, layout, memory_layout)
        return x if self.norm is None else self.norm.forward(x)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """Returns ``(dx, d_memory)``, ``d_memory`` summed over the layers."""
        walk = rule("decoder_backward", None)  # a student's (lesson 10), if the set has one
        if walk is not None:
            layers = [blocks_reading_memory(layer.sublayers) for layer in self.layers]
            return walk(dout, layers, self.norm is not None, None if self.norm is None else self.norm.backward)
        d = dout if self.norm is None else self.norm.backward(dout)
        stack_backward = rule("stack_backward_with_memory", stack_backward_with_memory)
        return stack_backward(d, [layer.backward for layer in self.layers])

    def step(self, x: Any, position: int, cache: "DecoderCache") -> Any:
        """``x (B, 1, D)`` at ``position`` through every layer, reading and filling ``cache``."""
        for index, layer in enumerate(self.layers):
            x = layer.step(x, position, cache.self_keys[index], cache.self_values[index],
                           cache.memory_keys[index], cache.memory_values[index], cache.memory_mask)
        return x if self.norm is None else self.norm.forward(x)


def kv_buffers(batch: int, n_heads: int, max_len: int, head_dim: int, n_layers: int,
               dtype: Any) -> tuple[list, list]:
    """Empty self-attention caches for incremental decoding: ``(keys, values)``, two lists of
    ``n_layers`` zero arrays ``(batch, n_heads, max_len, head_dim)`` in ``dtype``, one per layer,
    which ``SelfAttention.forward`` fills one position per step (its ``cache``)."""
    shape = (batch, n_heads, max_len, head_dim)
    keys = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]
    values = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]
    return keys, values


class DecoderCache:
    """What incremental decoding keeps between steps.

    * ``memory_keys[i]``, ``memory_values[i]``: layer ``i``'s cross-attention keys
      and values of the encoder output, ``(B, H, Ts, Dh)``, computed once;
    * ``self_keys[i]``, ``self_values[i]``: layer ``i``'s self-attention keys and
      values, ``(B, H, max_len, Dh)`` buffers filled one position per step;
    * ``memory_mask``: the source padding mask ``(B, 1, 1, Ts)``;
    * ``length``: how many target positions have been processed.
    """

    def __init__(self, memory_keys: list, memory_values: list, self_keys: list,
                 self_values: list, memory_mask: Any) -> None:
        self.memory_keys, self.memory_values = memory_keys, memory_values
        self.self_keys, self.self_values = self_keys, self_values
        self.memory_mask = memory_mask
        self.length = 0

    def select(self, rows: Any, same_sources: bool = False) -> "DecoderCache":
        """A cache whose batch row ``j`` is row ``rows[j]`` of this one (beam search reorders).

        ``same_sources``: every row ``rows[j]`` decodes the same source as row ``j`` (a beam never
        leaves its sentence), so the memory's keys, values and mask are kept as they are and only
        the self-attention caches are gathered."""
        chosen = DecoderCache(
            self.memory_keys if same_sources else [k[rows] for k in self.memory_keys],
            self.memory_values if same_sources else [v[rows] for v in self.memory_values],
            [k[rows] for k in self.self_keys], [v[rows] for v in self.self_values],
            self.memory_mask if same_sources else self.memory_mask[rows],
        )
        chosen.length = self.length
        return chosen
