"""Tokenizer, vocabulary, the embedded corpus, the Tatoeba loader and batching."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer import nn, ops, tokens
from npformer.data import (Vocab, detokenize, encode_pairs, load_pairs, make_batches, normalize,
                           split_by_source, tokenize, toy_corpus)



# --- tokenizer -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, tokens", [
    ("L'homme n'aime pas les chats noirs !", ["L'", "homme", "n'", "aime", "pas", "les", "chats", "noirs", "!"]),
    ("Il est parti aujourd'hui.", ["Il", "est", "parti", "aujourd'hui", "."]),
    ("« Bonjour », dit-il : où est-ce ?", ["«", "Bonjour", "»", ",", "dit-il", ":", "où", "est-ce", "?"]),
    ("Qu'est-ce que c'est\u202f?", ["Qu'", "est-ce", "que", "c'", "est", "?"]),
    ("Jusqu'à demain, j'attends.", ["Jusqu'", "à", "demain", ",", "j'", "attends", "."]),
    ("Il coûte 3,50 euros.", ["Il", "coûte", "3,50", "euros", "."]),
])
def test_french_tokenisation(text, tokens):
    assert tokenize(text, "fr") == tokens


def test_english_keeps_contractions_and_splits_punctuation():
    assert tokenize("I don't know, Tom. (Really?)", "en") == [
        "I", "don't", "know", ",", "Tom", ".", "(", "Really", "?", ")"]


@pytest.mark.parametrize("text, lang", [
    ("L'homme n'aime pas les chats noirs !", "fr"),
    ("« Bonjour », dit-il : où est-ce ?", "fr"),
    ("Qu'est-ce que c'est ?", "fr"),
    ("I don't know, Tom. (Really?)", "en"),
    ("Where is the cat?", "en"),
])
def test_detokenisation_gives_the_normal_sentence_back(text, lang):
    assert detokenize(tokenize(text, lang), lang) == text


def test_apostrophes_and_spaces_are_normalised():
    assert normalize("L\u2019homme\u00a0!  ") == "L'homme !"
    assert tokenize("Cours\u202f!", "fr") == ["Cours", "!"]
    assert normalize("e\u0301te\u0301") == "\u00e9t\u00e9"  # NFC


words = st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=8)
punctuation = st.sampled_from([".", ",", "!", "?", ";", ":", "«", "»", "(", ")"])


@given(st.lists(st.one_of(words, punctuation), min_size=1, max_size=12), st.sampled_from(["en", "fr"]))
def test_tokenize_detokenize_round_trip_on_unicode(tokens, lang):
    """Tokens -> text -> tokens is the identity (for NFC words and punctuation)."""
    tokens = [normalize(t) for t in tokens]
    assert tokenize(detokenize(tokens, lang), lang) == tokens


@given(st.text(max_size=60), st.sampled_from(["en", "fr"]))
def test_tokenize_never_fails_and_is_stable(text, lang):
    tokens = tokenize(text, lang)
    assert all(token.strip() == token and token for token in tokens)
    assert tokenize(detokenize(tokens, lang), lang) == tokens


def test_tokenizer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="lang must be one of"):
        tokenize("hello", "de")
    with pytest.raises(TypeError, match="text must be a str"):
        tokenize(b"hello")


# --- vocabulary ----------------------------------------------------------------------------

def test_vocab_specials_frequency_order_and_unknowns(tmp_path):
    vocab = Vocab.build([["le", "chat", "le"], ["le", "chien"], ["chat"]], min_freq=2)
    assert vocab.tokens == ["<pad>", "<bos>", "<eos>", "<unk>", "le", "chat"]
    assert vocab.encode(["le", "chien"], add_bos=True, add_eos=True) == [tokens.BOS_ID, 4, tokens.UNK_ID, tokens.EOS_ID]
    assert vocab.decode([tokens.BOS_ID, 4, 5, tokens.EOS_ID, 4]) == ["le", "chat"]
    assert len(Vocab.build([["a", "b", "c"]], max_size=5)) == 5
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").tokens == vocab.tokens
    with pytest.raises(ValueError, match="must start with"):
        Vocab(["a", "b"])


# --- the embedded corpus -------------------------------------------------------------------

def test_toy_corpus_is_deterministic_with_disjoint_sources_and_novel_test_pairs():
    from npformer.data.toy_corpus import HELD_OUT_PAIRS, NOUNS

    plural = {singular: plural for singular, plural, *_ in NOUNS}

    splits = toy_corpus(n_train=3000, n_valid=200, n_test=300, seed=1)
    assert splits.counts() == {"train": 3000, "valid": 200, "test": 300}
    assert splits.train == toy_corpus(n_train=3000, n_valid=200, n_test=300, seed=1).train
    sources = [{e for e, _ in part} for part in (splits.train, splits.valid, splits.test)]
    assert not (sources[0] & sources[1]) and not (sources[0] & sources[2]) and not (sources[1] & sources[2])
    # every held-out (noun, adjective) pair is absent from training ...
    train_text = " ".join(e for e, _ in splits.train)
    for noun, adjective in HELD_OUT_PAIRS:
        assert f"{adjective} {noun}" not in train_text
    # ... and every test sentence uses one of them
    for english, _ in splits.test:
        words = english.rstrip(".?").split()
        assert any((noun in words or plural[noun] in words) and adjective in words
                   for noun, adjective in HELD_OUT_PAIRS), english


@pytest.mark.parametrize("phenomenon", [
    "l'oiseau", "j'aime", "n'", "est-ce qu'", "pas de", "bel ", "les chats", "blanche", "où sont", "voyons",
])
def test_toy_corpus_shows_the_french_phenomena(phenomenon):
    french = " ".join(f for _, f in toy_corpus().train)
    assert phenomenon in french


# --- the Tatoeba loader --------------------------------------------------------------------

def test_loader_counts_and_reports_malformed_lines(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)\n".encode()
        + b"no tab here\n"
        + "Hi.\t\n".encode()
        + b"\xff\xfe broken\tbytes\n"
        + "Run!\tCours\u202f!\n".encode()
        + "Go.\tVa !\n".encode()
        + b"\n"
        + "A very long sentence with many words in it.\tUne phrase.\n".encode()
    )
    pairs, report = load_pairs(str(path), max_words=5)
    assert pairs == [("Go.", "Va !"), ("Run!", "Cours\u202f!")]
    assert report.problems == {"no tab": [2], "empty side": [3], "not UTF-8": [4], "empty line": [7]}
    assert report.duplicates == 1 and report.too_long == 1 and report.lines == 8
    summary = report.summary()
    assert "1 malformed (no tab): lines 2" in summary and "not UTF-8" in summary
    lowered, _ = load_pairs(str(path), max_words=5, lowercase=True, max_pairs=1)
    assert lowered == [("go.", "va !")]
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pairs(str(tmp_path / "missing.txt"))


def test_split_by_source_keeps_every_translation_of_a_sentence_together():
    pairs = [(f"sentence {i}", f"phrase {i} {j}") for i in range(200) for j in range(3)]
    splits = split_by_source(pairs, valid_fraction=0.1, test_fraction=0.1, seed=3)
    sources = [{e for e, _ in part} for part in (splits.train, splits.valid, splits.test)]
    assert [len(s) for s in sources] == [160, 20, 20]
    assert not (sources[0] & sources[1]) and not (sources[0] & sources[2]) and not (sources[1] & sources[2])
    assert len(splits.train) + len(splits.valid) + len(splits.test) == 600


def test_splits_of_a_file_sorted_by_length_are_fair_samples_of_it():
    """fra.txt is sorted by length. Drawn in the file's order, the test split would be its shortest
    sentences (and BLEU inflated); each split, and the first pairs of each (a validation sample),
    must have the file's mean length, within sampling error."""
    pairs = [(" ".join(["word"] * (1 + i // 40)) + f" {i}.", f"mot {i}.") for i in range(400)]  # 2 to 11 words
    splits = split_by_source(pairs, valid_fraction=0.1, test_fraction=0.1, seed=0)
    words = lambda part: np.mean([len(english.split()) for english, _ in part])  # noqa: E731
    overall = words(pairs)
    for part in (splits.train, splits.valid, splits.test, splits.train[:40]):
        assert abs(words(part) - overall) < 0.2 * overall, (words(part), overall)


def test_loader_on_the_real_fra_eng_file(shared_fra_eng):
    pairs, report = load_pairs(str(shared_fra_eng), max_words=8)
    assert report.lines == 167_130
    assert len(pairs) == 127_422 and not report.problems  # SOURCES.md: 127,422 pairs of <= 8 words
    splits = split_by_source(pairs)
    assert not ({e for e, _ in splits.train} & {e for e, _ in splits.test})


# --- batching ------------------------------------------------------------------------------

def test_batches_respect_the_budget_pad_correctly_and_give_the_right_masks():
    pairs = toy_corpus(n_train=400, n_valid=0, n_test=0).train
    src_vocab = Vocab.build(tokenize(e, "en") for e, _ in pairs)
    tgt_vocab = Vocab.build(tokenize(f, "fr") for _, f in pairs)
    examples = encode_pairs(pairs, src_vocab, tgt_vocab, max_len=64)
    batches = make_batches(examples, token_budget=300, rng=np.random.default_rng(0))
    assert sum(len(b.src) for b in batches) == len(examples)
    again = make_batches(examples, token_budget=300, rng=np.random.default_rng(0))
    assert all(np.array_equal(a.src, b.src) for a, b in zip(batches, again))
    for batch in batches:
        assert len(batch.src) * max(batch.src.shape[1], batch.tgt_in.shape[1]) <= 300
        assert np.all(batch.tgt_in[:, 0] == tokens.BOS_ID)
        # the decoder input is the target shifted right: tgt_in[t + 1] == tgt_out[t] where real
        real = batch.tgt_in[:, 1:] != tokens.PAD_ID
        np.testing.assert_array_equal(batch.tgt_in[:, 1:][real], batch.tgt_out[:, :-1][real])
        assert np.all((batch.tgt_out == tokens.EOS_ID).sum(axis=1) == 1)
        mask = ops.padding_mask(batch.src)
        np.testing.assert_array_equal(mask[:, 0, 0], batch.src != tokens.PAD_ID)
    with pytest.raises(ValueError, match="token_budget must be at least"):
        make_batches(examples, token_budget=3)
