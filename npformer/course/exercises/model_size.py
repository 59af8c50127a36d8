"""The auto-graded parts of lesson 11's open questions on the model's size and cost: the vocabulary at
which the embeddings and the output layer outgrow the layers (question 4), and the length at which
attention's N^2 terms cost as much as the feed-forward block (question 5).

The references count with npformer's own models (``num_params``) and with the FLOPs of each matrix
product (2 m k n), never with a stored number.
"""

from __future__ import annotations

import numpy

from ... import models
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, size


def _parameters(vocab, d_model, d_ff, n_layers):
    config = models.TransformerConfig(vocab, vocab, d_model=d_model, n_heads=1, d_ff=d_ff, n_layers=n_layers,
                                      max_len=8)
    return models.Transformer(config, seed=0, dtype=numpy.float16).num_params()


def _sides(d_model, d_ff, n_layers):
    """(parameters per vocabulary entry, both languages; parameters of the n_layers encoder and decoder layers)."""
    per_entry = _parameters(5, d_model, d_ff, 1) - _parameters(4, d_model, d_ff, 1)
    layer_pair = _parameters(4, d_model, d_ff, 2) - _parameters(4, d_model, d_ff, 1)
    return per_entry, n_layers * layer_pair


def _break_even_vocabulary(d_model, d_ff, n_layers):
    """The smallest vocabulary (both languages, untied) whose embeddings and output layer hold at least
    as many parameters as the layers."""
    per_entry, layers = _sides(d_model, d_ff, n_layers)
    return -(-layers // per_entry)


def _vocabulary_cases(rng):
    return [Case("the base model: D=512, F=2048, 6 layers (the question's setting)",
                 {"d_model": 512, "d_ff": 2048, "n_layers": 6}),
            Case("D=64, F=256, 2 layers", {"d_model": 64, "d_ff": 256, "n_layers": 2}),
            Case("D=8, F=8, 1 layer", {"d_model": 8, "d_ff": 8, "n_layers": 1})]


def _unseen_vocabulary(rng):
    sizes = {"d_model": 4 * size(rng, 1, 48), "d_ff": 4 * size(rng, 1, 192), "n_layers": size(rng, 1, 6)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _vocabulary_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got == expected or got < 1:
        return ""
    per_entry, layers = _sides(inputs["d_model"], inputs["d_ff"], inputs["n_layers"])
    if got * per_entry < layers:
        return Hint(f"at V = {got:,} the embeddings and the output layer hold {got * per_entry:,} parameters, "
                    f"fewer than the layers' {layers:,}")
    if (got - 1) * per_entry >= layers:
        return Hint(f"V = {got - 1:,} already holds at least as many parameters as the layers: count what "
                    f"one more vocabulary entry adds to the embeddings and to the output layer")
    return ""


# -- question 5: where attention's N^2 terms catch up with the feed-forward block ------------------------

def _product_flops(batch, m, k, n):
    return 2 * batch * m * k * n


def _crossing_length(d_model, n_heads, head_dim, d_ff):
    """The length N (a real number) at which one encoder block's N^2 terms (the scores Q K^T and the
    weighted sum P V, per head) take as many FLOPs as its feed-forward block (two products)."""
    def squared_terms(length):
        return (_product_flops(n_heads, length, head_dim, length) + _product_flops(n_heads, length, length, head_dim))

    def feed_forward(length):
        return _product_flops(1, length, d_model, d_ff) + _product_flops(1, length, d_ff, d_model)

    # squared_terms grows like N^2 and feed_forward like N: their ratio at N = 1 is the crossing
    return feed_forward(1) / squared_terms(1)


def _crossing_cases(rng):
    return [Case("the full-width block: d=768, H=10, D_h=768, F=3072 (the question's setting)",
                 {"d_model": 768, "n_heads": 10, "head_dim": 768, "d_ff": 3072}),
            Case("BERT-base: d=768, H=12, D_h=64, F=3072", {"d_model": 768, "n_heads": 12, "head_dim": 64,
                                                             "d_ff": 3072}),
            Case("the base Transformer: d=512, H=8, D_h=64, F=2048",
                 {"d_model": 512, "n_heads": 8, "head_dim": 64, "d_ff": 2048})]


def _unseen_crossing(rng):
    sizes = {"d_model": 32 * size(rng, 1, 40), "n_heads": size(rng, 1, 16), "head_dim": 16 * size(rng, 1, 12),
             "d_ff": 64 * size(rng, 1, 80)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _crossing_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got))
    width = inputs["n_heads"] * inputs["head_dim"]
    if numpy.isclose(got, expected) or width == inputs["d_model"]:
        return ""
    if numpy.isclose(got * inputs["d_model"], expected * width):
        return Hint("your length is the same for every number of heads and head size that keep "
                    "d_model: here H * D_h is not d_model")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("break_even_vocabulary", "break_even_vocabulary(d_model, d_ff, n_layers) -> int: the smallest "
             "vocabulary size V (both languages, untied) whose embeddings and output layer hold at least as many "
             "parameters as the n_layers encoder and decoder layers", "11", _break_even_vocabulary,
             _vocabulary_cases, ("vocabulary",), exact=True, hints=(_vocabulary_hint,), unseen=_unseen_vocabulary,
             question=4),
    Exercise("crossing_length", "crossing_length(d_model, n_heads, head_dim, d_ff) -> float: the length N at "
             "which an encoder block's N^2 terms take as many FLOPs as its feed-forward block", "11",
             _crossing_length, _crossing_cases, ("length",), hints=(_crossing_hint,), unseen=_unseen_crossing,
             question=5),
]


def _layer_parameters(d_model, d_ff, n_layers):
    return n_layers * (12 * d_model * d_model + 4 * d_model * d_ff + 2 * d_ff + 24 * d_model)


def _embeddings_only(d_model, d_ff, n_layers):
    return -(-_layer_parameters(d_model, d_ff, n_layers) // (2 * d_model))   # the output layer left out


def _rounded_down(d_model, d_ff, n_layers):
    return _layer_parameters(d_model, d_ff, n_layers) // (3 * d_model + 1)


def _width_as_d_model(d_model, n_heads, head_dim, d_ff):
    return d_model * d_ff / d_model             # BERT-base's crossing, N = F, as if H * D_h were d_model


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("break_even_vocabulary", "the output layer left out of the vocabulary side", _embeddings_only,
                  "already holds"),
    WrongSolution("break_even_vocabulary", "V rounded down", _rounded_down, "fewer than the layers"),
    WrongSolution("crossing_length", "H * D_h taken to be d_model", _width_as_d_model, "H * D_h is not d_model"),
]
