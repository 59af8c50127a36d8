"""BLEU: hand-computed cases, the 13a tokeniser, and agreement with sacreBLEU when installed;
chrF; the edit distance."""

import math
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conftest import import_crosscheck
from npformer.metrics import bleu, edit_distance, sentence_bleu, tokenize_13a


def test_identical_sentences_score_100():
    assert bleu(["the cat is on the mat ."], ["the cat is on the mat ."]) == pytest.approx(100.0)


def test_hand_computed_precisions():
    # hyp: the cat sat on the mat .   ref: the cat is on the mat .
    # 1-grams 6/7, 2-grams 4/6, 3-grams 2/5, 4-grams 1/4; equal lengths: no brevity penalty
    expected = 100 * math.exp((math.log(6 / 7) + math.log(4 / 6) + math.log(2 / 5) + math.log(1 / 4)) / 4)
    assert bleu(["the cat sat on the mat ."], ["the cat is on the mat ."]) == pytest.approx(expected)


def test_brevity_penalty_and_clipping():
    # hyp "the the the the" vs ref "the cat the dog the end": unigram matches clipped to 3 of 4
    # no bigram match -> exp smoothing: p2 = 1/(2*3), p3 = 1/(4*2), p4 = 1/(8*1); c = 4, r = 6
    score = bleu(["the the the the"], ["the cat the dog the end"])
    precisions = [3 / 4, 1 / (2 * 3), 1 / (4 * 2), 1 / (8 * 1)]
    expected = 100 * math.exp(1 - 6 / 4) * math.exp(sum(map(math.log, precisions)) / 4)
    assert score == pytest.approx(expected)


def test_corpus_level_sums_counts_and_multiple_references():
    hypotheses = ["a b c d", "e f"]
    single = bleu(hypotheses, ["a b c d", "e f g h"])
    # corpus counts: 1-grams 6/6, 2-grams 4/4, 3-grams 2/2, 4-grams 1/1; c = 6, r = 8
    assert single == pytest.approx(100 * math.exp(1 - 8 / 6))
    # a second reference stream with the closest length for sentence 2 removes the penalty
    assert bleu(hypotheses, [["a b c d", "e f g h"], ["x", "e f"]]) == pytest.approx(100.0)


def test_empty_hypotheses_and_too_short_score_zero():
    assert bleu([""], ["a b c"]) == 0.0
    assert bleu(["a b c"], ["a b c"]) == 0.0  # no 4-gram at all: BLEU is 0 (as in sacreBLEU)
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        bleu(["a", "b"], ["a"])


def test_13a_tokenisation():
    assert tokenize_13a("Hello, world! It costs $3.50 (really).") == [
        "Hello", ",", "world", "!", "It", "costs", "$", "3.50", "(", "really", ")", "."]
    assert tokenize_13a("l'homme &amp; 1990-2000") == ["l'homme", "&", "1990", "-", "2000"]  # ' is kept


def test_agrees_with_sacrebleu_when_installed():
    sacrebleu = import_crosscheck("sacrebleu","sacreBLEU is not installed (optional cross-check)")
    rng = np.random.default_rng(0)
    words = ["le", "chat", "noir", "mange", "la", "pomme", ",", ".", "!", "l'homme", "3.5", "«", "»", "?"]
    for _ in range(20):
        refs = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(15)]
        hyps = [" ".join(w for w in r.split() if rng.random() > 0.3) + (" la" if rng.random() < 0.3 else "")
                for r in refs]
        second = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(15)]
        assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
        assert bleu(hyps, [refs, second]) == pytest.approx(
            sacrebleu.corpus_bleu(hyps, [refs, second]).score, abs=1e-9)


def test_chrf_by_hand_and_against_sacrebleu():
    from npformer.metrics import chrf

    # "ab" against "ab": every n-gram matches -> 100; against "ac": 1-grams 1/2, 2-grams 0/1.
    assert chrf(["ab"], ["ab"]) == pytest.approx(100.0)
    p = r = (0.5 + 0.0) / 2  # orders 1 and 2 (both sides have them); P_n = R_n
    assert chrf(["ab"], ["ac"]) == pytest.approx(100 * 5 * p * r / (4 * p + r))
    assert chrf(["a b"], ["ab"]) == pytest.approx(100.0)  # spaces do not count
    assert chrf([""], ["abc"]) == 0.0
    with pytest.raises(ValueError, match="one string per hypothesis"):
        chrf(["a", "b"], ["a"])
    sacrebleu = import_crosscheck("sacrebleu", "sacreBLEU is not installed (optional cross-check)")
    rng = np.random.default_rng(0)
    words = ["le", "chat", "chats", "noir", "mange", "la", "pomme", "l'arbre", "!", "est-ce", "é", ""]
    for _ in range(30):
        hyps = [" ".join(rng.choice(words, rng.integers(0, 8))) for _ in range(rng.integers(1, 6))]
        refs = [" ".join(rng.choice(words, rng.integers(0, 8))) for _ in hyps]
        assert chrf(hyps, refs) == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)


def test_edit_distance_by_hand():
    assert edit_distance("kitten", "sitting") == 3  # k->s, e->i, insert g
    assert edit_distance("Zorvan", "Forvan") == 1
    assert edit_distance("Brannoc", "Bragirc") == 3  # n->g, n->i, o->r
    assert edit_distance("", "abc") == edit_distance("abc", "") == 3
    assert edit_distance("same", "same") == 0


@given(st.text("abc", max_size=7), st.text("abc", max_size=7))
def test_edit_distance_agrees_with_the_recursive_definition(first, second):
    @lru_cache(maxsize=None)
    def distance(i, j):  # first[i:] against second[j:], straight from the definition
        if i == len(first) or j == len(second):
            return len(first) - i + len(second) - j
        return min(distance(i + 1, j) + 1, distance(i, j + 1) + 1,
                   distance(i + 1, j + 1) + (first[i] != second[j]))

    assert edit_distance(first, second) == distance(0, 0) == edit_distance(second, first)


def test_sentence_bleu_scores_a_short_exact_translation_100_and_agrees_with_sacrebleu():
    """Corpus BLEU of one three-word sentence is 0 (it has no 4-gram); sentence BLEU, as sacreBLEU
    computes it (effective order, smoothing exp), is 100 for an exact match. ``evaluate --worst`` ranks
    by it, so "Il m'aime." against "Il m'aime." is never listed among the worst."""
    assert bleu(["Il m'aime."], ["Il m'aime."]) == 0.0
    assert sentence_bleu("Il m'aime.", "Il m'aime.") == 100.0
    assert sentence_bleu("", "Il m'aime.") == 0.0
    assert 0.0 < sentence_bleu("Il m'aime bien.", ["Il m'aime.", "Elle m'aime."]) < 100.0
    sacrebleu = import_crosscheck("sacrebleu", "sacreBLEU is not installed (optional cross-check)")
    rng = np.random.default_rng(1)
    words = ["le", "chat", "noir", "mange", "la", "pomme", ",", ".", "!", "l'homme", "3.5", "?"]
    for _ in range(300):
        reference = " ".join(rng.choice(words, size=rng.integers(1, 9)))
        hypothesis = " ".join(w for w in reference.split() if rng.random() > 0.3) + (" la" if rng.random() < 0.3 else "")
        second = " ".join(rng.choice(words, size=rng.integers(1, 9)))
        for references in ([reference], [reference, second]):
            assert sentence_bleu(hypothesis, references) == pytest.approx(
                sacrebleu.sentence_bleu(hypothesis, references).score, abs=1e-9), (hypothesis, references)
