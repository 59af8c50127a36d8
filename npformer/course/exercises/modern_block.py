"""Lesson 28: the modern feed-forward sublayer's backward pass, and the auto-graded parts of its questions.

The sublayer, with its residual path (``nn.SwiGLUFeedForward`` and the path around it)::

    hidden = silu(x @ W_gate) * (x @ W_up)             (..., F)
    y = x + hidden @ W_down                            (..., D)

``swiglu_ffn_backward`` returns ``(dx, dW_gate, dW_up, dW_down)``: the student walks back through the down
projection, their SwiGLU and the residual path; a SwiGLU variant (``variants.modern_parts``) changes the
answer here too. The questions: ``rope_saved_numbers`` (question 2, the numbers RoPE's forward keeps for
its backward: npformer's cache, measured), ``gqa_kv_weights`` (question 3, the weights of W_k and W_v
together: ``nn.GroupedQueryAttention``'s, counted), ``ffn_weights`` (question 4, the weights of the 2017
network and of SwiGLU's: npformer's modules, counted).
"""

from __future__ import annotations

import numpy

from ... import nn, ops
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size


def swiglu_ffn(x, W_gate, W_up, W_down, unit=None):
    """y = x + unit(x, W_gate, W_up) @ W_down; ``unit`` is npformer's SwiGLU unless given."""
    hidden = ops.swiglu_forward(x, W_gate, W_up)[0] if unit is None else unit(x, W_gate, W_up)
    return x + hidden @ W_down


def _ffn_backward(x, W_gate, W_up, W_down, dout):
    """(dx, dW_gate, dW_up, dW_down) by npformer's ops."""
    hidden, swiglu_cache = ops.swiglu_forward(x, W_gate, W_up)
    _, down_cache = ops.linear_forward(hidden, W_down)
    d_hidden, dW_down, _ = ops.linear_backward(dout, down_cache)
    dx, dW_gate, dW_up = ops.swiglu_backward(d_hidden, swiglu_cache)
    return dout + dx, dW_gate, dW_up, dW_down


def _ffn_inputs(rng, leading, width, hidden):
    return {"x": normal(rng, *leading, width), "W_gate": normal(rng, width, hidden) / 2,
            "W_up": normal(rng, width, hidden) / 2, "W_down": normal(rng, hidden, width) / 2,
            "dout": normal(rng, *leading, width)}


def _ffn_cases(rng):
    return [Case("B=2, T=3, D=4, F=6", _ffn_inputs(rng, (2, 3), 4, 6)),
            Case("one row: x (D,), D=3, F=5", _ffn_inputs(rng, (), 3, 5)),
            Case("T=4 rows, D=5, F=2: F narrower than D", _ffn_inputs(rng, (4,), 5, 2))]


def _unseen_ffn(rng):
    leading = tuple(size(rng, 1, 4) for _ in range(int(rng.integers(1, 3))))
    width, hidden = size(rng, 2, 6), size(rng, 2, 8)
    return [Case(f"x {(*leading, width)}, F={hidden}", _ffn_inputs(rng, leading, width, hidden))]


def _ffn_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return Hint(f"{output} has shape {got.shape}, not {expected.shape}")
    if output == "dx" and numpy.allclose(got + inputs["dout"], expected, rtol=1e-6):
        return Hint("dx misses exactly dout: change x alone, with the sublayer's output held, and y still moves")
    return ""


# -- question 2: what RoPE keeps for its backward pass -----------------------------------------------------

def _rope_saved_numbers(batch, length, heads, head_dim):
    """The numbers in npformer's rope cache for queries (batch, heads, length, head_dim)."""
    queries = numpy.broadcast_to(numpy.zeros(()), (batch, heads, length, head_dim))
    cache = ops.rope_forward(queries, 0)[1]
    return int(sum(numpy.asarray(value).size for value in cache.values()))


def _rope_cases(rng):
    return [Case("B=8, T=512, H=8, Dh=64", {"batch": 8, "length": 512, "heads": 8, "head_dim": 64}),
            Case("B=1, T=7, H=2, Dh=4", {"batch": 1, "length": 7, "heads": 2, "head_dim": 4}),
            Case("B=32, T=16, H=12, Dh=128", {"batch": 32, "length": 16, "heads": 12, "head_dim": 128})]


def _unseen_rope(rng):
    sizes = {"batch": size(rng, 1, 16), "length": size(rng, 1, 300), "heads": size(rng, 1, 16),
             "head_dim": 2 * size(rng, 1, 64)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _rope_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got > expected and got % expected == 0:
        return Hint(f"{got:,} grows with B or H, yet the rotation of a position is the same in every sequence "
                    "and every head")
    if got * 2 == expected:
        return Hint(f"{got:,} is half: each pair's rotation needs two numbers of its angle")
    return ""


# -- question 3: the key and value projections under grouped-query attention ------------------------------

def _gqa_kv_weights(d_model, n_heads, n_kv_heads):
    """The weights of W_k and W_v together, counted on nn.GroupedQueryAttention."""
    layer = nn.GroupedQueryAttention(d_model, n_heads, n_kv_heads, rng=numpy.random.default_rng(0))
    return int(sum(value.size for child in (layer.k, layer.v) for value in child.params().values()))


def _gqa_cases(rng):
    return [Case("D=512, H=8, Hkv=2 (the question's)", {"d_model": 512, "n_heads": 8, "n_kv_heads": 2}),
            Case("D=512, H=8, Hkv=8: every head its own", {"d_model": 512, "n_heads": 8, "n_kv_heads": 8}),
            Case("D=64, H=16, Hkv=1: multi-query", {"d_model": 64, "n_heads": 16, "n_kv_heads": 1})]


def _unseen_gqa(rng):
    heads = int(rng.choice([4, 8, 16]))
    kv_heads = int(rng.choice([h for h in (1, 2, 4, 8, 16) if heads % h == 0]))
    sizes = {"d_model": heads * 8 * size(rng, 1, 8), "n_heads": heads, "n_kv_heads": kv_heads}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _gqa_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got * 2 == expected:
        return Hint(f"{got:,} is half: both W_k and W_v shrink")
    if got == 2 * inputs["d_model"] ** 2:
        return Hint(f"{got:,} is the count with a key/value head per query head: it does not change with Hkv")
    return ""


# -- question 4: the weights of the two feed-forward networks ----------------------------------------------

def _ffn_weights(d_model, d_ff, gated):
    """The weight-matrix entries of npformer's FeedForward (gated False) or SwiGLUFeedForward (gated True)."""
    rng = numpy.random.default_rng(0)
    layer = nn.SwiGLUFeedForward(d_model, d_ff, rng=rng) if gated else nn.FeedForward(d_model, d_ff, rng=rng)
    return int(sum(value.size for value in layer.params().values() if value.ndim >= 2))


def _weights_cases(rng):
    return [Case("the 2017 network: D=512, d_ff=2048", {"d_model": 512, "d_ff": 2048, "gated": False}),
            Case("SwiGLU: D=512, F=1365 (8/3 D, rounded down)", {"d_model": 512, "d_ff": 1365, "gated": True}),
            Case("SwiGLU: D=6, F=16", {"d_model": 6, "d_ff": 16, "gated": True})]


def _unseen_weights(rng):
    sizes = {"d_model": size(rng, 2, 300), "d_ff": size(rng, 2, 1200), "gated": bool(rng.integers(0, 2))}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _weights_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    matrix = inputs["d_model"] * inputs["d_ff"]
    if got % matrix == 0 and got != expected:
        return Hint(f"{got // matrix} matrices of D x F, where this network has {expected // matrix}")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("swiglu_ffn_backward", "swiglu_ffn_backward(x, W_gate, W_up, W_down, dout) -> (dx (..., D), dW_gate (D, "
             "F), dW_up (D, F), dW_down (F, D)): y = x + (silu(x W_gate) * (x W_up)) W_down", "28", _ffn_backward,
             _ffn_cases, ("dx", "dW_gate", "dW_up", "dW_down"), swiglu_ffn, ("x", "W_gate", "W_up", "W_down"),
             hints=(_ffn_hint,), unseen=_unseen_ffn, points=2),
    Exercise("rope_saved_numbers", "rope_saved_numbers(batch, length, heads, head_dim) -> int: the numbers RoPE's "
             "forward keeps for the backward of one layer's queries", "28", _rope_saved_numbers, _rope_cases,
             ("numbers",), exact=True, hints=(_rope_hint,), unseen=_unseen_rope, question=2),
    Exercise("gqa_kv_weights", "gqa_kv_weights(d_model, n_heads, n_kv_heads) -> int: the weights of W_k and W_v "
             "together", "28", _gqa_kv_weights, _gqa_cases, ("weights",), exact=True, hints=(_gqa_hint,),
             unseen=_unseen_gqa, question=3),
    Exercise("ffn_weights", "ffn_weights(d_model, d_ff, gated) -> int: the weight-matrix entries of the 2017 "
             "feed-forward network (gated False) or of SwiGLU's (gated True)", "28", _ffn_weights, _weights_cases,
             ("weights",), exact=True, hints=(_weights_hint,), unseen=_unseen_weights, question=4),
]

TEXTBOOK: dict[str, str] = {
    "swiglu_ffn_backward": "hidden = silu(x W_gate) * (x W_up); dW_down = hidden^T dout (over every row); "
                           "dx_ffn, dW_gate, dW_up = swiglu_backward(x, W_gate, W_up, dout @ W_down.T); "
                           "dx = dout + dx_ffn",
}


# -- the mistakes students make ---------------------------------------------------------------------------

def _numpy_ffn(x, W_gate, W_up, W_down, dout, residual=True):
    """The sublayer's gradients in NumPy, as a student writes them."""
    gate, up = x @ W_gate, x @ W_up
    sigmoid = 1.0 / (1.0 + numpy.exp(-gate))
    hidden = gate * sigmoid * up
    d_hidden = dout @ W_down.T
    d_gate = d_hidden * up * sigmoid * (1.0 + gate * (1.0 - sigmoid))
    d_up = d_hidden * gate * sigmoid
    rows = x.reshape(-1, x.shape[-1])
    dx = d_gate @ W_gate.T + d_up @ W_up.T + (dout if residual else 0.0)
    return (dx, rows.T @ d_gate.reshape(-1, gate.shape[-1]), rows.T @ d_up.reshape(-1, up.shape[-1]),
            hidden.reshape(-1, hidden.shape[-1]).T @ dout.reshape(-1, dout.shape[-1]))


def _residual_forgotten(x, W_gate, W_up, W_down, dout):
    return _numpy_ffn(x, W_gate, W_up, W_down, dout, residual=False)


def _down_transposed(x, W_gate, W_up, W_down, dout):
    dx, dW_gate, dW_up, dW_down = _numpy_ffn(x, W_gate, W_up, W_down, dout)
    return dx, dW_gate, dW_up, dW_down.T


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("swiglu_ffn_backward", "the residual path forgotten", _residual_forgotten, "misses exactly dout"),
    WrongSolution("swiglu_ffn_backward", "dW_down transposed", _down_transposed, "shape"),
    WrongSolution("rope_saved_numbers", "a copy of x: B H T Dh",
                  lambda batch, length, heads, head_dim: batch * heads * length * head_dim, "grows with B or H"),
    WrongSolution("gqa_kv_weights", "W_k alone", lambda d_model, n_heads, n_kv_heads:
                  d_model * n_kv_heads * (d_model // n_heads), "is half"),
    WrongSolution("ffn_weights", "two matrices for SwiGLU too",
                  lambda d_model, d_ff, gated: 2 * d_model * d_ff, "matrices of D x F"),
]
