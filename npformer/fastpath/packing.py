"""``Packing``: the real tokens of a padded batch, side by side, so that no work is spent on ``<pad>``.

A batch of sentences is padded to one length ``T``: ``(B, T, D)``. Every layer of a Transformer
except attention works on each position alone (the projections, the feed-forward network, layer
norm, dropout, the residual additions), so a padded position costs as much as a real one there
and its result is thrown away. Packing keeps only the real positions, in reading order, as one
long sequence::

    padded (B, T, D)  --pack-->  packed (1, N, D)      N = the number of real tokens
    packed (1, N, D)  --unpack-> padded (B, T, D)      zero vectors at the padding

Attention is the one layer where positions meet, and it needs to know which sentence each token
belongs to: it unpacks its queries, keys and values into the padded ``(B, H, T, Dh)`` layout,
attends with the usual masks, and packs the result again. Padded keys are masked out, so the
zero vectors put there never reach a real position.

Why this is exact. With the usual masks, nothing a padded position computes reaches a real
position's output, and nothing reaches a padded position's output from the loss, so its gradient
is zero all the way down and adds nothing to any parameter's gradient. Working on the real
positions alone therefore gives the same outputs there and the same gradients, up to rounding
(``tests/test_fastpath.py`` checks every gradient in float64, with heavy padding and with none).
This is "remove padding" of FasterTransformer and ByteTransformer, for the position-wise layers.

The packed sequence is ``(1, N, D)``, not ``(N, D)``, so that every op still sees a batch of
sequences, as the lessons write them.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp


class Packing:
    """Where the real tokens of a ``(B, T)`` batch are: ``keep (B, T)`` boolean, True = a real token.

    ``batch_index`` and ``time_index`` (``(N,)`` each) name the sentence and the position of the
    ``n``-th packed token, in reading order (sentence by sentence, left to right).
    """

    def __init__(self, keep: Any) -> None:
        if keep.ndim != 2 or keep.dtype != bool:
            raise ValueError(f"Packing: keep must be a boolean (B, T) array, got {keep.dtype} {tuple(keep.shape)}")
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
