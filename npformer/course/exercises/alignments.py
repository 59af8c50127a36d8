"""The auto-graded parts of lesson 15's open questions on word alignments: how many pairs of links cross
(question 1), and the alignment error rate of one head's attention over a padded batch (question 3).

A link is ``(english, french)``, token indices, the order of ``npformer.data.Alignment``. The references
call npformer's own ``argmax_links`` and ``metrics.alignment_error_rate``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy

from ... import metrics
from ...tasks.translation.alignment import argmax_links
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, size

# -- question 1: crossing links ----------------------------------------------------------------------------

def _crossing_links(links):
    """links (L, 2) integers, one (english, french) row per link -> how many pairs of links cross: their
    French order is the reverse of their English order."""
    english, french = numpy.asarray(links).reshape(-1, 2).T
    return int(numpy.sum((english[:, None] < english[None, :]) & (french[:, None] > french[None, :])))


def _links_case(label, links):
    return Case(label, {"links": numpy.array(links, dtype=numpy.int64).reshape(-1, 2)})


def _crossing_cases(rng):
    return [
        _links_case("the black cat eats the apple -> le chat noir mange la pomme",
                    [[0, 0], [2, 1], [1, 2], [3, 3], [4, 4], [5, 5], [6, 6]]),
        _links_case("one English word on two French words (ne ... pas) and a reordering",
                    [[0, 0], [1, 1], [1, 3], [2, 2], [3, 5], [4, 4]]),
        _links_case("the order reversed: every pair crosses", [[0, 3], [1, 2], [2, 1], [3, 0]]),
        _links_case("one link", [[2, 0]]),
    ]


def _unseen_crossing(rng):
    english, french = size(rng, 2, 9), size(rng, 2, 9)
    count = size(rng, 2, english * french // 2 + 1)
    cells = rng.choice(english * french, size=count, replace=False)
    return [_links_case(f"{count} links among {english} English and {french} French tokens",
                        numpy.stack([cells // french, cells % french], axis=1))]


def _crossing_hint(got, expected, inputs, output):
    english, french = numpy.asarray(inputs["links"]).reshape(-1, 2).T
    got = int(round(float(numpy.asarray(got))))
    shared = int(numpy.sum(((english[:, None] < english[None, :]) & (french[:, None] == french[None, :]))
                           | ((english[:, None] == english[None, :]) & (french[:, None] > french[None, :]))))
    if got == 2 * expected and expected:
        return Hint("twice the crossings: each pair of links is counted from both of its ends")
    if shared and got == expected + shared:
        return Hint(f"{shared} more than the crossings, as many as the pairs of links that share a word: two "
                    f"links from one word keep their order in neither language, so they do not cross")
    return ""


# -- question 3: one head's alignment error rate -------------------------------------------------------------

def _head_aer(weights, source_lengths, target_lengths, sure, possible):
    """weights (B, Tt, Ts) one head's cross-attention rows (French token i over English token j), padded;
    source_lengths, target_lengths (B,); sure, possible (B, Tt, Ts) booleans, the gold links -> the AER of
    the alignment that links each French token to its largest weight, counted over the batch."""
    hypotheses, golds = [], []
    for b, (n_src, n_tgt) in enumerate(zip(source_lengths, target_lengths)):
        hypotheses.append(argmax_links(weights[b], int(n_src), int(n_tgt)))
        golds.append(SimpleNamespace(sure={(int(j), int(i)) for i, j in numpy.argwhere(sure[b])},
                                     possible={(int(j), int(i)) for i, j in numpy.argwhere(possible[b])}))
    return metrics.alignment_error_rate(hypotheses, golds)


def _aer_inputs(rng, source_lengths, target_lengths, sharpness):
    """A padded batch: rows of real queries softmax over the real keys (sharper with ``sharpness``),
    padding queries' rows too (attention does not mask queries), padded keys weight 0."""
    batch, width, height = len(source_lengths), max(source_lengths), max(target_lengths)
    weights = numpy.zeros((batch, height, width))
    sure = numpy.zeros((batch, height, width), dtype=bool)
    possible = numpy.zeros((batch, height, width), dtype=bool)
    for b, (n_src, n_tgt) in enumerate(zip(source_lengths, target_lengths)):
        scores = sharpness * rng.standard_normal((height, n_src))
        weights[b, :, :n_src] = numpy.exp(scores) / numpy.exp(scores).sum(-1, keepdims=True)
        diagonal = numpy.minimum(numpy.arange(n_tgt) * n_src // n_tgt, n_src - 1)
        sure[b, numpy.arange(n_tgt), diagonal] = True
        weights[b, numpy.arange(n_tgt), diagonal] += rng.random(n_tgt) < 0.5            # a head that half aligns
        possible[b] = sure[b] | ((rng.random((height, width)) < 0.15)
                                 & (numpy.arange(height) < n_tgt)[:, None] & (numpy.arange(width) < n_src)[None])
    return {"weights": weights, "source_lengths": numpy.array(source_lengths),
            "target_lengths": numpy.array(target_lengths), "sure": sure, "possible": possible}


def _aer_cases(rng):
    return [Case("B=1, Ts=6, Tt=7: one pair, no padding", _aer_inputs(rng, [6], [7], 1.0)),
            Case("B=3: lengths (6, 7), (4, 3), (2, 5): padded keys and queries",
                 _aer_inputs(rng, [6, 4, 2], [7, 3, 5], 2.0)),
            Case("B=2: a long pair and a one-word pair", _aer_inputs(rng, [9, 1], [8, 1], 0.5))]


def _unseen_aer(rng):
    batch = size(rng, 2, 5)
    sources, targets = rng.integers(1, 10, size=batch), rng.integers(1, 10, size=batch)
    return [Case(f"B={batch}, source lengths {sources.tolist()}, target lengths {targets.tolist()}",
                 _aer_inputs(rng, sources.tolist(), targets.tolist(), float(rng.uniform(0.3, 3))))]


def _aer_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got))
    if numpy.isclose(got, expected, rtol=1e-9, atol=0):
        return ""
    if numpy.isclose(got, _aer_padded_rows(**inputs), rtol=1e-9):
        return Hint("your AER would be right if every sentence had Tt French tokens: the padded rows of the "
                    "shorter ones weigh in", "link only the first target_lengths[b] rows of sentence b")
    if numpy.isclose(got, _aer_sentence_mean(**inputs), rtol=1e-9):
        return Hint("your AER weighs every sentence the same, whatever its number of links",
                    "sum the counts |A & S|, |A & P|, |A| and |S| over the batch, then divide once")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("crossing_links", "crossing_links(links) -> int: links (L, 2), one (english, french) row per link; "
             "the number of pairs of links that cross", "15", _crossing_links, _crossing_cases, ("crossings",),
             exact=True, hints=(_crossing_hint,), unseen=_unseen_crossing, question=1),
    Exercise("head_aer", "head_aer(weights, source_lengths, target_lengths, sure, possible) -> float: weights "
             "(B, Tt, Ts) padded, lengths (B,), sure and possible (B, Tt, Ts) booleans; the batch's AER of the "
             "argmax alignment", "15", _head_aer, _aer_cases, ("aer",), hints=(_aer_hint,), unseen=_unseen_aer,
             question=3),
]


# -- the mistakes students make (NumPy only: they run where npformer cannot be imported) --------------------

def _crossing_both_ways(links):
    english, french = numpy.asarray(links).reshape(-1, 2).T
    return int(numpy.sum((english[:, None] - english[None, :]) * (french[:, None] - french[None, :]) < 0))


def _crossing_ties(links):
    english, french = numpy.asarray(links).reshape(-1, 2).T
    later, earlier = english[:, None] <= english[None, :], french[:, None] >= french[None, :]
    return int(numpy.sum(later & earlier) - len(english))


def _counts(weights, n_src, rows, sure, possible):
    picked = numpy.zeros(sure.shape, dtype=bool)
    picked[numpy.arange(rows), weights[:rows, :n_src].argmax(axis=-1)] = True
    return rows, int((picked & sure).sum()), int((picked & possible).sum()), int(sure.sum())


def _aer_padded_rows(weights, source_lengths, target_lengths, sure, possible):
    totals = numpy.zeros(4)
    for b, n_src in enumerate(source_lengths):
        totals += _counts(weights[b], n_src, weights.shape[1], sure[b], possible[b])
    proposed, sure_found, possible_found, sure_total = totals
    return 1 - (sure_found + possible_found) / (proposed + sure_total)


def _aer_sentence_mean(weights, source_lengths, target_lengths, sure, possible):
    rates = []
    for b, (n_src, n_tgt) in enumerate(zip(source_lengths, target_lengths)):
        proposed, sure_found, possible_found, sure_total = _counts(weights[b], n_src, n_tgt, sure[b], possible[b])
        rates.append(1 - (sure_found + possible_found) / (proposed + sure_total))
    return float(numpy.mean(rates))


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("crossing_links", "each crossing pair counted twice", _crossing_both_ways, "twice the crossings"),
    WrongSolution("crossing_links", "links that share a word counted as crossing", _crossing_ties, "share a word"),
    WrongSolution("head_aer", "the padded rows linked too", _aer_padded_rows, "padded rows"),
    WrongSolution("head_aer", "the mean of the sentences' AERs", _aer_sentence_mean, "every sentence the same"),
]
