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

Each projection is its own ``Linear`` call, exactly as above. The fast path of training
(``npformer.fastpath``) runs the same blocks with q, k and v as one product of a fused
``(D, 3D)`` weight, on the real tokens alone; ``tests/test_fastpath.py`` shows it equal to this form.

``attn_weights`` keeps the ``(B, H, Tq, Tk)`` weights of the last call, for
plots by layer and head (a reference to the array the attention op made: no copy).
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from ..backend import xp
from .linear import Linear
from .module import Module


def check_heads(owner: str, d_model: int, n_heads: int) -> None:
    """``n_heads`` must divide ``d_model``: each head gets ``d_model / n_heads`` columns."""
    if d_model % n_heads:
        raise ValueError(f"{owner}: d_model must be divisible by n_heads, "
                         f"got d_model={d_model}, n_heads={n_heads}")


def split_heads(x: Any, heads: int) -> Any:
    """``(B, T, heads * Dh)`` -> ``(B, heads, T, Dh)``, contiguous."""
    batch, length, width = x.shape
    return xp.ascontiguousarray(x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3))


def merge_heads(x: Any) -> Any:
    """``(B, heads, T, Dh)`` -> ``(B, T, heads * Dh)``: the inverse of ``split_heads``."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_dim)


class MultiHeadAttention(Module):
    """Cross-attention: ``query (B, Tq, D)`` attends over ``memory (B, Tk, D)``.

    Children ``q``, ``k``, ``v``, ``o``: each a ``Linear(d_model, d_model)``.
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
        self.attn_weights = None

    # -- heads ----------------------------------------------------------------------------

    def split_heads(self, x: Any) -> Any:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``, contiguous (the attention products run faster on it)."""
        return split_heads(x, self.n_heads)

    def merge_heads(self, x: Any) -> Any:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``: the inverse of ``split_heads``."""
        return merge_heads(x)

    # -- attention over projected heads, then ``o``: the part both classes share ------------

    def attend_heads(self, q: Any, keys: Any, values: Any, mask: Any) -> Any:
        """Heads ``q (B, H, Tq, Dh)``, ``keys``, ``values (B, H, Tk, Dh)`` -> ``(B, Tq, D)``."""
        context, self._attention_cache = ops.current().attention_forward(q, keys, values, mask)
        self.attn_weights = self._attention_cache["weights"]
        return self.o.forward(self.merge_heads(context))

    def attend_heads_backward(self, dout: Any) -> tuple[Any, Any, Any]:
        """``dout (B, Tq, D)`` -> ``(dq, dk, dv)``, each ``(B, H, T, Dh)``."""
        d_context = self.split_heads(self.o.backward(dout))
        return ops.current().attention_backward(d_context, self._attention_cache)

    # -- cross-attention ------------------------------------------------------------------

    def forward(self, query: Any, memory: Any, mask: Any = None) -> Any:
        """``query (B, Tq, D)``, ``memory (B, Tk, D)``, ``mask`` broadcastable to ``(B, H, Tq, Tk)``
        -> ``(B, Tq, D)``."""
        q = self.split_heads(self.q.forward(query))
        keys, values = self.project_keys_values(memory)
        return self.attend_heads(q, keys, values, mask)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """``dout (B, Tq, D)`` -> ``(d_query, d_memory)``; adds every parameter's gradient."""
        dq, dk, dv = self.attend_heads_backward(dout)
        d_query = self.q.backward(self.merge_heads(dq))
        d_memory = self.k.backward(self.merge_heads(dk)) + self.v.backward(self.merge_heads(dv))
        return d_query, d_memory

    # -- inference with cached keys and values (no backward) --------------------------------

    def project_keys_values(self, memory: Any) -> tuple[Any, Any]:
        """Keys and values of ``memory (B, Tk, D)``, each ``(B, H, Tk, Dh)`` (for decoding caches)."""
        return self.split_heads(self.k.forward(memory)), self.split_heads(self.v.forward(memory))

    def attend(self, query: Any, keys: Any, values: Any, mask: Any = None) -> Any:
        """``query (B, Tq, D)`` over keys and values already split into heads (inference only)."""
        return self.attend_heads(self.split_heads(self.q.forward(query)), keys, values, mask)


class SelfAttention(MultiHeadAttention):
    """Self-attention: ``x (B, T, D)`` attends over itself. ``backward`` returns one ``dx``."""

    def forward(self, x: Any, mask: Any = None) -> Any:  # type: ignore[override]
        """``x (B, T, D)``, ``mask`` broadcastable to ``(B, H, T, T)`` -> ``(B, T, D)``."""
        q, keys, values = (self.split_heads(layer.forward(x)) for layer in (self.q, self.k, self.v))
        return self.attend_heads(q, keys, values, mask)

    def backward(self, dout: Any) -> Any:  # type: ignore[override]
        """``dout (B, T, D)`` -> ``dx (B, T, D)``, the sum of the q, k and v paths."""
        dq, dk, dv = self.attend_heads_backward(dout)
        return (self.q.backward(self.merge_heads(dq)) + self.k.backward(self.merge_heads(dk))
                + self.v.backward(self.merge_heads(dv)))

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
