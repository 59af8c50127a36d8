"""The exercises of lesson 17, the encoder-only classifier: the backward passes of masked pooling.

Lesson 17 pools the encoder's outputs into one vector per sentence: the backward passes of the
masked mean and the masked feature-wise maximum (``ops.pooling``), with its conventions: ``mask
(B, T)`` is True at real tokens, and a sentence with no real token pools to zeros and gets a zero
gradient.
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
        return ("NaN or inf in a fully padded row: its number of real tokens is n = 0, so dividing by n "
                "gives 0/0; such a row pools to zeros and gets zero gradient (divide by max(n, 1))")
    spread = numpy.broadcast_to(dout[:, None, :], x.shape)
    real = mask[..., None]
    n = numpy.maximum(counts, 1)[:, None, None]
    if hints.explains(spread / length, got) or hints.explains(real * spread / length, got):
        return ("divided by T, the padded length: the mean is over the n real tokens of each row, so "
                "dx = mask * dout / n")
    if hints.explains(spread / n, got):
        return ("gradient at the padded positions: padding does not enter the mean, so its gradient is 0 "
                "(multiply by the mask)")
    if hints.explains(real * spread, got):
        return "the 1/n is missing: that is the gradient of the masked sum, not of the mean"
    return ""


def _max_pool_hint(got, expected, inputs, output):
    """The maximum's gradient: a fully padded row, the mask forgotten, dout spread over every position."""
    if got.shape != expected.shape:
        return ""
    x, mask, dout, counts = _pool_pieces(inputs)
    empty = counts == 0
    if empty.any() and numpy.any(got[empty] != 0):
        return ("gradient in a fully padded row: it pools to zeros, whatever x holds, so its gradient is 0 "
                "(the argmax of a row of -inf is position 0, which is not a maximum)")
    if numpy.any(got[~empty][~mask[~empty]] != 0):
        return ("gradient at a padded position: the maximum is over the real tokens only (set the padded "
                "positions to -inf before the argmax)")
    if hints.explains(mask[..., None] * dout[:, None, :], got):
        return ("dout given to every real position: only the position each maximum came from gets it, "
                "the others get 0")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("masked_mean_pool_backward", "masked_mean_pool_backward(x, mask, dout) -> dx", "17",
             _mean_pool_backward, _pool_cases(_mean_pool, untied=False), ("dx",), _mean_pool, ("x",),
             hints=(_mean_pool_hint,), unseen=_unseen_pool(_mean_pool, untied=False), points=2),
    Exercise("masked_max_pool_backward", "masked_max_pool_backward(x, mask, dout) -> dx (no ties in x)", "17",
             _max_pool_backward, _pool_cases(_max_pool, untied=True), ("dx",), _max_pool, ("x",),
             hints=(_max_pool_hint,), unseen=_unseen_pool(_max_pool, untied=True), points=2),
]


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


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
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
