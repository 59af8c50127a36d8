"""Input as people type it (issue 47): case, names and long sentences, on the shipped Tatoeba
translator and on tiny runs; and the run folder's ``truecase.json``."""

import io
import json
import os
import warnings

import pytest

import npformer
from npformer import cli
from npformer.data import tokenize
from npformer.data.truecase import Truecaser
from npformer.tasks.translation import RunError, RunFolder, TrainOptions, Translator, load_run, train
from npformer.tasks.translation.result import piece_labels

TRAINING = [("Tom lives in Boston.", "Tom vit à Boston."), ("I think Tom is in the garden.", "Je pense que Tom est au jardin."),
            ("Where is the station?", "Où est la gare ?"), ("Mary and I see the cat.", "Mary et moi voyons le chat.")]


@pytest.fixture(scope="module")
def truecaser():
    return Truecaser.learn((tokenize(english, "en"), tokenize(french, "fr")) for english, french in TRAINING)


@pytest.fixture(scope="module")
def fra():
    return Translator.from_run(npformer.pretrained("fra"))


def test_the_truecaser_keeps_each_word_as_it_is_written_inside_a_sentence(truecaser):
    assert truecaser.forms["tom"] == "Tom" and truecaser.forms["i"] == "I" and truecaser.forms["the"] == "the"
    assert truecaser.forms["where"] == "where"  # met only first in a sentence: lower case
    assert truecaser.names[:2] == ["Tom", "Boston"] or set(truecaser.names[:3]) >= {"Tom", "Boston"}
    assert truecaser.truecase(tokenize("WHERE IS TOM?")) == ["Where", "is", "Tom", "?"]
    assert truecaser.truecase(tokenize("where is tom?")) == ["Where", "is", "Tom", "?"]
    # unknown words: as typed, or capitalised in a sentence typed all in capitals (most often a name)
    assert truecaser.truecase(tokenize("where is zorvan?")) == ["Where", "is", "zorvan", "?"]
    assert truecaser.truecase(tokenize("WHERE IS ZORVAN?")) == ["Where", "is", "Zorvan", "?"]
    assert truecaser.knows("BOSTON") and not truecaser.knows("Zorvan")


def test_a_name_the_target_translates_does_not_stand_in_for_unknown_ones():
    pairs = [("I see Mary.", "Je vois Marie."), ("I see Mary.", "Je vois Mary."), ("I know Tom.", "Je connais Tom.")] * 5
    truecaser = Truecaser.learn((tokenize(english), tokenize(french, "fr")) for english, french in pairs)
    assert truecaser.names == ["Tom"]   # "Mary" is written "Marie" half the time


def test_the_truecaser_is_saved_and_read_back_and_a_damaged_one_is_refused(truecaser, tmp_path):
    path = tmp_path / "truecase.json"
    truecaser.save(str(path))
    again = Truecaser.from_dict(json.loads(path.read_text(encoding="utf-8")))
    assert again.forms == truecaser.forms and again.names == truecaser.names
    for damaged in ({"forms": {}}, {"kind": "truecaser", "forms": {"a": 1}}, [], {"kind": "truecaser", "forms": {}, "names": "Tom"}):
        with pytest.raises(ValueError, match="not a truecaser"):
            Truecaser.from_dict(damaged)


@pytest.mark.parametrize("typed", ["WHERE IS THE STATION?", "where is the station?"])
def test_the_shipped_translator_reads_input_typed_without_case_as_written(fra, typed):
    assert fra.translate([typed], beam_size=4) == fra.translate(["Where is the station?"], beam_size=4)
    assert fra.translate(["Où"])  # French typed by mistake still gives something


def test_a_sentence_typed_with_capitals_is_read_as_typed(fra):
    typed, read = fra.source_tokens("Where is tom?")
    assert read == typed == ["Where", "is", "tom", "?"]
    _, read = fra.source_tokens("WHERE IS TOM?")
    assert read == ["Where", "is", "Tom", "?"]


def test_an_unknown_name_is_copied_letter_for_letter_by_the_piece_model(fra):
    found = fra.translations(["Zorvan lives in Quillet.", "ZORVAN LIKES CATS.", "Tom and Velmira are friends."],
                             beam_size=4)
    assert found[0].source_read[0] == "Tom" and found[0].source_read[3] == "Boston"   # the names read in their places
    assert "Zorvan" in found[0].text and "Quillet" in found[0].text, found[0].text
    assert "Zorvan" in found[1].text and "Velmira" in found[2].text and "Tom" in found[2].text
    assert found[2].text.count("Tom") == 1
    copied = {found[0].output_labels[position]: found[0].source_labels[source]
              for position, source in found[0].copies.items()}
    assert copied == {"Zorvan": "Zorvan", "Quillet": "Quillet"}
    assert found[0].source_labels[:1] == ["Zorvan"]   # a figure shows the name typed


def test_translate_names_the_words_the_model_never_saw(fra, capsys):
    assert fra.unknown_words(["Zorvan lives in Quillet.", "Where is the station?"]) == ["Zorvan", "Quillet"]
    assert cli.main(["translate", "--pretrained", "fra", "--beam", "1", "Zorvan lives in Quillet."]) == 0
    assert "never saw (copied from the source or guessed): Zorvan, Quillet" in capsys.readouterr().err


def test_a_known_word_with_a_capital_is_not_taken_for_a_name(fra):
    assert fra.stand_ins(["The", "cat", "sleeps", "."]) == []
    assert fra.stand_ins(["Boston", "is", "big", "."]) == []
    assert fra.stand_ins(["I", "met", "Angela", "Merkel", "in", "Zorvan", "."]) == [(2, 3, "Tom"), (5, 5, "Boston")]


def test_a_run_of_unknown_capitalised_words_is_one_name(fra):
    [found] = fra.translations(["I met Angela Merkel in Berlin."], beam_size=4)
    assert "Angela Merkel" in found.text, found.text
    assert "Angela Merkel" in found.source_labels


def test_piece_labels_mark_the_pieces_that_continue_a_word():
    assert piece_labels(["Zor", "van ", "vit ", "à ", "Qu", "ill", "et ", ". "]) == \
        ["Zor", "·van", "vit", "à", "Qu", "·ill", "·et", "."]
    assert piece_labels(["<bos>", "le", "chat"], pieces=False) == ["<bos>", "le", "chat"]


LONG = ("Tom went to the station early this morning because he wanted to catch the first train. "
        "Mary stayed at home. She read a book about the history of France and its old kings.")


def test_a_long_input_is_translated_in_sentences_and_said_so(fra):
    parts = fra.parts(LONG)
    assert parts == ["Tom went to the station early this morning because he wanted to catch the first train.",
                     "Mary stayed at home.", "She read a book about the history of France and its old kings."]
    [translation] = fra.translate([LONG])
    assert translation == " ".join(fra.translate(parts))
    notes = fra.length_notes(["Where is the station?", LONG, "one two three four five six seven eight nine ten "
                                                               "eleven twelve thirteen fourteen fifteen sixteen seventeen"])
    assert notes == ["sentence 2 has 33 words, more than the 16 of the longest sentences the model was trained on: "
                     "translated in 3 parts",
                     "sentence 3 has 17 words, more than the 16 of the longest sentences the model was trained on, "
                     "and no sentence end to split it at: it is translated whole and may lose some of its meaning "
                     "(shorter sentences translate better)"], notes
    assert fra.parts("Where is the station?") == ["Where is the station?"]


def test_nothing_is_cut_from_input_longer_than_the_model_reads(fra):
    words = " ".join(f"cat{n}" for n in range(60)) + "."   # more than 64 pieces, one sentence
    parts = fra.parts(words)
    assert len(parts) > 1 and " ".join(parts).replace(" .", ".") == words
    assert all(len(fra.src_vocab.pieces(tokenize(part))) <= fra.model.config.max_len for part in parts)
    with pytest.warns(UserWarning, match="the rest is cut"):
        fra.translations([words])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fra.translate([words])


def test_translate_prints_a_note_for_long_input(capsys):
    assert cli.main(["translate", "--pretrained", "fra", "--beam", "1", LONG]) == 0
    captured = capsys.readouterr()
    assert "sentence 1 has 33 words, more than the 16" in captured.err and "translated in 3 parts" in captured.err and captured.out.count("\n") == 1


def data_options(tmp_path, **overrides):
    pairs = tmp_path / "pairs.txt"
    numbered = [(f"Tom sees the cat {n}.", f"Tom voit le chat {n}.") for n in range(40)]
    pairs.write_text("".join(f"{english}\t{french}\n" for english, french in TRAINING + numbered), encoding="utf-8")
    settings = dict(data=str(pairs), runs_dir=str(tmp_path / "runs"), name="mine", d_model=16, d_ff=32, n_layers=1,
                    n_heads=2, max_steps=3, warmup=1, eval_every=1000, test_sentences=2, beam_size=1, max_words=8)
    settings.update(overrides)
    return TrainOptions(**settings)


def test_a_run_on_data_writes_its_truecaser_and_reads_it_back(tmp_path):
    stream = io.StringIO()
    assert train(data_options(tmp_path), stream=stream) == 0
    folder = tmp_path / "runs" / "mine"
    run = load_run(str(folder))
    assert run.truecaser is not None and run.truecaser.forms["tom"] == "Tom"
    assert Translator.from_run(run).truecaser is run.truecaser and Translator.from_run(run).trained_words == 8
    log = stream.getvalue()
    assert f"wrote {folder}: " in log and "curves.png (loss, BLEU and learning rate)" in log and "truecase.json" in log
    (folder / "truecase.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RunError, match="truecase.json is damaged"):
        load_run(str(folder))
    os.remove(folder / "truecase.json")          # a run written before issue 47
    assert load_run(str(folder)).truecaser is None and RunFolder(str(folder)).truecaser() is None


def test_resuming_a_run_that_has_trained_its_budget_says_so_and_exits_2(tmp_path, capsys):
    assert train(data_options(tmp_path), stream=io.StringIO()) == 0
    arguments = ["train", "--data", str(tmp_path / "pairs.txt"), "--runs-dir", str(tmp_path / "runs"), "--name", "mine",
                 "--resume", "--max-steps", "3"]
    assert cli.main(arguments) == 2
    assert "has already trained 3 steps, its whole budget (--max-steps 3)" in capsys.readouterr().err


def test_resuming_a_timed_run_that_has_spent_its_minutes_says_so_and_exits_2(tmp_path, capsys):
    """``--minutes`` without ``--max-steps``: a resume after the time is spent would train a second
    budget from a schedule started over; it is refused in one line, and the run is left as it was."""
    assert train(data_options(tmp_path, max_steps=None, minutes=0.002), stream=io.StringIO()) == 0
    checkpoint = tmp_path / "runs" / "mine" / "checkpoint.npz"
    before = checkpoint.stat().st_mtime_ns
    arguments = ["train", "--data", str(tmp_path / "pairs.txt"), "--runs-dir", str(tmp_path / "runs"), "--name", "mine",
                 "--resume", "--minutes", "0.002"]
    assert cli.main(arguments) == 2
    assert "its whole budget (--minutes 0.002)" in capsys.readouterr().err
    assert checkpoint.stat().st_mtime_ns == before


@pytest.mark.parametrize("warmup, said", [(300, True), (2, False)])
def test_a_run_that_ends_inside_its_warmup_says_so(tmp_path, warmup, said):
    stream = io.StringIO()
    assert train(data_options(tmp_path, warmup=warmup), stream=stream) == 0
    assert ("the learning rate warms up over 300 steps, more than the 3 of this run" in stream.getvalue()) is said


def test_long_words_adds_longer_pairs_to_training_and_holds_some_out(tmp_path):
    """``--long-words``: the validation and test splits stay those of ``--max-words``; the longer pairs
    go to training, a tenth of their English sentences held out in ``long.tsv``, none in two places."""
    longer = [(f"Tom sees the old black cat {n} in the garden today.", f"Tom voit le vieux chat noir {n} au jardin.")
              for n in range(60)]
    pairs = tmp_path / "with-longer.txt"
    numbered = [(f"Tom sees the cat {n}.", f"Tom voit le chat {n}.") for n in range(40)]
    # a long French for each short English sentence: where that English is in the validation or test
    # split, the pair must stay out of training
    long_french = [(english, f"Tom voit vraiment le petit chat numéro {n} dans le grand jardin.")
                   for n, (english, _) in enumerate(numbered)]
    pairs.write_text("".join(f"{e}\t{f}\n" for e, f in TRAINING + numbered + longer + long_french), encoding="utf-8")
    short = data_options(tmp_path, data=str(pairs), name="short")
    both = data_options(tmp_path, data=str(pairs), name="both", long_words=16)
    assert train(short, stream=io.StringIO()) == 0 and train(both, stream=io.StringIO()) == 0
    first, second = RunFolder(str(tmp_path / "runs" / "short")), RunFolder(str(tmp_path / "runs" / "both"))
    assert first.split("test") == second.split("test") and first.split("valid") == second.split("valid")
    held_out, trained = second.split("long"), second.split("train")
    evaluated = {e for e, _ in second.split("valid") + second.split("test")}
    assert evaluated & {e for e, _ in long_french}, "the test must hold a long pair whose English is evaluated"
    assert not {e for e, _ in held_out} & {e for e, _ in trained}
    assert not {e for e, _ in held_out + trained} & evaluated
    assert len(held_out) >= 6 and len(trained) + len(held_out) == len(first.split("train")) + 60 + 40 - \
        len(evaluated & {e for e, _ in long_french})
    assert not os.path.exists(first.path("long.tsv"))
    assert load_run(second.folder).config["data"]["long_held_out"] == len(held_out)
    assert Translator.from_run(load_run(second.folder)).trained_words == 16
    with pytest.raises(ValueError, match="long_words needs data and must be more than max_words"):
        data_options(tmp_path, long_words=8).check()
