"""A layer as a list of residual blocks: written once, walked forward, in reverse, and step by step.

A Transformer layer is a few sub-layers, each inside its residual block (``nn/residual.py``). The
layer holds them as a list, ``sublayers``, built in its constructor in the order the data flows::

    EncoderLayer:  [Residual(self_attn, norm1, drop1), Residual(ffn, norm2, drop2)]

``run`` walks the list forward, ``run_backward`` walks it in reverse (summing what the sub-layers
send back to the memory), and a generation step is ``run`` again with the caches among the
inputs. So the order of a layer's operations is written once, in its constructor; the model
summary reads it from the same list (the Annotated Transformer's ``SublayerConnection``; llm.c's
one backward that lists each layer's calls).

What a sub-layer reads besides its input (a mask, the layout of the rows, the encoder's output, a
cache) comes from one ``LayerInputs`` per call; each entry names its fields (``Residual.reads``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dropout import Dropout
from .layernorm import LayerNorm
from .layout import PADDED, Layout
from .module import Module, ModuleList
from .residual import Residual, stack_backward_with_memory


@dataclass
class LayerInputs:
    """What a layer's sub-layers read besides the stream ``x``; each ``Residual`` names its fields.

    ``mask``, ``layout``: self-attention's mask and the rows' layout (``nn/layout.py``); ``cache``:
    ``(key_buffer, value_buffer, position)`` in a generation step. ``memory``, ``memory_mask``,
    ``memory_layout``: what cross-attention reads; ``memory_heads``: the memory's keys and values,
    computed once per source when decoding."""

    mask: Any = None
    layout: Layout = PADDED
    cache: tuple | None = None
    memory: Any = None
    memory_mask: Any = None
    memory_layout: Layout = PADDED
    memory_heads: tuple | None = None

    def read(self, names: tuple[str, ...]) -> list:
        """The values of the fields ``names``, in that order."""
        return [getattr(self, name) for name in names]


class ResidualLayer(Module):
    """A layer as a list of ``Residual`` entries, ``self.sublayers``, which the subclass builds."""

    sublayers: list[Residual]

    def run(self, x: Any, inputs: LayerInputs) -> Any:
        """The forward pass (or a generation step): every entry in order."""
        for residual in self.sublayers:
            x = residual.forward(x, *inputs.read(residual.reads))
        return x

    def run_backward(self, dout: Any) -> tuple[Any, Any]:
        """``(dx, d_memory)``: every entry in reverse, the memory's gradients summed (the walk of
        ``stack_backward_with_memory``, whose layers here are the entries)."""
        return stack_backward_with_memory(dout, [residual.backward for residual in self.sublayers])


def blocks_with_gradients(residuals: list[Residual]) -> list[tuple]:
    """Each block's ``(sublayer_backward, norm_backward, dropout_backward)``, in the forward order, as a
    walk through an encoder layer takes them (an op set's ``encoder_layer_backward``, lesson 9): the
    sub-layer's and the norm's return ``(d_input, their parameters' gradients)``, and since the modules
    add those gradients to their own ``grads()``, the second is None here."""
    return [(lambda g, backward=residual.sublayer.backward: (backward(g), None),
             lambda g, backward=residual.norm.backward: (backward(g), None),
             residual.dropout.backward) for residual in residuals]


def blocks_reading_memory(residuals: list[Residual]) -> list[tuple]:
    """Each block's ``(sublayer_backward, norm_backward, dropout_backward, reads_memory)``, in the forward
    order, as a walk through a decoder takes them (an op set's ``decoder_backward``, lesson 10): a
    sub-layer that reads the memory returns ``(d_input, d_memory)``."""
    return [(residual.sublayer.backward, residual.norm.backward, residual.dropout.backward,
             "memory" in residual.reads) for residual in residuals]


class TransformerLayer(ResidualLayer):
    """What the encoder's and the decoder's layers share: each entry a sub-layer with its own
    ``LayerNorm`` and ``Dropout``, all pre-norm or all post-norm."""

    def __init__(self, d_model: int, *, dropout: float, dropout_rng: Any, pre_norm: bool, dtype: Any = None) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self._entry_options = d_model, dropout, dropout_rng, dtype
        self.sublayers = []

    def add(self, name: str, sublayer: Module, norm_name: str, dropout_name: str, reads: tuple[str, ...] = ()) -> None:
        """The next entry: ``sublayer`` as the child ``name``, then its norm ``norm_name`` and its
        dropout ``dropout_name`` (the parameter keys: ``self_attn.q.W``, ``norm1.gamma``)."""
        d_model, dropout, dropout_rng, dtype = self._entry_options
        norm, drop = LayerNorm(d_model, dtype=dtype), Dropout(dropout, dropout_rng)
        for child_name, child in ((name, sublayer), (norm_name, norm), (dropout_name, drop)):
            setattr(self, child_name, child)
        self.sublayers.append(Residual(sublayer, norm, drop, self.pre_norm, reads))


class Stack(Module):
    """``n_layers`` layers of one class (``layers``), plus ``norm`` when pre-norm: pre-norm residual
    streams are never normalised otherwise."""

    def __init__(self, layer: type, n_layers: int, d_model: int, *, pre_norm: bool, dtype: Any = None,
                 **layer_options: Any) -> None:
        """``layer_options``: the other keyword arguments of ``layer``."""
        super().__init__()
        self.layers = ModuleList([layer(d_model, pre_norm=pre_norm, dtype=dtype, **layer_options)
                                  for _ in range(n_layers)])
        self.norm = LayerNorm(d_model, dtype=dtype) if pre_norm else None
