"""Batch norm's variants (lesson 24): layer norm's changes made across the batch, with the same three
paths (through x_hat, the variance and the mean).

The lesson's form, per feature over the ``N`` kept positions (``keep (B, T)`` True at a real token;
a padded position's output is 0)::

    mean = sum_n x_n / N,  var = sum_n (x_n - mean)^2 / N,  x_hat = (x - mean) / sqrt(var + eps)
    y = gamma * x_hat + beta,  eps = 1e-5

Each forward marks ``mean`` and ``var`` (each ``(D,)``) and ``x_hat`` (``(B, T, D)``) with ``node``: the
steps ``batchnorm_dvar``, ``batchnorm_dmean`` and ``batchnorm_dx_hat`` are the gradients with respect
to them. ``dL/dx_hat`` is the lesson's under eps-outside and sum-of-squares, so ``batchnorm_dx_hat`` is
practice under variants.
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep as plain

EPS = 1e-5


def _normalised(x, keep, node, divisor, eps_outside=False):
    rows = x[keep]                                                     # (N, D): the kept positions
    mean = node("mean", rows.mean(axis=0))
    var = node("var", ((rows - mean) ** 2).sum(axis=0) / divisor(len(rows)))
    root = numpy.sqrt(var) + 0.01 if eps_outside else numpy.sqrt(var + EPS)
    return node("x_hat", (x - mean) / root)


def _kept(out, keep):
    return numpy.where(keep[..., None], out, 0.0)


def eps_outside(x, gamma, beta, keep, node=plain):
    keep = numpy.asarray(keep, dtype=bool)
    return _kept(gamma * _normalised(x, keep, node, lambda n: n, eps_outside=True) + beta, keep)


def adanorm(x, gamma, beta, keep, node=plain):
    keep = numpy.asarray(keep, dtype=bool)
    x_hat = _normalised(x, keep, node, lambda n: n)
    return _kept(gamma * (1 - 0.1 * x_hat) * x_hat + beta, keep)


def sum_of_squares(x, gamma, beta, keep, node=plain):
    keep = numpy.asarray(keep, dtype=bool)
    return _kept(gamma * _normalised(x, keep, node, lambda n: 1) + beta, keep)


def gain_plus_one(x, gamma, beta, keep, node=plain):
    keep = numpy.asarray(keep, dtype=bool)
    return _kept((1 + gamma) * _normalised(x, keep, node, lambda n: n) + beta, keep)


BATCH_NORM = Family(
    "batchnorm", ("batchnorm_dx_hat", "batchnorm_dvar", "batchnorm_dmean", "batchnorm_backward"), (
        Variant("eps-outside", "x_hat = (x - mean) / (sqrt(var) + eps') with eps' = 0.01 outside the root (in place "
                               "of the lesson's eps)",
                eps_outside),
        Variant("adanorm", "y = gamma * (1 - k x_hat) * x_hat + beta with k = 0.1 (AdaNorm's form)", adanorm),
        Variant("sum-of-squares", "var = sum_n (x_n - mean)^2 over the kept positions: the sum, not the mean",
                sum_of_squares),
        Variant("gain-plus-one", "y = (1 + gamma) * x_hat + beta: a gain that starts at 1 when gamma = 0",
                gain_plus_one)),
    nodes={"batchnorm_dx_hat": "x_hat", "batchnorm_dvar": "var", "batchnorm_dmean": "mean"},
    practice=("batchnorm_dx_hat",))
