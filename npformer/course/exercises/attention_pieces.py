"""The exercises of lessons 6 to 8: the masks (lesson 10's decoder mask too, padding and causal
together), scaled dot-product attention and its backward pass, the heads split and merged,
multi-head attention and its backward pass.

The signatures are natural, as in ``ops_backward``: a backward takes the op's inputs and then
the upstream gradient ``dout``, never one of npformer's caches. The references call
``npformer.ops`` (and ``nn.MultiHeadAttention``'s pieces), themselves checked against finite
differences and against PyTorch. The cases exercise the edges: length 1, one head, a padded
key, a fully masked attention row, a row of padding only; each draws its inputs from a seeded
generator, so a report can be reproduced.
"""

from __future__ import annotations

import math

import numpy

from ... import ops
from ...tokens import PAD_ID
from .. import hints
from .base import Case, Exercise, backward_cases, normal, size, with_dout

# -- masks -----------------------------------------------------------------------------------------

def _padding_mask(ids):
    return ops.padding_mask(ids, PAD_ID)


def _mask_cases(rng):
    return [Case("B=2, T=4, a padded tail", {"ids": numpy.array([[5, 6, 7, 0], [4, 0, 0, 0]])}),
            Case("B=1, T=1", {"ids": numpy.array([[3]])}),
            Case("B=3, T=3, no padding", {"ids": rng.integers(1, 9, size=(3, 3))})]


def _inverted_mask_hint(got, expected, inputs, output):
    if expected.all() or not expected.any():  # one value only: inverted or not, it cannot tell
        return ""
    if got.shape == expected.shape and numpy.array_equal(got.astype(bool), ~expected.astype(bool)):
        return "inverted: True must mean 'may attend' (a real token, a key at or before the query)"
    return ""


def _causal_mask(length):
    return ops.causal_mask(length)


def _decoder_mask(tgt_ids):
    return ops.padding_mask(tgt_ids, PAD_ID) & ops.causal_mask(tgt_ids.shape[1])


# -- attention ----------------------------------------------------------------------------------------

def _attention(q, k, v, mask):
    return ops.attention_forward(q, k, v, mask)[0]


def _attention_backward(q, k, v, mask, dout):
    return ops.attention_backward(dout, ops.attention_forward(q, k, v, mask)[1])


def _attention_inputs(r, batch, heads, t_query, t_key, head_dim, mask):
    return {"q": normal(r, batch, heads, t_query, head_dim), "k": normal(r, batch, heads, t_key, head_dim),
            "v": normal(r, batch, heads, t_key, head_dim), "mask": mask}


def _attention_shapes():
    padded = numpy.array([True, True, False])[None, None, None, :]
    fully_masked = numpy.ones((1, 1, 3, 4), dtype=bool)
    fully_masked[0, 0, 1] = False  # query 1 may attend to nothing
    return [
        ("B=2, H=2, Tq=3, Tk=3, causal mask", lambda r: _attention_inputs(r, 2, 2, 3, 3, 4, ops.causal_mask(3))),
        ("B=1, H=1, Tq=1, Tk=3, padded key (mask (1, 1, 1, 3))",
         lambda r: _attention_inputs(r, 1, 1, 1, 3, 2, padded)),
        ("B=1, H=1, Tq=3, Tk=4, query 1 fully masked", lambda r: _attention_inputs(r, 1, 1, 3, 4, 3, fully_masked)),
        ("B=2, H=3, Tq=2, Tk=5, no mask", lambda r: _attention_inputs(r, 2, 3, 2, 5, 2, None)),
    ]


def _attention_cases(rng):
    return [Case(label, make(rng)) for label, make in _attention_shapes()]


def attention_backward_cases(rng):
    return backward_cases(rng, _attention, _attention_shapes())


def split_heads_reference(x, n_heads):
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)


def merge_heads_reference(x):
    batch, heads, length, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_dim)


def _split_cases(rng):
    return [Case("B=2, T=3, D=8, 2 heads", {"x": normal(rng, 2, 3, 8), "n_heads": 2}),
            Case("B=1, T=1, D=4, 1 head", {"x": normal(rng, 1, 1, 4), "n_heads": 1}),
            Case("B=1, T=2, D=6, 3 heads", {"x": normal(rng, 1, 2, 6), "n_heads": 3})]


def _merge_cases(rng):
    return [Case(case.label, {"x": split_heads_reference(case.inputs["x"], case.inputs["n_heads"])})
            for case in _split_cases(rng)]


def _multi_head_attention_pieces(query, memory, Wq, Wk, Wv, Wo, n_heads, mask):
    caches, heads = [], []
    for x, W in ((query, Wq), (memory, Wk), (memory, Wv)):
        projected, cache = ops.linear_forward(x, W)
        caches.append(cache)
        heads.append(split_heads_reference(projected, n_heads))
    attended, attention_cache = ops.attention_forward(*heads, mask)
    out, out_cache = ops.linear_forward(merge_heads_reference(attended), Wo)
    return out, (caches, attention_cache, out_cache)


def _multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask):
    return _multi_head_attention_pieces(query, memory, Wq, Wk, Wv, Wo, n_heads, mask)[0]


def _multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    _, (caches, attention_cache, out_cache) = _multi_head_attention_pieces(
        query, memory, Wq, Wk, Wv, Wo, n_heads, mask)
    d_merged, dWo, _ = ops.linear_backward(dout, out_cache)
    d_heads = ops.attention_backward(split_heads_reference(d_merged, n_heads), attention_cache)
    (dquery, dWq, _), (dkeys, dWk, _), (dvalues, dWv, _) = (
        ops.linear_backward(merge_heads_reference(d_head), cache) for d_head, cache in zip(d_heads, caches))
    return dquery, dkeys + dvalues, dWq, dWk, dWv, dWo


def _memory_paths_hint(got, expected, inputs, output):
    """dmemory from one of the memory's two paths (through the keys, through the values) only."""
    if output != "dmemory":
        return ""
    forward_inputs = {key: value for key, value in inputs.items() if key != "dout"}
    _, (caches, attention_cache, out_cache) = _multi_head_attention_pieces(*forward_inputs.values())
    d_merged = ops.linear_backward(inputs["dout"], out_cache)[0]
    _, dk, dv = ops.attention_backward(split_heads_reference(d_merged, inputs["n_heads"]), attention_cache)
    for d_head, cache, path in ((dk, caches[1], "keys'"), (dv, caches[2], "values'")):
        if hints.explains(ops.linear_backward(merge_heads_reference(d_head), cache)[0], got):
            return hints.Hint(f"dmemory is what the memory gets through the {path[:-2]}s alone; the memory reaches "
                              "the output along another path as well",
                              "the memory feeds both the keys and the values, so dmemory is the sum of the two "
                              "paths' gradients")
    return ""


def _multi_head_attention_inputs(r, batch, t_query, t_memory, d_model, n_heads, mask):
    return {"query": normal(r, batch, t_query, d_model), "memory": normal(r, batch, t_memory, d_model),
            "Wq": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wk": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wv": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wo": normal(r, d_model, d_model) / math.sqrt(d_model), "n_heads": n_heads, "mask": mask}


def _multi_head_attention_shapes():
    padded_memory = numpy.array([[True, True, True], [True, False, False]])[:, None, None, :]
    return [
        ("B=2, Tq=2, Tm=3, D=4, 2 heads, padded memory",
         lambda r: _multi_head_attention_inputs(r, 2, 2, 3, 4, 2, padded_memory)),
        ("B=1, Tq=1, Tm=2, D=3, 1 head", lambda r: _multi_head_attention_inputs(r, 1, 1, 2, 3, 1, None)),
        ("B=1, Tq=3, Tm=3, D=6, 3 heads, causal",
         lambda r: _multi_head_attention_inputs(r, 1, 3, 3, 6, 3, ops.causal_mask(3))),
    ]


def _multi_head_attention_cases(rng):
    return [Case(label, make(rng)) for label, make in _multi_head_attention_shapes()]


def multi_head_attention_backward_cases(rng):
    return backward_cases(rng, _multi_head_attention, _multi_head_attention_shapes())


# -- the cases a student never sees ----------------------------------------------------------------
# Each draws its shapes and values from the generator the grader seeds afresh for every check.

def _padded_ids(rng, batch, length):
    ids = rng.integers(1, 9, size=(batch, length))
    for row, real in enumerate(rng.integers(0, length + 1, size=batch)):
        ids[row, real:] = PAD_ID
    return ids


def _unseen_padding_mask(rng):
    batch, length = size(rng, 1, 4), size(rng, 1, 6)
    return [Case(f"B={batch}, T={length}, random padded tails", {"ids": _padded_ids(rng, batch, length)})]


def _unseen_decoder_mask(rng):
    batch, length = size(rng, 1, 4), size(rng, 1, 6)
    return [Case(f"B={batch}, T={length}, random padded tails", {"tgt_ids": _padded_ids(rng, batch, length)})]


def _unseen_causal_mask(rng):
    length = size(rng, 3, 12)
    return [Case(f"T={length}", {"length": length})]


def _unseen_attention_inputs(rng):
    batch, heads, t_query, t_key, head_dim = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5),
                                              size(rng, 1, 6), size(rng, 1, 6))
    mask = rng.random((batch, 1, t_query, t_key)) < 0.75
    label = f"B={batch}, H={heads}, Tq={t_query}, Tk={t_key}, Dh={head_dim}, random mask"
    return label, _attention_inputs(rng, batch, heads, t_query, t_key, head_dim, mask)


def _unseen_attention(rng):
    label, inputs = _unseen_attention_inputs(rng)
    return [Case(label, inputs)]


def unseen_attention_backward(rng):
    label, inputs = _unseen_attention_inputs(rng)
    return [Case(label, with_dout(rng, inputs, _attention))]


def _unseen_split(rng):
    batch, length, heads, head_dim = size(rng, 1, 3), size(rng, 1, 5), size(rng, 1, 4), size(rng, 1, 5)
    return [Case(f"B={batch}, T={length}, {heads} heads of {head_dim}",
                 {"x": normal(rng, batch, length, heads * head_dim), "n_heads": heads})]


def _unseen_merge(rng):
    return [Case(case.label, {"x": split_heads_reference(case.inputs["x"], case.inputs["n_heads"])}) for case in _unseen_split(rng)]


def _unseen_multi_head_attention_inputs(rng):
    batch, t_query, t_memory, heads, head_dim = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5),
                                                 size(rng, 1, 3), size(rng, 1, 3))
    mask = rng.random((batch, 1, 1, t_memory)) < 0.8
    mask[..., 0] = True  # every query sees at least one key
    label = f"B={batch}, Tq={t_query}, Tm={t_memory}, D={heads * head_dim}, {heads} heads, random padding"
    return label, _multi_head_attention_inputs(rng, batch, t_query, t_memory, heads * head_dim, heads, mask)


def _unseen_multi_head_attention(rng):
    label, inputs = _unseen_multi_head_attention_inputs(rng)
    return [Case(label, inputs)]


def unseen_multi_head_attention_backward(rng):
    label, inputs = _unseen_multi_head_attention_inputs(rng)
    return [Case(label, with_dout(rng, inputs, _multi_head_attention))]


EXERCISES: list[Exercise] = [
    Exercise("padding_mask", "padding_mask(ids) -> boolean (B, 1, 1, T), True where ids != <pad> (0)", "06",
             _padding_mask, _mask_cases, ("mask",), exact=True, hints=(_inverted_mask_hint,),
             unseen=_unseen_padding_mask),
    Exercise("causal_mask", "causal_mask(length) -> boolean (T, T), True where key <= query", "06",
             _causal_mask, lambda rng: [Case(f"T={t}", {"length": t}) for t in (1, 2, 5)], ("mask",),
             exact=True, hints=(hints.causal_diagonal_hint, _inverted_mask_hint), unseen=_unseen_causal_mask),
    Exercise("decoder_mask", "decoder_mask(tgt_ids) -> boolean (B, 1, T, T): padding and causal", "10",
             _decoder_mask, lambda rng: [Case(case.label, {"tgt_ids": case.inputs["ids"]}) for case in _mask_cases(rng)]
             + [Case("a row of padding only", {"tgt_ids": numpy.array([[4, 5, 2], [PAD_ID, PAD_ID, PAD_ID]])})],
             ("mask",), exact=True, hints=(_inverted_mask_hint, hints.causal_diagonal_hint),
             unseen=_unseen_decoder_mask),
    Exercise("attention", "attention(q, k, v, mask) -> out", "07", _attention, _attention_cases, ("out",),
             unseen=_unseen_attention),
    Exercise("attention_backward", "attention_backward(q, k, v, mask, dout) -> (dq, dk, dv)", "07",
             _attention_backward, attention_backward_cases, ("dq", "dk", "dv"), _attention, ("q", "k", "v"),
             hints=(hints.attention_backward_hint,), unseen=unseen_attention_backward, points=2),
    Exercise("split_heads", "split_heads(x, n_heads) -> (B, H, T, D / H)", "08", split_heads_reference, _split_cases,
             ("heads",), hints=(hints.heads_order_hint(split=True),), unseen=_unseen_split),
    Exercise("merge_heads", "merge_heads(x) -> (B, T, H * Dh)", "08", merge_heads_reference, _merge_cases, ("merged",),
             hints=(hints.heads_order_hint(split=False),), unseen=_unseen_merge),
    Exercise("multi_head_attention",
             "multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask) -> out", "08",
             _multi_head_attention, _multi_head_attention_cases, ("out",),
             hints=(hints.multi_head_scale_hint(_multi_head_attention),), unseen=_unseen_multi_head_attention),
    Exercise("multi_head_attention_backward",
             "multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout) "
             "-> (dquery, dmemory, dWq, dWk, dWv, dWo)", "08", _multi_head_attention_backward,
             multi_head_attention_backward_cases, ("dquery", "dmemory", "dWq", "dWk", "dWv", "dWo"),
             _multi_head_attention, ("query", "memory", "Wq", "Wk", "Wv", "Wo"),
             hints=(_memory_paths_hint, hints.shared_weight_averaged_hint),
             unseen=unseen_multi_head_attention_backward, points=2),
]
