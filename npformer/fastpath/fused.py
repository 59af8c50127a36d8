"""Fused projections: several ``Linear`` layers that read one input, as one matrix product.

Self-attention projects its input three times, ``x @ Wq``, ``x @ Wk`` and ``x @ Wv``, each
``(D, D)``; cross-attention projects the encoder output twice (k and v). One product with the
weights side by side gives the same numbers::

    x @ [Wq | Wk | Wv] + [bq | bk | bv]  =  [x @ Wq + bq | x @ Wk + bk | x @ Wv + bv]    (N, 3D)

and a larger product runs closer to the BLAS peak than three small ones. Its backward is one
``linear_backward``: ``dW`` of the fused weight is ``[dWq | dWk | dWv]``.

Fused once, not on every call: ``fuse(layers)`` copies the layers' weights and biases into one
``(D, n D)`` weight and one ``(n D,)`` bias, then makes each layer's ``W`` and ``b`` (and their
gradients) column views of those arrays: each row of a view is contiguous, which is all the
optimizer's chunked update needs (``ops/fast/adam.py``), and the fused backward adds ``dW`` into
the fused gradient in one pass. The parameters keep their names, shapes and values;
the optimizer's in-place updates, ``load_state_dict`` and the textbook ``Linear.forward`` all
work on the views, so the fused arrays always hold the current weights. The twin of this file
is three ``Linear`` calls (``nn/attention.py``); ``tests/test_fastpath.py`` shows them equal.
"""

from __future__ import annotations

import weakref
from typing import Any

from .. import ops
from ..backend import xp
from ..nn import Linear


class FusedProjections:
    """``n`` ``Linear(D, D_out)`` layers reading one input, their parameters views of one weight
    ``(D, n D_out)`` and one bias ``(n D_out,)``. Made by ``fuse``."""

    def __init__(self, layers: tuple[Linear, ...]) -> None:
        if not all(isinstance(layer, Linear) and layer.has_bias and layer._tied_to is None for layer in layers):
            raise TypeError("fuse: every layer must be an untied nn.Linear with a bias")
        # The fusion keeps no reference to its layers (they reference its arrays): it lives and dies
        # with them, in ``_FUSIONS`` below.
        self.count, self.width = len(layers), layers[0].d_out
        self.weight = xp.concatenate([layer.W for layer in layers], axis=1)                     # (D, n D_out)
        self.weight_grad = xp.concatenate([layer.grad["W"] for layer in layers], axis=1)
        self.bias = xp.concatenate([layer.b for layer in layers])                                # (n D_out,)
        self.bias_grad = xp.concatenate([layer.grad["b"] for layer in layers])
        for index, layer in enumerate(layers):
            columns = slice(index * self.width, (index + 1) * self.width)
            layer.W, layer.b = self.weight[:, columns], self.bias[columns]
            layer.grad["W"], layer.grad["b"] = self.weight_grad[:, columns], self.bias_grad[columns]

    def holds(self, layers: tuple[Linear, ...]) -> bool:
        """Whether ``layers``' parameters are still this fusion's views (nothing rebound them)."""
        return len(layers) == self.count and all(
            layer.W.base is self.weight and layer.grad["W"].base is self.weight_grad
            and layer.b.base is self.bias and layer.grad["b"].base is self.bias_grad for layer in layers)

    def forward(self, x: Any) -> tuple[Any, Any]:
        """``x (..., D)`` -> ``(y (..., n D_out), cache)``: every layer's output side by side."""
        return ops.current().linear_forward(x, self.weight, self.bias)

    def backward(self, dy: Any, cache: Any) -> Any:
        """``dy (..., n D_out)`` -> ``dx (..., D)``; adds ``dW`` and ``db`` into every layer's gradient."""
        dx, d_weight, d_bias = ops.current().linear_backward(dy, cache)
        self.weight_grad += d_weight
        self.bias_grad += d_bias
        return dx


# One fusion per group of layers, found again on the next call (keyed by the group's first layer).
_FUSIONS: "weakref.WeakKeyDictionary[Linear, FusedProjections]" = weakref.WeakKeyDictionary()


def fuse(layers: tuple[Linear, ...]) -> FusedProjections:
    """The fusion of ``layers``: made at the first call (their parameters become views of it),
    the same object afterwards, made again if something rebound a parameter since."""
    fusion = _FUSIONS.get(layers[0])
    if fusion is None or not fusion.holds(layers):
        fusion = _FUSIONS[layers[0]] = FusedProjections(layers)
    return fusion
