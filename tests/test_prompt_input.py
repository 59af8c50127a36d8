"""Input as people type it into a prompt (issue 65): no final mark, French by mistake, nothing the
model knows, a name it holds too seldom to spell; on the shipped Tatoeba translator and on tiny runs."""

import json

import pytest

import npformer
from npformer import cli
from npformer.data import tokenize
from npformer.data.final_mark import GUESS, final_mark, marks_of
from npformer.data.truecase import Truecaser
from npformer.metrics import bleu
from npformer.tasks.translation import RunFolder, Translator
from npformer.tasks.translation.input_notes import input_note, looks_like_target

TYPED = ["I am tired", "my name is John", "I love pizza", "what time is it", "the weather is nice today"]


@pytest.fixture(scope="module")
def fra():
    return Translator.from_run(npformer.pretrained("fra"))


@pytest.fixture(scope="module")
def test_pairs():
    return RunFolder(npformer.pretrained("fra").folder).split("test")


@pytest.mark.parametrize("typed, mark", [
    ("I am tired", "."), ("what time is it", "?"), ("my name is John", "."), ("Is it far", "?"),
    ("Can you help me", "?"), ("Who's there", "?"), ("What a relief", "!"), ("How beautiful she is", "!"),
    ("How old is he", "?"), ("Don't cry", "."), ("Don't you like it", "?"), ("Do it this way", "."),
    ("Have a nice trip", "."), ("Have you seen him", "?"), ("You're tired, aren't you", "?"),
    ("Tom is here, right", "?"), ("When I run, I get sweaty", "."), ("What you need is a friend", "."),
    ("Hey, what was that", "?"), ("So where are we", "?"), ("What's the matter? Just tell me", "."),
    ("Just tell me. What's the matter", "?"), ("How about you", "?"), ("How come you're late", "?"), ("", "."),
])
def test_the_final_mark_is_the_one_the_words_ask_for(typed, mark):
    assert final_mark(tokenize(typed)) == mark


def test_the_guessed_mark_tells_questions_from_statements_in_the_test_split(test_pairs):
    marks = [tokenize(english)[-1] for english, _ in test_pairs]
    guessed = [final_mark(tokenize(english)[:-1]) for english, _ in test_pairs]
    right = sum((mark == "?") == (guess == "?") for mark, guess in zip(marks, guessed)) / len(test_pairs)
    assert right >= 0.995, right        # 99.78% (benchmarks/RESULTS.md)


def test_a_training_text_that_ends_its_sentences_with_marks_asks_for_them():
    assert marks_of([tokenize(text) for text in ["I see.", "Why?", "Run!", 'He said "hi."']]) == GUESS
    assert marks_of([tokenize(text) for text in ["i see", "the cat eats", "why?"]]) is None and marks_of([]) is None


def test_the_shipped_translator_gives_unmarked_input_the_mark_its_words_ask_for(fra):
    assert fra.final_mark == GUESS
    assert fra.read("what time is it").read[-1] == "?" and fra.read("I am tired").read[-1] == "."
    assert fra.read('He said "hi."').read[-1] == '"'          # a mark inside closing quotes is a mark
    assert [fra.read(sentence).read[-1] for sentence in TYPED] == [".", ".", ".", "?", "."]
    typed = fra.translate(TYPED, beam_size=4)
    marked = fra.translate([sentence + final_mark(tokenize(sentence)) for sentence in TYPED], beam_size=4)
    assert typed == marked and typed[0] == "Je suis fatigué." and typed[2] == "J'adore la pizza.", typed
    for text in typed:                                          # no word pair said twice
        words = [word for word in tokenize(text.lower(), "fr") if word.isalnum()]
        assert len(set(zip(words, words[1:]))) == len(words) - 1, text


def test_unmarked_lower_cased_input_scores_as_written_input_on_the_first_200_test_pairs(fra, test_pairs):
    pairs = test_pairs[:200]
    references = [french for _, french in pairs]
    written = bleu(fra.translate([english for english, _ in pairs]), references)
    unmarked = bleu(fra.translate([english.rstrip(".!?").lower() for english, _ in pairs]), references)
    assert unmarked >= written - 1.0, (written, unmarked)    # read as typed, the whole split lost 17.5


def test_french_typed_by_mistake_is_told_from_english(fra, test_pairs):
    english = sum(looks_like_target(fra, fra.read(source)) for source, _ in test_pairs)
    french = sum(looks_like_target(fra, fra.read(target)) for _, target in test_pairs)
    assert english == 0 and french >= 0.98 * len(test_pairs), (english, french)


def test_what_the_model_cannot_read_gets_one_line_and_is_left_as_typed(fra, capsys):
    long_french = "Je ne parle pas anglais. " * 4
    sentences = ["I am tired", "🍕", "Je ne parle pas anglais.", "Bonjour Tom", "Zorvan lives here", long_french]
    assert [input_note(fra, fra.read(sentence), number) for number, sentence in enumerate(sentences, 1)] == [
        None, "sentence 2 holds no word the model knows, so it is left as typed",
        "sentence 3 looks like French: this model translates English into French, so it is left as typed",
        "sentence 4 looks like French: this model translates English into French, so expect a poor translation",
        None, "sentence 6 looks like French: this model translates English into French, so it is left as typed"]
    assert fra.translate(sentences[:3])[1:] == ["🍕", "Je ne parle pas anglais."]
    assert cli.main(["translate", "--pretrained", "fra", "--beam", "1", *sentences]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith(("npformer translate: sentence", "npformer translate: words"))]
    assert [note.split(": ", 2)[1][:10] for note in notes] == ["words the ", *["sentence %d" % n for n in (2, 3, 4, 6)]]
    assert notes[0].endswith("never saw (copied from the source or guessed): Zorvan")   # not the French words
    assert "words" not in notes[-1]          # left as typed: no note about its length


def test_a_run_records_the_final_mark_its_training_text_asks_for_and_an_older_run_reads_as_typed():
    assert npformer.pretrained("toy").config["input"]["final_mark"] == GUESS      # "where is the cat?"
    toy = Translator.from_run(npformer.pretrained("toy"))
    assert toy.read("where is the cat").read[-1] == "?" and toy.read("the cat is white").read[-1] == "."
    older = Translator.for_config(toy.model, toy.src_vocab, toy.tgt_vocab, {"input": {"final_mark": None}})
    assert older.read("where is the cat").read[-1] == "cat"                      # written before issue 65
    assert Translator.for_config(toy.model, toy.src_vocab, toy.tgt_vocab, {}).final_mark is None


def test_a_name_the_training_text_holds_too_seldom_to_spell_is_copied(fra):
    assert "Berlin" in fra.truecaser.rare_names and "Tom" not in fra.truecaser.rare_names
    [text] = fra.translate(["I met Angela Merkel in Berlin."], beam_size=4)
    assert "Angela Merkel" in text and "Berlin" in text, text


def test_rare_names_are_learned_saved_and_absent_from_an_older_truecaser(tmp_path):
    pairs = [("I live in Tokyo.", "Je vis à Tokyo.")] * 12 + [("I was in Oslo.", "J'étais à Oslo.")]
    truecaser = Truecaser.learn((tokenize(english), tokenize(french, "fr")) for english, french in pairs)
    assert truecaser.rare_names == {"Oslo"}
    truecaser.save(str(tmp_path / "truecase.json"))
    document = json.loads((tmp_path / "truecase.json").read_text(encoding="utf-8"))
    assert Truecaser.from_dict(document).rare_names == {"Oslo"}
    del document["rare_names"]                               # written before issue 65
    assert Truecaser.from_dict(document).rare_names == frozenset()
    with pytest.raises(ValueError, match="not a truecaser"):
        Truecaser.from_dict({**document, "rare_names": "Oslo"})
