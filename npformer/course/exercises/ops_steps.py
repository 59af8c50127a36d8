"""The steps of lessons 2 and 5's derivations, each graded on its own, and the compact forms of those
lessons' backward passes.

    linear_row_backward  lesson 2: the linear layer for one row, x (Din,), before the batch of rows
    gelu_gate_backward   lesson 2: the backward pass of GELU's gate alone, y = Phi(x), before GELU's
    embedding_one_hot    lesson 5: the one-hot array O of the ids, with W[ids] = O W, before the
                         embedding's backward pass

The references are written with NumPy from each forward pass; the final exercises (in
``ops_backward``) keep npformer's ops as theirs. The hints say which property of an answer fails,
never the formula that fixes it.
"""

from __future__ import annotations

import numpy

from ...ops.special import erfc
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout
from .ops_backward import embedding_cases, unseen_embedding

# -- the linear layer, one row (lesson 2) ---------------------------------------------------------------


def _linear_row(x, W, b):
    """y (Dout,) = x (Din,) @ W (Din, Dout) + b (Dout,)."""
    return x @ W + b


def _linear_row_backward(x, W, b, dout):
    """dx_k = sum_j W_kj dout_j; dW_kj = x_k dout_j; db_j = dout_j."""
    return W @ dout, numpy.outer(x, dout), numpy.array(dout, dtype=numpy.float64)


def _row_inputs(d_in, d_out):
    return lambda r: {"x": normal(r, d_in), "W": normal(r, d_in, d_out), "b": normal(r, d_out)}


def _linear_row_cases(rng):
    return backward_cases(rng, _linear_row, [("Din=4 -> Dout=3", _row_inputs(4, 3)),
                                              ("Din=3 -> Dout=3: square W", _row_inputs(3, 3)),
                                              ("Din=5 -> Dout=1", _row_inputs(5, 1))])


def _unseen_linear_row(rng):
    d_in, d_out = size(rng, 2, 6), size(rng, 1, 6)
    return [Case(f"Din={d_in} -> Dout={d_out}", with_dout(rng, _row_inputs(d_in, d_out)(rng), _linear_row))]


def _row_weight_hint(got, expected, inputs, output):
    """dW laid out as (Dout, Din), or, with a square W, each row a multiple of the whole x."""
    if output != "dW":
        return ""
    if got.shape == expected.shape[::-1] and got.shape != expected.shape:
        return (f"dW has shape {got.shape}, W has {expected.shape}: the gradient of W_kj belongs at (k, j), "
                "where W_kj sits")
    x = numpy.asarray(inputs["x"], dtype=numpy.float64)
    if got.shape == expected.shape and got.ndim == 2 and numpy.abs(x).max() > 0:
        rows_along_x = all(numpy.allclose(row, (row @ x) / (x @ x) * x, rtol=1e-9, atol=1e-12) for row in got)
        if rows_along_x and not numpy.allclose(got, expected, rtol=1e-9, atol=1e-12):
            return ("every row of dW is a multiple of the whole x, but W_kj multiplies x_k only: row k of dW "
                    "can depend on x through x_k alone")
    return ""


def _row_input_hint(got, expected, inputs, output):
    """dx that weighs dout by a column of W: possible only when W is square."""
    W = numpy.asarray(inputs["W"], dtype=numpy.float64)
    if output != "dx" or got.shape != expected.shape or W.shape[0] != W.shape[1]:
        return ""
    if numpy.allclose(got, numpy.asarray(inputs["dout"]) @ W, rtol=1e-9, atol=1e-12):
        return ("agrees with the answer only for a symmetric W, and would not have x's shape (Din,) for a "
                "non-square one: x_k appears in every y_j, each time through its own entry of W")
    return ""


# -- GELU's gate (lesson 2) -------------------------------------------------------------------------------

def normal_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, written with erfc so that its far left tail keeps its digits."""
    return 0.5 * erfc(-numpy.asarray(x, dtype=numpy.float64) / numpy.sqrt(2.0))


def normal_density(x):
    """phi(x) = exp(-x^2 / 2) / sqrt(2 pi), Phi's derivative."""
    return numpy.exp(-0.5 * numpy.square(x)) / numpy.sqrt(2.0 * numpy.pi)


def _gelu_gate_backward(x, dout):
    """dx of y = Phi(x), entry by entry: dout * phi(x)."""
    return dout * normal_density(x)


def _gate_cases(rng):
    return backward_cases(rng, normal_cdf, [
        ("(2, 3, 4)", lambda r: {"x": 2 * normal(r, 2, 3, 4)}),
        ("(1, 1, 1): one entry", lambda r: {"x": numpy.array([[[0.7]]])}),
        ("(5, 7) with large |x|", lambda r: {"x": 6 * normal(r, 5, 7)}),
    ])


def _unseen_gate(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5))
    return [Case(f"shape {shape}", with_dout(rng, {"x": 3 * normal(rng, *shape)}, normal_cdf))]


def _gate_area_hint(got, expected, inputs, output):
    """A slope off by a constant factor: Phi rises from 0 to 1, so its slope has area 1."""
    dout = numpy.asarray(inputs["dout"], dtype=numpy.float64)
    if got.shape != expected.shape or not numpy.all(numpy.isfinite(got)):
        return ""
    slope, right = got[dout != 0] / dout[dout != 0], normal_density(inputs["x"])[dout != 0]
    factor = float(slope @ right / (right @ right))
    if abs(factor - 1) > 1e-3 and numpy.allclose(slope, factor * right, rtol=1e-6, atol=1e-12):
        return (f"your slope of Phi, got / dout, has area {factor:.4g} under it: Phi rises from 0 to 1, so the "
                "area under its slope must be 1")
    return ""


# -- the embedding's one-hot form (lesson 5) ----------------------------------------------------------------

def _embedding_one_hot(ids, W):
    """O (B, T, V): O[b, t, v] = 1 where ids[b, t] = v, else 0; O @ W = W[ids]."""
    return (numpy.asarray(ids)[..., None] == numpy.arange(W.shape[0])).astype(numpy.float64)


def _one_hot_cases(rng):
    return [Case(case.label, {"ids": case.inputs["ids"], "W": case.inputs["W"]}) for case in embedding_cases(rng)]


def _unseen_one_hot(rng):
    return [Case(case.label, {"ids": case.inputs["ids"], "W": case.inputs["W"]}) for case in unseen_embedding(rng)]


def _one_hot_width_hint(got, expected, inputs, output):
    if got.shape[:-1] == expected.shape[:-1] and got.shape[-1] != expected.shape[-1]:
        return (f"{got.shape[-1]} columns where W has {expected.shape[-1]} rows: O @ W needs one column of O per "
                "row of W, whether or not its id occurs in this batch")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("linear_row_backward", "linear_row_backward(x, W, b, dout) -> (dx, dW, db), one row: x (Din,), "
             "W (Din, Dout), b (Dout,), dout (Dout,)", "02", _linear_row_backward, _linear_row_cases,
             ("dx", "dW", "db"), _linear_row, ("x", "W", "b"), hints=(_row_weight_hint, _row_input_hint),
             unseen=_unseen_linear_row),
    Exercise("gelu_gate_backward", "gelu_gate_backward(x, dout) -> dx of y = Phi(x), entry by entry, shaped like x",
             "02", _gelu_gate_backward, _gate_cases, ("dx",), normal_cdf, ("x",), hints=(_gate_area_hint,),
             unseen=_unseen_gate),
    Exercise("embedding_one_hot", "embedding_one_hot(ids, W) -> O (B, T, V): O[b, t, v] = 1 where ids[b, t] = v, "
             "else 0, so that O @ W = W[ids]", "05", _embedding_one_hot, _one_hot_cases, ("one_hot",), exact=True,
             hints=(_one_hot_width_hint,), unseen=_unseen_one_hot),
]

# The order of each derivation's steps, before its final exercise.
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "linear_backward": ("linear_row_backward",),
    "gelu_backward": ("gelu_gate_backward",),
    "embedding_backward": ("embedding_one_hot",),
}

# What the grader shows once a final exercise passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "linear_row_backward": "dx = W dout, dW = outer(x, dout) (dW[k, j] = x[k] dout[j]), db = dout",
    "gelu_gate_backward": "dx = dout * phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi): the normal density, Phi's slope",
    "linear_backward": ("with x and dout flattened to rows, (N, Din) and (N, Dout): dx = dout W^T (back in x's shape), "
                        "dW = x^T dout, db = dout summed over the N rows"),
    "relu_backward": "dx = dout * (x > 0)",
    "gelu_backward": "dx = dout * (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the slope of Phi",
    "embedding_backward": ("dW = O^T dout, O the one-hot rows of ids: dW = zeros; np.add.at(dW, ids, dout), each id's "
                           "rows of dout added into its row (a repeated id adds up)"),
}


# -- the mistakes students make -----------------------------------------------------------------------------

def _row_weight_transposed(x, W, b, dout):
    return W @ dout, numpy.outer(dout, x), dout


def _row_input_untransposed(x, W, b, dout):
    return dout @ W, numpy.outer(x, dout), dout  # raises unless W is square, is wrong when it is


def _gate_without_inner_slope(x, dout):
    return dout * numpy.exp(-x * x / 2) / numpy.sqrt(numpy.pi)  # erf' at x / sqrt 2, the 1 / sqrt 2 left out


def _gate_without_half(x, dout):
    return dout * 2 * numpy.exp(-x * x / 2) / numpy.sqrt(2 * numpy.pi)  # (1 + erf) / 2: the 1/2 left out


def _gelu_density_term_only(x, dout):
    return dout * x * numpy.exp(-x * x / 2) / numpy.sqrt(2 * numpy.pi)  # the product rule's other term lost


def _one_hot_batch_width(ids, W):
    return numpy.eye(int(numpy.max(ids)) + 1)[ids]  # as many columns as the largest id needs


def _one_hot_flat(ids, W):
    return numpy.eye(W.shape[0])[numpy.asarray(ids).reshape(-1)]  # (B T, V): the positions' axes merged


WRONG_SOLUTIONS = [
    WrongSolution("linear_row_backward", "dW = outer(dout, x): laid out as (Dout, Din)", _row_weight_transposed,
                  "W_kj"),
    WrongSolution("linear_row_backward", "dx = dout W, a column of W for each x_k", _row_input_untransposed),
    WrongSolution("gelu_gate_backward", "the chain rule through x / sqrt 2 left out", _gate_without_inner_slope,
                  "area"),
    WrongSolution("gelu_gate_backward", "the 1/2 of (1 + erf) / 2 left out", _gate_without_half, "area"),
    WrongSolution("gelu_backward", "x phi(x) alone, the Phi(x) term lost", _gelu_density_term_only,
                  "a slope of 1/2"),
    WrongSolution("embedding_one_hot", "as many columns as the largest id in the batch", _one_hot_batch_width,
                  "whether or not its id occurs"),
    WrongSolution("embedding_one_hot", "(B T, V): the positions flattened", _one_hot_flat),
]
