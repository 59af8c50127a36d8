"""The variants of lesson 28's modern parts: RMSNorm (through 1/rms), rotary positions, the SwiGLU
unit (through SiLU) and grouped-query attention's shared heads.

The lesson's forms::

    rmsnorm:    m = mean_i x_i^2, r = 1 / sqrt(m + eps),  y = gamma * x * r   (eps = 1e-5; the steps: dL/dr,
                practice under variants: dL/dr = sum_i dout_i gamma_i x_i whatever r is, but for one; dL/dm)
    rope:       pairs (x[2i], x[2i+1]) turned by (offset + t) * 10000^(-2i/Dh)  (the step: one pair turned by
                a given angle, the same in every variant: practice)
    swiglu:     y = silu(a) * b, a = x W_gate, b = x W_up, silu(a) = a sigmoid(a)  (the steps: silu's backward,
                dL/da, dL/db)
    repeat_kv:  each of the Hkv heads of k copied n_rep times in a row: (B, Hkv * n_rep, T, Dh)
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep

EPS = 1e-5


def _rms_output(x, gamma, rstd, node, gain_plus_one=False):
    rstd = node("rstd", rstd)
    return (1 + gamma if gain_plus_one else gamma) * x * rstd


def _mean_square(x, node):
    return node("mean_square", (x * x).mean(axis=-1, keepdims=True))             # m (..., 1)


def rms_eps_outside(x, gamma, node=keep):
    return _rms_output(x, gamma, 1.0 / (numpy.sqrt(_mean_square(x, node)) + 0.01), node)


def rms_gain_plus_one(x, gamma, node=keep):
    return _rms_output(x, gamma, 1.0 / numpy.sqrt(_mean_square(x, node) + EPS), node, True)


def mean_absolute(x, gamma, node=keep):
    return _rms_output(x, gamma, 1.0 / (node("mean_square", numpy.abs(x).mean(axis=-1, keepdims=True)) + EPS), node)


def partial(x, gamma, node=keep):
    first = x[..., : (x.shape[-1] + 1) // 2]
    return _rms_output(x, gamma, 1.0 / numpy.sqrt(_mean_square(first, node) + EPS), node)


RMS_NORM = Family("rmsnorm", ("rmsnorm_d_rstd", "rmsnorm_d_mean_square", "rmsnorm_backward"), (
    Variant("eps-outside", "r = 1 / (sqrt(m) + eps') with eps' = 0.01 outside the root (in place of the lesson's "
                           "eps); m = mean_i x_i^2 as in the lesson",
            rms_eps_outside),
    Variant("gain-plus-one", "y = (1 + gamma) * x * r (Gemma's gain, 1 when gamma = 0); m and r as in the lesson",
            rms_gain_plus_one),
    Variant("mean-absolute", "r = 1 / (m + eps) with m = mean_i |x_i|: the mean absolute value, not the mean "
                             "square (the step's m is this one)", mean_absolute),
    Variant("partial", "m = the mean of x_i^2 over the first ceil(D/2) entries only (partial RMSNorm), "
                       "r = 1 / sqrt(m + eps); y = gamma * x * r over all D", partial)),
    nodes={"rmsnorm_d_rstd": "rstd", "rmsnorm_d_mean_square": "mean_square"}, practice=("rmsnorm_d_rstd",))


def _angles(length, head_dim, offset, base=10000.0, stretch=1.0):
    positions = (offset + numpy.arange(length)) / stretch                              # (T,)
    return positions[:, None] * base ** (-numpy.arange(0, head_dim, 2) / head_dim)     # (T, Dh/2)


def _turn(first, second, angles, sign=1.0):
    cos, sin = numpy.cos(angles), sign * numpy.sin(angles)
    return first * cos - second * sin, first * sin + second * cos


def _interleaved(x, angles, sign=1.0):
    turned = numpy.empty_like(x)
    turned[..., 0::2], turned[..., 1::2] = _turn(x[..., 0::2], x[..., 1::2], angles, sign)
    return turned


def base_100(x, offset, node=keep):
    return _interleaved(x, _angles(x.shape[-2], x.shape[-1], offset, base=100.0))


def half_split(x, offset, node=keep):
    half = x.shape[-1] // 2
    first, second = _turn(x[..., :half], x[..., half:], _angles(x.shape[-2], x.shape[-1], offset))
    return numpy.concatenate([first, second], axis=-1)


def reversed_frequencies(x, offset, node=keep):
    return _interleaved(x, _angles(x.shape[-2], x.shape[-1], offset)[:, ::-1])


def interpolated(x, offset, node=keep):
    return _interleaved(x, _angles(x.shape[-2], x.shape[-1], offset, stretch=4.0))


def rotate_pair(pair, angle, node=keep):
    """One pair (..., 2) turned by ``angle`` (...): the step every variant shares (only the angles and
    the pairing change)."""
    first, second = _turn(pair[..., 0], pair[..., 1], angle)
    return numpy.stack([first, second], axis=-1)


def _rope_variant(name, statement, forward):
    return Variant(name, statement, forward, {"rope_pair_backward": rotate_pair})


ROPE = Family("rope", ("rope_pair_backward", "rope_backward"), (
    _rope_variant("base-100", "the angles (offset + t) * 100^(-2i/Dh): base 100, not 10000", base_100),
    _rope_variant("half-split", "pair i is (x[i], x[i + Dh/2]), not (x[2i], x[2i+1]) (GPT-NeoX's layout); the "
                                "angles as in the lesson", half_split),
    _rope_variant("reversed-frequencies", "pair i turns at the frequency of pair Dh/2 - 1 - i: the angles "
                                          "(offset + t) * 10000^(-2(Dh/2 - 1 - i)/Dh), the slowest pair first",
                  reversed_frequencies),
    _rope_variant("interpolated", "the angles ((offset + t) / 4) * 10000^(-2i/Dh): positions interpolated by 4",
                  interpolated)),
    practice=("rope_pair_backward",))


def _sigmoid(z):
    return 0.5 * (1.0 + numpy.tanh(0.5 * z))


ACTIVATIONS = {  # variant -> (its activation phi(a), its statement)
    "swish-2": (lambda a: a * _sigmoid(2.0 * a), "phi(a) = a sigmoid(2a) (Swish with beta = 2)"),
    "glu": (_sigmoid, "phi(a) = sigmoid(a) (the original GLU's gate)"),
    "mish": (lambda a: a * numpy.tanh(numpy.logaddexp(0.0, a)), "phi(a) = a tanh(log(1 + exp(a))) (Mish)"),
    "squared-relu": (lambda a: numpy.maximum(a, 0.0) ** 2, "phi(a) = max(a, 0)^2 (ReGLU's gate squared)"),
}


def _swiglu_variant(name):
    phi, words = ACTIVATIONS[name]

    def unit(x, W_gate, W_up, node=keep):
        return phi(node("gate", x @ W_gate)) * node("up", x @ W_up)

    def gate(gate, node=keep):
        return phi(gate)

    def sublayer(x, W_gate, W_up, W_down, node=keep):
        return x + unit(x, W_gate, W_up) @ W_down                              # the sublayer and its residual path
    return Variant(name, f"silu is replaced by {words}: silu_backward is phi's, y = phi(x W_gate) * "
                         "(x W_up)", unit, {"silu_backward": gate, "swiglu_ffn_backward": sublayer})


SWIGLU = Family("swiglu", ("silu_backward", "swiglu_d_gate", "swiglu_d_up", "swiglu_backward", "swiglu_ffn_backward"),
                tuple(_swiglu_variant(name) for name in ACTIVATIONS), nodes={"swiglu_d_gate": "gate", "swiglu_d_up": "up"})


def _copies(k, n_rep, weights, tiled=False):
    """k's heads copied n_rep times (in a row, or as a block when ``tiled``), copy r = 1..n_rep times
    ``weights[r-1]``."""
    heads = k.shape[1]
    if tiled:
        return numpy.tile(k, (1, n_rep, 1, 1)) * numpy.repeat(weights, heads)[None, :, None, None]
    return numpy.repeat(k, n_rep, axis=1) * numpy.tile(weights, heads)[None, :, None, None]


def weighted(k, n_rep, node=keep):
    return _copies(k, n_rep, numpy.arange(1, n_rep + 1) / n_rep)


def tiled_weighted(k, n_rep, node=keep):
    return _copies(k, n_rep, numpy.arange(1, n_rep + 1) / n_rep, tiled=True)


def sqrt_scaled(k, n_rep, node=keep):
    return _copies(k, n_rep, numpy.full(n_rep, 1 / numpy.sqrt(n_rep)))


def reverse_weighted(k, n_rep, node=keep):
    return _copies(k, n_rep, numpy.arange(n_rep, 0, -1) / n_rep)


REPEAT_KV = Family("repeat_kv", ("repeat_kv_backward",), (
    Variant("weighted", "each head copied n_rep times in a row, copy r = 1..n_rep multiplied by r / n_rep",
            weighted),
    Variant("tiled-weighted", "the heads copied as a block n_rep times (head h is k's h mod Hkv), "
                              "block r = 1..n_rep multiplied by r / n_rep", tiled_weighted),
    Variant("sqrt-scaled", "each head copied n_rep times in a row, every copy divided by sqrt(n_rep)",
            sqrt_scaled),
    Variant("reverse-weighted", "each head copied n_rep times in a row, copy r = 1..n_rep multiplied by "
                                "(n_rep - r + 1) / n_rep", reverse_weighted)))
