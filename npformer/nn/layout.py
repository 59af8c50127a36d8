"""Where a batch's rows are: padded ``(B, T, D)``, or packed ``(1, N, D)`` with no ``<pad>`` row.

A batch of sentences is padded to one length ``T``. Every layer of a Transformer except
attention works on each position alone (the projections, the feed-forward network, layer norm,
dropout, the residual additions), so a padded position costs as much as a real one there and its
result is thrown away. The packed layout keeps only the real positions, in reading order, as one
long sequence::

    padded (B, T, D)  --pack-->  packed (1, N, D)      N = the number of real tokens
    packed (1, N, D)  --unpack-> padded (B, T, D)      zero vectors at the padding

Attention is the one layer where positions meet: it needs each token's sentence and position, so
it splits its projections into heads ``(B, H, T, Dh)`` through the layout (``split_heads``),
attends with the usual masks, and merges the heads back into rows (``merge_heads``). A block is
given its layout; it runs the same code on either, and only these two steps differ.

Why packing is exact: with the usual masks, nothing a padded position computes reaches a real
position's output, and nothing reaches a padded position's output from the loss, so its gradient
is zero all the way down and adds nothing to any parameter's gradient. The real positions alone
give the same outputs there and the same gradients, up to rounding (``tests/test_fastpath.py``
checks every gradient in float64). This is "remove padding" of FasterTransformer and
ByteTransformer, for the position-wise layers. The packed rows are ``(1, N, D)``, not ``(N, D)``,
so that every op still sees a batch of sequences, as the lessons write them.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp


class Layout:
    """Where a batch's rows are: ``pack`` a padded ``(B, T, ...)`` into this layout's rows, ``unpack``
    them back (zeros where nothing was computed), and ``split_heads`` / ``merge_heads`` between the
    rows of projections and attention's heads ``(B, H, T, Dh)``."""

    def pack(self, padded: Any) -> Any:
        raise NotImplementedError

    def unpack(self, rows: Any) -> Any:
        raise NotImplementedError

    def split_heads(self, rows: Any, n_parts: int, n_heads: int) -> list:
        raise NotImplementedError

    def merge_heads(self, parts: list) -> Any:
        raise NotImplementedError


class Padded(Layout):
    """The batch as it is: rows ``(B, T, ...)``. ``PADDED`` is the one instance."""

    def pack(self, padded: Any) -> Any:
        """Rows of this layout from a padded ``(B, T, ...)``: the same array."""
        return padded

    def unpack(self, rows: Any) -> Any:
        return rows

    def split_heads(self, rows: Any, n_parts: int, n_heads: int) -> list:
        """``n_parts`` projections side by side, ``rows (B, T, n_parts * D)`` -> ``n_parts``
        contiguous arrays ``(B, H, T, Dh)``."""
        batch, length, width = rows.shape
        parts = rows.reshape(batch, length, n_parts, n_heads, width // (n_parts * n_heads))
        return list(xp.ascontiguousarray(parts.transpose(2, 0, 3, 1, 4)))    # n_parts x (B, H, T, Dh)

    def merge_heads(self, parts: list) -> Any:
        """The inverse of ``split_heads``: ``n_parts`` arrays ``(B, H, T, Dh)`` -> ``(B, T, n_parts * D)``."""
        batch, heads, length, head_dim = parts[0].shape
        merged = parts[0][:, :, None] if len(parts) == 1 else xp.stack(parts, axis=2)   # (B, H, n, T, Dh)
        return merged.transpose(0, 3, 2, 1, 4).reshape(batch, length, len(parts) * heads * head_dim)


PADDED = Padded()


class Packed(Layout):
    """The real tokens of a ``(B, T)`` batch side by side: ``keep (B, T)`` boolean, True = a real token.

    ``batch_index`` and ``time_index`` (``(N,)`` each) name the sentence and the position of the
    ``n``-th packed token, in reading order (sentence by sentence, left to right).
    """

    def __init__(self, keep: Any) -> None:
        if keep.ndim != 2 or keep.dtype != bool:
            raise ValueError(f"Packed: keep must be a boolean (B, T) array, got {keep.dtype} {tuple(keep.shape)}")
        self.shape = tuple(keep.shape)
        self.batch_index, self.time_index = xp.nonzero(keep)        # (N,), (N,)
        self.count = int(self.batch_index.shape[0])

    def pack(self, padded: Any) -> Any:
        """``(B, T, ...)`` -> ``(1, N, ...)``: the real positions, in reading order."""
        return padded[self.batch_index, self.time_index][None]

    def unpack(self, packed: Any, out: Any = None) -> Any:
        """``(1, N, ...)`` -> ``(B, T, ...)`` with zeros at the padding; written into ``out`` (an
        array, or a view such as a transpose, of that shape) when given, which must hold zeros."""
        if out is None:
            out = xp.zeros(self.shape + tuple(packed.shape[2:]), dtype=packed.dtype)
        out[self.batch_index, self.time_index] = packed[0]
        return out

    def split_heads(self, rows: Any, n_parts: int, n_heads: int) -> list:
        """``rows (1, N, n_parts * D)`` -> ``n_parts`` arrays ``(B, H, T, Dh)``, zeros at the padding."""
        batch, length = self.shape
        head_dim = rows.shape[-1] // (n_parts * n_heads)
        parts = xp.zeros((n_parts, batch, n_heads, length, head_dim), dtype=rows.dtype)
        self.unpack(rows.reshape(1, self.count, n_parts, n_heads, head_dim),
                    out=parts.transpose(1, 3, 0, 2, 4))                  # parts seen as (B, T, n, H, Dh)
        return list(parts)

    def merge_heads(self, parts: list) -> Any:
        """``n_parts`` arrays ``(B, H, T, Dh)`` -> ``(1, N, n_parts * D)``."""
        heads, head_dim = parts[0].shape[1], parts[0].shape[3]
        merged = xp.empty((1, self.count, len(parts), heads, head_dim), dtype=parts[0].dtype)
        for index, part in enumerate(parts):
            merged[:, :, index] = self.pack(part.transpose(0, 2, 1, 3))    # (1, N, H, Dh)
        return merged.reshape(1, self.count, len(parts) * heads * head_dim)
