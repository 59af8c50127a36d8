"""The exercises of lesson 17, the encoder-only classifier: the backward passes of masked pooling.

Lesson 17 pools the encoder's outputs into one vector per sentence: the backward passes of the
masked mean and the masked feature-wise maximum (``ops.pooling``), with its conventions: ``mask
(B, T)`` is True at real tokens, and a sentence with no real token pools to zeros and gets a zero
gradient. Each is derived in one step first: the mean's through the masked sum it divides
(``masked_mean_pool_d_sum``), the maximum's through its local derivative ``d out[b, d] / d x[b, t, d]``
(``masked_max_pool_jacobian``: which entry each maximum came from, ties and empty rows included).
"""

from __future__ import annotations

import numpy

from ... import ops
from .. import hints
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout

# -- lesson 17: masked pooling --------------------------------------------------------------------------

def _mean_pool(x, mask):
    return ops.masked_mean_pool_forward(x, mask)[0]


def _mean_pool_backward(x, mask, dout):
    return ops.masked_mean_pool_backward(dout, ops.masked_mean_pool_forward(x, mask)[1])


def _max_pool(x, mask):
    return ops.masked_max_pool_forward(x, mask)[0]


def _max_pool_backward(x, mask, dout):
    return ops.masked_max_pool_backward(dout, ops.masked_max_pool_forward(x, mask)[1])


def _mask(lengths, length):
    """``(B, T)`` boolean, True at the first ``lengths[b]`` positions of row ``b``."""
    return numpy.arange(length)[None, :] < numpy.asarray(lengths)[:, None]


def _untied(rng, batch, length, width):
    """``(B, T, D)`` values whose entries along T differ by at least 0.4 in every (b, d) column, so that
    each maximum is unique and stays unique under the finite differences' steps."""
    ranks = numpy.argsort(rng.random((batch, length, width)), axis=1).astype(numpy.float64)
    return 0.8 * (ranks + rng.uniform(-0.3, 0.3, size=ranks.shape)) + rng.standard_normal((batch, 1, width))


def _pool_cases(forward, untied):
    def cases(rng):
        def make(batch, length, width, lengths, padding_on_top=False):
            def inputs(r):
                x = _untied(r, batch, length, width) if untied else normal(r, batch, length, width)
                mask = _mask(lengths, length)
                if padding_on_top:  # the padded positions hold the largest values: the mask must matter
                    x = numpy.where(mask[..., None], x, x.max() + 1 + r.random(x.shape))
                return {"x": x, "mask": mask}
            return inputs
        return backward_cases(rng, forward, [
            ("B=3, T=4, D=2: a padded tail, a full row and a fully padded row",
             make(3, 4, 2, [2, 4, 0], padding_on_top=True)),
            ("B=1, T=1, D=3: one token", make(1, 1, 3, [1])),
            ("B=2, T=5, D=4: one real token in a row, no padding in the other", make(2, 5, 4, [1, 5])),
        ])
    return cases


def _unseen_pool(forward, untied):
    def cases(rng):
        batch, length, width = size(rng, 1, 4), size(rng, 1, 6), size(rng, 1, 4)
        lengths = rng.integers(0, length + 1, size=batch)
        x = _untied(rng, batch, length, width) if untied else 2 * normal(rng, batch, length, width)
        mask = _mask(lengths, length)
        x = numpy.where(mask[..., None], x, x + rng.uniform(0, 3))  # padding anywhere, sometimes above the maxima
        label = f"B={batch}, T={length}, D={width}, real lengths {[int(n) for n in lengths]}"
        return [Case(label, with_dout(rng, {"x": x, "mask": mask}, forward))]
    return cases


def _pool_pieces(inputs):
    mask = numpy.asarray(inputs["mask"], dtype=bool)
    return inputs["x"], mask, inputs["dout"], mask.sum(axis=1)


def _mean_pool_hint(got, expected, inputs, output):
    """The mean's gradient: a division by T, the mask forgotten, 1/n forgotten, 0/0 at a padded row."""
    if got.shape != expected.shape:
        return ""
    x, mask, dout, counts = _pool_pieces(inputs)
    length = x.shape[1]
    empty = counts == 0
    if empty.any() and not numpy.all(numpy.isfinite(got[empty])):
        return ("NaN or inf in a fully padded row: it has n = 0 real tokens, and the forward pools it to "
                "zeros, a finite output with a finite gradient")
    spread = numpy.broadcast_to(dout[:, None, :], x.shape)
    real = mask[..., None]
    n = numpy.maximum(counts, 1)[:, None, None]
    if hints.explains(spread / length, got) or hints.explains(real * spread / length, got):
        return ("divided by T, the padded length: summed over a row's positions, dx should give back "
                "dout[b] (every real token moved by 1 moves the mean by 1); yours gives n/T of it")
    if hints.explains(spread / n, got):
        return ("gradient at the padded positions: out never reads a padded x[b, t], so moving one "
                "cannot change the loss")
    if hints.explains(real * spread, got):
        return ("summed over a row's positions, dx gives n times dout[b]: that is the gradient of the "
                "masked sum, not of the mean")
    return ""


def _max_pool_hint(got, expected, inputs, output):
    """The maximum's gradient: a fully padded row, the mask forgotten, dout spread over every position."""
    if got.shape != expected.shape:
        return ""
    x, mask, dout, counts = _pool_pieces(inputs)
    empty = counts == 0
    if empty.any() and numpy.any(got[empty] != 0):
        return ("gradient in a fully padded row: it pools to zeros whatever x holds, so no entry of it "
                "moves the output")
    if numpy.any(got[~empty][~mask[~empty]] != 0):
        return "gradient at a padded position: out[b, d] is a maximum over the real tokens only"
    if hints.explains(mask[..., None] * dout[:, None, :], got):
        return ("dout given to every real position: a small change of a token that is not its column's "
                "maximum leaves out unchanged")
    return ""


# -- the steps: through the masked sum, and the maximum's local derivative -------------------------------

def _mean_pool_d_sum(x, mask, dout):
    """dL/ds for s[b] = sum_t mask[b, t] x[b, t] and out[b] = s[b] / max(n[b], 1): (B, D)."""
    return dout / numpy.maximum(numpy.asarray(mask, dtype=bool).sum(axis=1), 1)[:, None]


def _max_pool_jacobian(x, mask):
    """J[b, t, d] = d out[b, d] / d x[b, t, d]: 1 at the first real position of column (b, d) that holds its
    maximum, 0 elsewhere and in a row with no real token: (B, T, D)."""
    mask = numpy.asarray(mask, dtype=bool)
    position = numpy.where(mask[..., None], x, -numpy.inf).argmax(axis=1)          # (B, D)
    jacobian = (numpy.arange(x.shape[1])[None, :, None] == position[:, None, :]).astype(numpy.float64)
    return jacobian * mask.any(axis=1)[:, None, None]


def _without_dout(cases):
    return lambda rng: [Case(case.label, {key: value for key, value in case.inputs.items() if key != "dout"})
                        for case in cases(rng)]


def _jacobian_cases(rng):
    tied = numpy.array([[[0.5, 2.0], [1.5, -1.0], [1.5, 2.0], [-3.0, 0.0]]])          # (1, 4, 2)
    return _without_dout(_pool_cases(_max_pool, untied=True))(rng) + [
        Case("B=1, T=4, D=2: ties for the maximum in both columns", {"x": tied, "mask": _mask([4], 4)})]


def _d_sum_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return (f"shape {got.shape} instead of {expected.shape}: s has one entry per sentence and feature, "
                "like out") if got.shape == inputs["x"].shape else ""
    counts = numpy.asarray(inputs["mask"], dtype=bool).sum(axis=1)
    if (counts == 0).any() and not numpy.all(numpy.isfinite(got[counts == 0])):
        return "NaN or inf in a row with no real token: out = s / max(n, 1) is s itself there"
    if hints.explains(inputs["dout"] / inputs["x"].shape[1], got):
        return "divided by T, the padded length: out divides s by the number of real tokens"
    return ""


def _jacobian_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    mask = numpy.asarray(inputs["mask"], dtype=bool)
    empty = ~mask.any(axis=1)
    if empty.any() and numpy.any(got[empty] != 0):
        return "nonzero in a row with no real token: it pools to zeros whatever x holds"
    if numpy.any(got[~empty][~mask[~empty]] != 0):
        return "nonzero at a padded position: out[b, d] is a maximum over the real tokens only"
    if numpy.any(numpy.abs(got).sum(axis=1)[~empty] > 1 + 1e-9):
        return ("more than one nonzero entry in a column (b, d): out[b, d] is one entry of x[b, :, d] (on a "
                "tie, the first real position that holds the maximum)")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("masked_mean_pool_d_sum", "masked_mean_pool_d_sum(x, mask, dout) -> dL/ds, (B, D): s[b] = sum_t "
             "mask[b, t] x[b, t], the sum the mean divides", "17", _mean_pool_d_sum, _pool_cases(_mean_pool, untied=False),
             ("d_sum",), hints=(_d_sum_hint,), unseen=_unseen_pool(_mean_pool, untied=False)),
    Exercise("masked_mean_pool_backward", "masked_mean_pool_backward(x, mask, dout) -> dx", "17",
             _mean_pool_backward, _pool_cases(_mean_pool, untied=False), ("dx",), _mean_pool, ("x",),
             hints=(_mean_pool_hint,), unseen=_unseen_pool(_mean_pool, untied=False), points=2),
    Exercise("masked_max_pool_jacobian", "masked_max_pool_jacobian(x, mask) -> J, (B, T, D): J[b, t, d] = "
             "d out[b, d] / d x[b, t, d]", "17", _max_pool_jacobian, _jacobian_cases, ("jacobian",),
             hints=(_jacobian_hint,), unseen=_without_dout(_unseen_pool(_max_pool, untied=True))),
    Exercise("masked_max_pool_backward", "masked_max_pool_backward(x, mask, dout) -> dx (no ties in x)", "17",
             _max_pool_backward, _pool_cases(_max_pool, untied=True), ("dx",), _max_pool, ("x",),
             hints=(_max_pool_hint,), unseen=_unseen_pool(_max_pool, untied=True), points=2),
]

# Each backward pass derived in one step first: through the masked sum, through the local derivative.
DERIVATIONS: dict[str, tuple[str, ...]] = {
    "masked_mean_pool_backward": ("masked_mean_pool_d_sum",),
    "masked_max_pool_backward": ("masked_max_pool_jacobian",),
}

# npformer's compact forms, shown once the final exercise passes.
TEXTBOOK: dict[str, str] = {
    "masked_mean_pool_backward": "dx = mask[:, :, None] * dout[:, None, :] / max(n, 1)[:, None, None], "
                                 "n = mask.sum(axis=1)",
    "masked_max_pool_backward": "t* = argmax over t of where(mask, x, -inf) (the first on a tie); dx[b, t*, d] = "
                                "dout[b, d] (np.put_along_axis), 0 elsewhere and in a row with no real token",
}


# -- the mistakes students make -----------------------------------------------------------------------------

def _mean_over_length(x, mask, dout):
    return mask[..., None] * dout[:, None, :] / x.shape[1]


def _mean_zero_by_zero(x, mask, dout):
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return mask[..., None] * dout[:, None, :] / mask.sum(axis=1)[:, None, None]


def _mean_without_mask(x, mask, dout):
    return numpy.broadcast_to(dout[:, None, :] / numpy.maximum(mask.sum(axis=1), 1)[:, None, None], x.shape).copy()


def _lazy_mean(x, mask, dout):
    return ops.masked_mean_pool_backward(dout, ops.masked_mean_pool_forward(x, mask)[1])


def _max_positions(x, mask, use_mask=True):
    scores = numpy.where(mask[..., None], x, -numpy.inf) if use_mask else x
    return scores.argmax(axis=1)  # (B, D)


def _route(x, position, dout):
    dx = numpy.zeros_like(x)
    rows, features = numpy.arange(x.shape[0])[:, None], numpy.arange(x.shape[2])[None, :]
    dx[rows, position, features] = dout
    return dx


def _max_padded_row_fed(x, mask, dout):
    return _route(x, _max_positions(x, mask), dout)  # a fully padded row: argmax of -inf is position 0


def _max_without_mask(x, mask, dout):
    return _route(x, _max_positions(x, mask, use_mask=False), dout * mask.any(axis=1)[:, None])


def _max_spread(x, mask, dout):
    return mask[..., None] * dout[:, None, :]


def _d_sum_zero_by_zero(x, mask, dout):
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return dout / mask.sum(axis=1)[:, None]


def _jacobian_every_tie(x, mask):
    scores = numpy.where(mask[..., None], x, -numpy.inf)
    return (scores == scores.max(axis=1, keepdims=True)).astype(float) * mask.any(axis=1)[:, None, None]


def _jacobian_padded_row_fed(x, mask):
    position = numpy.where(mask[..., None], x, -numpy.inf).argmax(axis=1)
    return (numpy.arange(x.shape[1])[None, :, None] == position[:, None, :]).astype(float)


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("masked_mean_pool_d_sum", "0/0 in a fully padded row", _d_sum_zero_by_zero, "no real token"),
    W("masked_mean_pool_d_sum", "divides by T", lambda x, mask, dout: dout / x.shape[1], "divided by T"),
    W("masked_max_pool_jacobian", "every tied position gets a 1", _jacobian_every_tie, "more than one nonzero"),
    W("masked_max_pool_jacobian", "a fully padded row's position 0 gets a 1", _jacobian_padded_row_fed,
      "no real token"),
    W("masked_mean_pool_backward", "divides by T, the padded length", _mean_over_length, "divided by T"),
    W("masked_mean_pool_backward", "0/0 in a fully padded row", _mean_zero_by_zero, "fully padded row"),
    W("masked_mean_pool_backward", "the mask forgotten in dx", _mean_without_mask, "padded positions"),
    W("masked_mean_pool_backward", "a pass-through to npformer's", _lazy_mean, "npformer's own"),

    W("masked_max_pool_backward", "a fully padded row routed to position 0", _max_padded_row_fed,
      "fully padded row"),
    W("masked_max_pool_backward", "the maximum over every position, padding included", _max_without_mask,
      "padded position"),
    W("masked_max_pool_backward", "dout given to every real position", _max_spread, "every real position"),
]
