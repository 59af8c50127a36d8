"""The variants of lesson 2's backward passes: the linear layer, ReLU and GELU.

The lesson's forms: ``out = x W + b`` (``x (..., d_in)``, ``W (d_in, d_out)``, ``b (d_out,)``);
``relu(x) = max(x, 0)``; ``gelu(x) = x Phi(x)`` with ``Phi`` the standard normal's distribution
function. The linear layer's step, ``linear_row_backward``, is the same backward pass for one row
``x (d_in,)``, which every forward here takes as it is. GELU's step, ``gelu_gate_backward``, is the
backward pass of the gate ``g`` of ``gelu(x) = x g(x)`` alone (``Phi`` in the lesson): each variant
gives its gate as the step's forward. Neither step is an intermediate of the forward, so nothing is
marked with ``node``.
"""

from __future__ import annotations

import numpy

from ...ops.special import erfc
from .base import Family, Variant, keep


def fan_in_scaled(x, W, b, node=keep):
    return x @ W / numpy.sqrt(x.shape[-1]) + b


def column_scaled(x, W, b, node=keep):
    scale = 1.0 / numpy.arange(1, W.shape[1] + 1)   # s_j = 1 / j, j = 1..d_out
    return (x @ W) * scale + b


def input_scaled(x, W, b, node=keep):
    scale = 1.0 / numpy.arange(1, x.shape[-1] + 1)  # a_i = 1 / i, i = 1..d_in
    return (x * scale) @ W + b


def centred_input(x, W, b, node=keep):
    return (x - x.mean(axis=-1, keepdims=True)) @ W + b


LINEAR = Family("linear", ("linear_row_backward", "linear_backward"), (
    Variant("fan-in-scaled", "out = x W / sqrt(d_in) + b", fan_in_scaled),
    Variant("column-scaled", "out = (x W) * s + b, each output column j = 1..d_out scaled by s_j = 1/j",
            column_scaled),
    Variant("input-scaled", "out = (x * a) W + b, each input feature i = 1..d_in scaled by a_i = 1/i",
            input_scaled),
    Variant("centred-input", "out = (x - mean(x)) W + b, the mean over each row's d_in features",
            centred_input)))


def leaky(x, node=keep):
    return numpy.where(x > 0, x, 0.1 * x)


def relu6(x, node=keep):
    return numpy.clip(x, 0.0, 6.0)


def squared(x, node=keep):
    return numpy.maximum(x, 0.0) ** 2


def elu(x, node=keep):
    return numpy.where(x > 0, x, numpy.expm1(numpy.minimum(x, 0.0)))


RELU = Family("relu", ("relu_backward",), (
    Variant("leaky", "leaky_relu(x) = x for x > 0, 0.1 x otherwise", leaky),
    Variant("relu6", "relu6(x) = min(max(x, 0), 6)", relu6),
    Variant("squared", "squared_relu(x) = max(x, 0)^2 (Primer's)", squared),
    Variant("elu", "elu(x) = x for x > 0, exp(x) - 1 otherwise", elu)))


def _sigmoid(z):
    return 0.5 * (1.0 + numpy.tanh(0.5 * z))


def _tanh_gate(x, node=keep):
    return 0.5 * (1.0 + numpy.tanh(numpy.sqrt(2.0 / numpy.pi) * (x + 0.044715 * x ** 3)))


def _quick_gate(x, node=keep):
    return _sigmoid(1.702 * x)


def _mish_gate(x, node=keep):
    return numpy.tanh(numpy.logaddexp(0.0, x))


def _wide_gate(x, node=keep):
    return 0.5 * erfc(-x / (2.0 * numpy.sqrt(2.0)))


def tanh_form(x, node=keep):
    return x * _tanh_gate(x)


def quick(x, node=keep):
    return x * _quick_gate(x)


def mish(x, node=keep):
    return x * _mish_gate(x)


def wide(x, node=keep):
    return x * _wide_gate(x)


def _gated(name, statement, forward, gate):
    return Variant(name, f"{statement}; gelu_gate_backward is the backward pass of that gate g alone",
                   forward, {"gelu_gate_backward": gate})


GELU = Family("gelu", ("gelu_gate_backward", "gelu_backward"), (
    _gated("tanh", "gelu(x) = x g(x), g(x) = (1 + tanh(u)) / 2, u = sqrt(2/pi) (x + 0.044715 x^3): GPT-2's tanh "
                   "form", tanh_form, _tanh_gate),
    _gated("quick", "gelu(x) = x g(x), g(x) = sigmoid(1.702 x): the quick form", quick, _quick_gate),
    _gated("mish", "mish(x) = x g(x), g(x) = tanh(softplus(x)), softplus(x) = log(1 + exp(x))", mish, _mish_gate),
    _gated("wide", "gelu(x) = x g(x), g(x) = Phi(x / 2): the distribution function of a normal of standard "
                   "deviation 2", wide, _wide_gate)))
