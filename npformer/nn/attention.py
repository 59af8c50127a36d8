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

Self-attention passes the same array as ``query`` and ``memory``; its input
gradient is then ``d_query + d_memory``. Cross-attention passes the decoder
state as ``query`` and the encoder output as ``memory``.

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

    def split_heads(self, x: Any) -> Any:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``, contiguous."""
        batch, length, _ = x.shape
        heads = x.reshape(batch, length, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)
        return xp.ascontiguousarray(heads)

    def merge_heads(self, x: Any) -> Any:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``."""
        batch, _, length, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(batch, length, self.d_model)

    def project_memory(self, memory: Any) -> tuple[Any, Any]:
        """Keys and values of ``memory (B, Tk, D)``, each ``(B, H, Tk, Dh)``."""
        return self.split_heads(self.k.forward(memory)), self.split_heads(self.v.forward(memory))

    def attend(self, query: Any, keys: Any, values: Any, mask: Any = None) -> Any:
        """Attention of ``query (B, Tq, D)`` over keys and values already split into heads."""
        q = self.split_heads(self.q.forward(query))
        context, self._cache = ops.attention_forward(q, keys, values, mask)
        self.attn_weights = self._cache["weights"]
        return self.o.forward(self.merge_heads(context))

    def forward(self, query: Any, memory: Any, mask: Any = None) -> Any:
        """``query (B, Tq, D)`` attends over ``memory (B, Tk, D)``; returns ``(B, Tq, D)``."""
        keys, values = self.project_memory(memory)
        return self.attend(query, keys, values, mask)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """Returns ``(d_query, d_memory)``; for self-attention the input gradient is their sum."""
        d_context = self.split_heads(self.o.backward(dout))
        dq, dk, dv = ops.attention_backward(d_context, self._cache)
        d_query = self.q.backward(self.merge_heads(dq))
        d_memory = self.k.backward(self.merge_heads(dk)) + self.v.backward(self.merge_heads(dv))
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
