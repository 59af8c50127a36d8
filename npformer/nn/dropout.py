"""``Dropout``: inverted dropout while training, the identity in eval mode. No parameters."""

from __future__ import annotations

from typing import Any

from .. import ops
from .module import Module


class Dropout(Module):
    """Drops with probability ``p`` using ``rng``, a Generator shared by the whole model."""

    def __init__(self, p: float, rng: Any) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be a number in [0, 1), got {p!r}")
        self.p = p
        self.rng = rng

    def forward(self, x: Any) -> Any:
        out, self._cache = ops.current().dropout_forward(x, self.p, self.rng, self.training)
        return out

    def backward(self, dout: Any) -> Any:
        return ops.current().dropout_backward(dout, self._cache)
