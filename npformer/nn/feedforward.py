"""``FeedForward``: the position-wise network ``fc2(activation(fc1(x)))``.

``fc1: d_model -> d_ff`` and ``fc2: d_ff -> d_model``, applied to every
position independently; ``activation`` is "relu" (the paper) or "gelu".
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from .linear import Linear
from .module import Module



class FeedForward(Module):
    """``(B, T, d_model)`` -> ``(B, T, d_model)`` through a hidden layer of width ``d_ff``."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", *,
                 rng: numpy.random.Generator, dtype: Any = None) -> None:
        super().__init__()
        if activation not in ops.ACTIVATIONS:
            raise ValueError(
                f"FeedForward: activation must be one of {sorted(ops.ACTIVATIONS)}, got {activation!r}"
            )
        self.activation = activation
        self.fc1 = Linear(d_model, d_ff, rng=rng, dtype=dtype)
        self.fc2 = Linear(d_ff, d_model, rng=rng, dtype=dtype)

    def forward(self, x: Any) -> Any:
        activation_forward, _ = ops.current().pair(ops.ACTIVATIONS[self.activation])   # the active set's
        hidden, self._activation_cache = activation_forward(self.fc1.forward(x))
        return self.fc2.forward(hidden)

    def backward(self, dout: Any) -> Any:
        _, activation_backward = ops.current().pair(ops.ACTIVATIONS[self.activation])
        d_hidden = activation_backward(self.fc2.backward(dout), self._activation_cache)
        return self.fc1.backward(d_hidden)
