"""The steps of multi-head attention's backward pass (lesson 8), each graded on its own: the gradient of
the heads' context, of the heads' queries, keys and values, and of the two inputs.

The forward pass, with ``query (B, Tq, D)``, ``memory (B, Tm, D)``, four ``(D, D)`` weights and
``H = n_heads`` heads of ``Dh = D / H``::

    q = split(query @ Wq),  k = split(memory @ Wk),  v = split(memory @ Wv)      (B, H, T, Dh)
    C = attention(q, k, v, mask)                                                  (B, H, Tq, Dh)
    out = merge(C) @ Wo                                                           (B, Tq, D)

Each step takes the final exercise's inputs (and ``dout``) and returns one intermediate result, so a
student whose ``multi_head_attention_backward`` is wrong learns which step is. The references are
written from the forward pass, step by step, with npformer's ops; the hints state a property the
wrong answer breaks, not the fix.
"""

from __future__ import annotations

import numpy

from ... import ops
from .. import hints
from .attention_pieces import (merge_heads_reference, multi_head_attention_backward_cases, split_heads_reference,
                               unseen_multi_head_attention_backward)
from .base import Exercise, WrongSolution

ARGUMENTS = "(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)"


def _heads(query, memory, Wq, Wk, Wv, n_heads):
    """The heads q (B, H, Tq, Dh), k and v (B, H, Tm, Dh)."""
    return tuple(split_heads_reference(x @ W, n_heads) for x, W in ((query, Wq), (memory, Wk), (memory, Wv)))


def _d_context(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """dL/dC, the heads' context before the merge: dout reaches C' = merge(C) through Wo. (B, H, Tq, Dh)."""
    return split_heads_reference(dout @ Wo.T, n_heads)


def _d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(dL/dq, dL/dk, dL/dv), each shaped like its head: attention's backward pass, given dL/dC."""
    _, cache = ops.attention_forward(*_heads(query, memory, Wq, Wk, Wv, n_heads), mask)
    return ops.attention_backward(_d_context(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout), cache)


def _d_inputs(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(dL/dquery, dL/dmemory): the query through q alone, the memory through k and v."""
    dq, dk, dv = (merge_heads_reference(d) for d in _d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout))
    return dq @ Wq.T, dk @ Wk.T + dv @ Wv.T


# -- hints: a property the answer breaks ----------------------------------------------------------------

def _arguments(inputs):
    return [inputs[name] for name in ("query", "memory", "Wq", "Wk", "Wv", "Wo", "n_heads", "mask", "dout")]


def _without_wo(inputs):
    """The arguments of a layer whose Wo is the identity."""
    arguments = _arguments(inputs)
    arguments[5] = numpy.eye(arguments[5].shape[0])
    return arguments


def _heads_shape_hint(got, expected, inputs, output):
    if got.ndim == 3 and expected.ndim == 4 and got.size == expected.size:
        return (f"{output} has shape {got.shape}, the layout of the merged rows: this step's gradients are one "
                f"per head, {expected.shape} (B, H, T, Dh), as attention's inputs and output are")
    return ""


def _d_context_hint(got, expected, inputs, output):
    dout, Wo, n_heads = inputs["dout"], inputs["Wo"], inputs["n_heads"]
    if hints.explains(split_heads_reference(dout @ Wo, n_heads), got):
        return ("right only where W_o is symmetric, which it is not here: C'_{t,j} reaches out_{t,i} with the "
                "weight (W_o)_{j,i}, row j of W_o")
    if hints.explains(split_heads_reference(dout, n_heads), got):
        return "dL/dC of a layer whose W_o is the identity: in these cases C' reaches the output through W_o"
    if got.shape == expected.shape and hints.explains((dout @ Wo.T).reshape(got.shape), got):
        return ("the right numbers in the wrong places: head h holds columns h*Dh to (h+1)*Dh - 1 of every "
                "position of C', and your answer mixes positions and heads")
    return _heads_shape_hint(got, expected, inputs, output)


def _d_heads_hint(got, expected, inputs, output):
    without_wo = _d_heads(*_without_wo(inputs))[("dq", "dk", "dv").index(output)]
    if hints.explains(without_wo, got) and not hints.explains(expected, got):
        return (f"{output} of a layer whose W_o is the identity: the gradient reaching the heads depends on W_o "
                "here (is your step multi_head_attention_d_context right?)")
    return _heads_shape_hint(got, expected, inputs, output)


def _d_inputs_hint(got, expected, inputs, output):
    arguments = _arguments(inputs)
    dq, dk, dv = (merge_heads_reference(d) for d in _d_heads(*arguments))
    Wq, Wk, Wv = arguments[2:5]
    if output == "dquery" and hints.explains(dq @ Wq, got):
        return "right only where W_q is symmetric, which it is not here: query_{t,j} reaches Q_{t,i} through (W_q)_{j,i}"
    if output == "dmemory" and not hints.explains(expected, got):
        for alone, path, other, passes in (
                (dv @ Wv.T, "values", "keys", " (so it passes only where no key can move a softmax)"),
                (dk @ Wk.T, "keys", "values", "")):
            if hints.explains(alone, got):
                return (f"dmemory is what the memory gets through the {path} alone; the memory reaches the output "
                        f"through the {other} as well{passes}")
    if got.ndim == 4 and expected.ndim == 3:
        return f"{output} has shape {got.shape}, one block per head: it must be shaped like its input, {expected.shape}"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("multi_head_attention_d_context",
             f"multi_head_attention_d_context{ARGUMENTS} -> dL/dC, the heads' context before the merge, "
             "(B, H, Tq, Dh)", "08", _d_context, multi_head_attention_backward_cases, ("d_context",),
             hints=(_d_context_hint,), unseen=unseen_multi_head_attention_backward),
    Exercise("multi_head_attention_d_heads",
             f"multi_head_attention_d_heads{ARGUMENTS} -> (dq, dk, dv), the gradients of the heads q "
             "(B, H, Tq, Dh), k and v (B, H, Tm, Dh)", "08", _d_heads, multi_head_attention_backward_cases,
             ("dq", "dk", "dv"), hints=(_d_heads_hint,), unseen=unseen_multi_head_attention_backward),
    Exercise("multi_head_attention_d_inputs",
             f"multi_head_attention_d_inputs{ARGUMENTS} -> (dquery, dmemory), shaped like query (B, Tq, D) "
             "and memory (B, Tm, D)", "08", _d_inputs, multi_head_attention_backward_cases, ("dquery", "dmemory"),
             hints=(_d_inputs_hint,), unseen=unseen_multi_head_attention_backward),
]

# The order of the derivation's steps, before its final exercise.
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "multi_head_attention_backward": ("multi_head_attention_d_context", "multi_head_attention_d_heads",
                                      "multi_head_attention_d_inputs"),
}

# What the grader shows once the final exercise passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "multi_head_attention_backward": (
        "dC = split(dout Wo^T); (dq, dk, dv) = attention_backward(q, k, v, mask, dC); dQ, dK, dV = merge of each; "
        "dquery = dQ Wq^T; dmemory = dK Wk^T + dV Wv^T (the memory feeds k and v); dWq = query^T dQ, "
        "dWk = memory^T dK, dWv = memory^T dV, dWo = merge(C)^T dout, each summed over every row "
        "(in self-attention, dx = dquery + dmemory)"),
}


# -- the mistakes students make (NumPy only, as a student writes them: the grader's worker has no npformer) --

def _numpy_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """``_d_heads`` in NumPy: attention's backward pass of the heads, given dL/dC."""
    q, k, v = _heads(query, memory, Wq, Wk, Wv, n_heads)
    d_context = split_heads_reference(dout @ Wo.T, n_heads)
    _, _, scale, weights, _, d_scores = hints.attention_pieces({"q": q, "k": k, "v": v, "mask": mask,
                                                                "dout": d_context})
    return scale * d_scores @ k, scale * d_scores.swapaxes(-1, -2) @ q, weights.swapaxes(-1, -2) @ d_context


def _context_untransposed(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    return split_heads_reference(dout @ Wo, n_heads)


def _context_without_wo(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    return split_heads_reference(dout, n_heads)


def _context_bare_reshape(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    batch, length, d_model = dout.shape
    return (dout @ Wo.T).reshape(batch, n_heads, length, d_model // n_heads)


def _heads_without_wo(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    return _numpy_d_heads(query, memory, Wq, Wk, Wv, numpy.eye(Wo.shape[0]), n_heads, mask, dout)


def _heads_merged(*arguments):
    return tuple(merge_heads_reference(d) for d in _numpy_d_heads(*arguments))


def _inputs_one_path(path):
    def inputs(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
        dq, dk, dv = (merge_heads_reference(d) for d in _numpy_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask,
                                                                        dout))
        return dq @ Wq.T, (dv @ Wv.T if path == "values" else dk @ Wk.T)
    return inputs


def _inputs_untransposed(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    dq, dk, dv = (merge_heads_reference(d) for d in _numpy_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout))
    return dq @ Wq, dk @ Wk + dv @ Wv


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("multi_head_attention_d_context", "W_o not transposed", _context_untransposed, "symmetric"),
    WrongSolution("multi_head_attention_d_context", "W_o skipped: dout split into heads", _context_without_wo,
                  "identity"),
    WrongSolution("multi_head_attention_d_context", "a bare reshape into heads", _context_bare_reshape,
                  "wrong places"),
    WrongSolution("multi_head_attention_d_heads", "W_o skipped on the way to the heads", _heads_without_wo,
                  "identity"),
    WrongSolution("multi_head_attention_d_heads", "the heads' gradients merged", _heads_merged, "one per head"),
    WrongSolution("multi_head_attention_d_inputs", "dmemory through the values only", _inputs_one_path("values"),
                  "through the values alone"),
    WrongSolution("multi_head_attention_d_inputs", "dmemory through the keys only", _inputs_one_path("keys"),
                  "through the keys alone"),
    WrongSolution("multi_head_attention_d_inputs", "the projections' weights not transposed", _inputs_untransposed,
                  "symmetric"),
]
