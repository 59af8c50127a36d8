"""``MultiHeadAttention``: ``h`` scaled dot-product attentions side by side (Vaswani et al., 3.2.2).

Shapes, with ``D = d_model`` and ``Dh = D / H``::

    q = split(query  @ Wq + bq)     (B, Tq, D) -> (B, H, Tq, Dh)
    k = split(memory @ Wk + bk)     (B, Tk, D) -> (B, H, Tk, Dh)
    v = split(memory @ Wv + bv)     (B, Tk, D) -> (B, H, Tk, Dh)
    context = attention(q, k, v, mask)           (B, H, Tq, Dh)
    out     = merge(context) @ Wo + bo           (B, Tq, D)

``split`` reshapes the last axis into ``H`` heads of ``Dh`` and moves the
head axis forward; ``merge`` undoes it. The heads are a reshape, not separate
matrices: ``Wq`` is one ``(D, D)`` matrix whose column block ``h`` serves
head ``h``. Parameters: four ``Linear(D, D)``, ``4 (D^2 + D)`` in all.

Self-attention (``forward_self(x)``) computes q, k and v of the same input with
one fused ``(D, 3D)`` product; its backward pass returns one ``dx``, the sum of
the three paths. Cross-attention (``forward(query, memory)``) takes the decoder
state as ``query`` and the encoder output as ``memory`` (k and v fused), and
its backward pass returns ``(d_query, d_memory)``. The parameters stay four
separate ``Linear`` layers either way.

``attn_weights`` keeps the ``(B, H, Tq, Tk)`` weights of the last call, for
plots by layer and head.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from ..backend import xp
from .linear import Linear
from .module import Module


class MultiHeadAttention(Module):
    """Parameters ``q``, ``k``, ``v``, ``o``: each a ``Linear(d_model, d_model)``."""

    def __init__(self, d_model: int, n_heads: int, *, rng: numpy.random.Generator,
                 dtype: Any = None) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"MultiHeadAttention: d_model must be divisible by n_heads, "
                f"got d_model={d_model}, n_heads={n_heads}"
            )
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.q = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.k = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.v = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.o = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.attn_weights = None

    def split_heads(self, x: Any, parts: int = 1) -> Any:
        """``(B, T, parts * D)`` -> ``parts`` arrays ``(B, H, T, Dh)``, contiguous (one array if parts = 1)."""
        batch, length, _ = x.shape
        heads = x.reshape(batch, length, parts, self.n_heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        split = [xp.ascontiguousarray(part) for part in heads]
        return split[0] if parts == 1 else split

    def merge_heads(self, *heads: Any) -> Any:
        """``parts`` arrays ``(B, H, T, Dh)`` -> ``(B, T, parts * D)`` (the inverse of ``split_heads``)."""
        batch, _, length, _ = heads[0].shape
        merged = xp.empty((batch, length, len(heads), self.n_heads, self.head_dim), dtype=heads[0].dtype)
        for index, part in enumerate(heads):
            merged[:, :, index] = part.transpose(0, 2, 1, 3)
        return merged.reshape(batch, length, len(heads) * self.d_model)

    # -- several projections of one input as one matrix product ------------------------------
    #
    # q, k and v read the same input in self-attention (k and v in cross-attention), so their
    # weights are concatenated into one (D, parts * D) matrix and applied with one product: a
    # bigger, faster GEMM. The gradient is split back into each Linear's own W and b, so the
    # parameters keep their names.

    def _fused_forward(self, x: Any, layers: tuple) -> tuple[Any, tuple]:
        weight = xp.concatenate([layer.W for layer in layers], axis=1)
        bias = xp.concatenate([layer.b for layer in layers])
        y, cache = ops.linear_forward(x, weight, bias)
        return y, (cache, layers)

    def _fused_backward(self, dy: Any, fused_cache: tuple) -> Any:
        cache, layers = fused_cache
        dx, dW, db = ops.linear_backward(dy, cache)
        width = self.d_model
        for index, layer in enumerate(layers):
            layer.grad["W"] += dW[:, index * width:(index + 1) * width]
            layer.grad["b"] += db[index * width:(index + 1) * width]
        return dx

    def project_memory(self, memory: Any) -> tuple[Any, Any]:
        """Keys and values of ``memory (B, Tk, D)``, each ``(B, H, Tk, Dh)``."""
        kv, self._memory_cache = self._fused_forward(memory, (self.k, self.v))
        keys, values = self.split_heads(kv, parts=2)
        return keys, values

    def attend(self, query: Any, keys: Any, values: Any, mask: Any = None) -> Any:
        """Attention of ``query (B, Tq, D)`` over keys and values already split into heads."""
        q = self.split_heads(self.q.forward(query))
        return self._attention(q, keys, values, mask)

    def _attention(self, q: Any, keys: Any, values: Any, mask: Any) -> Any:
        context, self._cache = ops.attention_forward(q, keys, values, mask)
        self.attn_weights = self._cache["weights"]
        return self.o.forward(self.merge_heads(context))

    def forward(self, query: Any, memory: Any, mask: Any = None) -> Any:
        """``query (B, Tq, D)`` attends over ``memory (B, Tk, D)``; returns ``(B, Tq, D)``.

        Use ``forward_self(x, mask)`` when query and memory are the same array.
        """
        self._self = False
        keys, values = self.project_memory(memory)
        return self.attend(query, keys, values, mask)

    def forward_self(self, x: Any, mask: Any = None) -> Any:
        """Self-attention of ``x (B, T, D)``: ``forward(x, x, mask)`` with one fused Q/K/V product."""
        self._self = True
        qkv, self._qkv_cache = self._fused_forward(x, (self.q, self.k, self.v))
        q, keys, values = self.split_heads(qkv, parts=3)
        return self._attention(q, keys, values, mask)

    def backward(self, dout: Any) -> Any:
        """After ``forward``: ``(d_query, d_memory)``. After ``forward_self``: ``dx``."""
        d_context = self.split_heads(self.o.backward(dout))
        dq, dk, dv = ops.attention_backward(d_context, self._cache)
        if self._self:
            return self._fused_backward(self.merge_heads(dq, dk, dv), self._qkv_cache)
        d_query = self.q.backward(self.merge_heads(dq))
        d_memory = self._fused_backward(self.merge_heads(dk, dv), self._memory_cache)
        return d_query, d_memory

    def forward_step(self, query: Any, key_buffer: Any, value_buffer: Any, position: int) -> Any:
        """Cached self-attention for one new position (inference only, no backward).

        ``query (B, 1, D)`` is the input at ``position``. Its key and value are
        written into ``key_buffer``/``value_buffer`` ``(B, H, max_len, Dh)`` at
        ``position``, and it attends over positions ``0 .. position``: the
        earlier keys and values are reused, not recomputed.
        """
        new_keys, new_values = self.project_memory(query)
        key_buffer[:, :, position] = new_keys[:, :, 0]
        value_buffer[:, :, position] = new_values[:, :, 0]
        end = position + 1
        return self.attend(query, key_buffer[:, :, :end], value_buffer[:, :, :end])
