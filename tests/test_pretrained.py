"""The translator that ships in the package: it loads without a clone's runs, still scores what it
scored when it was built, and the commands take it with --pretrained (never writing into the package)."""

import os

import pytest

import npformer
from npformer import cli
from npformer.tasks.translation import Translator, test_bleu
from npformer.tasks.translation.pretrained import available, pretrained_folder, pretrained_record
from npformer.tasks.translation import RunError, RunFolder


def test_the_toy_translator_ships_small_and_translates():
    assert available() == ["fra", "toy"]
    folder = pretrained_folder("toy")
    assert sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)) < 1_500_000
    run = npformer.pretrained("toy")
    [translation] = Translator.from_run(run).translate(["the black cat eats the white apple."])
    assert translation == "le chat noir mange la pomme blanche."


def test_the_shipped_weights_still_give_their_recorded_test_bleu():
    record = pretrained_record("toy")
    run = npformer.pretrained("toy")
    pairs = RunFolder(run.folder).split("test")
    assert len(pairs) == record["sentences"]
    again = test_bleu(Translator.from_run(run), pairs[:300], beam_size=1)
    assert again["bleu_greedy"] == pytest.approx(record["first_300"]["bleu_greedy"], abs=0.05)


def test_an_unknown_name_is_one_clear_line():
    with pytest.raises(RunError, match="no pretrained translator named 'big'; there is: fra, toy"):
        npformer.pretrained("big")


def test_the_commands_take_it_and_write_nothing_into_the_package(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(pretrained_folder("toy")))
    assert cli.main(["translate", "--pretrained", "toy", "--beam", "1", "the black cat eats the white apple."]) == 0
    assert "le chat noir mange la pomme blanche." in capsys.readouterr().out
    assert cli.main(["attention", "--pretrained", "toy", "the black cat eats the white apple."]) == 0
    assert (tmp_path / "attention-cross.png").exists()
    assert sorted(os.listdir(pretrained_folder("toy"))) == before
    assert cli.main(["translate", "--pretrained", "toy", "--run", "x", "the cat"]) == 2
    assert "not both" in capsys.readouterr().err


def _size(folder):
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


def test_the_tatoeba_translator_ships_in_float16_under_ten_megabytes_and_credits_its_data(capsys):
    """``fra``: trained by the documented Tatoeba command; its weights are stored as float16 and loaded
    back as float32; every command that reads it names the data's source and licence."""
    folder = pretrained_folder("fra")
    assert _size(folder) <= 10_000_000
    record = pretrained_record("fra")
    assert "CC-BY 2.0 FR" in record["data"] and "manythings.org/anki" in record["data"]
    assert record["weights"] == "float16" and "npformer train" in record["command"]
    run = npformer.pretrained("fra")
    assert all(value.dtype.name == "float32" for value in run.model.params().values())
    assert cli.main(["translate", "--pretrained", "fra", "--beam", "1", "Where is the station?"]) == 0
    captured = capsys.readouterr()
    assert "gare" in captured.out, captured.out
    assert "Tatoeba" in captured.err and "CC-BY 2.0 FR" in captured.err


def test_the_tatoeba_translator_still_gives_its_recorded_bleu_on_its_first_200_test_pairs():
    record = pretrained_record("fra")["first_200"]
    run = npformer.pretrained("fra")
    pairs = RunFolder(run.folder).split("test")[:200]
    again = test_bleu(Translator.from_run(run), pairs, beam_size=1)
    assert again["bleu_greedy"] == pytest.approx(record["bleu_greedy"], abs=0.05)


@pytest.mark.parametrize("command", [
    ["translate", "the black cat eats the white apple."],
    ["evaluate", "--max-sentences", "2"],
    ["attention", "the black cat eats the white apple."],
])
def test_every_command_that_searches_passes_on_its_length_penalty(command, tmp_path, monkeypatch):
    """``--length-penalty`` reaches the beam search of ``translate``, ``evaluate`` and ``attention``,
    and its default is ``decoding.LENGTH_PENALTY``."""
    from npformer.tasks.translation import decoding, translator

    monkeypatch.chdir(tmp_path)
    seen = []

    def recording_search(*args, **kwargs):
        seen.append(args[4])  # (model, src, beam_size, max_len, length_penalty)
        return decoding.beam_search(*args, **kwargs)

    monkeypatch.setattr(translator, "beam_search", recording_search)
    assert cli.main([command[0], "--pretrained", "toy", "--length-penalty", "1.7", *command[1:]]) == 0
    assert cli.main([command[0], "--pretrained", "toy", *command[1:]]) == 0
    assert seen[0] == 1.7 and seen[-1] == decoding.LENGTH_PENALTY == 0.6
