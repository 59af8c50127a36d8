"""Multi-head attention: ``h`` scaled dot-product attentions side by side (Vaswani et al., 3.2.2).

Shapes, with ``D = d_model``, ``H = n_heads`` and ``Dh = D / H``::

    q = split_heads(query  @ Wq + bq)      (B, Tq, D) -> (B, H, Tq, Dh)
    k = split_heads(memory @ Wk + bk)      (B, Tk, D) -> (B, H, Tk, Dh)
    v = split_heads(memory @ Wv + bv)      (B, Tk, D) -> (B, H, Tk, Dh)
    context = attention(q, k, v, mask)                  (B, H, Tq, Dh)
    out     = merge_heads(context) @ Wo + bo            (B, Tq, D)

``split_heads`` reshapes the last axis into ``H`` heads of ``Dh`` and moves the
head axis forward; ``merge_heads`` undoes it. The heads are a reshape, not
separate matrices: ``Wq`` is one ``(D, D)`` matrix whose column block ``h``
serves head ``h``. Parameters: four ``Linear(D, D)``, ``4 (D^2 + D)`` in all.

The backward pass is the forward pass read from the bottom up: the output
projection, merge becomes split, attention's own backward, split becomes
merge, and the three input projections. ``memory`` feeds both ``k`` and ``v``,
so its gradient is the sum of the two paths.

Two classes share that code:

* ``MultiHeadAttention`` (cross-attention): ``forward(query, memory, mask)``,
  ``backward(dout) -> (d_query, d_memory)``;
* ``SelfAttention``: ``forward(x, mask)``, ``backward(dout) -> dx``, where
  ``dx`` sums the gradients of the q, k and v paths.

**Textbook form and fast form.** With ``fused=False`` every projection is its
own ``Linear`` call, exactly as above; read that form first. With
``fused=True`` (the default) the projections that read the same input run as
one matrix product: q, k and v of self-attention through the ``(D, 3D)``
matrix ``[Wq | Wk | Wv]``, and k and v of cross-attention through
``[Wk | Wv]``. A larger product is faster than three small ones, and the
gradient of the product is split back into each ``Linear``'s own ``W`` and
``b``, so the parameters keep their names. A test checks that both forms
give the same outputs and gradients (``use_fused_attention`` switches a
whole model).

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
from .packing import Packing


def check_heads(owner: str, d_model: int, n_heads: int) -> None:
    """``n_heads`` must divide ``d_model``: each head gets ``d_model / n_heads`` columns."""
    if d_model % n_heads:
        raise ValueError(f"{owner}: d_model must be divisible by n_heads, "
                         f"got d_model={d_model}, n_heads={n_heads}")


class MultiHeadAttention(Module):
    """Cross-attention: ``query (B, Tq, D)`` attends over ``memory (B, Tk, D)``.

    Children ``q``, ``k``, ``v``, ``o``: each a ``Linear(d_model, d_model)``.
    """

    def __init__(self, d_model: int, n_heads: int, *, rng: numpy.random.Generator,
                 dtype: Any = None, fused: bool = True) -> None:
        super().__init__()
        check_heads(type(self).__name__, d_model, n_heads)
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.fused = fused
        self.q = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.k = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.v = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.o = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.attn_weights = None

    # -- heads ----------------------------------------------------------------------------

    def split_heads(self, x: Any, packing: Packing | None = None) -> Any:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``, contiguous. With ``packing``, ``x`` is the packed
        ``(1, N, D)`` of the real positions (``nn.Packing``) and the padded positions get zeros."""
        return self._split(x, 1, packing)[0]

    def merge_heads(self, x: Any, packing: Packing | None = None) -> Any:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``: the inverse of ``split_heads``. With ``packing``:
        ``(1, N, D)``, the real positions only."""
        return self._merge([x], packing)

    def _split(self, y: Any, n_parts: int, packing: Packing | None) -> list:
        """``n_parts`` projections side by side, ``y (B, T, n_parts * D)`` (packed: ``(1, N, n_parts * D)``)
        -> ``n_parts`` contiguous arrays ``(B, H, T, Dh)``."""
        if packing is None:
            batch, length, _ = y.shape
            parts = y.reshape(batch, length, n_parts, self.n_heads, self.head_dim).transpose(2, 0, 3, 1, 4)
            return [xp.ascontiguousarray(part) for part in parts]
        batch, length = packing.shape
        parts = xp.zeros((n_parts, batch, self.n_heads, length, self.head_dim), dtype=y.dtype)
        packing.unpack(y.reshape(1, packing.count, n_parts, self.n_heads, self.head_dim),
                       out=parts.transpose(1, 3, 0, 2, 4))             # parts seen as (B, T, n_parts, H, Dh)
        return list(parts)

    def _merge(self, parts: list, packing: Packing | None) -> Any:
        """The inverse of ``_split``: ``n_parts`` arrays ``(B, H, T, Dh)`` -> ``(B, T, n_parts * D)``
        (packed: ``(1, N, n_parts * D)``)."""
        batch, _, length, _ = parts[0].shape
        rows = (batch, length) if packing is None else (1, packing.count)
        merged = xp.empty((*rows, len(parts), self.n_heads, self.head_dim), dtype=parts[0].dtype)
        for index, part in enumerate(parts):
            by_position = part.transpose(0, 2, 1, 3)                    # (B, T, H, Dh)
            merged[:, :, index] = by_position if packing is None else packing.pack(by_position)
        return merged.reshape(*rows, len(parts) * self.d_model)

    # -- the core shared by both classes: attention over projected heads, then ``o`` ---------

    def _attend_and_project(self, q: Any, keys: Any, values: Any, mask: Any, packing: Packing | None) -> Any:
        context, self._attention_cache = ops.attention_forward(q, keys, values, mask)
        self.attn_weights = self._attention_cache["weights"]
        self._query_packing = packing
        return self.o.forward(self.merge_heads(context, packing))

    def _attend_and_project_backward(self, dout: Any) -> tuple[Any, Any, Any]:
        """``dout (B, Tq, D)`` (packed: ``(1, Nq, D)``) -> ``(dq, dk, dv)``, each ``(B, H, T, Dh)``."""
        d_context = self.split_heads(self.o.backward(dout), self._query_packing)
        return ops.attention_backward(d_context, self._attention_cache)

    # -- the fast form: several projections of one input as one product ---------------------

    def _fused_project(self, x: Any, layers: tuple[Linear, ...], packing: Packing | None = None) -> tuple[list, Any]:
        """``x @ [W1 | W2 | ...] + [b1 | b2 | ...]``, split into one head array per layer."""
        weight = xp.concatenate([layer.W for layer in layers], axis=1)
        bias = xp.concatenate([layer.b for layer in layers])
        y, cache = ops.linear_forward(x, weight, bias)
        return self._split(y, len(layers), packing), (cache, layers, packing)

    def _fused_project_backward(self, d_heads: tuple, fused_cache: Any) -> Any:
        """The gradients of the split head arrays -> ``dx``; adds each layer's ``dW`` and ``db``."""
        cache, layers, packing = fused_cache
        dx, dW, db = ops.linear_backward(self._merge(list(d_heads), packing), cache)
        for index, layer in enumerate(layers):
            columns = slice(index * self.d_model, (index + 1) * self.d_model)
            layer.grad["W"] += dW[:, columns]
            layer.grad["b"] += db[columns]
        return dx

    # -- cross-attention ------------------------------------------------------------------

    def forward(self, query: Any, memory: Any, mask: Any = None, query_packing: Packing | None = None,
                memory_packing: Packing | None = None) -> Any:
        """``query (B, Tq, D)``, ``memory (B, Tk, D)``, ``mask`` broadcastable to ``(B, H, Tq, Tk)``
        -> ``(B, Tq, D)``. With packings (``nn.Packing``), ``query`` and ``memory`` are packed,
        ``(1, Nq, D)`` and ``(1, Nk, D)``, and so is the output, ``(1, Nq, D)``."""
        q = self.split_heads(self.q.forward(query), query_packing)
        if self.fused:
            (keys, values), self._memory_cache = self._fused_project(memory, (self.k, self.v), memory_packing)
        else:
            keys = self.split_heads(self.k.forward(memory), memory_packing)
            values = self.split_heads(self.v.forward(memory), memory_packing)
            self._memory_packing = memory_packing
        return self._attend_and_project(q, keys, values, mask, query_packing)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """``dout (B, Tq, D)`` -> ``(d_query, d_memory)``; adds every parameter's gradient."""
        dq, dk, dv = self._attend_and_project_backward(dout)
        d_query = self.q.backward(self.merge_heads(dq, self._query_packing))
        if self.fused:
            d_memory = self._fused_project_backward((dk, dv), self._memory_cache)
        else:
            d_memory = (self.k.backward(self.merge_heads(dk, self._memory_packing))
                        + self.v.backward(self.merge_heads(dv, self._memory_packing)))
        return d_query, d_memory

    # -- inference with cached keys and values (no backward) --------------------------------

    def project_keys_values(self, memory: Any) -> tuple[Any, Any]:
        """Keys and values of ``memory (B, Tk, D)``, each ``(B, H, Tk, Dh)`` (for decoding caches)."""
        (keys, values), _ = self._fused_project(memory, (self.k, self.v))
        return keys, values

    def attend(self, query: Any, keys: Any, values: Any, mask: Any = None) -> Any:
        """``query (B, Tq, D)`` over keys and values already split into heads (inference only)."""
        return self._attend_and_project(self.split_heads(self.q.forward(query)), keys, values, mask, None)


class SelfAttention(MultiHeadAttention):
    """Self-attention: ``x (B, T, D)`` attends over itself. ``backward`` returns one ``dx``."""

    def forward(self, x: Any, mask: Any = None, packing: Packing | None = None) -> Any:
        """``x (B, T, D)``, ``mask`` broadcastable to ``(B, H, T, T)`` -> ``(B, T, D)``. With
        ``packing`` (``nn.Packing``), ``x`` and the output are packed, ``(1, N, D)``."""
        if self.fused:
            (q, keys, values), self._qkv_cache = self._fused_project(x, (self.q, self.k, self.v), packing)
        else:
            q, keys, values = (self.split_heads(layer.forward(x), packing) for layer in (self.q, self.k, self.v))
        return self._attend_and_project(q, keys, values, mask, packing)

    def backward(self, dout: Any) -> Any:
        """``dout (B, T, D)`` -> ``dx (B, T, D)``, the sum of the q, k and v paths."""
        dq, dk, dv = self._attend_and_project_backward(dout)
        if self.fused:
            return self._fused_project_backward((dq, dk, dv), self._qkv_cache)
        packing = self._query_packing
        return (self.q.backward(self.merge_heads(dq, packing)) + self.k.backward(self.merge_heads(dk, packing))
                + self.v.backward(self.merge_heads(dv, packing)))

    def forward_step(self, x: Any, key_buffer: Any, value_buffer: Any, position: int) -> Any:
        """Causal self-attention for one new position (inference only, no backward).

        ``x (B, 1, D)`` is the input at ``position``. Its key and value are
        written into ``key_buffer``/``value_buffer`` ``(B, H, max_len, Dh)`` at
        ``position``, and it attends over positions ``0 .. position``: the
        earlier keys and values are reused, not recomputed.
        """
        new_keys, new_values = self.project_keys_values(x)
        key_buffer[:, :, position] = new_keys[:, :, 0]
        value_buffer[:, :, position] = new_values[:, :, 0]
        end = position + 1
        return self.attend(x, key_buffer[:, :, :end], value_buffer[:, :, :end])


def use_fused_attention(model: Module, fused: bool) -> Module:
    """Switch every attention block of ``model`` to the fast (True) or textbook (False) form."""
    for _, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = fused
    return model
