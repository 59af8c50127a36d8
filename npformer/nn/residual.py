"""The residual connection around each sub-layer, and a layer as a list of them.

A residual block wraps a sub-layer ``F`` (attention, the feed-forward network) with dropout ``D``
and a norm ``LN``, after it (post-norm, the paper, Vaswani et al. 2017) or before it (pre-norm,
Xiong et al. 2020; GPT-2), which trains more stably in deep stacks::

    post-norm:  s = x + D(F(x)),   y = LN(s)
    pre-norm:   y = x + D(F(LN(x)))

Backward follows the two arrows out of ``x``: the identity path passes the gradient straight
through, the sub-layer path goes back through dropout, the sub-layer and (in pre-norm) the norm,
and the two are added::

    post-norm:  ds = LN'(dy),       dx = ds + F'(D'(ds))
    pre-norm:   dx = dy + LN'(F'(D'(dy)))

``residual_backward`` writes that rule with the three backward passes as functions of an upstream
gradient (lesson 09 derives it). Cross-attention reads a second input, the encoder's output
("memory"): its backward returns ``(d_input, d_memory)``, and so does its block's
(``residual_backward_with_memory``). Every decoder layer reads the same memory, so the memory's
gradient is the sum of what each layer sends back (``stack_backward_with_memory``, lesson 10).

``Residual`` is one such block, as an entry of a layer's list (``nn/layer.py``). An op set may
bring its own three rules (a student's, ``ops.using``; ``ops.RULE_NAMES``); the blocks run them in
place of the ones here.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import ops
from .module import Module

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


def rule(name: str, textbook: Callable) -> Callable:
    """The active op set's rule ``name`` when it brings one (a student's), else ``textbook``."""
    return getattr(ops.current(), name, textbook)


class _Identity:
    """No dropout (the modern block's): forward and backward pass their input through."""

    def forward(self, x: Any) -> Any:
        return x

    def backward(self, dout: Any) -> Any:
        return dout


class Residual:
    """``sublayer`` with its residual connection, ``norm`` and ``dropout`` (None: none). ``reads`` names
    the layer's inputs (``nn.LayerInputs``) the sub-layer takes after ``x``, in the order of its
    ``forward``'s parameters. Not a ``Module``: the layer owns the three blocks under their own names
    (``self_attn``, ``norm1``, ...)."""

    def __init__(self, sublayer: Module, norm: Module, dropout: Module | None, pre_norm: bool,
                 reads: tuple[str, ...] = ()) -> None:
        self.sublayer, self.norm, self.pre_norm, self.reads = sublayer, norm, pre_norm, reads
        self.dropout = dropout if dropout is not None else _Identity()

    def forward(self, x: Any, *inputs: Any) -> Any:
        """``x (B, T, D)`` (packed: ``(1, N, D)``) -> the same shape; ``inputs``: what the sub-layer
        reads after ``x`` (a mask, the memory, ...)."""
        if self.pre_norm:
            return x + self.dropout.forward(self.sublayer.forward(self.norm.forward(x), *inputs))
        return self.norm.forward(x + self.dropout.forward(self.sublayer.forward(x, *inputs)))

    def backward(self, dout: Any) -> tuple[Any, Any]:
        """``(dx, d_memory)``; ``d_memory`` is 0 unless the sub-layer reads the memory."""
        parts = (self.sublayer.backward, self.norm.backward, self.dropout.backward, self.pre_norm)
        if "memory" in self.reads:
            return rule("residual_backward_with_memory", residual_backward_with_memory)(dout, *parts)
        return rule("residual_backward", residual_backward)(dout, *parts), 0
