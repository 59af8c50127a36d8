"""The backward pass of a residual block, and of a stack of blocks that read a memory.

A residual block wraps a sub-layer ``F`` (attention, the feed-forward network) with dropout ``D``
and a layer norm ``LN``, after it (post-norm, the paper) or before it (pre-norm)::

    post-norm:  s = x + D(F(x)),   y = LN(s)
    pre-norm:   y = x + D(F(LN(x)))

The functions here take the backward passes of ``F``, ``LN`` and ``D`` as functions of an upstream
gradient (``sublayer_backward(d)``, ``norm_backward(d)``, ``dropout_backward(d)``; a block's
``.backward`` methods). Backward follows the two arrows out of ``x``: the identity path passes the
gradient straight through, the sub-layer path goes back through dropout, the sub-layer and (in
pre-norm) the norm, and the two are added::

    post-norm:  ds = LN'(dy),       dx = ds + F'(D'(ds))
    pre-norm:   dx = dy + LN'(F'(D'(dy)))

Cross-attention reads a second input, the encoder's output ("memory"): its backward returns
``(d_input, d_memory)``, and so does its block's. Every decoder layer reads the same memory, so the
memory's gradient is the sum of what each layer sends back (``stack_backward_with_memory``).
These are ops like the others: ``ops.using`` can replace them (lessons 9 and 10).
"""

from __future__ import annotations

from typing import Any, Callable

Backward = Callable[[Any], Any]


def residual_backward(dout: Any, sublayer_backward: Backward, norm_backward: Backward,
                      dropout_backward: Backward, pre_norm: bool) -> Any:
    """``dx`` of a residual block around a sub-layer with one input; shapes ``(B, T, D)``."""
    if pre_norm:
        return dout + norm_backward(sublayer_backward(dropout_backward(dout)))
    d_sum = norm_backward(dout)                                   # through y = LN(s)
    return d_sum + sublayer_backward(dropout_backward(d_sum))     # s = x + D(F(x)): both paths


def residual_backward_with_memory(dout: Any, sublayer_backward: Callable[[Any], tuple[Any, Any]],
                                  norm_backward: Backward, dropout_backward: Backward,
                                  pre_norm: bool) -> tuple[Any, Any]:
    """``(dx, d_memory)`` of a residual block whose sub-layer also reads the memory."""
    if pre_norm:
        d_input, d_memory = sublayer_backward(dropout_backward(dout))
        return dout + norm_backward(d_input), d_memory
    d_sum = norm_backward(dout)
    d_input, d_memory = sublayer_backward(dropout_backward(d_sum))
    return d_sum + d_input, d_memory


def stack_backward_with_memory(dout: Any, layer_backwards: list[Callable[[Any], tuple[Any, Any]]]) -> tuple[Any, Any]:
    """``(dx, d_memory)`` through layers given in forward order, each returning ``(dx, d_memory)``:
    the layers are undone last first, and the memory's gradient is summed over all of them."""
    d, d_memory = dout, 0
    for layer_backward in reversed(layer_backwards):
        d, d_layer_memory = layer_backward(d)
        d_memory = d_memory + d_layer_memory
    return d, d_memory
