"""The residual connection around each sub-layer, post-norm or pre-norm.

Post-norm (the paper, Vaswani et al. 2017)::

    y = LayerNorm(x + Dropout(Sublayer(x)))

Pre-norm (Xiong et al. 2020; GPT-2), which trains more stably in deep stacks::

    y = x + Dropout(Sublayer(LayerNorm(x)))

Backward follows the two arrows out of ``x``: the identity path passes the
gradient straight through, the sub-layer path goes back through dropout,
the sub-layer and (in pre-norm) the norm, and the two are added.

``sublayer`` is a function of the sub-layer's input, and
``sublayer_backward`` returns the gradient with respect to that input.
A sub-layer that also reads a second input (cross-attention reads the
encoder output) uses ``residual_backward_with_memory``, whose
``sublayer_backward`` returns ``(d_input, d_memory)`` and which returns
``(dx, d_memory)``; ``residual_backward`` is that function for a sub-layer
with one input.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import ops
from .dropout import Dropout
from .layernorm import LayerNorm


def residual_forward(x: Any, sublayer: Callable[[Any], Any], norm: LayerNorm,
                     dropout: Dropout, pre_norm: bool) -> Any:
    if pre_norm:
        return x + dropout.forward(sublayer(norm.forward(x)))
    return norm.forward(x + dropout.forward(sublayer(x)))


def residual_backward_with_memory(dout: Any, sublayer_backward: Callable[[Any], tuple[Any, Any]],
                                  norm: LayerNorm, dropout: Dropout, pre_norm: bool) -> tuple[Any, Any]:
    """``(dx, d_memory)`` for a sub-layer whose backward returns ``(d_input, d_memory)``: the op
    ``ops.residual_backward_with_memory`` with this block's norm and dropout."""
    return ops.current().residual_backward_with_memory(dout, sublayer_backward, norm.backward, dropout.backward, pre_norm)


def residual_backward(dout: Any, sublayer_backward: Callable[[Any], Any], norm: LayerNorm,
                      dropout: Dropout, pre_norm: bool) -> Any:
    """``dx`` for a sub-layer with one input: the op ``ops.residual_backward`` (``npformer/ops/residual.py``,
    where the equations are) with this block's norm and dropout."""
    return ops.current().residual_backward(dout, sublayer_backward, norm.backward, dropout.backward, pre_norm)
