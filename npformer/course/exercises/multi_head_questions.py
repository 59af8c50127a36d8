"""The auto-graded parts of lesson 8's open questions (its ``## Exercises`` list), each posed as a function
of the question's setting so that its reference is computed here, never stored:

    question 1  key_and_value_bias_grads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout) -> (db_k, db_v):
                the gradients of a key bias and a value bias added to the layer (at b = 0), with the
                lesson's attention, softmax(q k^T / sqrt(Dh)), whatever the student's variant
    question 2  same_as_one_attention(d_model, n_heads) -> bool: whether the layer with ``n_heads`` heads
                equals lesson 7's attention (one head of width D) between four linear layers
    question 3  multi_head_attention_multiply_adds(batch, length, d_model, n_heads)
                -> (projections, scores, weighted_sum): the forward pass's multiply-adds, by group

Question 4 (the layer with its four biases, compared with ``nn.MultiHeadAttention``) keeps its rubric:
its backward pass runs through the student's own attention, which a variant changes.
"""

from __future__ import annotations

import math

import numpy

from ... import ops
from .. import hints
from .attention_pieces import (merge_heads_reference, multi_head_attention_backward_cases, split_heads_reference,
                               unseen_multi_head_attention_backward)
from .base import Case, Exercise, WrongSolution, size

# -- question 1: the key bias and the value bias --------------------------------------------------------

def _heads_gradients(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(dQ, dK, dV), the gradients of the merged projections (B, T, D), through the lesson's attention."""
    q, k, v = (split_heads_reference(x @ W, n_heads) for x, W in ((query, Wq), (memory, Wk), (memory, Wv)))
    _, cache = ops.attention_forward(q, k, v, mask)
    return tuple(merge_heads_reference(d)
                 for d in ops.attention_backward(split_heads_reference(dout @ Wo.T, n_heads), cache))


def _key_and_value_bias_grads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(db_k, db_v), each (D,): a bias added to every key (value) gets the keys' (values') gradient summed
    over the batch and the positions."""
    _, dK, dV = _heads_gradients(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)
    return dK.sum(axis=(0, 1)), dV.sum(axis=(0, 1))


def _stacked(result, inputs):
    """(db_k, db_v) as one (2, D) array, compared at the scale of db_v: db_k's true value is exactly zero,
    and what rounding leaves of it is not an error."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError("return the two gradients, (db_k, db_v)")
    return (numpy.stack([numpy.asarray(gradient, dtype=numpy.float64) for gradient in result]),)


def _bias_hint(got, expected, inputs, output):
    """What the wrong bias gradient breaks: db_k must vanish, db_v must reach the output through W_o."""
    db_k, db_v = got
    dout, Wo = inputs["dout"], inputs["Wo"]
    if numpy.abs(db_k).max() > 1e-6 * numpy.abs(expected).max():
        return hints.Hint("db_k (row 0) is not zero here, yet adding one vector b_k to every key of a head adds "
                          "q_i . b_k / sqrt(Dh) to every score of row i alike: does the layer's output move?",
                          "softmax ignores a shift shared by a whole row, so db_k = 0 exactly")
    if not numpy.any(db_v):
        return hints.Hint("db_v (row 1) is zero, yet adding b_v to every value moves every output row by b_v W_o "
                          "in these cases (each row of attention weights sums to 1)",
                          "the shift argument holds for the keys only: db_v = sum over b, t of (dout W_o^T)")
    if hints.explains(dout.sum(axis=(0, 1)), db_v):
        return hints.Hint("db_v (row 1) equals dout summed over the batch and the positions, the gradient of a bias "
                          "added after W_o, not before it", "db_v = sum over b, t of (dout W_o^T)")
    if hints.explains((dout @ Wo).sum(axis=(0, 1)), db_v):
        return hints.Hint("db_v (row 1) is right only where W_o is symmetric, which it is not here",
                          "the value path reaches the output through W_o: dout W_o^T, not dout W_o")
    return ""


# -- question 2: one head against lesson 7's attention ---------------------------------------------------

def _same_as_one_attention(d_model, n_heads):
    """Both layers on random weights (seeded by the setting): equal to rounding or not."""
    rng = numpy.random.default_rng(1000 * d_model + n_heads)
    query, memory = rng.standard_normal((2, 3, d_model)), rng.standard_normal((2, 4, d_model))
    Wq, Wk, Wv, Wo = (rng.standard_normal((d_model, d_model)) / math.sqrt(d_model) for _ in range(4))
    heads = (split_heads_reference(x @ W, n_heads) for x, W in ((query, Wq), (memory, Wk), (memory, Wv)))
    many = merge_heads_reference(ops.attention_forward(*heads, None)[0]) @ Wo
    one = ops.attention_forward((query @ Wq)[:, None], (memory @ Wk)[:, None], (memory @ Wv)[:, None], None)[0]
    return bool(numpy.allclose(many, one[:, 0] @ Wo, rtol=1e-9, atol=1e-12))


def _same_cases(rng):
    return [Case(f"D={d_model}, {n_heads} head{'s' if n_heads > 1 else ''}",
                 {"d_model": d_model, "n_heads": n_heads}) for d_model, n_heads in ((4, 1), (4, 2), (6, 3), (3, 1))]


def _unseen_same(rng):
    n_heads, head_dim = int(rng.choice([1, size(rng, 2, 4)])), size(rng, 1, 4)
    return [Case(f"D={n_heads * head_dim}, {n_heads} heads", {"d_model": n_heads * head_dim, "n_heads": n_heads})]


def _same_hint(got, expected, inputs, output):
    heads = inputs["n_heads"]
    if bool(got) and not bool(expected):
        return (f"True for {heads} heads of {inputs['d_model'] // heads}: on random weights the two layers give "
                "outputs that differ by far more than rounding in this case")
    if bool(expected) and not bool(got):
        return "False for one head: on random weights the two layers agree to rounding in this case"
    return ""


# -- question 3: the multiply-adds -----------------------------------------------------------------------

def _product_multiply_adds(a_shape, b_shape):
    """Multiply-adds of a batched product a @ b: one per output entry and per summed index."""
    return int(numpy.prod(a_shape[:-1])) * a_shape[-1] * b_shape[-1]


def _multiply_adds(batch, length, d_model, n_heads):
    """(projections, scores, weighted_sum) of self-attention's forward pass, from the arrays' shapes."""
    heads = split_heads_reference(numpy.zeros((batch, length, d_model)), n_heads).shape  # (B, H, T, Dh)
    keys_transposed = heads[:2] + (heads[3], heads[2])                                   # (B, H, Dh, T)
    weights = heads[:3] + (length,)                                                      # (B, H, T, T)
    return (4 * _product_multiply_adds((batch, length, d_model), (d_model, d_model)),
            _product_multiply_adds(heads, keys_transposed), _product_multiply_adds(weights, heads))


def _multiply_adds_cases(rng):
    return [Case(f"B={b}, T={t}, D={d}, {h} heads", {"batch": b, "length": t, "d_model": d, "n_heads": h})
            for b, t, d, h in ((2, 5, 8, 2), (1, 1, 4, 1), (3, 7, 12, 4))]


def _unseen_multiply_adds(rng):
    batch, length, n_heads, head_dim = size(rng, 1, 8), size(rng, 1, 40), size(rng, 2, 8), size(rng, 1, 16)
    return [Case(f"B={batch}, T={length}, D={n_heads * head_dim}, {n_heads} heads",
                 {"batch": batch, "length": length, "d_model": n_heads * head_dim, "n_heads": n_heads})]


def _multiply_adds_hint(got, expected, inputs, output):
    """A constant factor of the wrong count, with the cases it passes."""
    ratio = float(got) / float(expected) if float(expected) else 0.0
    heads = inputs["n_heads"]
    if heads > 1 and math.isclose(ratio, heads):
        return hints.Hint(f"{output} is {heads} times the count, the factor of the case's number of heads: the "
                          "cases with one head pass", "each head's products are D / H wide, not D")
    if output == "projections" and math.isclose(ratio, 0.75):
        return hints.Hint("projections is 3/4 of the count in every case: one of the layer's (D, D) products is "
                          "missing", "four projections: q, k, v and the output's W_o")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("key_and_value_bias_grads",
             "key_and_value_bias_grads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout) -> (db_k, db_v), each "
             "(D,): the gradients of biases b_k and b_v added to memory @ Wk and memory @ Wv (at b = 0), with the "
             "lesson's attention softmax(q k^T / sqrt(Dh)); compared as one (2, D) array", "08",
             _key_and_value_bias_grads,
             multi_head_attention_backward_cases, ("db_k and db_v",), hints=(_bias_hint,), convert=_stacked,
             unseen=unseen_multi_head_attention_backward, question=1),
    Exercise("same_as_one_attention",
             "same_as_one_attention(d_model, n_heads) -> bool: whether multi-head attention with n_heads heads "
             "equals lesson 7's attention (one head of width d_model) between the same four linear layers, for "
             "every choice of weights", "08", _same_as_one_attention, _same_cases, ("same",), exact=True,
             hints=(_same_hint,), unseen=_unseen_same, question=2),
    Exercise("multi_head_attention_multiply_adds",
             "multi_head_attention_multiply_adds(batch, length, d_model, n_heads) -> (projections, scores, "
             "weighted_sum): the multiply-adds of self-attention's forward pass (T_q = T_m = length) in the four "
             "projections, in q k^T and in the weighted sum of the values, ints", "08", _multiply_adds,
             _multiply_adds_cases, ("projections", "scores", "weighted_sum"), exact=True,
             hints=(_multiply_adds_hint,), unseen=_unseen_multiply_adds, question=3),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _bias_grads_value_before_wo(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    return numpy.zeros(Wk.shape[1]), dout.sum(axis=(0, 1))


def _bias_grads_both_zero(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    return numpy.zeros(Wk.shape[1]), numpy.zeros(Wv.shape[1])


def _bias_grads_key_like_value(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    summed = (dout @ Wo.T).sum(axis=(0, 1))
    return summed, summed


def _multiply_adds_full_width_heads(batch, length, d_model, n_heads):
    return 4 * batch * length * d_model ** 2, n_heads * batch * length ** 2 * d_model, \
        n_heads * batch * length ** 2 * d_model


def _multiply_adds_three_projections(batch, length, d_model, n_heads):
    return 3 * batch * length * d_model ** 2, batch * length ** 2 * d_model, batch * length ** 2 * d_model


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("key_and_value_bias_grads", "db_v as dout summed, W_o skipped", _bias_grads_value_before_wo,
                  "after W_o"),
    WrongSolution("key_and_value_bias_grads", "both bias gradients zero (the shift argument for the values too)",
                  _bias_grads_both_zero, "is zero, yet adding b_v"),
    WrongSolution("key_and_value_bias_grads", "db_k taken equal to db_v", _bias_grads_key_like_value,
                  "is not zero here, yet adding one vector b_k"),
    WrongSolution("same_as_one_attention", "True for every number of heads", lambda d_model, n_heads: True,
                  "differ by far more than rounding"),
    WrongSolution("multi_head_attention_multiply_adds", "each head's products counted D wide",
                  _multiply_adds_full_width_heads, "times the count"),
    WrongSolution("multi_head_attention_multiply_adds", "three projections (W_o forgotten)",
                  _multiply_adds_three_projections, "3/4 of the count"),
]
