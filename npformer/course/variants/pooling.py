"""The variants of lesson 17's masked pooling: the mean's and the maximum's backward passes.

The lesson's forms, over the real positions of each row (``mask (B, T)`` True at a real token,
``n`` of them; a row of padding only pools to zeros)::

    mean:  out[b] = sum_t mask[b, t] x[b, t] / n          max:  out[b, d] = max over real t of x[b, t, d]

The mean's step differentiates the sum its forward divides (``node("sum", ...)``, the numerator); the
maximum's step is its local derivative ``d out[b, d] / d x[b, t, d]``, the gradient of ``sum(out)``
with respect to ``x`` (each column pools on its own), which every variant changes.
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep


def _counts(mask):
    return mask.sum(axis=1, keepdims=True)                                   # (B, 1)


def _masked_sum(x, mask, node):
    return node("sum", (x * mask[..., None]).sum(axis=1))                    # s (B, D)


def root_n(x, mask, node=keep):
    return _masked_sum(x, mask, node) / numpy.sqrt(numpy.maximum(_counts(mask), 1))


def plus_one(x, mask, node=keep):
    return _masked_sum(x, mask, node) / (_counts(mask) + 1)


def _weighted(x, mask, weights, node):
    weights = mask * weights                                                 # (B, T): 0 at padding
    total = weights.sum(axis=1, keepdims=True)
    return node("sum", (x * weights[..., None]).sum(axis=1)) / numpy.where(total > 0, total, 1.0)


def position_weighted(x, mask, node=keep):
    return _weighted(x, mask, numpy.arange(1, x.shape[1] + 1), node)         # w_t = t + 1


def decayed(x, mask, node=keep):
    return _weighted(x, mask, 0.8 ** numpy.arange(x.shape[1]), node)         # w_t = 0.8^t


def _with_head(variant):
    """The variant, its forward also given for the classifier head (lesson 17's head on this pool: a linear
    layer, then the mean cross-entropy over the sentences)."""
    def head(x, mask, W, b, labels, node=keep):
        logits = variant.forward(x, mask) @ W + b                            # (B, C)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - numpy.log(numpy.exp(shifted).sum(axis=-1, keepdims=True))
        return -numpy.take_along_axis(log_probs, numpy.asarray(labels)[:, None], axis=-1).mean()
    return Variant(variant.name, variant.statement, variant.forward, {"classifier_head_backward": head})


MEAN_POOL = Family("masked_mean_pool", ("masked_mean_pool_d_sum", "masked_mean_pool_backward",
                                        "classifier_head_backward"), tuple(_with_head(variant) for variant in (
    Variant("root-n", "out[b] = s[b] / sqrt(max(n, 1)), s[b] = sum over real t of x[b, t]", root_n),
    Variant("plus-one", "out[b] = s[b] / (n + 1), s[b] = sum over real t of x[b, t]: a smoothed mean", plus_one),
    Variant("position-weighted", "out[b] = s[b] / sum w_t, s[b] = sum over real t of w_t x[b, t], with "
                                 "w_t = t + 1 (t = 0..T-1; the sums over real t)", position_weighted),
    Variant("decayed", "out[b] = s[b] / sum w_t, s[b] = sum over real t of w_t x[b, t], with w_t = 0.8^t "
                       "(t = 0..T-1; the sums over real t): earlier tokens count more", decayed))),
    nodes={"masked_mean_pool_d_sum": "sum"})


def _real(x, mask, fill):
    return numpy.where(mask[..., None], x, fill)


def _empty_rows_zero(out, mask):
    return numpy.where(mask.any(axis=1)[:, None], out, 0.0)


def log_sum_exp(x, mask, node=keep):
    top = _real(x, mask, -numpy.inf).max(axis=1, keepdims=True)
    top = numpy.where(numpy.isfinite(top), top, 0.0)
    total = numpy.where(mask[..., None], numpy.exp(2.0 * (x - top)), 0.0).sum(axis=1)
    with numpy.errstate(divide="ignore"):
        return _empty_rows_zero(top[:, 0] + numpy.log(numpy.maximum(total, 1e-300)) / 2.0, mask)


def top_two(x, mask, node=keep):
    ordered = numpy.sort(_real(x, mask, -numpy.inf), axis=1)
    second = numpy.where(numpy.isfinite(ordered[:, -2]), ordered[:, -2], ordered[:, -1]) \
        if x.shape[1] > 1 else ordered[:, -1]
    return _empty_rows_zero(numpy.nan_to_num((ordered[:, -1] + second) / 2.0, neginf=0.0), mask)


def largest_magnitude(x, mask, node=keep):
    where = numpy.argmax(_real(numpy.abs(x), mask, -1.0), axis=1)            # (B, D)
    return _empty_rows_zero(numpy.take_along_axis(x, where[:, None, :], axis=1)[:, 0], mask)


def minimum(x, mask, node=keep):
    return _empty_rows_zero(numpy.nan_to_num(_real(x, mask, numpy.inf).min(axis=1), posinf=0.0), mask)


MAX_POOL = Family("masked_max_pool", ("masked_max_pool_jacobian", "masked_max_pool_backward"), (
    Variant("log-sum-exp", "out[b, d] = log(sum over real t of exp(2 x[b, t, d])) / 2: a smooth "
                           "maximum", log_sum_exp),
    Variant("top-two", "out[b, d] = the mean of the two largest x[b, t, d] over real t (the largest "
                       "alone when the row has one real token)", top_two),
    Variant("largest-magnitude", "out[b, d] = the x[b, t, d] of largest |x[b, t, d]| over real t, "
                                 "with its sign", largest_magnitude),
    Variant("minimum", "out[b, d] = min over real t of x[b, t, d]", minimum)),
    nodes={"masked_max_pool_jacobian": "x"})
