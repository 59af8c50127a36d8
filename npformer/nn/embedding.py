"""``Embedding``: a learned table ``W (V, D)``; token ``v`` becomes row ``W[v]``.

``LearnedPositions`` is the same table indexed by position instead of token
(BERT and GPT learn their positions; the translator uses fixed sinusoids).
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from ..backend import get_default_dtype, xp
from . import init
from .module import Module


class Embedding(Module):
    """Token ids ``(B, T)`` -> vectors ``(B, T, D)``. ``W`` starts as ``N(0, 1/D)``."""

    def __init__(self, vocab_size: int, d_model: int, *, rng: numpy.random.Generator,
                 dtype: Any = None) -> None:
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        dtype = dtype or get_default_dtype()
        self.add_param("W", init.normal(rng, (vocab_size, d_model), d_model**-0.5, dtype))

    def forward(self, ids: Any) -> Any:
        out, self._cache = ops.embedding_forward(ids, self.W)
        return out

    def backward(self, dout: Any) -> None:
        """Adds ``dW``; token ids have no gradient, so nothing is returned."""
        self.grad["W"] += ops.embedding_backward(dout, self._cache)


class LearnedPositions(Embedding):
    """A learned vector per position: ``W (max_len, D)``; position ``p`` reads row ``W[p]``."""

    def forward(self, batch: int, length: int, start: int = 0) -> Any:
        """The vectors of positions ``start .. start + length - 1`` for every row: ``(B, T, D)``."""
        positions = xp.broadcast_to(xp.arange(start, start + length), (batch, length))
        return super().forward(xp.ascontiguousarray(positions))
