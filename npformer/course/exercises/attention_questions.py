"""The auto-graded parts of lessons 6 and 7's open questions: a prefix language model's mask for a
padded batch (lesson 6, question 2); what scaling Q instead of the scores costs (lesson 7, question 1);
the output and the query gradient of a query whose scores are all equal (question 2); the bytes of
the attention weights kept for the backward pass (question 3).

Each is posed as a function of the question's setting, so that its reference is computed here (by
``npformer.ops`` or NumPy), never stored: a student's answer is checked on the question's own setting
and on others.
"""

from __future__ import annotations

import math

import numpy

from ... import ops
from ...tokens import PAD_ID
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size

# -- lesson 6, question 2: the prefix language model's mask ---------------------------------------------

def _prefix_lm_mask(ids, prefix_lengths):
    """ids (B, T) integers, prefix_lengths (B,) -> boolean (B, 1, T, T): query i of sentence b sees a
    real key j when j <= i, or when both lie in the sentence's first prefix_lengths[b] positions."""
    length = ids.shape[1]
    positions = numpy.arange(length)
    prefix = positions[None, :] < numpy.asarray(prefix_lengths)[:, None]                # (B, T)
    both_in_prefix = prefix[:, :, None] & prefix[:, None, :]                            # (B, Tq, Tk)
    sees = ops.causal_mask(length)[None] | both_in_prefix                               # (B, Tq, Tk)
    return ops.padding_mask(ids, PAD_ID) & sees[:, None]                                # (B, 1, Tq, Tk)


def _padded_ids(rng, lengths, width):
    ids = rng.integers(1, 30, size=(len(lengths), width))
    for row, real in enumerate(lengths):
        ids[row, real:] = PAD_ID
    return ids


def _prefix_cases(rng):
    return [
        Case("T=6, one sentence, P=3 (the question's setting)",
             {"ids": _padded_ids(rng, [6], 6), "prefix_lengths": numpy.array([3])}),
        Case("B=3, T=7: prefixes 2, 4 and 0 (a plain causal sentence), the last two padded",
             {"ids": _padded_ids(rng, [7, 5, 4], 7), "prefix_lengths": numpy.array([2, 4, 0])}),
        Case("B=2, T=5: a prefix of the whole sentence, and one of length 1",
             {"ids": _padded_ids(rng, [5, 3], 5), "prefix_lengths": numpy.array([5, 1])}),
    ]


def _unseen_prefix(rng):
    batch, length = size(rng, 1, 4), size(rng, 2, 9)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    prefixes = numpy.array([int(rng.integers(0, real + 1)) for real in lengths])
    return [Case(f"B={batch}, T={length}, prefixes {prefixes.tolist()}",
                 {"ids": _padded_ids(rng, lengths, length), "prefix_lengths": prefixes})]


def _prefix_hint(got, expected, inputs, output):
    got = numpy.asarray(got)
    if got.shape != expected.shape:
        return Hint(f"shape {got.shape}, where (B, 1, T, T) = {expected.shape} broadcasts over the heads")
    ids, prefixes = inputs["ids"], numpy.asarray(inputs["prefix_lengths"])
    real_key = (ids != PAD_ID)[:, None, None, :]
    if numpy.any(got & ~real_key):
        return Hint("a query sees a <pad> key: the prefix and causal rules alone let padding in",
                    "combine the mask with the padding mask by &")
    positions = numpy.arange(ids.shape[1])
    query_in_prefix = (positions[None, :] < prefixes[:, None])[:, None, :, None]
    key_after_query = positions[None, None, None, :] > positions[None, None, :, None]
    if numpy.any(got & key_after_query & ~expected):
        if numpy.any(got & key_after_query & query_in_prefix & ~expected):
            return Hint("a query inside the prefix sees a later key outside it: the rows of the prefix "
                        "queries differ", "a prefix query may look ahead only to keys inside the prefix")
        return Hint("a query after the prefix sees a later key", "outside the prefix the mask stays causal")
    return ""


# -- lesson 7, question 1: what the scaling costs --------------------------------------------------------

def _scaling_multiplications(query_length, key_length, head_dim):
    """The multiplications, per head, of scaling Q (Tq, Dh) and of scaling the scores (Tq, Tk)."""
    return (numpy.ones((query_length, head_dim)).size, numpy.ones((query_length, key_length)).size)


def _scaling_cases(rng):
    return [Case("Tq = Tk = 512, Dh = 64", {"query_length": 512, "key_length": 512, "head_dim": 64}),
            Case("cross-attention: Tq = 7, Tk = 30, Dh = 16", {"query_length": 7, "key_length": 30, "head_dim": 16}),
            Case("one query, Dh larger than Tk", {"query_length": 1, "key_length": 4, "head_dim": 96})]


def _unseen_scaling(rng):
    sizes = {"query_length": size(rng, 1, 600), "key_length": size(rng, 1, 600), "head_dim": 8 * size(rng, 1, 16)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _scaling_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got == expected:
        return ""
    if output == "scale Q" and got == inputs["query_length"] * inputs["key_length"]:
        return Hint("your count for Q grows with the number of keys, which Q (Tq, Dh) does not hold")
    if output == "scale S" and got == inputs["query_length"] * inputs["head_dim"]:
        return Hint("your count for the scores grows with Dh, which the scores (Tq, Tk) do not hold")
    return ""


# -- lesson 7, question 2: a query whose scores are all equal --------------------------------------------

def _flat_query(keys, values, dout, scale):
    """keys (Tk, Dh), values (Tk, Dv), dout (Dv,), scale -> (output (Dv,), dq (Dh,)) of the query q = 0,
    whose scores scale * q . k_j are all 0."""
    q = numpy.zeros((1, 1, 1, keys.shape[1]))
    out, cache = ops.attention_forward(q, keys[None, None], values[None, None])
    dq = ops.attention_backward(dout[None, None, None], cache)[0]
    return out[0, 0, 0], dq[0, 0, 0] * scale / cache["scale"]      # dq is linear in the scale


def _flat_inputs(rng, keys, head_dim, value_dim, scale):
    return {"keys": normal(rng, keys, head_dim), "values": normal(rng, keys, value_dim),
            "dout": normal(rng, value_dim), "scale": scale}


def _flat_cases(rng):
    return [Case("Tk=5, Dh=Dv=4, scale 1/sqrt(4) (the lesson's)", _flat_inputs(rng, 5, 4, 4, 0.5)),
            Case("Tk=3, Dh=2, Dv=6, scale 1", _flat_inputs(rng, 3, 2, 6, 1.0)),
            Case("Tk=1: one key", _flat_inputs(rng, 1, 3, 3, 1 / math.sqrt(3)))]


def _unseen_flat(rng):
    keys, head_dim, value_dim = size(rng, 2, 9), size(rng, 1, 8), size(rng, 1, 8)
    scale = float(rng.uniform(0.1, 2.0))
    return [Case(f"Tk={keys}, Dh={head_dim}, Dv={value_dim}, scale {scale:.2f}",
                 _flat_inputs(rng, keys, head_dim, value_dim, scale))]


def _flat_hint(got, expected, inputs, output):
    got = numpy.asarray(got, dtype=float)
    if output != "dq" or got.shape != expected.shape:
        return ""
    if not numpy.any(got) and numpy.any(expected):
        return Hint("dq is zero, yet a small change of q moves weight from one key to another, and the "
                    "output moves with it unless the values are all equal")
    keys, values, dout = inputs["keys"], inputs["values"], inputs["dout"]
    uncentred = inputs["scale"] / len(keys) * (values @ dout) @ keys
    if numpy.allclose(got, uncentred):
        return Hint("dq changes when the same vector is added to every value, although the output "
                    "then moves by that vector whatever q is", "the softmax's Jacobian subtracts the mean of dP")
    return ""


# -- lesson 7, question 3: the attention weights' bytes ---------------------------------------------------

def _attention_weights_bytes(batch, heads, length, itemsize):
    """The bytes of the weights P, (batch, heads, length, length) numbers of itemsize bytes."""
    one = numpy.zeros((), dtype=numpy.dtype(f"f{itemsize}"))
    return numpy.broadcast_to(one, (batch, heads, length, length)).nbytes


def _bytes_cases(rng):
    return [Case("B=64, H=8, T=512, float32 (the question's setting)",
                 {"batch": 64, "heads": 8, "length": 512, "itemsize": 4}),
            Case("B=1, H=16, T=4096, float16", {"batch": 1, "heads": 16, "length": 4096, "itemsize": 2}),
            Case("B=3, H=1, T=10, float64", {"batch": 3, "heads": 1, "length": 10, "itemsize": 8})]


def _unseen_bytes(rng):
    sizes = {"batch": size(rng, 1, 128), "heads": size(rng, 1, 32), "length": size(rng, 1, 2048),
             "itemsize": int(rng.choice([2, 4, 8]))}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _bytes_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got * inputs["itemsize"] == expected and inputs["itemsize"] != 1:
        return Hint(f"{got:,} is off by the factor itemsize = {inputs['itemsize']}: numbers, not bytes")
    if got * inputs["length"] == expected and inputs["length"] != 1:
        return Hint(f"{got:,} grows like T, where P holds one weight per query and key")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("prefix_lm_mask", "prefix_lm_mask(ids, prefix_lengths) -> boolean (B, 1, T, T): ids (B, T) with "
             "<pad> = 0, prefix_lengths (B,); True where query i of sentence b may attend to key j", "06",
             _prefix_lm_mask, _prefix_cases, ("mask",), exact=True, hints=(_prefix_hint,), unseen=_unseen_prefix,
             question=2),
    Exercise("scaling_multiplications", "scaling_multiplications(query_length, key_length, head_dim) -> "
             "(multiplications to scale Q, multiplications to scale the scores), per head", "07",
             _scaling_multiplications, _scaling_cases, ("scale Q", "scale S"), exact=True, hints=(_scaling_hint,),
             unseen=_unseen_scaling,
             question=1),
    Exercise("flat_query", "flat_query(keys, values, dout, scale) -> (output (Dv,), dq (Dh,)): keys (Tk, Dh), "
             "values (Tk, Dv), dout (Dv,), for the query q = 0", "07", _flat_query, _flat_cases, ("output", "dq"),
             hints=(_flat_hint,), unseen=_unseen_flat, question=2),
    Exercise("attention_weights_bytes", "attention_weights_bytes(batch, heads, length, itemsize) -> int, the "
             "bytes of P", "07", _attention_weights_bytes, _bytes_cases, ("bytes",), exact=True,
             hints=(_bytes_hint,), unseen=_unseen_bytes, question=3),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _prefix_without_padding(ids, prefix_lengths):
    positions = numpy.arange(ids.shape[1])
    in_prefix = positions[None, :] < numpy.asarray(prefix_lengths)[:, None]
    return ((positions[None, :] <= positions[:, None])[None] | in_prefix[:, None, :])[:, None]


def _prefix_over_queries(ids, prefix_lengths):
    positions = numpy.arange(ids.shape[1])
    query_in_prefix = positions[None, :] < numpy.asarray(prefix_lengths)[:, None]
    sees = (positions[None, :] <= positions[:, None])[None] | query_in_prefix[:, :, None]
    return (sees & (ids != PAD_ID)[:, None, :])[:, None]


def _scaling_swapped(query_length, key_length, head_dim):
    return query_length * key_length, query_length * head_dim


def _flat_query_zero_gradient(keys, values, dout, scale):
    return values.mean(axis=0), numpy.zeros(keys.shape[1])


def _flat_query_uncentred(keys, values, dout, scale):
    return values.mean(axis=0), scale / len(keys) * (values @ dout) @ keys


def _bytes_as_numbers(batch, heads, length, itemsize):
    return batch * heads * length * length


def _bytes_linear_in_length(batch, heads, length, itemsize):
    return batch * heads * length * itemsize


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("prefix_lm_mask", "the padding mask forgotten", _prefix_without_padding, "<pad> key"),
    WrongSolution("prefix_lm_mask", "the prefix read on the queries' axis", _prefix_over_queries,
                  "inside the prefix sees a later key"),
    WrongSolution("scaling_multiplications", "the two costs swapped", _scaling_swapped, "grows with"),
    WrongSolution("flat_query", "dq = 0 because the weights are uniform", _flat_query_zero_gradient, "dq is zero"),
    WrongSolution("flat_query", "the softmax's Jacobian without its mean", _flat_query_uncentred,
                  "added to every value"),
    WrongSolution("attention_weights_bytes", "numbers, not bytes", _bytes_as_numbers, "itemsize"),
    WrongSolution("attention_weights_bytes", "one weight per query", _bytes_linear_in_length, "grows like T"),
]
