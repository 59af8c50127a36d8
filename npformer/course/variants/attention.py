"""Attention's variants (lesson 7): the same steps (through v, the weights P and the scores S), with a
change to how the scores are made or normalised.

The lesson's form, ``q (B, H, Tq, Dh)``, ``k, v (B, H, Tk, Dh)``, ``mask`` True where a query may look::

    S = q k^T / sqrt(Dh),  P = softmax(S) over the keys a query may see (a row that may see none: 0),
    out = P v

Each forward marks ``scores`` (S as the variant defines it, before the mask) and ``weights`` (P) with
``node``. ``dL/dP = dout v^T`` whatever the scores are, so ``attention_d_weights`` is practice under
variants.
"""

from __future__ import annotations

import numpy

from ..exercises.attention_pieces import merge_heads_reference, split_heads_reference
from .base import Family, Variant, keep


def _allowed(mask, shape):
    return numpy.ones(shape, dtype=bool) if mask is None else numpy.broadcast_to(mask, shape)


def _masked_softmax(scores, mask, plus_one=False):
    """softmax over the allowed keys of each row (``plus_one``: a 1 added to the denominator); 0 where
    a row may see nothing."""
    allowed = _allowed(mask, scores.shape)
    shifted = numpy.where(allowed, scores, -numpy.inf)
    top = numpy.max(numpy.where(allowed, scores, 0.0 if plus_one else -1e300), axis=-1, keepdims=True)
    if plus_one:
        top = numpy.maximum(top, 0.0)
    with numpy.errstate(invalid="ignore", over="ignore"):
        exp = numpy.where(allowed, numpy.exp(shifted - top), 0.0)
    total = exp.sum(axis=-1, keepdims=True) + (numpy.exp(-top) if plus_one else 0.0)
    return numpy.where(total > 0, exp / numpy.where(total > 0, total, 1.0), 0.0)


def _attend(scores, v, mask, node, plus_one=False):
    scores = node("scores", scores)
    weights = node("weights", _masked_softmax(scores, mask, plus_one))
    return weights @ v


def scaled_by_d(q, k, v, mask, node=keep):
    return _attend(q @ k.swapaxes(-1, -2) / q.shape[-1], v, mask, node)


def alibi(q, k, v, mask, node=keep):
    heads, t_query, t_key = q.shape[1], q.shape[2], k.shape[2]
    slopes = 2.0 ** (-8.0 * numpy.arange(1, heads + 1) / heads)                          # (H,)
    distance = numpy.abs(numpy.arange(t_query)[:, None] - numpy.arange(t_key)[None, :])  # (Tq, Tk)
    bias = -slopes[:, None, None] * distance                                             # (H, Tq, Tk)
    return _attend(q @ k.swapaxes(-1, -2) / numpy.sqrt(q.shape[-1]) + bias, v, mask, node)


def quiet(q, k, v, mask, node=keep):
    return _attend(q @ k.swapaxes(-1, -2) / numpy.sqrt(q.shape[-1]), v, mask, node, plus_one=True)


def soft_capped(q, k, v, mask, node=keep):
    cap = 2.0
    return _attend(cap * numpy.tanh(q @ k.swapaxes(-1, -2) / (numpy.sqrt(q.shape[-1]) * cap)), v, mask, node)



ATTENTION = Family(
    "attention", ("attention_dv", "attention_d_weights", "attention_d_scores", "attention_backward"),
    (Variant("scaled-by-d", "S = q k^T / Dh (not / sqrt(Dh)); the rest as in the lesson", scaled_by_d),
     Variant("alibi", "S = q k^T / sqrt(Dh) - m_h |i - j| (ALiBi: i and j the query's and the key's indices from 0, "
                      "also when Tq != Tk; head h = 1..H has the slope m_h = 2^(-8h/H)); the rest as in the lesson",
             alibi),
     Variant("quiet", "P_ij = exp(S_ij) / (1 + sum_j' exp(S_ij')) over the keys a query may see: a 1 added to the "
                      "softmax's denominator; S and out as in the lesson", quiet),
     Variant("soft-capped", "S = c tanh(q k^T / (c sqrt(Dh))) with c = 2 (scores soft-capped); the rest as in the "
                            "lesson", soft_capped)),
    nodes={"attention_dv": "v", "attention_d_weights": "weights", "attention_d_scores": "scores"},
    practice=("attention_d_weights",))


# -- multi-head attention (lesson 8) --------------------------------------------------------------------
# The same variants inside every head. The forward marks the heads ``q``, ``k``, ``v`` and their
# ``context`` (before the merge): ``dL/dcontext = split(dout Wo^T)`` whatever the heads' attention is,
# so ``multi_head_attention_d_context`` is practice under variants; the heads' gradients and the
# inputs' change with the scores.

def _multi_head(attend):
    def forward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, node=keep):
        q = node("q", split_heads_reference(query @ Wq, n_heads))       # (B, H, Tq, Dh)
        k = node("k", split_heads_reference(memory @ Wk, n_heads))      # (B, H, Tm, Dh)
        v = node("v", split_heads_reference(memory @ Wv, n_heads))
        context = node("context", attend(q, k, v, mask))                 # (B, H, Tq, Dh)
        return merge_heads_reference(context) @ Wo
    return forward


MULTI_HEAD_ATTENTION = Family(
    "multi_head_attention", ("multi_head_attention_d_context", "multi_head_attention_d_heads",
                             "multi_head_attention_d_inputs", "multi_head_attention_backward"),
    tuple(Variant(variant.name, f"in every head, {variant.statement}", _multi_head(variant.forward))
          for variant in ATTENTION.variants),
    nodes={"multi_head_attention_d_context": "context", "multi_head_attention_d_heads": ("q", "k", "v"),
           "multi_head_attention_d_inputs": ("query", "memory")},
    practice=("multi_head_attention_d_context",), drawn_with="attention")  # lesson 8 reuses the student's lesson 7
