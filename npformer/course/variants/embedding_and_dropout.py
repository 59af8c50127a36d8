"""The variants of the embedding's backward pass (lesson 5) and dropout's (lesson 9).

The lessons' forms: ``out[b, t] = W[ids[b, t]]`` (``ids (B, T)``, ``W (V, D)``); dropout
``out = x * keep / (1 - p)`` with ``keep`` the kept entries (True or False) and ``p`` the drop rate.
The embedding's step, ``embedding_one_hot`` (the one-hot array ``O`` of the ids, ``W[ids] = O W``), is
not in the family: it is a forward, the same in every variant, graded as the lesson poses it (as the
positional encoding is), not a gradient a variant's forward could give.
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep as plain


def scaled_by_sqrt_d(ids, W, node=plain):
    return W[ids] * numpy.sqrt(W.shape[1])


def unit_norm(ids, W, node=plain):
    rows = W[ids]
    return rows / numpy.sqrt((rows * rows).sum(axis=-1, keepdims=True))


def centred(ids, W, node=plain):
    return W[ids] - W.mean(axis=0)


def position_weighted(ids, W, node=plain):
    weights = numpy.arange(1, ids.shape[-1] + 1) / ids.shape[-1]   # (T,): (t + 1) / T
    return W[ids] * weights[:, None]


EMBEDDING = Family("embedding", ("embedding_backward",), (
    Variant("scaled-by-sqrt-d", "out[b, t] = sqrt(D) W[ids[b, t]] (the Transformer paper's scale)",
            scaled_by_sqrt_d),
    Variant("unit-norm", "out[b, t] = W[ids[b, t]] / ||W[ids[b, t]]||: each looked-up row scaled to "
                         "length 1", unit_norm),
    Variant("centred", "out[b, t] = W[ids[b, t]] - mean_v W[v]: the table's mean row (over all V rows) "
                       "taken off", centred),
    Variant("position-weighted", "out[b, t] = W[ids[b, t]] (t + 1) / T: position t = 0..T-1 of T "
                                 "weighted", position_weighted)))


def unscaled(x, keep, p, node=plain):
    return x * keep


def sqrt_scaled(x, keep, p, node=plain):
    return x * keep / numpy.sqrt(1.0 - p)


def soft(x, keep, p, node=plain):
    return x * (keep + 0.1 * (1 - keep)) / (1.0 - 0.9 * p)


def by_kept_fraction(x, keep, p, node=plain):
    kept = keep.mean(axis=-1, keepdims=True)
    return x * keep / numpy.where(kept > 0, kept, 1.0)


DROPOUT = Family("dropout", ("dropout_backward",), (
    Variant("unscaled", "out = x * keep: no 1/(1 - p) (the scale is applied at inference instead)",
            unscaled),
    Variant("sqrt-scaled", "out = x * keep / sqrt(1 - p)", sqrt_scaled),
    Variant("soft", "out = x * (keep + 0.1 (1 - keep)) / (1 - 0.9 p): a dropped entry keeps a tenth of "
                    "itself", soft),
    Variant("by-kept-fraction", "out = x * keep / f, f the fraction of entries kept in x's row (over the "
                                "last axis; f = 1 when none is)", by_kept_fraction)))
