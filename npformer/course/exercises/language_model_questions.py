"""The checkable parts of lessons 18-19's open questions.

    top_p_filter   lesson 18, question 1: nucleus (top-p) filtering of one vector of logits
    unk_rule       lesson 19, question 3: what English sentences become in a French vocabulary (their
                   share of <unk>), and how well a rule on that share alone tells the languages apart

Each is posed as a function of the question's setting, so its reference is computed here, never stored.
"""

from __future__ import annotations

import numpy

from ...tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from .. import hints
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, size

# -- lesson 18, question 1: top-p ---------------------------------------------------------------------------

def _top_p_filter(logits, p):
    """Every logit outside the nucleus set to -inf: the nucleus is the smallest set of the most probable
    words (of softmax(logits)) whose probabilities sum to at least p."""
    logits = numpy.array(logits, dtype=numpy.float64)
    probabilities = hints.softmax(logits)
    order = numpy.argsort(-probabilities, kind="stable")
    count = min(int(numpy.searchsorted(numpy.cumsum(probabilities[order]), p)) + 1, len(logits))
    filtered = numpy.full_like(logits, -numpy.inf)
    filtered[order[:count]] = logits[order[:count]]
    return filtered


def _clear_p(rng, logits, low, high):
    """A p in [low, high] at least 1e-6 away from every cumulative sum of the sorted probabilities
    (where rounding could decide the size of the nucleus)."""
    cumulative = numpy.cumsum(numpy.sort(hints.softmax(numpy.asarray(logits, dtype=numpy.float64)))[::-1])
    while True:
        p = float(rng.uniform(low, high))
        if numpy.all(numpy.abs(cumulative - p) > 1e-6):
            return p


def _distinct(rng, count, scale=1.0):
    return scale * rng.permutation(count) + rng.uniform(-0.3 * scale, 0.3 * scale, size=count)


def _top_p_cases(rng):
    plain = _distinct(rng, 8, 0.7)
    large = 1000.0 + numpy.array([0.2, -1.1, 0.9, 0.5, -0.4, 1.4])  # the most probable word last
    filtered = _distinct(rng, 7, 1.0)
    filtered[[0, 3, 5]] = -numpy.inf  # removed by top-k before: probability 0, never in the nucleus
    return [Case("V=8, p near 0.9", {"logits": plain, "p": _clear_p(rng, plain, 0.85, 0.95)}),
            Case("V=8, a tiny p: one word, greedy decoding", {"logits": plain, "p": 1e-4}),
            Case("V=6, logits near 1000, p near 0.7", {"logits": large, "p": _clear_p(rng, large, 0.65, 0.75)}),
            Case("V=7, three -inf, p = 0.999", {"logits": filtered, "p": 0.999}),
            Case("V=1: one word, whatever p", {"logits": numpy.array([0.3]), "p": 0.7})]


def _unseen_top_p(rng):
    vocab = size(rng, 1, 12)
    logits = _distinct(rng, vocab, float(rng.uniform(0.3, 2.0))) + rng.uniform(-5, 5)
    if vocab > 2 and rng.random() < 0.5:
        logits[rng.integers(vocab)] = -numpy.inf
    return [Case(f"V={vocab}", {"logits": logits, "p": _clear_p(rng, logits, 0.05, 0.99)})]


def _top_p_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    logits, p = numpy.asarray(inputs["logits"], dtype=numpy.float64), inputs["p"]
    if numpy.any(got[~numpy.isfinite(expected)] == 0):
        return Hint("0 where the answer has -inf: a logit of 0 still gets probability exp(0) / sum after the "
                    "softmax", "-inf is what gives probability 0")
    if numpy.array_equal(got, _top_p_no_shift(logits, p), equal_nan=True):
        return Hint("exp of these logits (near 1000) is inf, and inf / inf is NaN: the probabilities are lost",
                    "subtract the largest logit before exp (the softmax ignores the shift)")
    kept = numpy.isfinite(got)
    mass, count = hints.softmax(logits)[kept].sum(), int(kept.sum())
    right = int(numpy.isfinite(expected).sum())
    if mass < p - 1e-9:
        return Hint(f"the words kept hold probability {mass:.4f}, less than p = {p:.4f}",
                    "the nucleus is the smallest set that reaches p: keep the word whose probability crosses p too")
    if count == right:
        return Hint(f"the right number of words ({count}) but not the most probable ones",
                    "sort the probabilities in decreasing order (argsort of -p) and keep the first ones")
    if count > right:
        return Hint(f"{count} words kept, but {right} of the most probable already hold at least p = {p:.4f}: "
                    "the set is not the smallest", "stop at the first word whose cumulative probability reaches p")
    return ""


# -- lesson 19, question 3: English in a French vocabulary -------------------------------------------------

def _unk_rule(ids, is_english):
    """(mean share of <unk> among the words of the English sentences, the same for the French ones, the
    balanced accuracy of the rule "English when more than half of its words are <unk>")."""
    ids = numpy.asarray(ids)
    words = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)
    share = (ids == UNK_ID).sum(axis=1) / words.sum(axis=1)
    english = numpy.asarray(is_english, dtype=bool)
    said_english = share > 0.5
    balanced = (said_english[english].mean() + (~said_english[~english]).mean()) / 2
    return share[english].mean(), share[~english].mean(), balanced


def _sentences(rows, width):
    """Word ids per row -> (B, width) ids: <bos> words <eos> <pad> ..."""
    ids = numpy.full((len(rows), width), PAD_ID)
    for index, row in enumerate(rows):
        ids[index, : len(row) + 2] = [BOS_ID, *row, EOS_ID]
    return ids


def _unk_cases(rng):
    u = UNK_ID
    first = _sentences([[u, u, 9, u], [u, 14, u, 12, u, u], [7, 8, 9], [u, 10, 11, 12, 13, 14],
                        [15, u, 16, 17, 18, 19, 20]], 9)
    edges = _sentences([[u, 9], [u, u, 8, 7], [u], [9, 10, 11, u, u], [12, u, 13, u]], 7)
    return [Case("B=5, T=9: two English sentences (one short), three French, padded tails",
                 {"ids": first, "is_english": numpy.array([True, True, False, False, False])}),
            Case("B=5, T=7: shares of exactly one half, a sentence of one <unk>; three English, two French",
                 {"ids": edges, "is_english": numpy.array([True, False, True, True, False])})]


def _unseen_unk(rng):
    batch, width = size(rng, 3, 9), size(rng, 4, 12)
    english = rng.random(batch) < 0.5
    english[0], english[1] = True, False
    rows = []
    for is_english in english:
        words = rng.integers(5, 40, size=size(rng, 1, width - 2))
        words[rng.random(len(words)) < (0.7 if is_english else 0.15)] = UNK_ID
        rows.append(words.tolist())
    return [Case(f"B={batch}, T={width}, random sentences", {"ids": _sentences(rows, width), "is_english": english})]


def _unk_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    ids, english = numpy.asarray(inputs["ids"]), numpy.asarray(inputs["is_english"], dtype=bool)
    unknown = (ids == UNK_ID).sum(axis=1)
    words = ((ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)).sum(axis=1)
    side = english if output == "english_share" else ~english
    if output in ("english_share", "french_share"):
        if hints.explains((unknown / ids.shape[1])[side].mean(), got) or \
                hints.explains((unknown / (words + 2))[side].mean(), got):
            return Hint(f"{output} is lower than it should be: a sentence's share would change if more <pad> "
                        "were appended to it, or if it lost its <bos> and <eos>",
                        "count the sentence's words only: not <pad>, <bos> or <eos>")
        if hints.explains(unknown[side].sum() / words[side].sum(), got):
            return Hint(f"{output} weighs a long sentence more than a short one: it is not the mean of the "
                        "sentences' shares", "take each sentence's share first, then their mean")
    if output == "balanced_accuracy":
        share = unknown / words
        if not hints.explains(expected, got) and numpy.any(share == 0.5):
            said = share >= 0.5
            if hints.explains((said[english].mean() + (~said[~english]).mean()) / 2, got):
                return Hint("a sentence whose words are exactly half <unk> is said to be English",
                            "the rule is 'more than half': > 0.5, not >= 0.5")
        if hints.explains(((share > 0.5) == english).mean(), got):
            return Hint("the accuracy moves with how many sentences each language has; the balanced accuracy "
                        "weighs the two languages equally", "the mean of the accuracy on the English sentences "
                        "and the accuracy on the French ones")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("top_p_filter", "top_p_filter(logits, p) -> logits (V,) with every word outside the nucleus set to "
             "-inf", "18", _top_p_filter, _top_p_cases, ("filtered",), exact=True, hints=(_top_p_hint,),
             unseen=_unseen_top_p, question=1),
    Exercise("unk_rule", "unk_rule(ids (B, T), is_english (B,)) -> (english_share, french_share, "
             "balanced_accuracy)", "19", _unk_rule, _unk_cases, ("english_share", "french_share", "balanced_accuracy"),
             hints=(_unk_hint,), unseen=_unseen_unk, question=3),
]


# -- the mistakes students make -----------------------------------------------------------------------------

def _student_probabilities(logits):
    z = numpy.asarray(logits, dtype=float)
    e = numpy.exp(z - z.max())
    return e / e.sum()


def _student_top_p(logits, p, reach=True, descending=True, fill=-numpy.inf, probabilities=None):
    z = numpy.asarray(logits, dtype=float)
    probs = _student_probabilities(z) if probabilities is None else probabilities
    order = numpy.argsort(-probs if descending else probs)
    cumulative = numpy.cumsum(probs[order])
    count = int((cumulative < p).sum()) + (1 if reach else 0)
    out = numpy.full_like(z, fill)
    out[order[:count]] = z[order[:count]]
    return out


def _top_p_below(logits, p):
    return _student_top_p(logits, p, reach=False)  # stops before the word that crosses p


def _top_p_ascending(logits, p):
    return _student_top_p(logits, p, descending=False)


def _top_p_zero(logits, p):
    return _student_top_p(logits, p, fill=0.0)


def _top_p_one_more(logits, p):
    filtered = _student_top_p(logits, p)
    z = numpy.asarray(logits, dtype=float)
    outside = numpy.flatnonzero(~numpy.isfinite(filtered) & numpy.isfinite(z))
    if outside.size:
        best = outside[numpy.argmax(z[outside])]
        filtered[best] = z[best]  # "<= p" where "< p" was meant: one word too many
    return filtered


def _top_p_no_shift(logits, p):
    z = numpy.asarray(logits, dtype=float)
    with numpy.errstate(over="ignore", invalid="ignore"):
        e = numpy.exp(z)
        return _student_top_p(logits, p, probabilities=e / e.sum())


def _student_unk(ids, is_english, words=None, pooled=False, at_half=False, plain=False):
    ids, english = numpy.asarray(ids), numpy.asarray(is_english, dtype=bool)
    words = ((ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)) if words is None else words
    unknown = ids == UNK_ID
    if pooled:
        shares = [unknown[side].sum() / words[side].sum() for side in (english, ~english)]
    share = unknown.sum(axis=1) / words.sum(axis=1)
    if not pooled:
        shares = [share[english].mean(), share[~english].mean()]
    said = share >= 0.5 if at_half else share > 0.5
    accuracy = (said == english).mean() if plain else (said[english].mean() + (~said[~english]).mean()) / 2
    return shares[0], shares[1], accuracy


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("top_p_filter", "stops before the word that crosses p (mass below p)", _top_p_below, "less than p"),
    W("top_p_filter", "sorted in increasing order: the least probable kept", _top_p_ascending, "most probable"),
    W("top_p_filter", "0 instead of -inf", _top_p_zero, "0 where the answer has -inf"),
    W("top_p_filter", "one word too many", _top_p_one_more, "not the smallest"),
    W("top_p_filter", "no max subtracted: exp overflows near 1000", _top_p_no_shift, "inf / inf is NaN"),

    W("unk_rule", "every position counted, <pad> too", lambda ids, is_english: _student_unk(
        ids, is_english, words=numpy.ones(numpy.shape(ids), dtype=bool)), "<pad> were appended"),
    W("unk_rule", "one pooled ratio per language", lambda ids, is_english: _student_unk(
        ids, is_english, pooled=True), "weighs a long sentence more"),
    W("unk_rule", "more than half read as at least half", lambda ids, is_english: _student_unk(
        ids, is_english, at_half=True), "exactly half"),
    W("unk_rule", "plain accuracy, not balanced", lambda ids, is_english: _student_unk(
        ids, is_english, plain=True), "weighs the two languages equally"),
]
