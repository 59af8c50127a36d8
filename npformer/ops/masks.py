"""Boolean attention masks, **True where a query may attend to a key**.

Both broadcast against the ``(B, H, Tq, Tk)`` scores of ``attention_forward``
and combine with ``&``:

* ``padding_mask(ids, pad_id)`` -> ``(B, 1, 1, T)``: key ``t`` of sequence ``b``
  is a real token. Used by encoder self-attention, decoder cross-attention
  (with the source ids) and decoder self-attention (with the target ids).
* ``causal_mask(T)`` -> ``(T, T)``: query ``i`` may see key ``j`` only if
  ``j <= i`` (lower triangle, diagonal included), so a decoder position cannot
  look at the tokens it has to predict.

Decoder self-attention uses ``padding_mask(tgt_ids, pad) & causal_mask(T)``,
of shape ``(B, 1, T, T)``.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ..tokens import PAD_ID
from ._validate import check_integer, check_ndim


def padding_mask(ids: Any, pad_id: int = PAD_ID) -> Any:
    """``ids (B, T)`` integers -> boolean ``(B, 1, 1, T)``, True where ``ids != pad_id``."""
    check_integer("padding_mask", "ids", ids)
    check_ndim("padding_mask", "ids", ids, 2, "(B, T)")
    return (ids != pad_id)[:, None, None, :]


def causal_mask(T: int) -> Any:
    """Boolean ``(T, T)`` lower triangle: True where key ``j <= query i``."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"causal_mask: T must be a positive int, got {T!r}")
    return xp.tril(xp.ones((T, T), dtype=bool))
