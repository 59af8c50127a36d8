"""The exercises of lesson 28, the parts of a LLaMA-style decoder: RMSNorm's backward pass (and its
one step, the gradient of the row's ``1/rms``), rotary positions' backward pass from a cache offset,
SiLU's and SwiGLU's backward passes, and the sum that grouped-query attention's shared key/value heads
need (``repeat_kv_backward``).

Signatures take the forward's inputs and the upstream gradient ``dout``, as every backward exercise
of the course: ``rmsnorm_backward(x, gamma, dout)``, ``rope_backward(x, offset, dout)``,
``swiglu_backward(x, W_gate, W_up, dout)``, ``repeat_kv_backward(k, n_rep, dout)``. The references are
npformer's ops; the finite differences of the forward check them too.
"""

from __future__ import annotations

import numpy

from ... import ops
from .. import hints
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout

EPS = 1e-5  # RMSNorm's epsilon in the lesson's signatures (LLaMA 2's)

# -- RMSNorm ------------------------------------------------------------------------------------------


def _rmsnorm(x, gamma):
    return ops.rmsnorm_forward(x, gamma, EPS)[0]


def _rmsnorm_backward(x, gamma, dout):
    return ops.rmsnorm_backward(dout, ops.rmsnorm_forward(x, gamma, EPS)[1])


def _rstd(x):
    return 1.0 / numpy.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)


def rmsnorm_d_rstd(x, gamma, dout):
    """dL/dr for r = 1/sqrt(mean(x^2) + eps), one number per row: sum_i dout_i gain_i x_i."""
    return (dout * gamma * x).sum(axis=-1, keepdims=True)


def _rmsnorm_inputs(*shape, offset=0.0):
    return lambda r: {"x": offset + 2 * normal(r, *shape), "gamma": 1 + 0.5 * normal(r, shape[-1])}


def rmsnorm_cases(rng):
    return backward_cases(rng, _rmsnorm, [("B=2, T=3, D=5", _rmsnorm_inputs(2, 3, 5, offset=1.0)),
                                           ("B=1, T=1, D=4: one token", _rmsnorm_inputs(1, 1, 4)),
                                           ("(6, 2): rows of two numbers", _rmsnorm_inputs(6, 2))])


def unseen_rmsnorm(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 7))  # D = 1 would give y = gamma sign(x), dx ~ eps: no test
    inputs = _rmsnorm_inputs(*shape, offset=float(rng.uniform(-3, 3)))(rng)
    return [Case(f"B={shape[0]}, T={shape[1]}, D={shape[2]}", with_dout(rng, inputs, _rmsnorm))]


def _d_rstd_hint(got, expected, inputs, output):
    if got.shape == inputs["x"].shape and got.shape != expected.shape:
        return "one number per row: r is shared by the whole row, so dL/dr is one number per row, shape (..., 1)"
    if got.shape == expected.shape and numpy.allclose(got, (inputs["dout"] * inputs["x"]).sum(-1, keepdims=True),
                                                      rtol=1e-9, atol=1e-12):
        return "the gamma is missing: your dL/dr stays the same when gamma doubles, but y, and its slope in r, double"
    return ""


def _rmsnorm_hint(got, expected, inputs, output):
    if output != "dx" or got.shape != expected.shape:
        return ""
    x, gamma, dout = inputs["x"], inputs["gamma"], inputs["dout"]
    rstd = _rstd(x)
    g, x_hat = dout * gamma, x * rstd
    candidates = [
        (rstd * g, "the direct path only: your dx_j ignores the row's other entries, but r depends on every x_i "
                   "of the row (the path through the root)"),
        (rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)),
         "a term that removes a shift of the row, as layer norm's does (from the mean it subtracts); RMSNorm's "
         "forward subtracts no mean"),
        (rstd * (g - x_hat * (g * x_hat).sum(-1, keepdims=True)),
         "the path through the root D times too large, D the row's length: m = mean(x^2) carries a 1/D"),
    ]
    for candidate, hint in candidates:
        if numpy.allclose(got, candidate, rtol=1e-9, atol=1e-12):
            return hint
    return ""


# -- rotary positions -----------------------------------------------------------------------------------


def _rope(x, offset):
    return ops.rope_forward(x, offset)[0]


def _rope_backward(x, offset, dout):
    return ops.rope_backward(dout, ops.rope_forward(x, offset)[1])


def _turned(x, offset, sign):
    """``x``'s pairs turned by ``sign * (offset + t) * 10000^(-2i/Dh)``, in NumPy (the wrong solutions run
    where npformer cannot be imported)."""
    length, head_dim = x.shape[-2], x.shape[-1]
    angles = sign * (offset + numpy.arange(length))[:, None] * 10000.0 ** (-numpy.arange(0, head_dim, 2) / head_dim)
    out = numpy.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * numpy.cos(angles) - x[..., 1::2] * numpy.sin(angles)
    out[..., 1::2] = x[..., 0::2] * numpy.sin(angles) + x[..., 1::2] * numpy.cos(angles)
    return out


def _rope_inputs(batch, heads, length, head_dim, offset):
    return lambda r: {"x": normal(r, batch, heads, length, head_dim), "offset": offset}


def _rope_cases(rng):
    return backward_cases(rng, _rope, [
        ("B=2, H=2, T=4, Dh=6, offset 0: a whole sequence", _rope_inputs(2, 2, 4, 6, 0)),
        ("B=1, H=1, T=1, Dh=4, offset 9: one new position after 9 cached ones", _rope_inputs(1, 1, 1, 4, 9)),
        ("B=1, H=3, T=3, Dh=2, offset 5", _rope_inputs(1, 3, 3, 2, 5))])


def _unseen_rope(rng):
    batch, heads, length, pairs, offset = size(rng, 1, 2), size(rng, 1, 3), size(rng, 1, 5), size(rng, 1, 4), size(rng, 0, 30)
    inputs = _rope_inputs(batch, heads, length, 2 * pairs, offset)(rng)
    return [Case(f"B={batch}, H={heads}, T={length}, Dh={2 * pairs}, offset {offset}", with_dout(rng, inputs, _rope))]


def _rope_hint(got, expected, inputs, output):
    x, offset, dout = inputs["x"], inputs["offset"], inputs["dout"]
    if got.shape != expected.shape:
        return ""
    if numpy.allclose(got, _rope(dout, offset), rtol=1e-9, atol=1e-12):
        return ("dout turned by +angle, as the forward turns x: at a quarter turn the forward puts x[2i] in "
                "y[2i+1], so a change of x[2i] moves the loss by dout[2i+1], and your dx[2i] is -dout[2i+1]")
    if offset and numpy.allclose(got, _rope_backward(x, 0, dout), rtol=1e-9, atol=1e-12):
        return ("the angles start at position 0: with a cache, row t of x sits at position offset + t")
    return ""


# -- SiLU and SwiGLU -------------------------------------------------------------------------------------


def silu(gate):
    return gate / (1.0 + numpy.exp(-gate))


def _silu_backward(gate, dout):
    sigmoid = 1.0 / (1.0 + numpy.exp(-gate))
    return dout * sigmoid * (1.0 + gate * (1.0 - sigmoid))


def _swiglu(x, W_gate, W_up):
    return ops.swiglu_forward(x, W_gate, W_up)[0]


def _swiglu_backward(x, W_gate, W_up, dout):
    return ops.swiglu_backward(dout, ops.swiglu_forward(x, W_gate, W_up)[1])


def _swiglu_with(x, W_gate, W_up, dout, silu_slope, up_path=True):
    """The backward pass with ``silu_slope(a)`` as SiLU's derivative, in NumPy (hints and wrong solutions)."""
    gate, up = x @ W_gate, x @ W_up
    d_gate, d_up = dout * up * silu_slope(gate), dout * silu(gate)
    rows = x.reshape(-1, x.shape[-1])
    dx = d_gate @ W_gate.T + (d_up @ W_up.T if up_path else 0.0)
    return dx, rows.T @ d_gate.reshape(-1, gate.shape[-1]), rows.T @ d_up.reshape(-1, up.shape[-1])


def sigmoid(a):
    return 1.0 / (1.0 + numpy.exp(-a))


def _gate_inputs(*shape):
    return lambda r: {"gate": 3 * normal(r, *shape)}


def _silu_cases(rng):
    return backward_cases(rng, silu, [("B=2, T=3, F=5", _gate_inputs(2, 3, 5)), ("one number", _gate_inputs(1)),
                                       ("gate values near -30 and 30", lambda r: {"gate": numpy.array([-30.0, -2.0, 0.0, 30.0])})])


def _swiglu_inputs(*shape, width):
    return lambda r: {"x": normal(r, *shape), "W_gate": 1.5 * normal(r, shape[-1], width),
                      "W_up": normal(r, shape[-1], width)}


def swiglu_cases(rng):
    return backward_cases(rng, _swiglu, [("B=2, T=3, D=4 -> F=5", _swiglu_inputs(2, 3, 4, width=5)),
                                         ("B=1, T=1, D=3 -> F=2: one token", _swiglu_inputs(1, 1, 3, width=2)),
                                         ("(6, 4) rows, D=4 -> F=3", _swiglu_inputs(6, 4, width=3))])


def _unseen_gate(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 6))
    return [Case(f"shape {shape}", with_dout(rng, {"gate": 3 * normal(rng, *shape)}, silu))]


def unseen_swiglu(rng):
    batch, length, d_model, width = size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5), size(rng, 2, 6)
    inputs = _swiglu_inputs(batch, length, d_model, width=width)(rng)
    return [Case(f"B={batch}, T={length}, D={d_model} -> F={width}", with_dout(rng, inputs, _swiglu))]


def _sigmoid_only(a):
    return sigmoid(a)


def _sigmoid_for_its_derivative(a):
    return sigmoid(a) + a * sigmoid(a)


_SILU_MISTAKES = ((_sigmoid_only, "silu's slope taken as sigmoid(a), which is below 1 everywhere; at a = 2 silu rises "
                                  "by about 1.09 per unit: silu(a) = a sigmoid(a) is a product"),
                  (_sigmoid_for_its_derivative, "a slope that grows without bound (31 at a = 30), where silu(a) = a "
                                                "sigmoid(a) tends to a, of slope 1: check the derivative of sigmoid"))


def _silu_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    for slope, hint in _SILU_MISTAKES:
        if "x" in inputs:
            candidate = _swiglu_with(inputs["x"], inputs["W_gate"], inputs["W_up"], inputs["dout"], slope)
            candidate = candidate[("dx", "dW_gate", "dW_up").index(output)]
        else:
            candidate = inputs["dout"] * slope(inputs["gate"])
        if numpy.allclose(got, candidate, rtol=1e-9, atol=1e-12):
            return hint
    return ""


def _swiglu_path_hint(got, expected, inputs, output):
    if output != "dx" or got.shape != expected.shape:
        return ""
    gate_only = _swiglu_with(inputs["x"], inputs["W_gate"], inputs["W_up"], inputs["dout"], silu_slope, up_path=False)[0]
    if numpy.allclose(got, gate_only, rtol=1e-9, atol=1e-12):
        return "x feeds both products, the gate and the linear branch: dx is the sum of both paths"
    return ""


def silu_slope(a):
    return sigmoid(a) * (1.0 + a * (1.0 - sigmoid(a)))


# -- grouped-query attention's shared heads ---------------------------------------------------------------


def _repeat_kv(k, n_rep):
    return numpy.repeat(k, n_rep, axis=1)


def _repeat_kv_backward(k, n_rep, dout):
    batch, kv_heads = k.shape[:2]
    return dout.reshape(batch, kv_heads, n_rep, *dout.shape[2:]).sum(axis=2)


def _kv_inputs(batch, kv_heads, length, head_dim, n_rep):
    return lambda r: {"k": normal(r, batch, kv_heads, length, head_dim), "n_rep": n_rep}


def _repeat_kv_cases(rng):
    return backward_cases(rng, _repeat_kv, [
        ("B=2, Hkv=2 shared by 3 query heads each, T=4, Dh=3", _kv_inputs(2, 2, 4, 3, 3)),
        ("B=1, Hkv=1 shared by 4 (multi-query), T=1, Dh=2", _kv_inputs(1, 1, 1, 2, 4)),
        ("B=1, Hkv=3, n_rep=1: every head its own", _kv_inputs(1, 3, 2, 2, 1))])


def _unseen_repeat_kv(rng):
    batch, kv_heads, length, head_dim, n_rep = (size(rng, 1, 2), size(rng, 1, 3), size(rng, 1, 5), size(rng, 1, 5),
                                                 size(rng, 2, 4))
    inputs = _kv_inputs(batch, kv_heads, length, head_dim, n_rep)(rng)
    return [Case(f"B={batch}, Hkv={kv_heads}, n_rep={n_rep}, T={length}, Dh={head_dim}",
                 with_dout(rng, inputs, _repeat_kv))]


def _repeat_kv_hint(got, expected, inputs, output):
    k, n_rep, dout = inputs["k"], inputs["n_rep"], inputs["dout"]
    if got.shape != expected.shape or n_rep == 1:
        return ""
    batch, kv_heads = k.shape[:2]
    grouped = dout.reshape(batch, kv_heads, n_rep, *dout.shape[2:])
    if numpy.allclose(got, grouped[:, :, 0], rtol=1e-9, atol=1e-12):
        return ("only the first query head of each group: key/value head j is read by n_rep query heads, and your "
                "dk[:, j] does not change when the dout of the others does")
    if numpy.allclose(got, grouped.mean(axis=2), rtol=1e-9, atol=1e-12):
        return ("n_rep times too small: each of a head's n_rep copies moves the loss in full when the head "
                "changes (the forward has no 1/n_rep)")
    if kv_heads > 1 and numpy.allclose(got, dout.reshape(batch, n_rep, kv_heads, *dout.shape[2:]).sum(axis=1),
                                       rtol=1e-9, atol=1e-12):
        return ("grouped as numpy.tile: with numpy.repeat, query head h reads key/value head h // n_rep, so the "
                "n_rep heads of a group are neighbours")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("rmsnorm_d_rstd", "rmsnorm_d_rstd(x, gamma, dout) -> dL/dr, one number per row (..., 1)", "28",
             rmsnorm_d_rstd, rmsnorm_cases, ("d_rstd",), hints=(_d_rstd_hint,), unseen=unseen_rmsnorm),
    Exercise("rmsnorm_backward", "rmsnorm_backward(x, gamma, dout) -> (dx, dgamma)", "28", _rmsnorm_backward,
             rmsnorm_cases, ("dx", "dgamma"), _rmsnorm, ("x", "gamma"), hints=(_rmsnorm_hint, hints.summed_over_rows_hint),
             unseen=unseen_rmsnorm,
             points=2),
    Exercise("rope_backward", "rope_backward(x, offset, dout) -> dx", "28", _rope_backward, _rope_cases, ("dx",),
             _rope, ("x",), hints=(_rope_hint,), unseen=_unseen_rope, points=2),
    Exercise("silu_backward", "silu_backward(gate, dout) -> d_gate", "28", _silu_backward, _silu_cases, ("d_gate",),
             silu, ("gate",), hints=(_silu_hint,), unseen=_unseen_gate, points=2),
    Exercise("swiglu_backward", "swiglu_backward(x, W_gate, W_up, dout) -> (dx, dW_gate, dW_up)", "28",
             _swiglu_backward, swiglu_cases, ("dx", "dW_gate", "dW_up"), _swiglu, ("x", "W_gate", "W_up"),
             hints=(_silu_hint, _swiglu_path_hint, hints.summed_over_rows_hint), unseen=unseen_swiglu, points=2),
    Exercise("repeat_kv_backward", "repeat_kv_backward(k, n_rep, dout) -> dk", "28", _repeat_kv_backward,
             _repeat_kv_cases, ("dk",), _repeat_kv, ("k",), hints=(_repeat_kv_hint,), unseen=_unseen_repeat_kv,
             points=2),
]


# Each derivation's steps, in the order a student takes them (``modern_parts_steps`` holds the later ones).
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "rmsnorm_backward": ("rmsnorm_d_rstd", "rmsnorm_d_mean_square"),
    "rope_backward": ("rope_pair_backward",),
    "swiglu_backward": ("silu_backward", "swiglu_d_gate", "swiglu_d_up"),
}

# npformer's compact forms, shown once the final exercise passes.
TEXTBOOK: dict[str, str] = {
    "rmsnorm_backward": ("dx = r * (g - x_hat * mean(g * x_hat)) with g = dout * gamma, r = 1/sqrt(mean(x^2) + eps), "
                         "x_hat = x * r; dgamma = sum of dout * x_hat over every row"),
    "rope_pair_backward": "d_pair = R(-angle) dout = R(angle)^T dout: (c d0 + s d1, -s d0 + c d1)",
    "rope_backward": ("dx[2i] = dout[2i] cos + dout[2i+1] sin; dx[2i+1] = -dout[2i] sin + dout[2i+1] cos, "
                      "angle = (offset + t) * 10000^(-2i/Dh): the rotation by -angle"),
    "silu_backward": "d_gate = dout * s * (1 + a * (1 - s)), s = sigmoid(a)",
    "swiglu_backward": ("a = x W_gate, b = x W_up, s = sigmoid(a); da = dout * b * s * (1 + a * (1 - s)), "
                        "db = dout * a * s; dW_gate = x^T da, dW_up = x^T db (over every row); "
                        "dx = da W_gate^T + db W_up^T"),
    "repeat_kv_backward": "dk = dout.reshape(B, Hkv, n_rep, T, Dh).sum(axis=2)",
}


# -- the mistakes students make -------------------------------------------------------------------------

def _d_rstd_per_entry(x, gamma, dout):
    return dout * gamma * x


def _d_rstd_without_gain(x, gamma, dout):
    return (dout * x).sum(axis=-1, keepdims=True)


def _rmsnorm_direct_only(x, gamma, dout):
    rstd = _rstd(x)
    return rstd * dout * gamma, (dout * x * rstd).reshape(-1, x.shape[-1]).sum(0)


def _rmsnorm_with_mean_term(x, gamma, dout):
    rstd = _rstd(x)
    g, x_hat = dout * gamma, x * rstd
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return dx, (dout * x_hat).reshape(-1, x.shape[-1]).sum(0)


def _rmsnorm_sum_for_mean(x, gamma, dout):
    rstd = _rstd(x)
    g, x_hat = dout * gamma, x * rstd
    return rstd * (g - x_hat * (g * x_hat).sum(-1, keepdims=True)), (dout * x_hat).reshape(-1, x.shape[-1]).sum(0)


def _rmsnorm_dgain_averaged(x, gamma, dout):
    rstd = _rstd(x)
    g, x_hat = dout * gamma, x * rstd
    dx = rstd * (g - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return dx, (dout * x_hat).reshape(-1, x.shape[-1]).mean(0)


def _rope_backward_forward_turn(x, offset, dout):
    return _turned(dout, offset, +1.0)


def _rope_backward_from_zero(x, offset, dout):
    return _turned(dout, 0, -1.0)


def _silu_backward_sigmoid_only(gate, dout):
    return dout * _sigmoid_only(gate)


def _swiglu_backward_sigmoid_only(x, W_gate, W_up, dout):
    return _swiglu_with(x, W_gate, W_up, dout, _sigmoid_only)


def _swiglu_backward_gate_path_only(x, W_gate, W_up, dout):
    return _swiglu_with(x, W_gate, W_up, dout, silu_slope, up_path=False)


def _repeat_kv_first_only(k, n_rep, dout):
    return dout[:, ::n_rep]


def _repeat_kv_mean(k, n_rep, dout):
    return dout.reshape(k.shape[0], k.shape[1], n_rep, *dout.shape[2:]).mean(axis=2)


def _repeat_kv_tiled(k, n_rep, dout):
    return dout.reshape(k.shape[0], n_rep, k.shape[1], *dout.shape[2:]).sum(axis=1)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("rmsnorm_d_rstd", "not summed over the row", _d_rstd_per_entry, "one number per row"),
    WrongSolution("rmsnorm_d_rstd", "the gamma forgotten", _d_rstd_without_gain, "the gamma is missing"),
    WrongSolution("rmsnorm_backward", "the path through the root forgotten", _rmsnorm_direct_only, "path through the root"),
    WrongSolution("rmsnorm_backward", "layer norm's mean term", _rmsnorm_with_mean_term, "as layer norm's"),
    WrongSolution("rmsnorm_backward", "a sum for the mean in d r / d x", _rmsnorm_sum_for_mean, "1/D"),
    WrongSolution("rmsnorm_backward", "dgamma averaged over the rows", _rmsnorm_dgain_averaged, "a sum over the rows"),
    WrongSolution("rope_backward", "the forward rotation applied to dout", _rope_backward_forward_turn, "quarter turn"),
    WrongSolution("rope_backward", "the cache offset ignored", _rope_backward_from_zero, "offset + t"),
    WrongSolution("silu_backward", "silu' = sigmoid", _silu_backward_sigmoid_only, "is a product"),
    WrongSolution("swiglu_backward", "silu' = sigmoid", _swiglu_backward_sigmoid_only, "is a product"),
    WrongSolution("swiglu_backward", "dx through the gate only", _swiglu_backward_gate_path_only, "both paths"),
    WrongSolution("repeat_kv_backward", "the first query head of each group", _repeat_kv_first_only, "does not change"),
    WrongSolution("repeat_kv_backward", "the mean over the group", _repeat_kv_mean, "n_rep times too small"),
    WrongSolution("repeat_kv_backward", "grouped as numpy.tile", _repeat_kv_tiled, "h // n_rep"),
]
