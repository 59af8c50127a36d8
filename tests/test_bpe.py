"""Byte-pair encoding (``npformer.data.bpe``): a hand-worked example, exact round trips over
hypothesis-drawn Unicode text, no ``<unk>`` for words of known characters, saving and loading,
and a run trained with ``--tokenizer bpe``."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer.data import BPE, BPEVocab, Vocab, join_pieces, learn_merges, tokenize, toy_corpus
from npformer.data.bpe import END, word_symbols
from npformer.tokens import BOS_ID, EOS_ID, SPECIAL_TOKENS, UNK_ID

# Worked by hand (the module docstring starts it). Pairs and counts, "␣" = END:
#   low 5: l o w␣ | lower 2: l o w e r␣ | newest 6: n e w e s t␣ | widest 3: w i d e s t␣
#   1. (e, s) 9 and (s, t␣) 9 tie; "e" sorts first          -> es
#   2. (es, t␣) 9                                            -> est␣
#   3. (l, o) 7                                              -> lo
#   4. (e, w) 6, (n, e) 6, (w, est␣) 6 tie; "e" sorts first  -> ew      (newest: n ew est␣)
#   5. (ew, est␣) 6 and (n, ew) 6 tie; "ew" < "n"            -> ewest␣
#   6. (n, ewest␣) 6                                         -> newest␣
#   7. (lo, w␣) 5                                            -> low␣
COUNTS = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
HAND_MERGES = [("e", "s"), ("es", "t" + END), ("l", "o"), ("e", "w"), ("ew", "est" + END),
               ("n", "ewest" + END), ("lo", "w" + END)]


def test_merges_reproduce_the_hand_worked_example():
    assert learn_merges(COUNTS, 7) == HAND_MERGES
    bpe = BPE(HAND_MERGES)
    assert bpe.segment("lowest") == ["lo", "w", "est" + END]  # (lo, w) is not a merge: only (lo, w␣) is
    assert bpe.segment("newest") == ["newest" + END]
    assert bpe.segment("lower") == ["lo", "w", "e", "r" + END]
    assert bpe.segment("s") == ["s" + END]


def test_learning_stops_when_no_pair_occurs_twice_and_rejects_bad_counts():
    merges = learn_merges(COUNTS, 1000)
    assert len(merges) < 1000 and merges[:7] == HAND_MERGES
    assert learn_merges({"ab": 1}, 5) == []  # a pair seen once is not worth a symbol
    assert learn_merges(COUNTS, 0) == []
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="n_merges must be an integer >= 0"):
            learn_merges(COUNTS, bad)


def test_overlapping_pairs_merge_left_to_right():
    assert BPE([("a", "a")]).segment("aaa") == ["aa", "a" + END]
    # a a a a␣ -> aa a a␣; then (aa, a) and (a, a␣) tie at 3 and "a" sorts first
    merges = learn_merges({"aaaa": 3}, 2)
    assert merges == [("a", "a"), ("a", "a" + END)]
    assert BPE(merges).segment("aaaa") == ["aa", "aa" + END]


def test_the_same_counts_in_any_order_give_the_same_merges():
    reordered = dict(reversed(list(COUNTS.items())))
    assert learn_merges(reordered, 20) == learn_merges(COUNTS, 20)


words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda text: not any(char.isspace() for char in text))


@settings(max_examples=200, deadline=None)
@given(sentence=st.lists(words, min_size=1, max_size=6), merges=st.integers(0, 40))
def test_pieces_join_back_into_exactly_the_words(sentence, merges):
    learned = learn_merges({word: 2 for word in sentence}, merges)
    pieces = [piece for word in sentence for piece in BPE(learned).segment(word)]
    assert join_pieces(pieces) == sentence
    assert sum(piece.endswith(END) for piece in pieces) == len(sentence)  # one word end per word
    assert all(END not in piece[:-1] for piece in pieces)  # and never inside a piece


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=60), merges=st.integers(0, 60))
def test_any_text_round_trips_through_a_vocabulary_learned_on_it(text, merges):
    sentence = tokenize(text, "fr")
    vocab = BPEVocab.learn([sentence], merges)
    ids = vocab.encode(sentence, add_bos=True, add_eos=True)
    assert UNK_ID not in ids
    assert vocab.decode(ids) == sentence
    assert vocab.join(vocab.pieces(sentence)) == sentence


def test_every_training_word_and_every_new_word_of_known_characters_has_no_unk():
    splits = toy_corpus()
    english = [tokenize(e, "en") for e, _ in splits.train]
    vocab = BPEVocab.learn(english, 200)
    assert len(vocab) <= len(SPECIAL_TOKENS) + 2 * len({c for s in english for w in s for c in w}) + 200
    assert all(UNK_ID not in vocab.encode(sentence) for sentence in english)
    new_word = "gobbledygook"  # never in the corpus; every letter is
    assert new_word not in {w for s in english for w in s}
    assert UNK_ID not in vocab.encode([new_word]) and vocab.decode(vocab.encode([new_word])) == [new_word]
    assert vocab.encode(["ß"]) == [UNK_ID]  # a character never seen is the one way to <unk>


def test_decoding_stops_at_eos_and_keeps_an_unfinished_word():
    vocab = BPEVocab.learn([["chat", "chats"], ["chat"]], 10)
    ids = vocab.encode(["chats", "chat"])
    assert vocab.decode([BOS_ID] + ids + [EOS_ID] + ids) == ["chats", "chat"]
    pieces = vocab.pieces(["chats"])
    assert len(pieces) > 1
    unfinished = vocab.encode(["chats"])[:-1]  # the model stopped inside the word
    assert vocab.decode(unfinished) == ["".join(pieces[:-1])]
    assert vocab.whole_word("Tom") == "Tom" + END and vocab.join(["Tom" + END]) == ["Tom"]


def test_word_symbols_mark_the_last_character():
    assert word_symbols("chat") == ["c", "h", "a", "t" + END]
    assert word_symbols("à") == ["à" + END]
    with pytest.raises(ValueError, match="at least one character"):
        word_symbols("")


def test_saving_and_loading_keeps_the_merges(tmp_path):
    vocab = BPEVocab.learn([tokenize(e, "en") for e, _ in toy_corpus().train[:500]], 50)
    path = tmp_path / "vocab.json"
    vocab.save(str(path))
    loaded = Vocab.load(str(path))
    assert isinstance(loaded, BPEVocab) and loaded.tokens == vocab.tokens and loaded.merges == vocab.merges
    sentence = tokenize("the green apples do not like a small boy.", "en")
    assert loaded.encode(sentence) == vocab.encode(sentence)
    word_vocab = Vocab.build([["a", "b"]])
    word_vocab.save(str(path))
    assert type(Vocab.load(str(path))) is Vocab
    path.write_text(json.dumps({"tokens": vocab.tokens, "merges": [["a"]]}))
    with pytest.raises(ValueError, match="'merges' must be a list of"):
        Vocab.load(str(path))


def test_a_run_trained_with_bpe_stores_its_merges_and_translates_words(tmp_path):
    import io

    from npformer import cli
    from npformer.tasks.translation import TrainOptions, Translator, train
    from npformer.tasks.translation.attention import attention_of
    from npformer.tasks.translation import load_run

    options = TrainOptions(runs_dir=str(tmp_path), name="bpe", max_steps=30, tokenizer="bpe", bpe_merges=60,
                           joint_vocab=True, d_model=16, d_ff=32, n_layers=1, n_heads=2, eval_every=1000,
                           test_sentences=10)
    log = io.StringIO()
    assert train(options, stream=log) == 0
    assert "BPE: 60 merges (joint)" in log.getvalue()
    saved = json.loads((tmp_path / "bpe" / "tgt_vocab.json").read_text())
    assert len(saved["merges"]) == 60 and saved == json.loads((tmp_path / "bpe" / "src_vocab.json").read_text())
    run = load_run(str(tmp_path / "bpe"))
    assert isinstance(run.src_vocab, BPEVocab) and isinstance(run.tgt_vocab, BPEVocab)
    translator = Translator.from_run(run)
    [translation] = translator.translate(["the black cat eats the apple"], beam_size=2)
    assert translation and "  " not in translation  # pieces joined into words, one space between
    assert translator.unknown_words(["the zebra eats"]) == []  # a new word of known letters is no <unk>
    sentence = attention_of(run, "the black cat eats the gobbledygook")
    rows, columns = sentence.labels["cross"]
    assert sentence.attention["cross"][0].shape[1:] == (len(rows), len(columns))  # one label per piece
    assert len(columns) > len("the black cat eats the gobbledygook .".split())
    assert cli.main(["translate", "--run", str(tmp_path / "bpe"), "a small dog"]) == 0
