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
"""

from __future__ import annotations

from typing import Any, Callable

from .dropout import Dropout
from .layernorm import LayerNorm


def residual_forward(x: Any, sublayer: Callable[[Any], Any], norm: LayerNorm,
                     dropout: Dropout, pre_norm: bool) -> Any:
    if pre_norm:
        return x + dropout.forward(sublayer(norm.forward(x)))
    return norm.forward(x + dropout.forward(sublayer(x)))


def residual_backward(dout: Any, sublayer_backward: Callable[[Any], Any], norm: LayerNorm,
                      dropout: Dropout, pre_norm: bool) -> Any:
    if pre_norm:
        d_sublayer_input = sublayer_backward(dropout.backward(dout))
        return dout + norm.backward(d_sublayer_input)
    d_sum = norm.backward(dout)
    return d_sum + sublayer_backward(dropout.backward(d_sum))
