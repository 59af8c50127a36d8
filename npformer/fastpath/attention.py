"""A core attention block (``nn/attention.py``) run on packed rows, with its projections fused.

The position-wise work of an attention block, the q, k, v and output projections, runs on the
real tokens alone, ``(1, N, D)`` (``fastpath.packing``); the scores need the padded layout, so
the heads are unpacked around the attention op and the context is packed again::

    packed x (1, N, D) -> x @ [Wq | Wk | Wv] (1, N, 3D) -> unpack -> q, k, v (B, H, T, Dh)
    context = attention(q, k, v, mask)                                          (B, H, T, Dh)
    out = pack(merge_heads(context)) @ Wo + bo                                  (1, N, D)

Cross-attention fuses ``[Wk | Wv]`` for the memory and projects the query with ``Wq`` alone.
The block's own ``Linear`` children and the active op set do the work; only the layout differs
from ``MultiHeadAttention.forward``, whose numbers this gives (``tests/test_fastpath.py``).
"""

from __future__ import annotations

from typing import Any

from .. import ops
from ..backend import xp
from ..nn import MultiHeadAttention
from .fused import fuse
from .packing import Packing


def split_packed(block: MultiHeadAttention, y: Any, n_parts: int, packing: Packing) -> list:
    """``n_parts`` projections side by side on packed rows, ``y (1, N, n_parts D)`` -> ``n_parts``
    contiguous head arrays ``(B, H, T, Dh)``, zeros at the padding."""
    batch, length = packing.shape
    parts = xp.zeros((n_parts, batch, block.n_heads, length, block.head_dim), dtype=y.dtype)
    packing.unpack(y.reshape(1, packing.count, n_parts, block.n_heads, block.head_dim),
                   out=parts.transpose(1, 3, 0, 2, 4))             # parts seen as (B, T, n_parts, H, Dh)
    return list(parts)


def merge_packed(block: MultiHeadAttention, parts: list, packing: Packing) -> Any:
    """The inverse of ``split_packed``: ``n_parts`` arrays ``(B, H, T, Dh)`` -> ``(1, N, n_parts D)``."""
    merged = xp.empty((1, packing.count, len(parts), block.n_heads, block.head_dim), dtype=parts[0].dtype)
    for index, part in enumerate(parts):
        merged[:, :, index] = packing.pack(part.transpose(0, 2, 1, 3))      # (1, N, H, Dh)
    return merged.reshape(1, packing.count, len(parts) * block.d_model)


class _PackedAttention:
    """What both packed blocks share: the attention op on heads, then the block's output projection
    on the packed context, and its backward down to ``(dq, dk, dv)``."""

    def __init__(self, block: MultiHeadAttention, packing: Packing) -> None:
        self.block, self.packing = block, packing

    def _attend(self, q: Any, keys: Any, values: Any, mask: Any) -> Any:
        context, self._attention_cache = ops.current().attention_forward(q, keys, values, mask)
        self.block.attn_weights = self._attention_cache["weights"]   # the block's last weights, as its own call keeps
        return self.block.o.forward(merge_packed(self.block, [context], self.packing))    # (1, Nq, D)

    def _attend_backward(self, dout: Any) -> tuple[Any, Any, Any]:
        """``dout (1, Nq, D)`` -> ``(dq, dk, dv)``, each ``(B, H, T, Dh)``."""
        d_context = split_packed(self.block, self.block.o.backward(dout), 1, self.packing)[0]
        return ops.current().attention_backward(d_context, self._attention_cache)


class PackedSelfAttention(_PackedAttention):
    """A core ``SelfAttention`` block on packed rows: ``forward(x, mask)``, ``backward(dout) -> dx``,
    the signatures of the block's own; q, k and v as one product of the fused ``[Wq | Wk | Wv]``."""

    def __init__(self, block: MultiHeadAttention, packing: Packing) -> None:
        super().__init__(block, packing)
        self.fused = fuse((block.q, block.k, block.v))

    def forward(self, x: Any, mask: Any) -> Any:
        """Packed ``x (1, N, D)`` -> packed ``(1, N, D)``."""
        qkv, self._fused_cache = self.fused.forward(x)                                  # (1, N, 3D)
        q, keys, values = split_packed(self.block, qkv, 3, self.packing)                # (B, H, T, Dh) each
        return self._attend(q, keys, values, mask)

    def backward(self, dout: Any) -> Any:
        dq, dk, dv = self._attend_backward(dout)
        return self.fused.backward(merge_packed(self.block, [dq, dk, dv], self.packing), self._fused_cache)


class PackedCrossAttention(_PackedAttention):
    """A core ``MultiHeadAttention`` (cross-attention) block on packed rows: ``forward(query, memory,
    mask)``, ``backward(dout) -> (d_query, d_memory)``; k and v as one product of ``[Wk | Wv]``."""

    def __init__(self, block: MultiHeadAttention, packing: Packing, memory_packing: Packing) -> None:
        super().__init__(block, packing)
        self.memory_packing = memory_packing
        self.fused = fuse((block.k, block.v))

    def forward(self, query: Any, memory: Any, mask: Any) -> Any:
        """Packed ``query (1, Nq, D)`` and ``memory (1, Nk, D)`` -> packed ``(1, Nq, D)``."""
        q = split_packed(self.block, self.block.q.forward(query), 1, self.packing)[0]
        kv, self._fused_cache = self.fused.forward(memory)                              # (1, Nk, 2D)
        keys, values = split_packed(self.block, kv, 2, self.memory_packing)
        return self._attend(q, keys, values, mask)

    def backward(self, dout: Any) -> tuple[Any, Any]:
        dq, dk, dv = self._attend_backward(dout)
        d_query = self.block.q.backward(merge_packed(self.block, [dq], self.packing))
        d_memory = self.fused.backward(merge_packed(self.block, [dk, dv], self.memory_packing), self._fused_cache)
        return d_query, d_memory
