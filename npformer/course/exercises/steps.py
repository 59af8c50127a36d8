"""The steps of three derivations, each graded on its own: the softmax Jacobian (lesson 3), layer
norm's backward pass through x_hat, the variance and the mean (lesson 4), and attention's backward
pass through v, the weights and the scores (lesson 7). (Other lessons keep their steps in their own
modules: ``modern_parts_steps``, ``masked_pooling``, ``patches``.)

A student derives a backward pass one intermediate gradient at a time; each step is an exercise
with the final exercise's inputs and returns one intermediate result, so a student whose final
answer is wrong learns which step is (``check(name, fn, steps=...)``). The references here are
written out with NumPy from the forward pass, step by step; the final exercises keep npformer's
ops as their references, which the finite differences check as well.
"""

from __future__ import annotations

import numpy

from .. import hints
from .attention_pieces import attention_backward_cases, unseen_attention_backward
from .base import Case, Exercise, normal, size
from .ops_backward import layernorm_cases, unseen_layernorm

EPS = 1e-5  # layer norm's epsilon, as in the lessons' signatures

# -- the softmax Jacobian (lesson 3) ------------------------------------------------------------------


def _softmax_jacobian(x):
    """J[i, j] = dp_i / dx_j = p_i (delta_ij - p_j), for one vector x (n,)."""
    p = hints.softmax(x)
    return numpy.diag(p) - numpy.outer(p, p)


def _jacobian_cases(rng):
    return [Case("n=4", {"x": normal(rng, 4)}), Case("n=1: one entry", {"x": numpy.array([0.4])}),
            Case("n=3, scores near 1000", {"x": 1000 + normal(rng, 3)})]


def _unseen_jacobian(rng):
    n = size(rng, 2, 7)
    return [Case(f"n={n}", {"x": 2 * normal(rng, n)})]


def _jacobian_hint(got, expected, inputs, output):
    p = hints.softmax(inputs["x"])
    if got.shape == expected.shape and numpy.allclose(got, numpy.diag(p * (1 - p)), rtol=1e-9, atol=1e-12):
        return hints.Hint("zero off the diagonal: yet p_i changes when any x_j of the vector changes",
                          "only the diagonal: p_i depends on every x_j (through the sum in the denominator)")
    if got.shape == expected.shape and numpy.allclose(got, -numpy.outer(p, p), rtol=1e-9, atol=1e-12):
        return hints.Hint("right off the diagonal, wrong on it", "on the diagonal, x_i is in the numerator too")
    return ""


# -- layer norm's three paths (lesson 4) --------------------------------------------------------------

def _layernorm_parts(x, gamma, dout):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    rstd = 1.0 / numpy.sqrt(variance + EPS)
    return centered, rstd, dout * gamma


def _layernorm_dx_hat(x, gamma, beta, dout):
    """dL/dx_hat = dout * gamma."""
    return dout * gamma


def _layernorm_dvar(x, gamma, beta, dout):
    """dL/dvar = sum_i dx_hat_i (x_i - mean) (-1/2) (var + eps)^(-3/2), per row: (..., 1)."""
    centered, rstd, dx_hat = _layernorm_parts(x, gamma, dout)
    return -0.5 * (dx_hat * centered).sum(axis=-1, keepdims=True) * rstd ** 3


def _layernorm_dmean(x, gamma, beta, dout):
    """dL/dmean, directly (x_i - mean) and through the variance, per row: (..., 1)."""
    centered, rstd, dx_hat = _layernorm_parts(x, gamma, dout)
    d_variance = _layernorm_dvar(x, gamma, beta, dout)
    return -(dx_hat * rstd).sum(axis=-1, keepdims=True) + d_variance * (-2.0 * centered).mean(axis=-1, keepdims=True)


def _path_hint(path):
    def hint(got, expected, inputs, output):
        if got.shape != expected.shape:
            return (f"shape {got.shape} instead of {expected.shape}: one number per row (keepdims=True), since "
                    f"each row has its own {path}") if got.size != expected.size or got.ndim != expected.ndim else ""
        return ""
    return hint


def _variance_hint(got, expected, inputs, output):
    centered, rstd, dx_hat = _layernorm_parts(inputs["x"], inputs["gamma"], inputs["dout"])
    without_half = -(dx_hat * centered).sum(axis=-1, keepdims=True) * rstd ** 3
    if got.shape == expected.shape and numpy.allclose(got, without_half, rtol=1e-9, atol=1e-14):
        return hints.Hint("dvar = 2 x (right answer): a constant factor, the same in every row",
                          "the derivative of (var + eps)^(-1/2) brings a factor -1/2")
    if got.shape == expected.shape and numpy.allclose(got, -expected, rtol=1e-9, atol=1e-14):
        return hints.Hint("dvar = -(right answer): the sign", "(var + eps)^(-1/2) falls as the variance grows")
    return _path_hint("variance")(got, expected, inputs, output)


# -- attention's backward pass, step by step (lesson 7) ----------------------------------------------

def _attention_pieces(q, k, v, mask, dout):
    """The weights P, dP and dS of attention's backward pass (``hints.attention_pieces``, which the
    attention hints already use)."""
    _, _, _, weights, d_weights, d_scores = hints.attention_pieces({"q": q, "k": k, "v": v, "mask": mask,
                                                                      "dout": dout})
    return weights, d_weights, d_scores


def _attention_dv(q, k, v, mask, dout):
    """dL/dv = P^T dout."""
    return _attention_pieces(q, k, v, mask, dout)[0].swapaxes(-1, -2) @ dout


def _attention_d_weights(q, k, v, mask, dout):
    """dL/dP = dout v^T: (B, H, Tq, Tk)."""
    return dout @ v.swapaxes(-1, -2)


def _attention_d_scores(q, k, v, mask, dout):
    """dL/dS through the softmax of each row: P * (dP - sum_j dP_j P_j)."""
    return _attention_pieces(q, k, v, mask, dout)[2]


def _d_scores_hint(got, expected, inputs, output):
    weights, d_weights, _ = _attention_pieces(*(inputs[name] for name in ("q", "k", "v", "mask", "dout")))
    scale = 1.0 / numpy.sqrt(inputs["q"].shape[-1])
    if got.shape != expected.shape:
        return ""
    if numpy.allclose(got, weights * (1 - weights) * d_weights, rtol=1e-9, atol=1e-12):
        return hints.Hint("the rows of dS do not sum to zero, yet the rows of a softmax's gradient do",
                          "only the diagonal of the softmax Jacobian: each weight of a row depends on every score "
                          "of the row")
    if numpy.allclose(got, expected * scale, rtol=1e-9, atol=1e-12):
        return hints.Hint(f"dS = (right answer) x {scale:.4g}, which is 1/sqrt(d_head)",
                          "the scale belongs to the scores' own inputs (q and k), not to dS")
    return ""


def _d_weights_hint(got, expected, inputs, output):
    if got.shape == expected.shape[:-2] + expected.shape[-2:][::-1]:
        return hints.Hint("shape (..., Tk, Tq): dP has one row per query and one column per key, like P",
                          "the transpose")
    return ""


def _dv_hint(got, expected, inputs, output):
    return hints.attention_backward_hint(got, expected, inputs, "dv")


EXERCISES: list[Exercise] = [
    Exercise("softmax_jacobian", "softmax_jacobian(x) -> (n, n): J[i, j] = dp_i / dx_j, x one vector (n,)", "03",
             _softmax_jacobian, _jacobian_cases, ("jacobian",), hints=(_jacobian_hint,), unseen=_unseen_jacobian),
    Exercise("layernorm_dx_hat", "layernorm_dx_hat(x, gamma, beta, dout) -> dL/dx_hat, shaped like x", "04",
             _layernorm_dx_hat, layernorm_cases, ("dx_hat",), unseen=unseen_layernorm),
    Exercise("layernorm_dvar", "layernorm_dvar(x, gamma, beta, dout) -> dL/dvar, (..., 1): one per row", "04",
             _layernorm_dvar, layernorm_cases, ("dvar",), hints=(_variance_hint,), unseen=unseen_layernorm),
    Exercise("layernorm_dmean", "layernorm_dmean(x, gamma, beta, dout) -> dL/dmean, (..., 1): one per row", "04",
             _layernorm_dmean, layernorm_cases, ("dmean",), hints=(_path_hint("mean"),), unseen=unseen_layernorm),
    Exercise("attention_dv", "attention_dv(q, k, v, mask, dout) -> dL/dv, (B, H, Tk, Dh)", "07", _attention_dv,
             attention_backward_cases, ("dv",), hints=(_dv_hint,), unseen=unseen_attention_backward),
    Exercise("attention_d_weights", "attention_d_weights(q, k, v, mask, dout) -> dL/dP, (B, H, Tq, Tk)", "07",
             _attention_d_weights, attention_backward_cases, ("d_weights",), hints=(_d_weights_hint,),
             unseen=unseen_attention_backward),
    Exercise("attention_d_scores", "attention_d_scores(q, k, v, mask, dout) -> dL/dS, (B, H, Tq, Tk)", "07",
             _attention_d_scores, attention_backward_cases, ("d_scores",), hints=(_d_scores_hint,),
             unseen=unseen_attention_backward),
]

# The order of each derivation's steps, before its final exercise.
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "softmax_backward": ("softmax_jacobian",),
    "layernorm_backward": ("layernorm_dx_hat", "layernorm_dvar", "layernorm_dmean"),
    "attention_backward": ("attention_dv", "attention_d_weights", "attention_d_scores"),
}

# What the grader shows once a derivation's final exercise passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "softmax_backward": "dx = p * (dout - sum(dout * p, axis=-1, keepdims=True)), p = softmax(x)",
    "layernorm_backward": ("dx = r * (g - mean(g) - x_hat * mean(g * x_hat)) with g = dout * gamma, "
                           "r = 1/sqrt(var + eps), the means over the row; dgamma = sum of dout * x_hat, "
                           "dbeta = sum of dout, over every row"),
    "attention_backward": ("dv = P^T dout; dP = dout v^T; dS = P * (dP - rowsum(dP * P)); "
                           "dq = dS k / sqrt(d_head); dk = dS^T q / sqrt(d_head)"),
}


def _wrong(name, mistake, function, hint=""):
    from .base import WrongSolution
    return WrongSolution(name, mistake, function, hint)


def _only_diagonal_jacobian(x):
    p = hints.softmax(x)
    return numpy.diag(p * (1 - p))


def _outer_only_jacobian(x):
    return -numpy.outer(hints.softmax(x), hints.softmax(x))


def _dvar_without_half(x, gamma, beta, dout, eps=1e-5):
    centered = x - x.mean(axis=-1, keepdims=True)
    return -((dout * gamma) * centered).sum(axis=-1, keepdims=True) * (centered.var(axis=-1, keepdims=True) + eps) ** -1.5


def _dvar_per_entry(x, gamma, beta, dout, eps=1e-5):
    centered = x - x.mean(axis=-1, keepdims=True)
    return -0.5 * (dout * gamma) * centered * (centered.var(axis=-1, keepdims=True) + eps) ** -1.5


def _dmean_direct_only(x, gamma, beta, dout, eps=1e-5):
    rstd = 1.0 / numpy.sqrt(x.var(axis=-1, keepdims=True) + eps)
    return (dout * gamma * rstd).sum(axis=-1, keepdims=True)


def _dv_untransposed(q, k, v, mask, dout):
    return _attention_pieces(q, k, v, mask, dout)[0] @ dout  # raises when Tq != Tk, is wrong when equal


def _d_weights_transposed(q, k, v, mask, dout):
    return v @ dout.swapaxes(-1, -2)


def _d_scores_diagonal(q, k, v, mask, dout):
    weights, d_weights, _ = _attention_pieces(q, k, v, mask, dout)
    return weights * (1 - weights) * d_weights


def _d_scores_scaled(q, k, v, mask, dout):
    return _attention_d_scores(q, k, v, mask, dout) / numpy.sqrt(q.shape[-1])


WRONG_SOLUTIONS = [
    _wrong("softmax_jacobian", "only the diagonal", _only_diagonal_jacobian, "only the diagonal"),
    _wrong("softmax_jacobian", "-p_i p_j on the diagonal too", _outer_only_jacobian, "numerator too"),
    _wrong("layernorm_dx_hat", "dout alone, gamma forgotten", lambda x, gamma, beta, dout: dout),
    _wrong("layernorm_dvar", "the factor -1/2 forgotten", _dvar_without_half, "-1/2"),
    _wrong("layernorm_dvar", "not summed over the row", _dvar_per_entry, "one number per row"),
    _wrong("layernorm_dmean", "the direct path only, with the wrong sign", _dmean_direct_only),
    _wrong("attention_dv", "P dout instead of P^T dout", _dv_untransposed),
    _wrong("attention_d_weights", "v dout^T: the transpose", _d_weights_transposed, "the transpose"),
    _wrong("attention_d_scores", "only the diagonal of the softmax Jacobian", _d_scores_diagonal, "only the diagonal"),
    _wrong("attention_d_scores", "the 1/sqrt(d) scale put on dS", _d_scores_scaled, "belongs to"),
]
