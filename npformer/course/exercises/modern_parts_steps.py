"""The steps of lesson 28's derivations, each graded on its own before its final exercise:

    rmsnorm_d_mean_square   dL/dm, m = mean_i x_i^2 the statistic r = (m + eps)^(-1/2) is made of (after
                            rmsnorm_d_rstd, in ``modern_parts``)
    rope_pair_backward      one pair turned by a given angle: the 2 x 2 rotation's backward pass
    swiglu_d_gate           dL/da for y = silu(a) * b, a = x W_gate (after silu_backward)
    swiglu_d_up             dL/db for the same y, b = x W_up

The references are written from the forward pass with NumPy, step by step; the steps reuse the final
exercises' cases (the pair's rotation has its own: one angle per pair).
"""

from __future__ import annotations

import numpy

from ..hints import explains
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout
from .modern_parts import (EPS, rmsnorm_cases, rmsnorm_d_rstd, sigmoid, silu, silu_slope, swiglu_cases,
                           unseen_rmsnorm, unseen_swiglu)

# -- RMSNorm: through the mean square -----------------------------------------------------------------


def _rmsnorm_d_mean_square(x, gamma, dout):
    """dL/dm for m = mean_i x_i^2, r = (m + eps)^(-1/2): dL/dr * (-1/2) (m + eps)^(-3/2), (..., 1)."""
    mean_square = (x * x).mean(axis=-1, keepdims=True)
    return -0.5 * rmsnorm_d_rstd(x, gamma, dout) * (mean_square + EPS) ** -1.5


def _d_mean_square_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ("one number per row: m is one number per row, so dL/dm is one too, shape (..., 1)"
                if got.shape == inputs["x"].shape else "")
    if explains(2.0 * expected, got):
        return "twice the right size: the slope of (m + eps)^(-1/2) in m carries the power's own factor"
    if explains(-expected, got) or explains(-2.0 * expected, got):
        return "the sign: r = (m + eps)^(-1/2) falls as m grows, so a loss that rises with r falls with m"
    return ""


# -- RoPE: one pair ---------------------------------------------------------------------------------------


def _rotate_pair(pair, angle):
    """pair (..., 2) turned by angle (...): (cos a x0 - sin a x1, sin a x0 + cos a x1)."""
    cos, sin = numpy.cos(angle), numpy.sin(angle)
    return numpy.stack([cos * pair[..., 0] - sin * pair[..., 1], sin * pair[..., 0] + cos * pair[..., 1]], axis=-1)


def _rope_pair_backward(pair, angle, dout):
    """dL/dpair: dout turned by -angle."""
    return _rotate_pair(dout, -numpy.asarray(angle, dtype=numpy.float64))


def _pair_inputs(angles):
    return lambda r: {"pair": normal(r, len(angles), 2), "angle": numpy.asarray(angles, dtype=numpy.float64)}


def _pair_cases(rng):
    return backward_cases(rng, _rotate_pair, [
        ("5 pairs, angles in (-pi, pi)", _pair_inputs(rng.uniform(-numpy.pi, numpy.pi, 5))),
        ("2 pairs turned by a quarter turn (pi/2) and a half turn (pi)", _pair_inputs([numpy.pi / 2, numpy.pi])),
        ("3 pairs, angles 0 (no turn), 9 and 40 (past a whole turn)", _pair_inputs([0.0, 9.0, 40.0]))])


def _unseen_pair(rng):
    count = size(rng, 1, 6)
    inputs = _pair_inputs(rng.uniform(-20, 20, count))(rng)
    return [Case(f"{count} pairs, angles in (-20, 20)", with_dout(rng, inputs, _rotate_pair))]


def _pair_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    if explains(_rotate_pair(inputs["dout"], inputs["angle"]), got):
        return ("dout turned by +angle, as the forward turns the pair: at a quarter turn the forward puts x0 in "
                "y1 (y1 = x0), so a change of x0 moves the loss by dout[1], and your d_pair[0] is -dout[1]")
    return ""


# -- SwiGLU: the two branches ------------------------------------------------------------------------------


def _swiglu_d_gate(x, W_gate, W_up, dout):
    """dL/da for y = silu(a) * b, a = x W_gate, b = x W_up: dout * b * silu'(a)."""
    gate = x @ W_gate
    return dout * (x @ W_up) * silu_slope(gate)


def _swiglu_d_up(x, W_gate, W_up, dout):
    """dL/db for y = silu(a) * b: dout * silu(a)."""
    return dout * silu(x @ W_gate)


def _d_gate_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    gate = inputs["x"] @ inputs["W_gate"]
    if explains(inputs["dout"] * silu_slope(gate), got):
        return "the same dL/da whatever b = x W_up is: y doubles when b doubles, and so does its slope in a"
    if explains(inputs["dout"] * (inputs["x"] @ inputs["W_up"]) * sigmoid(gate), got):
        return "silu's slope taken as sigmoid(a): silu(a) = a sigmoid(a) is a product"
    return ""


def _d_up_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    gate = inputs["x"] @ inputs["W_gate"]
    if explains(inputs["dout"] * gate, got):
        return "dL/db = dout * a: b multiplies silu(a) in y, not a"
    if explains(inputs["dout"] * silu_slope(gate), got):
        return "y = silu(a) * b is linear in b: its slope in b is a value of the forward, not a derivative of silu"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("rmsnorm_d_mean_square", "rmsnorm_d_mean_square(x, gamma, dout) -> dL/dm, m = mean_i x_i^2: "
             "one number per row (..., 1)", "28", _rmsnorm_d_mean_square, rmsnorm_cases, ("d_mean_square",),
             hints=(_d_mean_square_hint,), unseen=unseen_rmsnorm),
    Exercise("rope_pair_backward", "rope_pair_backward(pair, angle, dout) -> d_pair (N, 2): pair (N, 2) turned "
             "by angle (N,)", "28", _rope_pair_backward, _pair_cases, ("d_pair",), _rotate_pair, ("pair",),
             hints=(_pair_hint,), unseen=_unseen_pair),
    Exercise("swiglu_d_gate", "swiglu_d_gate(x, W_gate, W_up, dout) -> dL/da, a = x W_gate: (..., F)", "28",
             _swiglu_d_gate, swiglu_cases, ("d_gate",), hints=(_d_gate_hint,), unseen=unseen_swiglu),
    Exercise("swiglu_d_up", "swiglu_d_up(x, W_gate, W_up, dout) -> dL/db, b = x W_up: (..., F)", "28",
             _swiglu_d_up, swiglu_cases, ("d_up",), hints=(_d_up_hint,), unseen=unseen_swiglu),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _d_mean_square_without_half(x, gamma, dout):
    return 2.0 * _rmsnorm_d_mean_square(x, gamma, dout)


def _d_mean_square_per_entry(x, gamma, dout):
    mean_square = (x * x).mean(axis=-1, keepdims=True)
    return -0.5 * dout * gamma * x * (mean_square + EPS) ** -1.5


def _pair_forward_turn(pair, angle, dout):
    return _rotate_pair(dout, angle)


def _d_gate_without_up(x, W_gate, W_up, dout):
    return dout * silu_slope(x @ W_gate)


def _d_up_with_gate(x, W_gate, W_up, dout):
    return dout * (x @ W_gate)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("rmsnorm_d_mean_square", "the power's -1/2 forgotten", _d_mean_square_without_half,
                  "twice the right size"),
    WrongSolution("rmsnorm_d_mean_square", "not summed over the row", _d_mean_square_per_entry, "one number per row"),
    WrongSolution("rope_pair_backward", "the forward's turn applied to dout", _pair_forward_turn, "quarter turn"),
    WrongSolution("swiglu_d_gate", "the linear branch b forgotten", _d_gate_without_up, "whatever b"),
    WrongSolution("swiglu_d_up", "a in place of silu(a)", _d_up_with_gate, "not a"),
]
