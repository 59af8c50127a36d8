"""Batch norm's backward pass in steps (lesson 24): through x_hat, the variance and the mean, as lesson 4
derives layer norm's, with the statistics taken per feature over the kept positions.

    batchnorm_dx_hat  dL/dx_hat, shaped like x (B, T, D): 0 at a padded position, whose output is 0
    batchnorm_dvar    dL/dvar, one number per feature (D,)
    batchnorm_dmean   dL/dmean, one number per feature (D,), directly and through the variance

Each step takes the final exercise's inputs, ``(x, gamma, beta, keep, dout)``, and its cases. The
references are written out here from the forward pass, step by step; the final exercise's reference is
``teacher_forcing_and_batchnorm``'s, which the finite differences check as well.
"""

from __future__ import annotations

import numpy

from ..hints import explains
from .base import Exercise, WrongSolution
from .teacher_forcing_and_batchnorm import (BATCHNORM_EPS, batchnorm_backward_cases, batchnorm_parts,
                                            unseen_batchnorm_backward)


def _centered(x, keep):
    """``x`` minus the kept positions' mean of each feature, at every position: (B, T, D)."""
    return x - x[keep].mean(axis=0)


def _per_feature(values):
    """The sum over every position of a (B, T, D) array: one number per feature, (D,)."""
    return values.reshape(-1, values.shape[-1]).sum(axis=0)


def _batchnorm_dx_hat(x, gamma, beta, keep, dout):
    """dL/dx_hat = dout * gamma at a kept position, 0 at a padded one: (B, T, D)."""
    keep = numpy.asarray(keep, dtype=bool)
    return dout * gamma * keep[..., None]


def _batchnorm_dvar(x, gamma, beta, keep, dout):
    """dL/dvar = sum over the kept positions of dx_hat (x - mean) (-1/2) (var + eps)^(-3/2): (D,)."""
    keep, rstd, _ = batchnorm_parts(x, keep)
    dx_hat = _batchnorm_dx_hat(x, gamma, beta, keep, dout)
    return -0.5 * _per_feature(dx_hat * _centered(x, keep)) * rstd ** 3


def _batchnorm_dmean(x, gamma, beta, keep, dout):
    """dL/dmean: directly, through x - mean in every kept x_hat, and through the variance: (D,)."""
    keep, rstd, _ = batchnorm_parts(x, keep)
    dx_hat = _batchnorm_dx_hat(x, gamma, beta, keep, dout)
    direct = -_per_feature(dx_hat) * rstd
    through_variance = _batchnorm_dvar(x, gamma, beta, keep, dout) * (-2.0 * _centered(x, keep)[keep]).mean(axis=0)
    return direct + through_variance


# -- hints: a property the answer breaks, never the fix ------------------------------------------------

def _padded_share(output):
    """The padded positions' share of the step ``output``'s per-feature sum, had it run over them too."""
    def share(x, gamma, keep, dout):
        rstd = batchnorm_parts(x, keep)[1]
        dx_hat_everywhere = dout * gamma
        if output == "dvar":
            return -0.5 * _per_feature(dx_hat_everywhere * _centered(x, keep) * ~keep[..., None]) * rstd ** 3
        return -_per_feature(dx_hat_everywhere * ~keep[..., None]) * rstd
    return share


def _dx_hat_hint(got, expected, inputs, output):
    keep = numpy.asarray(inputs["keep"], dtype=bool)
    if got.shape != expected.shape or keep.all():
        return ""
    if numpy.abs(got[~keep]).max(initial=0.0) > 0 and explains(expected[keep], got[keep]):
        return ("right at the kept positions, but not 0 at the padded ones: a padded position's output is 0 "
                "whatever its x_hat holds")
    return ""


def _feature_step_hint(path):
    """The hint of the step ``path`` ("dvar" or "dmean"), one number per feature."""
    def hint(got, expected, inputs, output):
        if got.shape != expected.shape:
            return (f"shape {got.shape} instead of {expected.shape}: each feature has one {path[1:]}, shared by "
                    f"every kept position, so dL/d{path[1:]} is one number per feature")
        keep = numpy.asarray(inputs["keep"], dtype=bool)
        factor = next((factor for factor in (2.0, -2.0, 0.5, -0.5) if explains(factor * expected, got)), None)
        if factor is not None:
            return (f"{factor:g} times the right answer in every feature: a constant factor, the rest of the form "
                    "is right")
        if explains(-expected, got):
            return f"the sign: the right answer times -1, in every feature (what does a larger {path[1:]} do to x_hat?)"
        count = int(keep.sum())
        if count > 1 and explains(expected / count, got):
            return (f"1/{count} of the right answer, {count} the number of kept positions: the {path[1:]} reaches "
                    f"every kept output, and each of them adds its share")
        if (~keep).any():
            share = _padded_share(path)(inputs["x"], inputs["gamma"], keep, inputs["dout"])
            if numpy.abs(share).max() > 1e-9 * numpy.abs(expected).max() and explains(expected + share, got):
                return (f"the padded positions' terms are in the sum: their outputs are 0 whatever the {path[1:]} "
                        f"is, and a case without padding passes")
        return ""
    return hint


EXERCISES: list[Exercise] = [
    Exercise("batchnorm_dx_hat", "batchnorm_dx_hat(x, gamma, beta, keep, dout) -> dL/dx_hat, (B, T, D) like x", "24",
             _batchnorm_dx_hat, batchnorm_backward_cases, ("dx_hat",), hints=(_dx_hat_hint,),
             unseen=unseen_batchnorm_backward),
    Exercise("batchnorm_dvar", "batchnorm_dvar(x, gamma, beta, keep, dout) -> dL/dvar, (D,): one per feature", "24",
             _batchnorm_dvar, batchnorm_backward_cases, ("dvar",), hints=(_feature_step_hint("dvar"),),
             unseen=unseen_batchnorm_backward),
    Exercise("batchnorm_dmean", "batchnorm_dmean(x, gamma, beta, keep, dout) -> dL/dmean, (D,): one per feature",
             "24", _batchnorm_dmean, batchnorm_backward_cases, ("dmean",), hints=(_feature_step_hint("dmean"),),
             unseen=unseen_batchnorm_backward),
]

# The order of batch norm's steps, before its final exercise.
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "batchnorm_backward": ("batchnorm_dx_hat", "batchnorm_dvar", "batchnorm_dmean"),
}

# What the grader shows once batchnorm_backward passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "batchnorm_backward": ("dx = r * (g - mean(g) - x_hat * mean(g * x_hat)) at a kept position, 0 at a padded one, "
                           "with g = dout * gamma, r = 1/sqrt(var + eps), the means per feature over the N kept "
                           "positions; dgamma = sum of dout * x_hat, dbeta = sum of dout, over the kept positions"),
}


# -- realistic wrong solutions -------------------------------------------------------------------------

def _dx_hat_everywhere(x, gamma, beta, keep, dout):
    return dout * gamma


def _dvar_without_half(x, gamma, beta, keep, dout):
    rows = x[keep]
    return -(dout * gamma * keep[..., None] * (x - rows.mean(0))).reshape(-1, x.shape[-1]).sum(0) \
        * (rows.var(0) + BATCHNORM_EPS) ** -1.5


def _dvar_over_padding(x, gamma, beta, keep, dout):
    rows = x[keep]
    return -0.5 * (dout * gamma * (x - rows.mean(0))).reshape(-1, x.shape[-1]).sum(0) \
        * (rows.var(0) + BATCHNORM_EPS) ** -1.5


def _dvar_per_position(x, gamma, beta, keep, dout):
    rows = x[keep]
    return -0.5 * dout * gamma * keep[..., None] * (x - rows.mean(0)) * (rows.var(0) + BATCHNORM_EPS) ** -1.5


def _dvar_averaged(x, gamma, beta, keep, dout):
    return _batchnorm_dvar(x, gamma, beta, keep, dout) / keep.sum()


def _dmean_sign(x, gamma, beta, keep, dout):
    rows = x[keep]
    return (dout * gamma * keep[..., None]).reshape(-1, x.shape[-1]).sum(0) / numpy.sqrt(rows.var(0) + BATCHNORM_EPS)


def _dmean_over_padding(x, gamma, beta, keep, dout):
    rows = x[keep]
    return -(dout * gamma).reshape(-1, x.shape[-1]).sum(0) / numpy.sqrt(rows.var(0) + BATCHNORM_EPS)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("batchnorm_dx_hat", "dout * gamma at the padded positions too", _dx_hat_everywhere,
                  "not 0 at the padded ones"),
    WrongSolution("batchnorm_dvar", "the factor -1/2 forgotten", _dvar_without_half,
                  "times the right answer in every feature"),
    WrongSolution("batchnorm_dvar", "the padded positions summed too", _dvar_over_padding,
                  "padded positions' terms"),
    WrongSolution("batchnorm_dvar", "not summed over the positions", _dvar_per_position, "one number per feature"),
    WrongSolution("batchnorm_dvar", "a mean over the kept positions, not a sum", _dvar_averaged,
                  "each of them adds its share"),
    WrongSolution("batchnorm_dmean", "the direct path with the wrong sign", _dmean_sign, "the sign"),
    WrongSolution("batchnorm_dmean", "the padded positions summed too", _dmean_over_padding,
                  "padded positions' terms"),
]
