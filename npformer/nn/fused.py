"""``FusedLinear``: several ``Linear`` layers that read one input, as one matrix product.

Self-attention projects its input three times, ``x @ Wq``, ``x @ Wk`` and ``x @ Wv``, each
``(D, D)``. One product with the weights side by side gives the same numbers::

    x @ [Wq | Wk | Wv] + [bq | bk | bv]  =  [x @ Wq + bq | x @ Wk + bk | x @ Wv + bv]    (N, 3D)

and a larger product runs closer to the BLAS peak than three small ones. Its backward is one
``linear_backward``: ``dW`` of the side-by-side weight is ``[dWq | dWk | dWv]``.

The side-by-side arrays are the storage: at construction each layer's ``W`` and ``b`` (and their
gradients) become column views of them, so the layers keep their names (``q.W``, ``k.b``), shapes
and values, the optimizer's in-place updates and ``load_state_dict`` reach the fused arrays, and a
checkpoint never sees them (nanoGPT's ``c_attn``, kept under the paper's three names). Each row of
a view is contiguous, which is all the optimizer's chunked update needs (``ops/fast/adam.py``).
A consecutive run of the layers (cross-attention's ``k`` and ``v``) is one product too. (The modern
block's grouped-query attention keeps its three products: its ``k`` and ``v`` are narrower than ``q``.)
"""

from __future__ import annotations

from typing import Any

from .. import ops
from ..backend import xp
from .linear import Linear


class FusedLinear:
    """``n`` ``Linear(D, D_out)`` layers reading one input, whose parameters are column views of one
    weight ``(D, n D_out)`` and one bias ``(n D_out,)``. Not a ``Module``: the layers own the names."""

    def __init__(self, layers: tuple[Linear, ...]) -> None:
        if not all(isinstance(layer, Linear) and layer.has_bias and "W" in layer.grad for layer in layers):
            raise TypeError("FusedLinear: every layer must be an untied nn.Linear with a bias")
        self.width = layers[0].d_out
        self.weight = xp.concatenate([layer.W for layer in layers], axis=1)                     # (D, n D_out)
        self.weight_grad = xp.concatenate([layer.grad["W"] for layer in layers], axis=1)
        self.bias = xp.concatenate([layer.b for layer in layers])                                # (n D_out,)
        self.bias_grad = xp.concatenate([layer.grad["b"] for layer in layers])
        for index, layer in enumerate(layers):
            columns = self.columns(slice(index, index + 1))
            layer.W, layer.b = self.weight[:, columns], self.bias[columns]
            layer.grad["W"], layer.grad["b"] = self.weight_grad[:, columns], self.bias_grad[columns]

    def columns(self, layers: slice) -> slice:
        """The columns of the fused weight that the layers ``layers`` (a run, e.g. ``slice(1, 3)``) own."""
        return slice(layers.start * self.width, layers.stop * self.width)

    def forward(self, x: Any, layers: slice) -> tuple[Any, Any]:
        """``x (..., D)`` -> ``(y (..., n D_out), cache)``: the outputs of ``layers``, side by side."""
        columns = self.columns(layers)
        return ops.current().linear_forward(x, self.weight[:, columns], self.bias[columns])

    def backward(self, dy: Any, cache: Any, layers: slice) -> Any:
        """``dy (..., n D_out)`` -> ``dx (..., D)``; adds ``dW`` and ``db`` into the layers' gradients."""
        dx, d_weight, d_bias = ops.current().linear_backward(dy, cache)
        columns = self.columns(layers)
        self.weight_grad[:, columns] += d_weight
        self.bias_grad[columns] += d_bias
        return dx
