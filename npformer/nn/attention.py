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

* ``MultiHeadAttention`` (cross-attention, the general form): ``forward(query, memory, mask)``,
  ``backward(dout) -> (d_query, d_memory)``;
* ``SelfAttention``: ``forward(x, mask)``, ``backward(dout) -> dx``, where
  ``dx`` sums the gradients of the q, k and v paths (the query and the memory are one input).

The three input projections are one product (``nn/fused.py``): ``q``, ``k`` and ``v`` are
``Linear`` children whose parameters are column views of one ``(D, 3D)`` weight the block owns from
its construction, so self-attention computes ``x @ [Wq | Wk | Wv]`` once (cross-attention: ``Wq`` on
the query, ``[Wk | Wv]`` on the memory), the same numbers as three products.

The rows may be padded ``(B, T, D)`` or packed ``(1, N, D)`` (``nn/layout.py``): the block is given
its ``layout``, which splits the projections into heads and merges them back; nothing else differs.

``attn_weights`` keeps the ``(B, H, Tq, Tk)`` weights of the last call, for
plots by layer and head (a reference to the array the attention op made: no copy).

A student's multi-head attention backward (lesson 08) takes the block's backward pass when the active op
set brings one (the rule ``multi_head_attention_backward``): it is handed the padded inputs, the weights
and the upstream gradient, and returns both inputs' gradients and every parameter's.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from .fused import FusedLinear
from .layout import PADDED, Layout
from .linear import Linear
from .module import Module
from .residual import rule

QUERY, KEYS_VALUES, QKV = slice(0, 1), slice(1, 3), slice(0, 3)   # runs of the fused [q | k | v]


def check_heads(owner: str, d_model: int, n_heads: int) -> None:
    """``n_heads`` must divide ``d_model``: each head gets ``d_model / n_heads`` columns."""
    if d_model % n_heads:
        raise ValueError(f"{owner}: d_model must be divisible by n_heads, "
                         f"got d_model={d_model}, n_heads={n_heads}")


def split_heads(x: Any, heads: int) -> Any:
    """``(B, T, heads * Dh)`` -> ``(B, heads, T, Dh)``, contiguous."""
    return PADDED.split_heads(x, 1, heads)[0]


def merge_heads(x: Any) -> Any:
    """``(B, heads, T, Dh)`` -> ``(B, T, heads * Dh)``: the inverse of ``split_heads``."""
    return PADDED.merge_heads([x])


class MultiHeadAttention(Module):
    """Cross-attention: ``query (B, Tq, D)`` attends over ``memory (B, Tk, D)``.

    Children ``q``, ``k``, ``v``, ``o``: each a ``Linear(d_model, d_model)``; ``q``, ``k`` and ``v``
    views of the fused ``qkv`` (``nn.FusedLinear``).
    """

    def __init__(self, d_model: int, n_heads: int, *, rng: numpy.random.Generator,
                 dtype: Any = None) -> None:
        super().__init__()
        check_heads(type(self).__name__, d_model, n_heads)
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.q = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.k = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.v = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.o = Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.qkv = FusedLinear((self.q, self.k, self.v))
        self.attn_weights = None

    def __getstate__(self) -> dict:
        """What a copy or a pickle keeps: everything but the fused arrays, which ``q``, ``k``, ``v`` hold."""
        return {name: value for name, value in self.__dict__.items() if name != "qkv"}

    def __setstate__(self, state: dict) -> None:
        """A copied or unpickled block: its ``q``, ``k``, ``v`` become views of one fused weight again."""
        self.__dict__.update(state)
        self.qkv = FusedLinear((self.q, self.k, self.v))

    def split_heads(self, x: Any) -> Any:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``, contiguous (the padded layout's)."""
        return split_heads(x, self.n_heads)

    def merge_heads(self, x: Any) -> Any:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``: the inverse of ``split_heads``."""
        return merge_heads(x)

    # -- attention over projected heads, then ``o``: the part both classes share ------------

    def attend_heads(self, q: Any, keys: Any, values: Any, mask: Any, layout: Layout = PADDED) -> Any:
        """Heads ``q (B, H, Tq, Dh)``, ``keys``, ``values (B, H, Tk, Dh)`` -> rows ``(B, Tq, D)``
        (``(1, Nq, D)`` packed)."""
        context, self._attention_cache = ops.current().attention_forward(q, keys, values, mask)
        self.attn_weights = self._attention_cache["weights"]
        self._query_layout = layout
        return self.o.forward(layout.merge_heads([context]))

    def attend_heads_backward(self, dout: Any) -> tuple[Any, Any, Any]:
        """``dout`` rows ``(B, Tq, D)`` -> ``(dq, dk, dv)``, each ``(B, H, T, Dh)``."""
        attention_cache = self._attention_cache                  # before a forward pass: says so in words
        d_context = self._query_layout.split_heads(self.o.backward(dout), 1, self.n_heads)[0]
        return ops.current().attention_backward(d_context, attention_cache)

    # -- cross-attention ------------------------------------------------------------------

    def forward(self, query: Any, memory: Any, mask: Any = None, layout: Layout = PADDED,
                memory_layout: Layout = PADDED, memory_heads: tuple | None = None) -> Any:
        """``query (B, Tq, D)``, ``memory (B, Tk, D)``, ``mask`` broadcastable to ``(B, H, Tq, Tk)``
        -> ``(B, Tq, D)``; packed rows in a packed ``layout`` / ``memory_layout``. ``memory_heads``:
        the memory's keys and values already split into heads (decoding computes them once; no
        backward then: ``memory`` is not read)."""
        projected, self._query_cache = self.qkv.forward(query, QUERY)                  # (B, Tq, D)
        q = layout.split_heads(projected, 1, self.n_heads)[0]                           # (B, H, Tq, Dh)
        self._memory_cache = None                                 # memory_heads given: no memory to send back to
        if memory_heads is None:
            keys_values, projection_cache = self.qkv.forward(memory, KEYS_VALUES)      # (B, Tk, 2D)
            memory_heads = memory_layout.split_heads(keys_values, 2, self.n_heads)      # 2 x (B, H, Tk, Dh)
            self._memory_cache = memory_layout, projection_cache
        self._inputs = query, memory, mask, layout, memory_layout     # for a student's backward (lesson 08)
        return self.attend_heads(q, *memory_heads, mask, layout)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """``dout (B, Tq, D)`` -> ``(d_query, d_memory)``; adds every parameter's gradient."""
        memory_cache = self._memory_cache                        # before a forward pass: says so in words
        if memory_cache is None:
            raise RuntimeError("MultiHeadAttention.backward: the last forward attended over given memory_heads "
                               "(decoding), which has no backward; run forward(query, memory, ...) first")
        memory_layout, projection_cache = memory_cache
        students = rule("multi_head_attention_backward", None)   # a student's (lesson 08), if the set has one
        if students is not None:
            return self.backward_by(students, dout)
        dq, dk, dv = self.attend_heads_backward(dout)
        d_query = self.qkv.backward(self._query_layout.merge_heads([dq]), self._query_cache, QUERY)
        d_memory = self.qkv.backward(memory_layout.merge_heads([dk, dv]), projection_cache, KEYS_VALUES)
        return d_query, d_memory

    def backward_by(self, students: Any, dout: Any) -> tuple[Any, Any]:
        """``backward`` by a student's rule, which sees padded rows ``(B, T, D)`` (a packed layout's are
        unpacked, zeros at the padding, and the gradients packed again) and the weights by name."""
        query, memory, mask, layout, memory_layout = self._inputs
        d_query, d_memory, grads = students(layout.unpack(query), memory_layout.unpack(memory), self.params(),
                                            self.n_heads, mask, layout.unpack(dout))
        own_grads = self.grads()                                  # views: adding to them adds to the block's
        for key, grad in grads.items():
            own_grads[key] += grad
        return layout.pack(d_query), memory_layout.pack(d_memory)

    def project_keys_values(self, memory: Any) -> tuple[Any, Any]:
        """Keys and values of ``memory (B, Tk, D)``, each ``(B, H, Tk, Dh)`` (for decoding caches)."""
        keys_values, _ = self.qkv.forward(memory, KEYS_VALUES)
        return tuple(PADDED.split_heads(keys_values, 2, self.n_heads))


class SelfAttention(MultiHeadAttention):
    """Self-attention: ``x (B, T, D)`` attends over itself. ``backward`` returns one ``dx``."""

    def forward(self, x: Any, mask: Any = None, layout: Layout = PADDED,  # type: ignore[override]
                cache: tuple | None = None) -> Any:
        """``x (B, T, D)``, ``mask`` broadcastable to ``(B, H, T, T)`` -> ``(B, T, D)``; packed rows in a
        packed ``layout``. ``cache``: ``(key_buffer, value_buffer, position)`` when ``x (B, 1, D)`` is
        one new position during generation (no backward): its key and value are written into the
        ``(B, H, max_len, Dh)`` buffers at ``position``, and it attends over positions
        ``0 .. position``, the earlier keys and values reused, not recomputed."""
        qkv, self._projection_cache = self.qkv.forward(x, QKV)                          # (B, T, 3D)
        self._inputs = x, x, mask, layout, layout                  # for a student's backward (lesson 08)
        q, keys, values = layout.split_heads(qkv, 3, self.n_heads)                      # 3 x (B, H, T, Dh)
        if cache is not None:
            key_buffer, value_buffer, position = cache
            key_buffer[:, :, position], value_buffer[:, :, position] = keys[:, :, 0], values[:, :, 0]
            keys, values = key_buffer[:, :, :position + 1], value_buffer[:, :, :position + 1]
        return self.attend_heads(q, keys, values, mask, layout)

    def backward(self, dout: Any) -> Any:  # type: ignore[override]
        """``dout (B, T, D)`` -> ``dx (B, T, D)``, the sum of the q, k and v paths (one fused product)."""
        students = rule("multi_head_attention_backward", None)   # a student's (lesson 08), if the set has one
        if students is not None:
            d_query, d_memory = self.backward_by(students, dout)
            return d_query + d_memory
        dq, dk, dv = self.attend_heads_backward(dout)
        return self.qkv.backward(self._query_layout.merge_heads([dq, dk, dv]), self._projection_cache, QKV)

    def forward_step(self, x: Any, key_buffer: Any, value_buffer: Any, position: int) -> Any:
        """``forward`` for one new position ``x (B, 1, D)`` at ``position`` over the cached keys and
        values (inference only, no backward)."""
        return self.forward(x, None, PADDED, (key_buffer, value_buffer, position))
