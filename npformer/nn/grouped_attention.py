"""Causal self-attention with rotary positions and grouped-query heads, as in LLaMA 2 and 3.

With ``D = d_model``, ``H = n_heads`` query heads of ``Dh = D / H`` and ``Hkv = n_kv_heads``
key/value heads (``Hkv`` divides ``H``)::

    q = rope(split(x @ Wq, H))                 (B, T, D)   -> (B, H, T, Dh)
    k = rope(split(x @ Wk, Hkv))               (B, T, Hkv Dh) -> (B, Hkv, T, Dh)
    v = split(x @ Wv, Hkv)                     (B, Hkv, T, Dh)
    context = grouped_query_attention(q, k, v, mask)       (B, H, T, Dh)
    out     = merge(context) @ Wo              (B, T, D)

No biases. Positions enter only through the rotation of ``q`` and ``k`` (``ops.rope``), never added
to the residual stream. Parameters: ``2 D^2 + 2 D Hkv Dh``; ``Wk`` and ``Wv`` shrink with ``Hkv``,
and so does the KV cache, ``2 Hkv Dh`` numbers per position and layer instead of ``2 D``.

The backward pass reads the forward from the bottom up; ``x`` feeds ``q``, ``k`` and ``v``, so its
gradient is the sum of the three paths. ``step`` is one KV-cached generation step: the new position's
query and key are rotated by its own position (``rope``'s ``offset``) and the key and value written
into the cache, so the cache holds exactly the rotated keys the full forward pass computes.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from .attention import check_heads, merge_heads, split_heads
from .linear import Linear
from .module import Module


def check_grouped_heads(owner: str, d_model: int, n_heads: int, n_kv_heads: int) -> None:
    """``n_heads`` divides ``d_model`` (``check_heads``), ``n_kv_heads`` divides ``n_heads``, and each head's
    ``d_model / n_heads`` numbers pair up for the rotation."""
    check_heads(owner, d_model, n_heads)
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"{owner}: n_kv_heads must divide n_heads, got n_heads={n_heads}, n_kv_heads={n_kv_heads}")
    if (d_model // n_heads) % 2:
        raise ValueError(f"{owner}: d_model / n_heads must be even for rotary positions, "
                         f"got {d_model} / {n_heads} = {d_model // n_heads}")


class GroupedQueryAttention(Module):
    """``x (B, T, D)`` -> ``(B, T, D)``. Children ``q``, ``k``, ``v``, ``o`` (``Linear`` without bias)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, *, rope_base: float = 10000.0,
                 rng: numpy.random.Generator, dtype: Any = None) -> None:
        super().__init__()
        check_grouped_heads(type(self).__name__, d_model, n_heads, n_kv_heads)
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.rope_base = rope_base
        kv_width = n_kv_heads * self.head_dim
        self.q = Linear(d_model, d_model, rng=rng, dtype=dtype, bias=False)
        self.k = Linear(d_model, kv_width, rng=rng, dtype=dtype, bias=False)
        self.v = Linear(d_model, kv_width, rng=rng, dtype=dtype, bias=False)
        self.o = Linear(d_model, d_model, rng=rng, dtype=dtype, bias=False)
        self.attn_weights = None

    def _rotated(self, x: Any, position: int) -> tuple[Any, Any, Any, dict, dict]:
        """``q``, ``k`` (rotated from ``position``) and ``v`` of ``x (B, T, D)``, and the two rotations' caches."""
        op_set = ops.current()
        q, q_rotation = op_set.rope_forward(split_heads(self.q.forward(x), self.n_heads), position, self.rope_base)
        k, k_rotation = op_set.rope_forward(split_heads(self.k.forward(x), self.n_kv_heads), position, self.rope_base)
        return q, k, split_heads(self.v.forward(x), self.n_kv_heads), q_rotation, k_rotation

    def _attend(self, q: Any, keys: Any, values: Any, mask: Any) -> Any:
        context, self._attention_cache = ops.current().grouped_query_attention_forward(q, keys, values, mask)
        self.attn_weights = self._attention_cache["weights"]                 # (B, H, Tq, Tk)
        return self.o.forward(merge_heads(context))

    def forward(self, x: Any, mask: Any = None, cache: tuple | None = None) -> Any:
        """``x (B, T, D)``, ``mask`` broadcastable to ``(B, H, T, T)`` -> ``(B, T, D)``. ``cache``:
        ``(key_buffer, value_buffer, position)`` when ``x (B, 1, D)`` is one new position during
        generation (no backward): its rotated key and value are written into the ``(B, Hkv,
        max_len, Dh)`` buffers at ``position``, and it attends over positions ``0 .. position``."""
        position = 0 if cache is None else cache[2]
        q, keys, values, self._q_rotation, self._k_rotation = self._rotated(x, position)
        if cache is not None:
            key_buffer, value_buffer, _ = cache
            key_buffer[:, :, position], value_buffer[:, :, position] = keys[:, :, 0], values[:, :, 0]
            keys, values = key_buffer[:, :, :position + 1], value_buffer[:, :, :position + 1]
        return self._attend(q, keys, values, mask)

    def backward(self, dout: Any) -> Any:
        """``dout (B, T, D)`` -> ``dx (B, T, D)``, the sum of the q, k and v paths."""
        op_set = ops.current()
        d_context = split_heads(self.o.backward(dout), self.n_heads)                       # (B, H, T, Dh)
        dq, dk, dv = op_set.grouped_query_attention_backward(d_context, self._attention_cache)
        dq = op_set.rope_backward(dq, self._q_rotation)                                    # (B, H, T, Dh)
        dk = op_set.rope_backward(dk, self._k_rotation)                                    # (B, Hkv, T, Dh)
        return (self.q.backward(merge_heads(dq)) + self.k.backward(merge_heads(dk))
                + self.v.backward(merge_heads(dv)))
