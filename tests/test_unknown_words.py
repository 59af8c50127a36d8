"""Aligned word pairs made unknown in training (npformer.data.unknown_words): hidden as <unk> for word
vocabularies, replaced by invented words for BPE pieces; and what it teaches."""

from __future__ import annotations

import io
import json
import os

import numpy
import pytest
from hypothesis import given, settings, strategies as st

from npformer.data import (Alignment, BPEVocab, WordInventor, copy_links, drawn_links, encode_pairs, hide_links,
                           invent_links, noun_phrase, sentence_pair, swap_in_words, tokenize, toy_corpus, Vocab)
from npformer.tasks.translation import TrainOptions, Translator, train
from npformer.tasks.translation.evaluation import unknown_words_copied
from npformer.tasks.translation.trainer import training_copy_links
from npformer.tokens import BOS_ID, EOS_ID, UNK_ID
from npformer.tasks.translation import load_run


def test_gold_links_are_the_one_to_one_sure_links():
    english, french, gold = sentence_pair("negation", "she", "see", noun_phrase("cat", "black"))
    # she does not see the black cat . -> elle ne voit pas le chat noir .
    assert english == ["she", "does", "not", "see", "the", "black", "cat", "."]
    assert french == ["elle", "ne", "voit", "pas", "le", "chat", "noir", "."]
    links = copy_links(english, french, gold)
    pairs = {(english[s], french[t]) for s, t in links}
    assert {("she", "elle"), ("see", "voit"), ("the", "le"), ("cat", "chat"), ("black", "noir")} <= pairs
    assert not {word for word, _ in pairs} & {"not", "does"}  # "not" makes both "ne" and "pas"
    assert not {word for _, word in pairs} & {"ne", "pas"}
    assert links == sorted(links)
    # A French word made of two English words ("a lot" -> "beaucoup") is not one to one either.
    two_to_one = Alignment(sure=frozenset({(0, 1), (1, 1), (2, 0)}), possible=frozenset({(0, 1), (1, 1), (2, 0)}))
    assert copy_links(["a", "lot", "read"], ["lire", "beaucoup"], two_to_one) == [(2, 0)]


def test_without_an_alignment_the_links_are_words_written_alike_once_on_each_side():
    english = tokenize("Tom gave Mary 3 apples in 1989, Tom said.", "en")
    french = tokenize("Tom a donné 3 pommes à Mary en 1989.", "fr")
    links = copy_links(english, french)
    assert [(english[s], french[t]) for s, t in links] == [("Mary", "Mary"), ("3", "3"), ("1989", "1989")]
    assert all(english[s] == french[t] for s, t in links)  # "Tom" twice in English; "." has no letter
    # Lower-case look-alikes are left out: "a" and "me" are false friends ("has", "myself").
    english, french = tokenize("Give me a plan.", "en"), tokenize("Il me donne un plan et a ri.", "fr")
    assert copy_links(english, french) == []


def test_the_embedded_corpus_has_links_in_almost_every_pair_and_tatoeba_style_text_in_some():
    corpus = toy_corpus(n_train=300, n_valid=10, n_test=10)
    links = [copy_links(tokenize(e, "en"), tokenize(f, "fr"), gold)
             for (e, f), gold in zip(corpus.train, corpus.alignments["train"])]
    assert sum(map(bool, links)) == len(links)
    assert numpy.mean([len(pair_links) for pair_links in links]) >= 3


def examples_and_links():
    pairs = [("Tom saw Mary.", "Tom a vu Mary."), ("I am here.", "Je suis ici."), ("Paris is big.", "Paris est grand.")]
    src_vocab = Vocab.build([tokenize(e, "en") for e, _ in pairs])
    tgt_vocab = Vocab.build([tokenize(f, "fr") for _, f in pairs])
    examples = encode_pairs(pairs, src_vocab, tgt_vocab, max_len=64)
    links = [copy_links(tokenize(e, "en"), tokenize(f, "fr")) for e, f in pairs]
    return pairs, examples, links


def test_hiding_at_rate_one_replaces_exactly_the_linked_words_on_both_sides():
    pairs, examples, links = examples_and_links()
    original = [(list(s), list(t)) for s, t in examples]
    hidden = hide_links(examples, links, 1.0, numpy.random.default_rng(0))
    assert examples == original  # the examples given are not changed
    assert links == [[(0, 0), (2, 3)], [], [(0, 0)]]
    for (src, tgt), (new_src, new_tgt), pair_links in zip(examples, hidden, links):
        expected_src, expected_tgt = list(src), list(tgt)
        for s, t in pair_links:
            expected_src[s], expected_tgt[t + 1] = UNK_ID, UNK_ID  # +1: <bos> comes first
        assert (new_src, new_tgt) == (expected_src, expected_tgt)
        assert new_tgt[0] == BOS_ID and new_tgt[-1] == EOS_ID
    assert hide_links(examples, links, 0.0, numpy.random.default_rng(0)) == examples


@settings(max_examples=30, deadline=None)
@given(rate=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1), max_len=st.integers(1, 6))
def test_each_link_is_hidden_whole_or_not_at_all_and_the_same_state_draws_the_same(rate, seed, max_len):
    """Over drawn rates, seeds and length limits (which cut links off): a changed source position
    always has its target changed too, nothing else changes, and the draws repeat."""
    corpus = toy_corpus(n_train=40, n_valid=1, n_test=1)
    src_vocab = Vocab.build([tokenize(e, "en") for e, _ in corpus.train])
    tgt_vocab = Vocab.build([tokenize(f, "fr") for _, f in corpus.train])
    examples = encode_pairs(corpus.train, src_vocab, tgt_vocab, max_len)
    links = [copy_links(tokenize(e, "en"), tokenize(f, "fr"), gold)
             for (e, f), gold in zip(corpus.train, corpus.alignments["train"])]
    hidden = hide_links(examples, links, rate, numpy.random.default_rng(seed))
    assert hidden == hide_links(examples, links, rate, numpy.random.default_rng(seed))
    for (src, tgt), (new_src, new_tgt), pair_links in zip(examples, hidden, links):
        assert len(new_src) == len(src) and len(new_tgt) == len(tgt)
        changed_src = {i for i, (a, b) in enumerate(zip(src, new_src)) if a != b}
        changed_tgt = {j - 1 for j, (a, b) in enumerate(zip(tgt, new_tgt)) if a != b}
        assert all(new_src[i] == UNK_ID for i in changed_src) and all(new_tgt[j + 1] == UNK_ID for j in changed_tgt)
        hidden_links = {(s, t) for s, t in pair_links if s in changed_src}
        assert {s for s, _ in hidden_links} == changed_src and {t for _, t in hidden_links} == changed_tgt
        assert all(s < len(src) and t + 1 < len(tgt) - 1 for s, t in hidden_links)
    if rate == 1.0:
        usable = sum(s < len(src) and t + 1 < len(tgt) - 1 for (src, tgt), pl in zip(examples, links) for s, t in pl)
        assert sum(a != b for (src, _), (new, _) in zip(examples, hidden) for a, b in zip(src, new)) == usable


def test_bad_arguments_are_named():
    _, examples, links = examples_and_links()
    with pytest.raises(ValueError, match="rate must be in"):
        hide_links(examples, links, 1.5, numpy.random.default_rng(0))
    with pytest.raises(ValueError, match="3 examples but links for 2"):
        hide_links(examples, links[:2], 0.1, numpy.random.default_rng(0))
    with pytest.raises(ValueError, match="no words"):
        swap_in_words([("a", "b")], [[(0, 0)]], [])


def test_swap_in_words_puts_the_word_on_both_sides_and_skips_pairs_without_links():
    pairs, _, links = examples_and_links()
    swapped, words = swap_in_words(pairs, links, ["Zorvan", "Quillet"])
    assert swapped == [("Zorvan saw Mary.", "Zorvan a vu Mary."), ("Quillet is big.", "Quillet est grand.")]
    assert words == ["Zorvan", "Quillet"]


class FixedTranslations:
    """A stand-in translator that answers with translations written in advance."""

    def __init__(self, translations, lowercase=False):
        self.translations, self.lowercase, self.tgt_lang = translations, lowercase, "fr"

    def translate(self, sentences, beam_size=1, length_penalty=0.6, progress=False):
        return self.translations[: len(sentences)]


@pytest.mark.parametrize("lowercase", [False, True])
def test_names_are_counted_copied_near_or_missed(lowercase):
    pairs = [("Zorvan is here.", "Zorvan est ici."), ("Zorvan is here.", "Zorvan est ici."),
             ("I saw Brannoc.", "J'ai vu Brannoc."), ("I saw Brannoc.", "J'ai vu Brannoc."),
             ("Tosker!", "Tosker !"), ("Tosker!", "Tosker !")]
    translations = ["Zorvan est ici.", "Forvan est ici.", "J'ai vu Bragirc.", "J'ai vu Branoc.", "Taskr !", ""]
    if lowercase:
        translations = [translation.lower() for translation in translations]
    result = unknown_words_copied(FixedTranslations(translations, lowercase), pairs,
                                  ["Zorvan", "Zorvan", "Brannoc", "Brannoc", "Tosker", "Tosker"])
    # Forvan and Branoc are 1 edit off, Taskr 2, Bragirc 3; the empty translation misses
    assert (result["sentences"], result["copied"], result["near"]) == (6, 1, 3)
    assert result["examples"][1] == (*pairs[1], translations[1])
    with pytest.raises(ValueError, match="6 pairs but 4 words"):
        unknown_words_copied(FixedTranslations(translations), pairs, ["Zorvan"] * 4)


def test_a_resumed_toy_run_finds_the_same_gold_links_as_a_new_one(tmp_path):
    """A resumed run reads its splits back from its folder, gold alignments included
    (``alignments.json``), and finds the links a new run found; a folder without them (a run on
    other data) falls back to the words written the same on both sides."""
    from npformer.data import Vocab
    from npformer.tasks.translation import RunFolder

    options = TrainOptions(max_pairs=50)
    corpus = toy_corpus(n_train=50)
    token_pairs = [(tokenize(e, "en"), tokenize(f, "fr")) for e, f in corpus.train]
    folder = RunFolder(str(tmp_path / "toy"))
    vocab = Vocab.build([english for english, _ in token_pairs])
    folder.create({"model": {}}, vocab, vocab, corpus)
    _, _, _, read_back = folder.read()
    assert read_back.alignments == corpus.alignments      # every split, in order
    fresh = training_copy_links(options, corpus, token_pairs)
    assert training_copy_links(options, read_back, token_pairs) == fresh and all(fresh)
    from npformer.data import Splits

    without = training_copy_links(options, Splits(corpus.train, corpus.valid, corpus.test), token_pairs, log=print)
    assert without != fresh  # the fallback is not the gold alignment: the test above can fail


@pytest.mark.slow
@pytest.mark.parametrize("rate, least, most", [(0.0, 0, 0), (0.1, 20, 30)])
def test_the_words_model_learns_to_write_unk_where_a_new_word_belongs(tmp_path, rate, least, most):
    """The point of it all. Trained on the embedded corpus with some aligned pairs hidden, a tiny
    model writes <unk> for a new noun and the translator copies the noun through; trained
    without, the same model never writes <unk>. 150 steps of d_model 32 (measured: 30 of 30
    copied with unk_rate 0.1, 0 of 30 without; at 100 steps neither copies). The two trainings are two tests, so that two
    workers run them side by side."""
    options = TrainOptions(name=f"rate{rate}", runs_dir=str(tmp_path), d_model=32, d_ff=64, max_steps=150,
                           eval_every=10_000, test_sentences=10, beam_size=2, unk_rate=rate)
    assert train(options, stream=io.StringIO()) == 0
    translator = Translator.from_run(load_run(os.path.join(tmp_path, options.name)))
    sentences = [f"the {noun} sees the cat." for noun in ("zorvan", "quillet", "brannoc")] * 10
    outputs = translator.translate(sentences)
    copied = sum(word in output for word, output in zip(["zorvan", "quillet", "brannoc"] * 10, outputs))
    assert least <= copied <= most, f"unk_rate {rate}: {copied} of 30 new nouns copied"


TEXT = ["chat", "chien", "Tom", "brannoc", "maison", "ami", "l'", "1989", "école"]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capital=st.booleans(), min_len=st.integers(1, 5), extra=st.integers(0, 6))
def test_invented_words_follow_the_letter_pairs_of_their_text(seed, capital, min_len, extra):
    """Every letter pair of an invented word, and its first and last letter, occurs so in some
    word of the text; lengths stay in bounds; the same state invents the same word."""
    inventor = WordInventor(TEXT)
    words = [word.lower() for word in TEXT if word.isalpha()]
    pairs = {word[k: k + 2] for word in words for k in range(len(word) - 1)}
    word = inventor(numpy.random.default_rng(seed), capital, min_len, min_len + extra)
    assert word == inventor(numpy.random.default_rng(seed), capital, min_len, min_len + extra)
    assert min_len <= len(word) <= min_len + extra and word[0].isupper() == capital
    letters = word.lower()
    assert {letters[k: k + 2] for k in range(len(letters) - 1)} <= pairs
    assert any(w.startswith(letters[0]) for w in words) and any(w.endswith(letters[-1]) for w in words)


def test_invented_words_are_new_and_varied():
    inventor = WordInventor(tokenize(" ".join(e + " " + f for e, f in toy_corpus(n_train=500).train), "en"))
    rng = numpy.random.default_rng(0)
    words = [inventor(rng, capital=False) for _ in range(200)]
    assert len(set(words)) >= 150 and numpy.mean([len(w) for w in words]) >= 4
    with pytest.raises(ValueError, match="no alphabetic words"):
        WordInventor(["1989", "."])
    with pytest.raises(ValueError, match="longest word learned from has 2"):
        WordInventor(["ab"])(rng, min_len=3)
    with pytest.raises(ValueError, match="min_len <= max_len"):
        inventor(rng, min_len=5, max_len=4)


def test_with_an_alphabet_every_invented_word_is_spelled_in_its_letters():
    """Two vocabularies, one per language, know different letters: the inventor keeps to the
    letters both know, the first one's capital included."""
    words = ["garçon", "où", "window", "chat", "Tom", "été", "rat"]
    known = set("abcdefghijklmnoprstuwyCT")  # no ç, ù, é; of the capitals only C and T
    inventor = WordInventor(words, known)
    assert set(inventor.letters) == set("windowchatomr")
    rng = numpy.random.default_rng(0)
    assert all(set(inventor(rng, capital, min_len=2)) <= known for capital in (False, True) for _ in range(50))
    with pytest.raises(ValueError, match="with a known capital"):
        WordInventor(["rat"], set("rat"))(rng, capital=True)


def test_invent_links_puts_one_new_word_on_both_sides_of_each_chosen_link():
    pairs = [("Tom saw Mary.", "Tom a vu Mary."), ("I am here.", "Je suis ici."), ("Paris is big.", "Paris est grand.")]
    tokens = [(tokenize(e, "en"), tokenize(f, "fr")) for e, f in pairs]
    original = [(list(s), list(t)) for s, t in tokens]
    links = [copy_links(s, t) for s, t in tokens]
    inventor = WordInventor(word for s, t in tokens for word in s + t)
    changed = invent_links(tokens, links, 1.0, numpy.random.default_rng(0), inventor)
    assert tokens == original and sorted(changed) == [0, 2]  # pair 1 has no link
    for n, (source, target) in changed.items():  # at rate 1, every link of the pair is replaced
        assert [i for i, word in enumerate(source) if word != tokens[n][0][i]] == [i for i, _ in links[n]]
        assert [j for j, word in enumerate(target) if word != tokens[n][1][j]] == [j for _, j in links[n]]
        for i, j in links[n]:
            assert source[i] == target[j] and source[i][0].isupper() and source[i] not in ("Tom", "Mary", "Paris")
    assert changed == invent_links(tokens, links, 1.0, numpy.random.default_rng(0), inventor)
    assert invent_links(tokens, links, 0.0, numpy.random.default_rng(0), inventor) == {}
    # hide_links and invent_links choose the same links from the same state.
    chosen = dict(drawn_links(links, 0.5, numpy.random.default_rng(7)))
    assert sorted(invent_links(tokens, links, 0.5, numpy.random.default_rng(7), inventor)) == sorted(chosen)


def test_an_invented_word_is_spelled_in_known_pieces():
    """What a BPE model sees: an invented word is never <unk>, and usually several pieces."""
    corpus = toy_corpus(n_train=500)
    sentences = [tokenize(e, "en") for e, _ in corpus.train] + [tokenize(f, "fr") for _, f in corpus.train]
    vocab = BPEVocab.learn(sentences, 200)
    inventor = WordInventor(word for sentence in sentences for word in sentence)
    rng = numpy.random.default_rng(1)
    words = [inventor(rng, capital=False) for _ in range(100)]
    assert all(3 not in vocab.encode([word]) for word in words)  # 3: <unk>
    assert numpy.mean([len(vocab.pieces([word])) for word in words]) > 1.5


def test_a_bpe_trainer_with_one_vocabulary_per_language_never_makes_unk(tmp_path):
    """The letters of the English and French vocabularies differ (``w``, ``ç``, ``ù``): every
    invented word is spelled in pieces both know, so an epoch's examples hold no <unk>."""
    from npformer.tasks.translation.trainer import Trainer, start_run

    options = TrainOptions(name="pieces", runs_dir=str(tmp_path), tokenizer="bpe", bpe_merges=100, unk_rate=0.9,
                           max_pairs=400)
    trainer = Trainer(options, stream=io.StringIO())
    trainer._build(*start_run(options, trainer.run_folder, log=lambda *_: None))
    assert set(trainer.src_vocab.index) != set(trainer.tgt_vocab.index)
    examples = trainer.epoch_examples()
    changed = sum(example != original for example, original in zip(examples, trainer.train_examples))
    assert changed >= 300 and not any(UNK_ID in src + tgt for src, tgt in examples)


def test_a_known_english_word_is_translated_never_copied():
    """A target ``<unk>`` copies only a number, a name, or a word the source vocabulary does not know
    either (``Translator.copyable``); a sentence with none of them never writes ``<unk>``."""
    import npformer
    from npformer.tasks.translation import Translator

    translator = Translator.from_run(npformer.pretrained("toy"))
    typed, read = translator.source_tokens("The cat sees Zorvan and 42 dogs, and I see it")
    flags = dict(zip(typed, translator.copyable(typed, read)))
    assert flags["Zorvan"] and flags["42"], flags  # a name, a number
    assert not flags["The"] and not flags["cat"] and not flags["I"] and not flags["dogs"], flags
    for beam in (1, 3):
        for found in translator.translations(["the cat sees the dog.", "the black cat eats the apple."], beam):
            assert 3 not in found.output_ids and not found.copies, (found.text, found.output_tokens)
        named = translator.translations(["the cat sees Zorvan."], beam)[0]
        assert all(translator.copyable(named.source_typed, named.source_read)[at] for at in named.copies.values())
