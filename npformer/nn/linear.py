"""``Linear``: ``y = x @ W + b`` with parameters ``W (d_in, d_out)`` and ``b (d_out,)``.

With ``tied_to=embedding`` the layer owns no ``W``: it uses the embedding's
table transposed, ``W = E.T`` with ``E (d_out, d_in)``, and its backward adds
``dW.T`` into the embedding's gradient. That is weight tying (Press and Wolf,
2017): the output projection and the target embedding are one matrix, and
its gradient is the sum of both uses.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ops
from ..backend import get_default_dtype
from . import init
from .module import Module


class Linear(Module):
    """An affine map on the last axis. Parameters ``W`` (Xavier uniform) and ``b`` (zeros)."""

    def __init__(self, d_in: int, d_out: int, *, rng: numpy.random.Generator, dtype: Any = None,
                 bias: bool = True, tied_to: Module | None = None) -> None:
        super().__init__()
        dtype = dtype or get_default_dtype()
        self.d_in, self.d_out = d_in, d_out
        self._tied_to = tied_to
        if tied_to is None:
            self.add_param("W", init.xavier_uniform(rng, d_in, d_out, dtype))
        elif tuple(tied_to.W.shape) != (d_out, d_in):
            raise ValueError(
                f"Linear: tied_to.W must have shape (d_out, d_in) = ({d_out}, {d_in}), "
                f"got {tuple(tied_to.W.shape)}"
            )
        self.has_bias = bias
        if bias:
            self.add_param("b", init.zeros((d_out,), dtype))

    @property
    def weight(self) -> Any:
        """The ``(d_in, d_out)`` matrix in use: ``W``, or the tied embedding's table transposed."""
        return self.W if self._tied_to is None else self._tied_to.W.T

    def forward(self, x: Any) -> Any:
        """``x (..., d_in)`` -> ``(..., d_out)``."""
        y, self._cache = ops.current().linear_forward(x, self.weight, self.b if self.has_bias else None)
        return y

    def backward(self, dy: Any) -> Any:
        """Adds ``dW`` and ``db`` to the gradients; returns ``dx``."""
        dx, dW, db = ops.current().linear_backward(dy, self._cache)
        if self._tied_to is None:
            self.grad["W"] += dW
        else:
            self._tied_to.grad["W"] += dW.T
        if self.has_bias:
            self.grad["b"] += db
        return dx
