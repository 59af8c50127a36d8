"""What a new user meets first: the same model on every machine, input as people type it, the latest
run by default, --version, outputs beside the run."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from npformer import __version__, cli
from npformer.tasks.translation import TrainOptions, Translator, train
from npformer.tasks.translation.options import DEFAULT_STEPS
from npformer.tasks.translation import load_run


SMALL = dict(d_model=16, d_ff=32, n_layers=1, n_heads=2, eval_every=1000, test_sentences=10, log_every=1)


def _losses(folder):
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as file:
        return [r["loss"] for r in map(json.loads, file) if r["kind"] == "train"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A folder ``runs/`` holding one small trained run, ``toy-tiny``."""
    root = tmp_path_factory.mktemp("home")
    assert train(TrainOptions(runs_dir=str(root / "runs"), name="toy-tiny", max_steps=40, **SMALL),
                 stream=io.StringIO()) == 0
    return root


def test_the_default_run_is_a_number_of_steps_not_of_minutes():
    assert TrainOptions().budget() == (DEFAULT_STEPS, None)
    assert TrainOptions(data="fra.txt").budget() == (None, 30.0)
    assert TrainOptions(minutes=1.5).budget() == (None, 1.5)


@pytest.mark.slow
def test_the_same_command_gives_the_same_model_on_a_busy_machine(tmp_path):
    """Two runs at once, each slowing the other, give the losses of a run alone, bit for bit."""
    arguments = ["--runs-dir", str(tmp_path), "--max-steps", "12", "--d-model", "16", "--d-ff", "32",
                 "--layers", "1", "--heads", "2", "--eval-every", "1000", "--test-sentences", "10"]
    assert cli.main(["train", "--name", "quiet", *arguments]) == 0
    busy = [subprocess.Popen([sys.executable, "-m", "npformer", "train", "--name", name, *arguments],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name in ("busy1", "busy2")]
    assert [process.wait() for process in busy] == [0, 0]
    quiet = _losses(tmp_path / "quiet")
    assert len(quiet) == 1 and quiet == _losses(tmp_path / "busy1") == _losses(tmp_path / "busy2")
    assert json.load(open(tmp_path / "busy1" / "checkpoint.json"))["step"] == 12
    weights = [np.load(tmp_path / name / "checkpoint.npz") for name in ("quiet", "busy1", "busy2")]
    for key in weights[0].files:
        if key.startswith("param/"):
            assert np.array_equal(weights[0][key], weights[1][key]) and np.array_equal(weights[0][key], weights[2][key])


def test_input_as_people_type_it_is_read_like_the_training_text(runs):
    translator = Translator.from_run(load_run(str(runs / "runs" / "toy-tiny")))
    assert translator.source_tokens("I like the dog")[1] == ["i", "like", "the", "dog", "."]
    assert translator.source_tokens("Where is the dog?")[1][-1] == "?"  # a mark is added only when missing
    typed = translator.translate(["I like the dog", "Where are the white cats"])
    assert typed == translator.translate(["i like the dog.", "where are the white cats?"])   # the mark it asks for
    assert translator.unknown_words(["I like Zorglub", "the zorglub"]) == ["Zorglub", "zorglub"]


def test_commands_use_the_latest_run_and_say_so(runs, monkeypatch, capsys):
    monkeypatch.chdir(runs)
    assert cli.main(["translate", "I like Zorglub"]) == 0
    captured = capsys.readouterr()
    assert "using runs/toy-tiny" in captured.err and "Zorglub" in captured.err  # the unknown word is named
    assert captured.out.strip()
    assert cli.main(["evaluate", "--max-sentences", "8", "--worst", "2"]) == 0
    output = capsys.readouterr().out
    assert "BLEU greedy" in output and "the 2 worst translations" in output and "expected:" in output
    monkeypatch.chdir(runs / "runs")  # no runs/ here
    assert cli.main(["translate", "hello"]) == 2
    assert "no --run given" in capsys.readouterr().err


def test_attention_writes_beside_the_run_not_in_the_current_folder(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["attention", "the black cat eats.", "--run", str(runs / "runs" / "toy-tiny"), "--kind", "all"]) == 0
    assert list(tmp_path.iterdir()) == []
    for kind in ("encoder", "decoder", "cross"):
        assert (runs / "runs" / "toy-tiny" / f"attention-{kind}.png").is_file()


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"npformer {__version__}"


def test_a_checkpoint_has_the_mode_of_the_other_files(runs):
    folder = runs / "runs" / "toy-tiny"
    modes = {name: os.stat(folder / name).st_mode & 0o777 for name in ("checkpoint.npz", "config.json")}
    assert modes["checkpoint.npz"] == modes["config.json"]
