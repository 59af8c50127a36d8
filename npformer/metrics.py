"""Corpus BLEU (Papineni et al., 2002), written to agree with sacreBLEU's default ``corpus_bleu``.

For hypotheses ``h`` and references ``r`` (detokenised strings), after the
``13a`` tokenisation of the WMT ``mteval-v13a`` script::

    p_n  = sum over sentences of clipped n-gram matches / sum of hypothesis n-grams
           (an n-gram counts at most as often as in the reference that has most of it)
    BP   = 1 if c >= r else exp(1 - r / c)     c = hypothesis length, r = reference length
                                               (per sentence, the closest reference; ties: shorter)
    BLEU = 100 * BP * exp(mean over n = 1..4 of log p_n)

Smoothing ``exp`` (sacreBLEU's default, the NIST ``mteval`` one): the k-th
order with no match at all gets ``p_n = 1 / (2^k * total_n)`` instead of 0.
An order with no hypothesis n-gram at all makes the score 0, and so does a hypothesis with no
n-gram in common with its references (no smoothing then).

``sentence_bleu`` scores one sentence as sacreBLEU's ``sentence_bleu`` does: the same counts and
smoothing, with the *effective order*: the mean runs over the orders the hypothesis has n-grams of
(a three-word sentence has no 4-gram), so a short exact translation scores 100, not 0.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

_13A_RULES = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # most punctuation
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # . and , unless preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # . and , unless followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # - after a digit
]


def tokenize_13a(line: str) -> list[str]:
    """The ``13a`` tokenisation of sacreBLEU (mteval-v13a)."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&")
                .replace("&lt;", "<").replace("&gt;", ">"))
    line = f" {line} "
    for pattern, replacement in _13A_RULES:
        line = pattern.sub(replacement, line)
    return line.split()


def _ngrams(tokens: list[str], max_order: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for n in range(1, max_order + 1)
                   for i in range(len(tokens) - n + 1))


def _clipped_counts(hypothesis: list[str], references: list[list[str]], max_order: int):
    """``(ngram, count, clipped count)`` for every n-gram of ``hypothesis`` up to ``max_order``.

    The clipped count is at most the n-gram's count in the reference that has most of it.
    """
    max_ref_counts: Counter = Counter()
    for reference in references:
        max_ref_counts |= _ngrams(reference, max_order)
    for ngram, count in _ngrams(hypothesis, max_order).items():
        yield ngram, count, min(count, max_ref_counts[ngram])


def modified_precision(hypothesis: list[str], references: list[list[str]], n: int) -> tuple[int, int]:
    """BLEU's modified n-gram precision of one tokenised sentence, as ``(matches, total)``.

    ``total`` counts the n-grams of ``hypothesis``; ``matches`` counts each of them at
    most as often as it occurs in the reference that has most of it (clipping), so
    "the the the the" against "the cat is on the mat" matches 2 of 4 unigrams.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"modified_precision: n must be an int >= 1, got {n!r}")
    counted = [(count, clipped) for ngram, count, clipped in _clipped_counts(hypothesis, references, n)
               if len(ngram) == n]
    return sum(clipped for _, clipped in counted), sum(count for count, _ in counted)


def bleu(hypotheses: Sequence[str], references: Sequence, max_order: int = 4) -> float:
    """Corpus BLEU in [0, 100].

    Args:
        hypotheses: one detokenised string per sentence.
        references: one string per hypothesis, or a list of reference streams
            (``[[ref1_a, ref1_b, ...], [ref2_a, ...]]``, sacreBLEU's layout: each
            inner list holds one reference for every hypothesis).
    """
    hypotheses = list(hypotheses)
    if references and isinstance(references[0], str):
        streams = [list(references)]
    else:
        streams = [list(stream) for stream in references]
    for stream in streams:
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"bleu: each reference stream must have one reference per hypothesis "
                f"({len(hypotheses)}), got {len(stream)}"
            )
    matches = [0] * max_order
    totals = [0] * max_order
    hyp_length = ref_length = 0
    for index, hypothesis in enumerate(hypotheses):
        lengths = _count_sentence(hypothesis, [stream[index] for stream in streams], matches, totals)
        hyp_length, ref_length = hyp_length + lengths[0], ref_length + lengths[1]
    return _score(matches, totals, hyp_length, ref_length, effective_order=False)


def sentence_bleu(hypothesis: str, references: str | Sequence[str], max_order: int = 4) -> float:
    """BLEU of one sentence in [0, 100], as sacreBLEU's ``sentence_bleu``: smoothing ``exp`` and the
    effective order (orders the hypothesis is too short for are left out of the mean).

    Args:
        hypothesis: one detokenised string.
        references: its reference, or a list of references.
    """
    references = [references] if isinstance(references, str) else list(references)
    matches, totals = [0] * max_order, [0] * max_order
    hyp_length, ref_length = _count_sentence(hypothesis, references, matches, totals)
    return _score(matches, totals, hyp_length, ref_length, effective_order=True)


def _count_sentence(hypothesis: str, references: list[str], matches: list[int], totals: list[int]) -> tuple[int, int]:
    """Add one sentence's clipped n-gram matches and hypothesis n-grams (order n at index n - 1) into
    ``matches`` and ``totals``; return its length and its closest reference's (on a tie, the shorter)."""
    hyp_tokens = tokenize_13a(hypothesis)
    ref_tokens = [tokenize_13a(reference) for reference in references]
    for ngram, count, clipped in _clipped_counts(hyp_tokens, ref_tokens, len(totals)):
        totals[len(ngram) - 1] += count
        matches[len(ngram) - 1] += clipped
    return len(hyp_tokens), min((abs(len(r) - len(hyp_tokens)), len(r)) for r in ref_tokens)[1]


def _score(matches: list[int], totals: list[int], hyp_length: int, ref_length: int, effective_order: bool) -> float:
    """``100 BP exp(mean log p_n)`` from the n-gram counts; with ``effective_order`` the mean runs over
    the orders up to the last one the hypothesis has n-grams of, else an order without any scores 0."""
    if hyp_length == 0 or not any(matches):   # not one n-gram in common: 0, unsmoothed (as sacreBLEU)
        return 0.0
    log_precisions = []
    smoothing = 1.0
    for n in range(len(totals)):
        if totals[n] == 0:
            if effective_order:
                break
            return 0.0
        if matches[n] == 0:
            smoothing *= 2.0
            precision = 1.0 / (smoothing * totals[n])
        else:
            precision = matches[n] / totals[n]
        log_precisions.append(math.log(precision))
    brevity = 1.0 if hyp_length >= ref_length else math.exp(1.0 - ref_length / hyp_length)
    return 100.0 * brevity * math.exp(sum(log_precisions) / len(log_precisions))


def chrf(hypotheses: Sequence[str], references: Sequence[str], char_order: int = 6, beta: float = 2.0) -> float:
    """Corpus chrF in [0, 100] (Popovic, 2015), written to agree with sacreBLEU's ``corpus_chrf``.

    Character n-grams of orders ``n = 1 .. char_order``, spaces removed, summed over the
    corpus: ``P_n = matched / hypothesis n-grams``, ``R_n = matched / reference n-grams``
    (a match counts at most as often as in the other side; a sentence whose reference is too
    short for order ``n`` adds no hypothesis n-grams to it). ``P`` and ``R`` average the
    ``P_n`` and ``R_n`` over the orders that both sides have, and::

        chrF = 100 * (1 + beta^2) P R / (beta^2 P + R)         (beta = 2: recall weighs more)

    Unlike BLEU it gives credit for a word that is partly right (``chats`` for ``chat``).
    ``references``: one string per hypothesis.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(references) != len(hypotheses) or (references and not isinstance(references[0], str)):
        raise ValueError(f"chrf: references must be one string per hypothesis ({len(hypotheses)}), "
                         f"got {len(references)} of {type(references[0]).__name__ if references else 'nothing'}")
    totals = [[0, 0, 0] for _ in range(char_order)]  # per order: hypothesis, reference, matched n-grams
    for hypothesis, reference in zip(hypotheses, references):
        hyp_chars, ref_chars = "".join(hypothesis.split()), "".join(reference.split())
        for n in range(1, char_order + 1):
            hyp_ngrams = Counter(hyp_chars[i:i + n] for i in range(len(hyp_chars) - n + 1))
            ref_ngrams = Counter(ref_chars[i:i + n] for i in range(len(ref_chars) - n + 1))
            # A reference too short to have n-grams of this order does not count the hypothesis's.
            totals[n - 1][0] += sum(hyp_ngrams.values()) if ref_ngrams else 0
            totals[n - 1][1] += sum(ref_ngrams.values())
            totals[n - 1][2] += sum((hyp_ngrams & ref_ngrams).values())
    orders = [(matched / hyp, matched / ref) for hyp, ref, matched in totals if hyp > 0 and ref > 0]
    if not orders:
        return 0.0
    precision = sum(p for p, _ in orders) / len(orders)
    recall = sum(r for _, r in orders) / len(orders)
    if precision + recall == 0:
        return 0.0
    factor = beta * beta
    return 100.0 * (1 + factor) * precision * recall / (factor * precision + recall)


def attention_entropy(weights):
    """The entropy of each attention row, in nats: ``H = -sum_k w_k log w_k`` over the last axis.

    ``weights (..., Tk)``: rows that sum to 1, or are all zero (a fully masked query), with
    ``0 log 0 = 0``. Returns ``weights.shape[:-1]``. ``0`` is a head that looks at one key;
    ``log Tk`` one that spreads evenly over all of them.
    """
    import numpy

    weights = numpy.asarray(weights, dtype=numpy.float64)
    logs = numpy.log(numpy.where(weights > 0, weights, 1.0))  # 0 log 0 = 0, never log(0)
    return -numpy.sum(weights * logs, axis=-1)


def alignment_error_rate(hypotheses: Sequence[set], golds: Sequence) -> float:
    """Alignment error rate (Och and Ney, 2003) of a corpus of word alignments.

    ``hypotheses[k]``: the links ``(source index, target index)`` proposed for sentence pair ``k``;
    ``golds[k]``: its gold alignment, with ``sure`` links ``S`` and ``possible`` links
    ``P`` (``S`` within ``P``), as ``data.Alignment``. Counts are summed over the corpus::

        AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

    0 when every proposed link is possible and every sure link is proposed; 1 when no proposed
    link is even possible.
    """
    if len(hypotheses) != len(golds):
        raise ValueError(f"alignment_error_rate: {len(hypotheses)} hypotheses but {len(golds)} gold alignments")
    proposed = sure_found = possible_found = sure_total = 0
    for links, gold in zip(hypotheses, golds):
        links = set(links)
        proposed += len(links)
        sure_total += len(gold.sure)
        sure_found += len(links & gold.sure)
        possible_found += len(links & gold.possible)
    if proposed + sure_total == 0:
        raise ValueError("alignment_error_rate: no links at all, proposed or gold")
    return 1.0 - (sure_found + possible_found) / (proposed + sure_total)


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance: the fewest one-character insertions, deletions and substitutions
    that turn ``first`` into ``second``.

    Dynamic programming over prefixes, one row at a time: with ``D[i][j]`` the distance between
    ``first[:i]`` and ``second[:j]``::

        D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1, D[i-1][j-1] + (first[i-1] != second[j-1]))

    ``edit_distance("Brannoc", "Branoc") == 1``. Used to tell a name spelled nearly right from
    one not written at all (``tasks.translation.evaluation.unknown_words_copied``).
    """
    previous = list(range(len(second) + 1))  # D[0][j] = j: insert the first j characters
    for i, first_char in enumerate(first, 1):
        current = [i]  # D[i][0] = i: delete the first i characters
        for j, second_char in enumerate(second, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (first_char != second_char)))
        previous = current
    return previous[-1]
