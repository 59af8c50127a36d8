"""Lesson 11: the whole Transformer's backward pass, composed from its parts' backward passes.

    transformer_backward   from the logits' gradient to the two embedding tables: the output projection,
                           the decoder (which hands back the memory's gradient too), the encoder, and each
                           side's embedding, x = Dropout(sqrt(D) E[ids] + PE)

As in ``blocks_and_training``'s residual exercises, the backward functions a case hands the student are
linear maps with random matrices of their own (what the output projection, a decoder, an encoder, a
dropout mask and an embedding table's scatter do to a gradient), so a part called in the wrong place,
the memory's gradient sent the wrong way or the embedding's scale forgotten changes the numbers. An
op set may bring the student's function as the rule ``transformer_backward``: ``Transformer.backward``
then hands it the model's own parts (``models/transformer.py``).
"""

from __future__ import annotations

import math

import numpy

from ..hints import Hint, explains
from .base import Case, Exercise, WrongSolution, normal, size
from .blocks_and_training import dropout_map, linear_map


def _transformer_backward(dlogits, out_proj_backward, decoder_backward, encoder_backward, src_dropout_backward,
                          tgt_dropout_backward, src_table_backward, tgt_table_backward, d_model):
    """(dW_src, dW_tgt): the reference, in the order of the forward pass undone."""
    d_decoded = out_proj_backward(dlogits)
    d_tgt, d_memory = decoder_backward(d_decoded)
    d_src = encoder_backward(d_memory)
    scale = math.sqrt(d_model)
    return src_table_backward(src_dropout_backward(d_src) * scale), tgt_table_backward(tgt_dropout_backward(d_tgt) * scale)


def _table(rng, batch, length, vocab):
    """An embedding table's scatter: ``d (B, T, D)`` added into the rows of ``ids``, ``(V, D)``."""
    ids = rng.integers(0, vocab, size=(batch, length))

    def table_backward(d):
        table = numpy.zeros((vocab, d.shape[-1]))
        numpy.add.at(table, ids.reshape(-1), d.reshape(-1, d.shape[-1]))
        return table
    return table_backward


def _inputs(rng, batch, src_length, tgt_length, d_model, vocab):
    decoder_to_input, decoder_to_memory = linear_map(rng, d_model), normal(rng, tgt_length, src_length)
    return {"dlogits": normal(rng, batch, tgt_length, vocab),
            "out_proj_backward": linear_map(rng, vocab, d_model),
            "decoder_backward": lambda d: (decoder_to_input(d), numpy.einsum("btd,ts->bsd", d, decoder_to_memory)),
            "encoder_backward": linear_map(rng, d_model),
            "src_dropout_backward": dropout_map(rng, (batch, src_length, d_model)),
            "tgt_dropout_backward": dropout_map(rng, (batch, tgt_length, d_model)),
            "src_table_backward": _table(rng, batch, src_length, vocab + 1),
            "tgt_table_backward": _table(rng, batch, tgt_length, vocab), "d_model": d_model}


def _cases(rng):
    return [Case("B=2, source 3, target 4, D=4, V=5", _inputs(rng, 2, 3, 4, 4, 5)),
            Case("B=1, source 1, target 1, D=2, V=3: one token each", _inputs(rng, 1, 1, 1, 2, 3)),
            Case("B=2, source 5, target 2, D=9, V=6", _inputs(rng, 2, 5, 2, 9, 6))]


def _unseen(rng):
    batch, src_length, tgt_length = size(rng, 1, 3), size(rng, 1, 5), size(rng, 1, 5)
    d_model, vocab = size(rng, 2, 8), size(rng, 3, 9)
    return [Case(f"B={batch}, source {src_length}, target {tgt_length}, D={d_model}, V={vocab}",
                 _inputs(rng, batch, src_length, tgt_length, d_model, vocab))]


def _hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    scale = math.sqrt(inputs["d_model"])
    if explains(expected / scale, got):
        return Hint(f"{output} = (right answer) / {scale:.4g}, and {scale:.4g} is sqrt(d_model)",
                    "the lookup is scaled by sqrt(d_model) in the forward pass, so its gradient is too")
    if output == "dW_src" and not numpy.any(got):
        return Hint("dW_src is zero: nothing reached the source's table",
                    "the decoder hands back the memory's gradient, which is the encoder's upstream gradient")
    return ""


def _wrong(skip=(), memory_from_target=False):
    """The composition as a student might get it wrong."""
    def wrong(dlogits, out_proj_backward, decoder_backward, encoder_backward, src_dropout_backward,
              tgt_dropout_backward, src_table_backward, tgt_table_backward, d_model):
        d_tgt, d_memory = decoder_backward(out_proj_backward(dlogits))
        d_src = encoder_backward(d_tgt if memory_from_target else d_memory)
        scale = 1.0 if "scale" in skip else math.sqrt(d_model)
        through = (lambda dropout, d: d) if "dropout" in skip else (lambda dropout, d: dropout(d))
        return (src_table_backward(through(src_dropout_backward, d_src) * scale),
                tgt_table_backward(through(tgt_dropout_backward, d_tgt) * scale))
    return wrong


EXERCISES = [
    Exercise("transformer_backward",
             "transformer_backward(dlogits, out_proj_backward, decoder_backward, encoder_backward, "
             "src_dropout_backward, tgt_dropout_backward, src_table_backward, tgt_table_backward, d_model) -> "
             "(dW_src, dW_tgt): the two embedding tables' gradients", "11", _transformer_backward, _cases,
             ("dW_src", "dW_tgt"), hints=(_hint,), unseen=_unseen),
]

WRONG_SOLUTIONS = [
    WrongSolution("transformer_backward", "the scale sqrt(d_model) forgotten", _wrong(skip=("scale",)),
                  "is sqrt(d_model)"),
    WrongSolution("transformer_backward", "the dropout masks skipped on the way back", _wrong(skip=("dropout",))),
    WrongSolution("transformer_backward", "the encoder fed the target's gradient, not the memory's",
                  _wrong(memory_from_target=True)),
]

TEXTBOOK = {"transformer_backward": ("d_h = out_proj_backward(dlogits); d_tgt, d_memory = decoder_backward(d_h); "
                                     "d_src = encoder_backward(d_memory); dW_side = table_backward(sqrt(D) * "
                                     "dropout_backward(d_side)) on each side (the positions have no parameter)")}

