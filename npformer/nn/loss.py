"""``CrossEntropyLoss``: mean softmax cross-entropy over non-padding targets, with label smoothing."""

from __future__ import annotations

from typing import Any

from .. import ops
from .module import Module


class CrossEntropyLoss(Module):
    """``forward(logits (B, T, V), targets (B, T)) -> loss``; ``backward(dloss=1.0) -> dlogits``."""

    def __init__(self, ignore_index: int | None = 0, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, logits: Any, targets: Any) -> Any:
        loss, self._cache = ops.cross_entropy_forward(
            logits, targets, self.ignore_index, self.label_smoothing
        )
        return loss

    def backward(self, dloss: float = 1.0) -> Any:
        return ops.cross_entropy_backward(dloss, self._cache)
