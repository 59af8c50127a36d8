"""Gold word alignments of the embedded corpus, the alignment error rate, rollout and saliency.

* the grammar's alignments on hand-written examples (crossing adjectives, ``ne ... pas`` from
  ``not``, elided ``l'`` from ``the``, ``pas de`` from ``a``, ``est-ce que`` from ``do``), and on
  the whole corpus: indices in range, every French token from some English token;
* AER (Och and Ney) on hand-worked examples;
* rollout: its rows stay distributions, and a hand-worked one-layer case;
* saliency: npformer's backward against central differences of ``log p(y_i)`` in float64.
"""

from __future__ import annotations

import numpy
import pytest
from hypothesis import given, settings, strategies as st

from npformer import Transformer, TransformerConfig, backend
from npformer.data import Alignment, Vocab, tokenize, toy_corpus
from npformer.data.toy_corpus import _sentence, noun_phrase, sentence_pair
from npformer.metrics import alignment_error_rate
from npformer.tasks.translation.alignment import argmax_links, explain, rollout, saliency, score_alignments
from npformer.tokens import BOS_ID, PAD_ID


@pytest.fixture(scope="module")
def corpus():
    return toy_corpus()


def _links(english, french, gold, sure=True):
    """The gold links as (English word, French word) pairs."""
    return {(english[e], french[f]) for e, f in (gold.sure if sure else gold.possible)}


# -- the grammar's alignments --------------------------------------------------------------------

def test_an_adjective_after_the_noun_crosses():
    english, french, gold = sentence_pair("statement", noun_phrase("cat", "black"), "eat", noun_phrase("apple"))
    assert english == ["the", "black", "cat", "eats", "the", "apple", "."]
    assert french == ["le", "chat", "noir", "mange", "la", "pomme", "."]
    assert gold.sure == {(0, 0), (2, 1), (1, 2), (3, 3), (4, 4), (5, 5), (6, 6)}
    assert gold.possible == gold.sure


def test_an_adjective_before_the_noun_does_not_cross():
    english, french, gold = sentence_pair("is", noun_phrase("house", "small"), adjective="red")
    assert french == ["la", "petite", "maison", "est", "rouge", "."]
    assert _links(english, french, gold) == {("the", "la"), ("small", "petite"), ("house", "maison"),
                                             ("is", "est"), ("red", "rouge"), (".", ".")}
    english, french, gold = sentence_pair("where", noun_phrase("bird", "beautiful"))
    assert french == ["où", "est", "le", "bel", "oiseau", "?"] and ("beautiful", "bel") in _links(english, french, gold)


def test_ne_and_pas_both_come_from_not_and_the_auxiliary_is_possible():
    english, french, gold = sentence_pair("negation", "i", "eat", noun_phrase("apple"))
    assert english == ["i", "do", "not", "eat", "the", "apple", "."]
    assert french == ["je", "ne", "mange", "pas", "la", "pomme", "."]
    assert _links(english, french, gold) == {("i", "je"), ("not", "ne"), ("not", "pas"), ("eat", "mange"),
                                             ("the", "la"), ("apple", "pomme"), (".", ".")}
    assert _links(english, french, gold, sure=False) - _links(english, french, gold) == {
        ("do", "ne"), ("do", "mange"), ("do", "pas")}
    english, french, gold = sentence_pair("is_not", noun_phrase("cat", plural=True), adjective="white")
    assert french == ["les", "chats", "ne", "sont", "pas", "blancs", "."]
    assert _links(english, french, gold) >= {("not", "ne"), ("not", "pas"), ("are", "sont"), ("white", "blancs")}


def test_elided_forms_keep_their_links():
    english, french, gold = sentence_pair("negation", "she", "have", noun_phrase("man"))
    assert english == ["she", "does", "not", "have", "the", "man", "."]
    assert french == ["elle", "n'", "a", "pas", "l'", "homme", "."]
    assert _links(english, french, gold) == {("she", "elle"), ("not", "n'"), ("not", "pas"), ("have", "a"),
                                             ("the", "l'"), ("man", "homme"), (".", ".")}
    english, french, gold = sentence_pair("question", "i", "like", noun_phrase("apple", determiner="a"))
    assert french == ["est-ce", "que", "j'", "aime", "une", "pomme", "?"]
    assert _links(english, french, gold) == {("do", "est-ce"), ("do", "que"), ("i", "j'"), ("like", "aime"),
                                             ("an", "une"), ("apple", "pomme"), ("?", "?")}


def test_pas_de_comes_from_the_indefinite_article():
    english, french, gold = sentence_pair("negation", "i", "eat", noun_phrase("apple", "red", determiner="a"))
    assert english == ["i", "do", "not", "eat", "a", "red", "apple", "."]
    assert french == ["je", "ne", "mange", "pas", "de", "pomme", "rouge", "."]
    assert {("a", "de"), ("red", "rouge"), ("apple", "pomme")} <= _links(english, french, gold)


def test_a_question_comes_from_its_auxiliary():
    english, french, gold = sentence_pair("question", "he", "eat", noun_phrase("dog", "big", plural=True))
    assert english == ["does", "he", "eat", "the", "big", "dogs", "?"]
    assert french == ["est-ce", "qu'", "il", "mange", "les", "grands", "chiens", "?"]
    assert gold.sources_of(0) == gold.sources_of(1) == [0]


def test_unknown_words_are_clear_errors():
    with pytest.raises(ValueError, match="unknown noun 'unicorn'"):
        noun_phrase("unicorn")
    with pytest.raises(ValueError, match="unknown verb 'fly'"):
        sentence_pair("statement", "i", "fly", noun_phrase("cat"))
    with pytest.raises(ValueError, match="kind must be one of"):
        sentence_pair("exclamation", noun_phrase("cat"))


def test_every_pair_of_the_corpus_is_aligned_in_range_and_completely(corpus):
    for split in ("train", "valid", "test"):
        assert len(corpus.alignments[split]) == len(getattr(corpus, split))
        for (source, target), gold in zip(getattr(corpus, split), corpus.alignments[split]):
            n_en, n_fr = len(tokenize(source, "en")), len(tokenize(target, "fr"))
            assert gold.sure <= gold.possible
            assert all(0 <= e < n_en and 0 <= f < n_fr for e, f in gold.possible), (source, target)
            assert {f for _, f in gold.sure} == set(range(n_fr)), f"a French token with no source: {target}"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_generator_tokens_are_the_tokenizer_tokens(seed):
    """The alignment indexes the tokens the grammar built; they must be what ``tokenize`` reads back."""
    from npformer.data import detokenize

    english, french, _, gold = _sentence(numpy.random.default_rng(seed))
    assert tokenize(detokenize(english, "en"), "en") == english
    assert tokenize(detokenize(french, "fr"), "fr") == french


# -- the alignment error rate --------------------------------------------------------------------

def test_aer_on_hand_worked_examples():
    gold = Alignment(sure=frozenset({(0, 0), (1, 1)}), possible=frozenset({(0, 0), (1, 1), (2, 1)}))
    assert alignment_error_rate([{(0, 0), (1, 1)}], [gold]) == 0.0
    assert alignment_error_rate([{(0, 1), (1, 0)}], [gold]) == 1.0
    # one sure link and one possible link: 1 - (1 + 2) / (2 + 2) = 0.25
    assert alignment_error_rate([{(0, 0), (2, 1)}], [gold]) == pytest.approx(0.25)
    # summed over the corpus, not averaged per sentence: 1 - (2 + 2 + 0 + 0) / (2 + 2 + 1 + 2)
    assert alignment_error_rate([{(0, 0), (1, 1)}, {(5, 5)}], [gold, gold]) == pytest.approx(1 - 4 / 7)
    with pytest.raises(ValueError, match="2 hypotheses but 1"):
        alignment_error_rate([set(), set()], [gold])


def test_argmax_links_link_each_target_token_to_its_largest_score():
    scores = numpy.array([[0.1, 0.9, 0.0], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4], [0.0, 0.0, 1.0]])
    assert argmax_links(scores, n_src=3, n_tgt=3) == {(1, 0), (0, 1), (2, 2)}  # the <eos> row is left out
    assert argmax_links(scores, n_src=2, n_tgt=2) == {(1, 0), (0, 1)}  # padding columns are left out


# -- rollout ----------------------------------------------------------------------------------------

def _random_maps(rng, batch=2, heads=3, n_src=5, n_tgt=4, layers=2):
    def softmax(scores):
        weights = numpy.exp(scores - scores.max(-1, keepdims=True))
        return weights / weights.sum(-1, keepdims=True)
    causal = numpy.tril(numpy.ones((n_tgt, n_tgt), dtype=bool))
    encoder = [softmax(rng.normal(size=(batch, heads, n_src, n_src))) for _ in range(layers)]
    decoder = [softmax(numpy.where(causal, rng.normal(size=(batch, heads, n_tgt, n_tgt)), -numpy.inf))
               for _ in range(layers)]
    cross = [softmax(rng.normal(size=(batch, heads, n_tgt, n_src))) for _ in range(layers)]
    return encoder, decoder, cross


def test_rollout_keeps_what_is_left_for_the_target_and_a_hand_worked_layer():
    rng = numpy.random.default_rng(0)
    encoder, decoder, cross = _random_maps(rng)
    rolled = rollout(encoder, decoder, cross)
    assert rolled.shape == (2, 4, 5) and numpy.all(rolled >= 0)
    # After L decoder layers a row keeps (1/2)^L on the target side: what reaches the source sums
    # to 1 - (1/2)^L, whatever the weights.
    numpy.testing.assert_allclose(rolled.sum(-1), 1 - 0.5 ** 2)
    # One layer each: R_enc = A/2 + I/2; R = (D/2 + I/2) 0 / 2 + C R_enc / 2 = C (A + I) / 4.
    one = rollout(encoder[:1], decoder[:1], cross[:1])
    expected = cross[0].mean(1) @ (encoder[0].mean(1) + numpy.eye(5)) / 4
    numpy.testing.assert_allclose(one, expected)


def test_rollout_composes_the_layers_from_the_first_to_the_last():
    """Two layers each, written out: R_enc = E2 E1 (layer 1's mixing applied first, each E = A/2 + I/2);
    F1 = C1 R_enc / 2 and F2 = (D2/2 + I/2) F1 / 2 + C2 R_enc / 2. Composed in the other order, the
    encoder's product is E1 E2, which these random maps tell apart."""
    rng = numpy.random.default_rng(5)
    encoder, decoder, cross = _random_maps(rng)
    half = lambda maps: maps.mean(1) / 2 + numpy.eye(maps.shape[-1]) / 2  # noqa: E731
    encoder_rollout = half(encoder[1]) @ half(encoder[0])
    first = cross[0].mean(1) @ encoder_rollout / 2
    expected = half(decoder[1]) @ first / 2 + cross[1].mean(1) @ encoder_rollout / 2
    numpy.testing.assert_allclose(rollout(encoder, decoder, cross), expected)
    wrong_order = half(encoder[0]) @ half(encoder[1])
    assert not numpy.allclose(wrong_order, encoder_rollout)


def test_the_head_average_row_scores_the_mean_of_the_heads(monkeypatch):
    """``attention --score``'s "layer l, head average" row: the argmax of the heads' mean. Here head 0
    points each French word at the wrong source word, head 1 at the right one, more sharply, so the
    mean is right (AER 0) and head 0 alone wrong (AER 1)."""
    from npformer.tasks.translation import alignment

    corpus = toy_corpus(n_train=20, n_valid=0, n_test=4)
    pairs, golds = corpus.test, corpus.alignments["test"]

    def explain(model, src_vocab, tgt_vocab, sources, targets):  # one batch: the four pairs, in order
        cross = numpy.zeros((len(sources), 2, max(map(len, targets)) + 1, max(map(len, sources))))
        for b, (gold, source, target) in enumerate(zip(golds, sources, targets)):
            for f in range(len(target)):
                right = gold.sources_of(f)[0]
                cross[b, 0, f, (right + 1) % len(source)] = 0.6
                cross[b, 1, f, right] = 1.0
        return {"cross": [cross], "rollout": cross[:, 1], "saliency": cross[:, 1]}

    monkeypatch.setattr(alignment, "explain", explain)
    model = Transformer(TransformerConfig(8, 8, d_model=8, n_heads=2, d_ff=8, n_layers=1, max_len=32), seed=0)
    scores = score_alignments(model, None, None, pairs, golds, batch_size=len(pairs))
    assert scores.heads == [[1.0, 0.0]] and scores.layer_average == [0.0], (scores.heads, scores.layer_average)


# -- saliency ----------------------------------------------------------------------------------------

def _float64_model(src_vocab=11, tgt_vocab=13):
    config = TransformerConfig(src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=16, n_heads=2, d_ff=24,
                               n_layers=2, max_len=16, dropout=0.1)
    model = Transformer(config, seed=3, dtype=numpy.float64)
    return model.eval()


def _log_probability(model, src, tgt_in, row, target):
    logits = backend.to_numpy(model.forward(src, tgt_in))[0, row]
    return logits[target] - numpy.log(numpy.exp(logits - logits.max()).sum()) - logits.max()


@pytest.mark.parametrize("n_src, n_tgt", [(1, 1), (5, 4)])
def test_saliency_is_npformers_backward_against_finite_differences(n_src, n_tgt):
    """``S[i, j] = || g_ij * e_j ||`` where ``g_ij = dlog p(y_i) / de_j``. The source ids are distinct, so
    moving row ``x_j`` of the embedding table by ``h`` moves ``e_j`` by ``h sqrt(D)``: central
    differences of ``log p(y_i)`` in that row give ``sqrt(D) g_ij``."""
    model = _float64_model()
    rng = numpy.random.default_rng(n_src)
    src = (rng.permutation(numpy.arange(4, 11))[:n_src])[None, :]
    tgt_out = rng.integers(4, 13, size=(1, n_tgt))
    tgt_in = numpy.concatenate([[[BOS_ID]], tgt_out[:, :-1]], axis=1)
    found = saliency(model, src, tgt_in, tgt_out)
    assert found.shape == (1, n_tgt, n_src)
    table, step = model.src_embed.W, 1e-6
    embeddings = table[src[0]] * model.embed_scale
    for i in range(n_tgt):
        for j in range(n_src):
            gradient = numpy.zeros(model.config.d_model)
            for d in range(model.config.d_model):
                original = table[src[0, j], d]
                table[src[0, j], d] = original + step
                up = _log_probability(model, src, tgt_in, i, tgt_out[0, i])
                table[src[0, j], d] = original - step
                down = _log_probability(model, src, tgt_in, i, tgt_out[0, i])
                table[src[0, j], d] = original
                gradient[d] = (up - down) / (2 * step) / model.embed_scale
            expected = numpy.linalg.norm(gradient * embeddings[j])
            assert found[0, i, j] == pytest.approx(expected, rel=1e-6, abs=1e-12), (i, j)
    assert all(not numpy.any(g) for g in model.grads().values()), "saliency leaves no parameter gradient behind"


def test_saliency_of_a_padded_batch_equals_one_sentence_at_a_time():
    model = _float64_model()
    sources = [[4, 5, 6], [7]]
    targets = [[4, 5], [6, 7, 8]]
    src = numpy.array([[4, 5, 6], [7, PAD_ID, PAD_ID]])
    tgt_in = numpy.array([[BOS_ID, 4, 5, PAD_ID], [BOS_ID, 6, 7, 8]])
    tgt_out = numpy.array([[4, 5, PAD_ID, PAD_ID], [6, 7, 8, PAD_ID]])
    batch = saliency(model, src, tgt_in, tgt_out)
    for b, (source, target) in enumerate(zip(sources, targets)):
        alone = saliency(model, numpy.array([source]), numpy.array([[BOS_ID] + target]),
                         numpy.array([target + [PAD_ID]]))
        numpy.testing.assert_allclose(batch[b, : len(target) + 1, : len(source)], alone[0], rtol=1e-9, atol=1e-12)
        assert not numpy.any(batch[b, len(target):]), "padding and <eos> rows explain nothing"


# -- scoring, end to end -------------------------------------------------------------------------------

def test_an_oracle_scores_zero_and_explanations_have_the_right_shapes():
    """A fake explanation that is the gold alignment scores AER 0; the real explanations of an
    untrained model have one matrix per layer, shaped like the batch."""
    corpus = toy_corpus(n_train=50, n_valid=5, n_test=20)
    pairs, golds = corpus.test, corpus.alignments["test"]
    oracle = [{(g.sources_of(f)[0], f) for f in range(len(tokenize(target, "fr")))}
              for (_, target), g in zip(pairs, golds)]
    assert alignment_error_rate(oracle, golds) == 0.0
    src_vocab = Vocab.build([tokenize(e, "en") for e, _ in corpus.train + corpus.test])
    tgt_vocab = Vocab.build([tokenize(f, "fr") for _, f in corpus.train + corpus.test])
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=16, n_heads=2, d_ff=32,
                                          n_layers=2, max_len=32), seed=0)
    sources = [tokenize(e, "en") for e, _ in pairs[:3]]
    targets = [tokenize(f, "fr") for _, f in pairs[:3]]
    explained = explain(model, src_vocab, tgt_vocab, sources, targets)
    longest_src, longest_tgt = max(map(len, sources)), max(map(len, targets))
    assert [m.shape for m in explained["cross"]] == [(3, 2, longest_tgt + 1, longest_src)] * 2
    assert explained["rollout"].shape == explained["saliency"].shape == (3, longest_tgt + 1, longest_src)
    scores = score_alignments(model, src_vocab, tgt_vocab, pairs, golds, batch_size=7)
    assert scores.pairs == 20 and len(scores.heads) == 2 and len(scores.heads[0]) == 2
    assert all(0.0 <= aer <= 1.0 for _, aer in scores.rows())
    with pytest.raises(ValueError, match="20 pairs but 19"):
        score_alignments(model, src_vocab, tgt_vocab, pairs, golds[:-1])
