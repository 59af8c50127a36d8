"""The auto-graded parts of lesson 24's open questions (its ``## Exercises`` list), each posed as a function
of the question's setting so that its reference is computed here, never stored:

    question 2  batchnorm_padding_normalised_backward(x, keep, dout) -> dx (B, T, D): the backward pass of the
                lesson's ``batch_norm(x, keep)``, which normalises every position, padded ones too, with the
                kept rows' statistics (gamma = 1, beta = 0, eps = 1e-5)
    question 4  padding_share(lengths, batch_of) -> share: the padded share of the positions of batches of
                sentences, each padded to its batch's longest

Questions 1 (how a sentence's output moves with its batch-mates) and 3 (batch norm in training mode on
one position) ask for a measurement's reading and a reason: they keep their rubric, as do question 2's
words (what the padded positions receive, where the sums run) and question 4's reading of its table.
"""

from __future__ import annotations

import numpy

from ...data import pad_rows
from ...tokens import PAD_ID
from .. import hints
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size

EPS = 1e-5  # the lesson's batch_norm's default

# -- question 2: batch norm that normalises the padding too ----------------------------------------------

def _padding_normalised(x, keep):
    """The lesson's batch_norm(x, keep): every position normalised with the statistics of the kept rows."""
    rows = x[keep]
    return (x - rows.mean(axis=0)) / numpy.sqrt(rows.var(axis=0) + EPS)


def _padding_normalised_backward(x, keep, dout):
    """dx (B, T, D): every output reads the statistics, so the sums run over every position, / N kept."""
    rows, count, width = x[keep], keep.sum(), x.shape[-1]
    rstd = 1.0 / numpy.sqrt(rows.var(axis=0) + EPS)
    x_hat = (x - rows.mean(axis=0)) * rstd
    g_sum = dout.reshape(-1, width).sum(axis=0) / count
    gx_sum = (dout * x_hat).reshape(-1, width).sum(axis=0) / count
    return rstd * (dout - keep[..., None] * (g_sum + x_hat * gx_sum))


def _keep(rng, batch, length):
    """Padded tails: each sentence keeps 1 to ``length`` positions."""
    return numpy.arange(length)[None, :] < rng.integers(1, length + 1, size=(batch, 1))


def _inputs(rng, batch, length, width, padded=True):
    keep = _keep(rng, batch, length) if padded else numpy.ones((batch, length), dtype=bool)
    return {"x": 2 * normal(rng, batch, length, width) + 0.5, "keep": keep}


def _padding_normalised_cases(rng):
    return backward_cases(rng, _padding_normalised, [
        ("B=3, T=4, D=2, padded tails", lambda r: _inputs(r, 3, 4, 2)),
        ("B=2, T=3, D=3, no padding", lambda r: _inputs(r, 2, 3, 3, padded=False)),
        ("B=4, T=5, D=1, padded tails", lambda r: _inputs(r, 4, 5, 1))])


def _unseen_padding_normalised(rng):
    batch, length, width = size(rng, 2, 4), size(rng, 2, 6), size(rng, 1, 4)
    return backward_cases(rng, _padding_normalised, [(f"B={batch}, T={length}, D={width}, random padded tails",
                                                      lambda r: _inputs(r, batch, length, width))])


def _sums_over(x, keep, dout, summed, divided_by):
    """The compact form with its two sums over the rows in ``summed`` and divided by ``divided_by``."""
    rows, width = x[keep], x.shape[-1]
    rstd = 1.0 / numpy.sqrt(rows.var(axis=0) + EPS)
    x_hat = (x - rows.mean(axis=0)) * rstd
    g_sum = (dout * summed[..., None]).reshape(-1, width).sum(axis=0) / divided_by
    gx_sum = (dout * x_hat * summed[..., None]).reshape(-1, width).sum(axis=0) / divided_by
    return rstd * (dout - keep[..., None] * (g_sum + x_hat * gx_sum))


def _padding_normalised_hint(got, expected, inputs, output):
    x, keep, dout = inputs["x"], inputs["keep"], inputs["dout"]
    padded = ~keep
    if padded.any() and not numpy.any(got[padded]) and numpy.any(expected[padded]):
        return hints.Hint("dx is zero at the padded positions, yet each padded output depends on its own x "
                          "(finite differences there are not zero)",
                          "a padded position gets its direct term r g_p: no statistic depends on it")
    if padded.any() and hints.explains(_sums_over(x, keep, dout, keep, keep.sum()), got):
        return hints.Hint("dx is right at the padded positions and in the case without padding, wrong at the kept "
                          "positions of a padded batch",
                          "every output reads the statistics: the two sums run over every position, padded ones "
                          "included, still divided by N kept")
    if padded.any() and hints.explains(_sums_over(x, keep, dout, numpy.ones_like(keep), keep.size), got):
        return hints.Hint("dx is right in the case without padding only: with padding, its kept rows are off by "
                          "a factor that depends on how many positions are padded",
                          "the statistics are means over the N kept rows: divide the sums by N, not B T")
    return ""


# -- question 4: the padding share -----------------------------------------------------------------------

def _padding_share(lengths, batch_of):
    """The share of <pad> among all the positions of the batches, each padded by pad_rows to its longest."""
    padded = [pad_rows([[1] * int(length) for length in lengths[batch_of == batch]])
              for batch in numpy.unique(batch_of)]
    return sum(int((ids == PAD_ID).sum()) for ids in padded) / sum(ids.size for ids in padded)


def _share_cases(rng):
    return [Case("7 sentences in 3 batches of 2, 3 and 2",
                 {"lengths": numpy.array([3, 5, 2, 2, 7, 4, 4]), "batch_of": numpy.array([0, 0, 1, 1, 1, 2, 2])}),
            Case("one batch of equal lengths: no padding",
                 {"lengths": numpy.array([6, 6, 6]), "batch_of": numpy.array([0, 0, 0])}),
            Case("batches of 1 and 5 sentences, listed out of order",
                 {"lengths": numpy.array([9, 1, 2, 1, 3, 1]), "batch_of": numpy.array([4, 1, 1, 1, 1, 1])})]


def _unseen_share(rng):
    sentences, batches = size(rng, 2, 60), size(rng, 1, 8)
    return [Case(f"{sentences} sentences in up to {batches} batches",
                 {"lengths": rng.integers(1, 31, size=sentences),
                  "batch_of": rng.integers(0, batches, size=sentences)})]


def _share_hint(got, expected, inputs, output):
    lengths, batch_of = inputs["lengths"], inputs["batch_of"]
    batches = [lengths[batch_of == batch] for batch in numpy.unique(batch_of)]
    per_batch = numpy.mean([(rows.max() - rows).sum() / (rows.max() * rows.size) for rows in batches])
    if hints.explains(per_batch, got) and not hints.explains(expected, got):
        return hints.Hint("share is the mean of the batches' own shares: right only where every batch holds as "
                          "many positions as every other, which these do not",
                          "count the padded positions of all the batches over all their positions")
    padding = sum((rows.max() - rows).sum() for rows in batches)
    if hints.explains(padding / lengths.sum(), got):
        return hints.Hint("share is the padding per real token: it can exceed 1, and a share of the positions "
                          "cannot", "divide by every position, padded ones included")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("batchnorm_padding_normalised_backward",
             "batchnorm_padding_normalised_backward(x, keep, dout) -> dx (B, T, D): the backward pass of the "
             "lesson's batch_norm(x, keep), every position normalised with the kept rows' statistics (keep "
             "(B, T) boolean, eps = 1e-5)", "24", _padding_normalised_backward, _padding_normalised_cases,
             ("dx",), _padding_normalised, ("x",), hints=(_padding_normalised_hint,),
             unseen=_unseen_padding_normalised, points=2, question=2),
    Exercise("padding_share",
             "padding_share(lengths, batch_of) -> float: lengths (N,) of sentences, batch_of (N,) the batch of "
             "each; the share of <pad> among all the batches' positions, each batch padded to its longest", "24",
             _padding_share, _share_cases, ("share",), hints=(_share_hint,), unseen=_unseen_share, question=4),
]

TEXTBOOK: dict[str, str] = {
    "batchnorm_padding_normalised_backward": (
        "r = 1 / sqrt(var + eps) and x_hat = (x - mean) r for every position (mean, var over the N kept rows); "
        "S1 = sum of dout / N and S2 = sum of dout x_hat / N, both over EVERY position (each output reads the "
        "statistics); dx = r (dout - S1 - x_hat S2) at a kept position, r dout at a padded one"),
}


# -- the mistakes students make -------------------------------------------------------------------------

def _padded_zero(x, keep, dout):
    rows, width = x[keep], x.shape[-1]
    rstd = 1.0 / numpy.sqrt(rows.var(axis=0) + EPS)
    x_hat = (x - rows.mean(axis=0)) * rstd
    n = keep.sum()
    g = dout * keep[..., None]
    dx = rstd * (g - (g.reshape(-1, width).sum(0) + x_hat * (g * x_hat).reshape(-1, width).sum(0)) / n)
    return dx * keep[..., None]


def _sums_over_kept(x, keep, dout):
    return _sums_over(x, keep, dout, keep, keep.sum())


def _sums_divided_by_all(x, keep, dout):
    return _sums_over(x, keep, dout, numpy.ones_like(keep), keep.size)


def _mean_of_batch_shares(lengths, batch_of):
    shares = []
    for batch in numpy.unique(batch_of):
        rows = lengths[batch_of == batch]
        shares.append((rows.max() - rows).sum() / (rows.max() * len(rows)))
    return float(numpy.mean(shares))


def _padding_per_token(lengths, batch_of):
    padding = sum((lengths[batch_of == b].max() - lengths[batch_of == b]).sum() for b in numpy.unique(batch_of))
    return padding / lengths.sum()


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("batchnorm_padding_normalised_backward", "the padded positions given no gradient (the exercise's "
                  "batchnorm_backward)", _padded_zero, "zero at the padded positions"),
    WrongSolution("batchnorm_padding_normalised_backward", "the two sums over the kept positions only",
                  _sums_over_kept, "wrong at the kept positions of a padded batch"),
    WrongSolution("batchnorm_padding_normalised_backward", "the sums divided by B T", _sums_divided_by_all,
                  "the case without padding only"),
    WrongSolution("padding_share", "the mean of the batches' shares", _mean_of_batch_shares,
                  "mean of the batches' own shares"),
    WrongSolution("padding_share", "padding per real token", _padding_per_token, "padding per real token"),
]
