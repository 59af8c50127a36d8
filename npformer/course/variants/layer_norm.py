"""Layer norm's variants (lesson 4): the same three paths (through x_hat, the variance and the mean),
each with a change a textbook could have made.

The lesson's form, row by row over the last axis (D entries)::

    mean = sum_i x_i / D,  var = sum_i (x_i - mean)^2 / D,  x_hat = (x - mean) / sqrt(var + eps)
    y = gamma * x_hat + beta,  eps = 1e-5

Each forward marks ``mean``, ``var`` and ``x_hat`` with ``node``: the steps ``layernorm_dvar`` and
``layernorm_dmean`` are the gradients with respect to them. ``dL/dx_hat`` is ``dout * gamma`` in
every variant here but AdaNorm's, so ``layernorm_dx_hat`` is practice under variants.
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep

EPS = 1e-5


def _statistics(x, node, divisor):
    mean = node("mean", x.mean(axis=-1, keepdims=True))
    var = node("var", ((x - mean) ** 2).sum(axis=-1, keepdims=True) / divisor)
    return mean, var


def unbiased(x, gamma, beta, node=keep):
    mean, var = _statistics(x, node, x.shape[-1] - 1)
    x_hat = node("x_hat", (x - mean) / numpy.sqrt(var + EPS))
    return gamma * x_hat + beta


def eps_outside(x, gamma, beta, node=keep):
    mean, var = _statistics(x, node, x.shape[-1])
    x_hat = node("x_hat", (x - mean) / (numpy.sqrt(var) + 0.01))
    return gamma * x_hat + beta


def adanorm(x, gamma, beta, node=keep):
    mean, var = _statistics(x, node, x.shape[-1])
    x_hat = node("x_hat", (x - mean) / numpy.sqrt(var + EPS))
    return gamma * (1 - 0.1 * x_hat) * x_hat + beta


def sum_of_squares(x, gamma, beta, node=keep):
    mean, var = _statistics(x, node, 1)
    x_hat = node("x_hat", (x - mean) / numpy.sqrt(var + EPS))
    return gamma * x_hat + beta



LAYER_NORM = Family(
    "layernorm", ("layernorm_dx_hat", "layernorm_dvar", "layernorm_dmean", "layernorm_backward"),
    (Variant("unbiased", "var = sum_i (x_i - mean)^2 / (D - 1), the unbiased variance; the rest as in the lesson",
             unbiased),
     Variant("eps-outside", "x_hat = (x - mean) / (sqrt(var) + eps') with eps' = 0.01 outside the root (in place "
                            "of the eps argument); the rest as in the lesson", eps_outside),
     Variant("adanorm", "y = gamma * (1 - k x_hat) * x_hat + beta with k = 0.1 (AdaNorm); mean, var, x_hat as in "
                        "the lesson", adanorm),
     Variant("sum-of-squares", "var = sum_i (x_i - mean)^2, the sum, not the mean (so x_hat has unit norm); the "
                               "rest as in the lesson", sum_of_squares)),
    nodes={"layernorm_dx_hat": "x_hat", "layernorm_dvar": "var", "layernorm_dmean": "mean"},
    practice=("layernorm_dx_hat",))
