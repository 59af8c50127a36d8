"""Bad input, by kind: every case is one clear line and exit status 2 (or a clear exception in the
library), checked before any work starts, never a traceback."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from npformer import cli, models, nn, tokens
from npformer.data import Splits, Vocab
from npformer.tasks.checks import check_folder_can_be_created
from npformer.tasks.translation import TrainOptions, train
from npformer.tasks.translation import RunFolder
from npformer.training import save_checkpoint

# Options that take text (paths, names): the walk below checks the numbers and the choices, and
# the tests after it check the paths. A new option must be a number, a choice, a switch or here.
TEXT_OPTIONS = {"--data", "--name", "--runs-dir", "--run", "--out", "--json", "--op", "--lessons", "--ops", "--secret",
                "--results", "--install", "--pair", "--url", "--roster", "--metadata",
                "--html", "--logs", "--executed"}
REQUIRED = {"translate": ["--run", "nowhere", "the cat"], "attention": ["the cat", "--run", "nowhere"],
            "evaluate": ["--run", "nowhere"], "course grade": ["nowhere"]}


def _subcommands(parser=None, words=""):
    """Every command's parser by the words that name it: "train", ..., and each action of a command
    that has them ("course grade")."""
    [subparsers] = [a for a in (parser or cli.build_parser())._actions if isinstance(a, argparse._SubParsersAction)]
    commands = {}
    for name, sub in subparsers.choices.items():
        nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
        commands.update(_subcommands(sub, f"{words}{name} ") if nested else {f"{words}{name}": sub})
    return commands


def _bad_values():
    """(command, flag, value) for every numeric and every choice option of every subcommand."""
    cases = []
    for command, sub in _subcommands().items():
        for action in sub._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            if flag is None or flag == "--help" or action.nargs == 0:
                continue
            if action.choices is not None:
                cases.append((command, flag, "bogus"))
            elif getattr(action.type, "__name__", "") in ("int", "float"):
                cases += [(command, flag, "-5"), (command, flag, "zero")]
            else:
                assert flag in TEXT_OPTIONS, f"{command} {flag}: give it a range (cli.arguments.number) or a choice"
    return cases


def _one_line_error(capsys, command):
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"npformer {command}:"), lines[0]
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize("command, flag, value", _bad_values())
def test_every_option_of_every_command_rejects_an_out_of_range_value(command, flag, value, capsys):
    assert cli.main([*command.split(), flag, value, *REQUIRED.get(command, [])]) == 2
    line = _one_line_error(capsys, command)
    assert flag in line and value in line


@pytest.mark.parametrize("arguments", [
    ["student", "out", "--timeout", "5"], ["exercises", "--set", "1"], ["collect", "lessons", "--secret", "s.txt"],
    ["project", "out", "--seed", "1"], ["grade", "class", "--install", "x"], ["gradescope", "a.zip", "--lessons", "x"]])
def test_a_course_action_refuses_a_flag_it_does_not_take(arguments, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["course", *arguments]) == 2
    assert "unrecognized arguments" in _one_line_error(capsys, f"course {arguments[0]}")
    assert not any(tmp_path.iterdir())


def test_a_course_actions_help_lists_its_own_flags_only(capsys):
    assert cli.main(["course", "grade", "--help"]) == 0
    shown = capsys.readouterr().out
    assert all(flag in shown for flag in ("--out", "--reasons", "--secret", "--set", "--no-isolation"))
    assert not any(flag in shown for flag in ("--install", "--format", "--lessons", "--notebooks", "--threshold"))


def test_the_walk_covers_the_options_that_matter():
    flags = {(command, flag) for command, flag, _ in _bad_values()}
    for expected in [("train", "--lr"), ("train", "--dropout"), ("train", "--minutes"), ("train", "--heads"),
                     ("train", "--token-budget"), ("train", "--beam"), ("translate", "--beam"),
                     ("lm", "--temperature"), ("lm", "--top-k"), ("bench", "--steps"), ("gradcheck", "--tol"),
                     ("evaluate", "--max-sentences"), ("language-id", "--pooling"),
                     ("translate", "--length-penalty"), ("evaluate", "--length-penalty"),
                     ("attention", "--length-penalty"), ("course grade", "--timeout"),
                     ("course autograde", "--format"), ("course project-check", "--threshold"),
                     ("course notebooks", "--lesson")]:
        assert expected in flags


@pytest.mark.parametrize("arguments, words", [
    (["--heads", "3"], ["--d-model", "--heads", "divisible"]),
    (["--d-model", "30", "--heads", "4"], ["--d-model=30", "--heads=4"]),
    (["--token-budget", "32"], ["--token-budget", "32", "64"]),
    (["--dropout", "1"], ["--dropout", "[0, 1)"]),
    (["--label-smoothing", "-0.1"], ["--label-smoothing"]),
    (["--minutes", "0"], ["--minutes", "> 0"]),
    (["--lr", "inf"], ["--lr", "finite"]),
    (["--joint-vocab"], ["--joint-vocab", "--tokenizer bpe"]),
    (["--tokenizer", "bpe", "--bpe-merges", "0"], ["--bpe-merges", "0"]),
    (["--unk-rate", "1"], ["--unk-rate", "[0, 1)"]),
])
def test_train_checks_values_and_combinations_before_any_work(arguments, words, tmp_path, capsys):
    assert cli.main(["train", "--runs-dir", str(tmp_path / "runs"), *arguments]) == 2
    line = _one_line_error(capsys, "train")
    assert all(word in line for word in words), line
    assert not (tmp_path / "runs").exists()  # nothing was created: no work started


def test_the_library_checks_train_options_too(tmp_path):
    from npformer.tasks.translation import RunError

    with pytest.raises(RunError, match="n_heads"):
        train(TrainOptions(runs_dir=str(tmp_path), n_heads=5, max_steps=1))
    with pytest.raises(RunError, match="lr must be > 0"):
        train(TrainOptions(runs_dir=str(tmp_path), lr=0.0, max_steps=1))
    assert not any(tmp_path.iterdir())


# -- paths ----------------------------------------------------------------------------------------


def test_output_paths_that_cannot_be_written_are_named_before_any_work(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert cli.main(["train", "--runs-dir", str(a_file / "runs")]) == 2
    assert "is a file, not a folder" in _one_line_error(capsys, "train")
    assert cli.main(["bench", "--json", str(tmp_path / "missing" / "out.json")]) == 2
    assert "does not exist" in _one_line_error(capsys, "bench")
    assert cli.main(["bench", "--json", str(tmp_path)]) == 2
    assert "is a folder" in _one_line_error(capsys, "bench")
    # the output path is checked before the run is loaded (here: a folder that holds no run)
    assert cli.main(["attention", "the cat", "--run", str(tmp_path), "--out", str(tmp_path / "no" / "a.png")]) == 2
    assert "the folder" in _one_line_error(capsys, "attention")
    assert cli.main(["attention", "the cat", "--run", str(tmp_path), "--html", str(tmp_path / "no" / "a.html")]) == 2
    assert "the folder" in _one_line_error(capsys, "attention")
    assert cli.main(["attention", "--score", "--run", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "is a folder" in _one_line_error(capsys, "attention")
    assert cli.main(["evaluate", "--run", "nowhere", "--data", str(tmp_path / "none.tsv")]) == 2
    assert "no such file" in _one_line_error(capsys, "evaluate")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="a /proc file system (Linux)")
def test_a_runs_folder_that_the_system_refuses_is_named_in_one_line(tmp_path, capsys):
    """Under /proc even root passes os.access, but nothing can be made there: the check tries."""
    assert cli.main(["train", "--runs-dir", "/proc/npformer-test/runs", "--max-steps", "1"]) == 2
    assert "cannot create the folder /proc/npformer-test/runs" in _one_line_error(capsys, "train")
    # the check that proves a folder can be made leaves nothing behind
    check_folder_can_be_created(str(tmp_path / "a" / "b" / "runs"))
    assert not any(tmp_path.iterdir())


def test_missing_parents_of_the_runs_folder_are_created(tmp_path, capsys):
    runs = tmp_path / "a" / "b" / "runs"
    status = cli.main(["train", "--runs-dir", str(runs), "--name", "deep", "--max-steps", "2", "--d-model", "16",
                       "--d-ff", "16", "--layers", "1", "--eval-every", "1000", "--test-sentences", "5"])
    assert status == 0, capsys.readouterr().err
    # fewer steps than log_every: nothing logged during training, and the run still ends cleanly
    assert (runs / "deep" / "checkpoint.npz").is_file() and (runs / "deep" / "curves.png").is_file()


# -- damaged run folders --------------------------------------------------------------------------

CONFIG = dict(src_vocab=9, tgt_vocab=10, d_model=8, n_heads=2, d_ff=8, n_layers=1, max_len=16)


@pytest.fixture
def run_folder(tmp_path):
    """A small but complete run folder, written through the library's own functions."""
    words = lambda n: list(tokens.SPECIAL_TOKENS) + [f"w{i}" for i in range(n - 4)]  # noqa: E731
    src_vocab, tgt_vocab = Vocab(words(CONFIG["src_vocab"])), Vocab(words(CONFIG["tgt_vocab"]))
    model = models.Transformer(models.TransformerConfig(**CONFIG), seed=0)
    folder = RunFolder(str(tmp_path / "run"))
    folder.create({"model": model.config.to_dict()}, src_vocab, tgt_vocab,
                  Splits([("w1 w2", "w3")], [("w1", "w2")], [("w2", "w1")]))
    save_checkpoint(folder.checkpoint, model)
    return folder


def _object_array(folder):
    np.savez(folder.checkpoint, meta=np.array([{"step": 1}], dtype=object))


def _wrong_shape(folder):
    arrays = dict(np.load(folder.checkpoint))
    arrays["param/out_proj.b"] = arrays["param/out_proj.b"][:3]
    np.savez(folder.checkpoint, **arrays)


def _wrong_dtype(folder):
    arrays = dict(np.load(folder.checkpoint))
    arrays["param/out_proj.W"] = arrays["param/out_proj.W"].astype(np.float64)
    np.savez(folder.checkpoint, **arrays)


def _truncate(folder):
    data = open(folder.checkpoint, "rb").read()
    open(folder.checkpoint, "wb").write(data[: len(data) // 2])


DAMAGE = {
    "checkpoint not a zip": (lambda f: open(f.checkpoint, "w").write("hello"), "checkpoint.npz", "not a complete .npz"),
    "checkpoint truncated": (_truncate, "checkpoint.npz", "truncated"),
    "checkpoint object array": (_object_array, "checkpoint.npz", "object array"),
    "checkpoint wrong shape": (_wrong_shape, "checkpoint.npz", "out_proj.b must have shape"),
    "checkpoint wrong dtype": (_wrong_dtype, "checkpoint.npz", "out_proj.W must have dtype float32"),
    "config not JSON": (lambda f: open(f.path("config.json"), "w").write("{oops"), "config.json", "not valid JSON"),
    "config without model": (lambda f: open(f.path("config.json"), "w").write("{}"), "config.json", "no 'model'"),
    "config from another version": (lambda f: json.dump({"model": {"src_vocab": 9, "colour": 1}},
                                                        open(f.path("config.json"), "w")),
                                    "config.json", "do not fit this version"),
    "vocabulary not JSON": (lambda f: open(f.path("src_vocab.json"), "w").write("["), "src_vocab.json", "not valid JSON"),
    "vocabulary without tokens": (lambda f: open(f.path("tgt_vocab.json"), "w").write("{}"), "tgt_vocab.json",
                                  "no list of 'tokens'"),
    "missing file": (lambda f: os.remove(f.path("tgt_vocab.json")), "tgt_vocab.json", "missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_run_folder_names_the_file_and_what_is_wrong(damage, run_folder, capsys):
    assert cli.main(["translate", "--run", run_folder.folder, "w1 w2"]) == 0  # intact, it works
    capsys.readouterr()
    spoil, file_name, words = DAMAGE[damage]
    spoil(run_folder)
    assert cli.main(["translate", "--run", run_folder.folder, "w1 w2"]) == 2
    line = _one_line_error(capsys, "translate")
    assert file_name in line and words in line, line


def test_a_damaged_checkpoint_is_never_overwritten_by_a_resume(tmp_path, capsys):
    arguments = ["train", "--runs-dir", str(tmp_path), "--name", "r", "--d-model", "16", "--d-ff", "16",
                 "--layers", "1", "--eval-every", "1000", "--test-sentences", "5"]
    assert cli.main([*arguments, "--max-steps", "2"]) == 0
    checkpoint = tmp_path / "r" / "checkpoint.npz"
    damaged = checkpoint.read_bytes()[:500]
    checkpoint.write_bytes(damaged)
    capsys.readouterr()
    assert cli.main([*arguments, "--max-steps", "4", "--resume"]) == 2
    assert "cannot resume" in _one_line_error(capsys, "train")
    assert checkpoint.read_bytes() == damaged


# -- the library used in the wrong order ----------------------------------------------------------


def test_backward_before_forward_says_so_in_words():
    rng = np.random.default_rng(0)
    blocks = [(nn.Linear(4, 3, rng=rng), (2, 3)), (nn.LayerNorm(4), (2, 4)), (nn.Dropout(0.1, rng), (2, 4)),
              (nn.FeedForward(4, 8, rng=rng), (2, 4)), (nn.SelfAttention(4, 2, rng=rng), (1, 2, 4)),
              (nn.MultiHeadAttention(4, 2, rng=rng), (1, 2, 4)),
              (models.Transformer(models.TransformerConfig(**CONFIG)), (1, 2, CONFIG["tgt_vocab"]))]
    for block, shape in blocks:
        with pytest.raises(nn.BackwardBeforeForwardError, match="backward ran before its forward"):
            block.backward(np.ones(shape, dtype=np.float32))
    # it is still an AttributeError, so hasattr() and getattr(..., default) keep working
    assert not hasattr(nn.Linear(4, 3, rng=rng), "_cache")
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        nn.Linear(4, 3, rng=rng).missing


# -- the last line of defence ---------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_that_asks_for_a_report(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("something nobody expected")

    monkeypatch.setattr(cli.translate, "run", broken)
    monkeypatch.delenv("NPFORMER_DEBUG", raising=False)
    assert cli.main(["translate", "--run", "x", "the cat"]) == 1
    line = _one_line_error(capsys, "translate")
    assert "RuntimeError: something nobody expected" in line and "report" in line and "--debug" in line
    with pytest.raises(RuntimeError, match="something nobody expected"):
        cli.main(["--debug", "translate", "--run", "x", "the cat"])
    monkeypatch.setenv("NPFORMER_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["translate", "--run", "x", "the cat"])


def test_the_installed_command_prints_no_traceback_on_bad_input(tmp_path):
    for arguments in (["train", "--lr", "-1"], ["translate", "--run", str(tmp_path), "the cat"],
                      ["bench", "--json", str(tmp_path / "no" / "x.json")]):
        result = subprocess.run([sys.executable, "-m", "npformer", *arguments], capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
