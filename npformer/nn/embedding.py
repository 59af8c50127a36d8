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
    """Token ids ``(B, T)`` -> vectors ``(B, T, D)``. ``W`` starts as ``N(0, 1/D)``.

    With ``shared_with=other`` the block owns no ``W``: it looks up ``other``'s table and
    adds its gradient into ``other``'s, so one table serves two inputs (a joint vocabulary's
    source and target) and its gradient is the sum of both uses. Each block keeps the cache
    of its own lookup.
    """

    def __init__(self, vocab_size: int, d_model: int, *, rng: numpy.random.Generator,
                 dtype: Any = None, shared_with: Module | None = None) -> None:
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self._shared_with = shared_with
        if shared_with is None:
            dtype = dtype or get_default_dtype()
            self.add_param("W", init.normal(rng, (vocab_size, d_model), d_model**-0.5, dtype))
        elif tuple(shared_with.W.shape) != (vocab_size, d_model):
            raise ValueError(f"Embedding: shared_with.W must have shape (vocab_size, d_model) = "
                             f"({vocab_size}, {d_model}), got {tuple(shared_with.W.shape)}")

    @property
    def table(self) -> Any:
        """The ``(V, D)`` table in use: ``W``, or the shared block's."""
        return self.W if self._shared_with is None else self._shared_with.W

    def forward(self, ids: Any) -> Any:
        out, self._cache = ops.current().embedding_forward(ids, self.table)
        return out

    def backward(self, dout: Any) -> None:
        """Adds ``dW``; token ids have no gradient, so nothing is returned."""
        owner = self if self._shared_with is None else self._shared_with
        owner.grad["W"] += ops.current().embedding_backward(dout, self._cache)


class LearnedPositions(Embedding):
    """A learned vector per position: ``W (max_len, D)``; position ``p`` reads row ``W[p]``."""

    def forward(self, batch: int, length: int, start: int = 0) -> Any:
        """The vectors of positions ``start .. start + length - 1`` for every row: ``(B, T, D)``."""
        positions = xp.broadcast_to(xp.arange(start, start + length), (batch, length))
        return super().forward(xp.ascontiguousarray(positions))
