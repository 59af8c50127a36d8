"""The trainer and the train / translate / evaluate commands, on tiny runs of the embedded corpus."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from npformer import backend, cli, ops
from npformer.training import checkpoint
from npformer.tasks.translation import TrainOptions, Trainer, train
from npformer.tasks.translation import RunError, load_run

TINY = dict(d_model=16, d_ff=32, n_layers=1, n_heads=2)


def options(folder, name, **overrides):
    settings = dict(name=name, runs_dir=str(folder), **TINY, token_budget=512, eval_every=10_000,
                    eval_sentences=10, test_sentences=20, beam_size=2, log_every=1, max_steps=20)
    settings.update(overrides)
    return TrainOptions(**settings)


def train_losses(folder):
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as file:
        return {r["step"]: r["loss"] for r in map(json.loads, file) if r["kind"] == "train"}


def test_this_module_is_one_work_unit_of_the_scheduler():
    """Its tests share ``tiny_run``: pytest-xdist hands the whole module to one worker (the scheduler
    of tests/conftest.py), parametrised tests included; other modules' tests go one by one."""
    from conftest import work_unit

    parametrised = "tests/test_train.py::test_translate_rejects_empty_input[arguments0-None-x]"
    plain = "tests/test_train.py::test_a_run_folder_holds_config_vocabularies_checkpoint_metrics_and_curves"
    assert work_unit(parametrised) == work_unit(plain) == "tests/test_train.py"
    assert work_unit("tests/test_cli.py::test_python_dash_m_and_help") == "tests/test_cli.py::test_python_dash_m_and_help"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    status = train(options(folder, "tiny", max_steps=150, eval_every=75, d_model=32, d_ff=64, warmup=50),
                   stream=io.StringIO())
    assert status == 0
    return os.path.join(str(folder), "tiny")


def test_a_run_folder_holds_config_vocabularies_checkpoint_metrics_and_curves(tiny_run):
    for name in ("config.json", "src_vocab.json", "tgt_vocab.json", "checkpoint.npz", "checkpoint.json",
                 "metrics.jsonl", "curves.png", "train.tsv", "valid.tsv", "test.tsv"):
        assert os.path.isfile(os.path.join(tiny_run, name)), name
    with open(os.path.join(tiny_run, "metrics.jsonl"), encoding="utf-8") as file:
        records = [json.loads(line) for line in file]
    kinds = {r["kind"] for r in records}
    assert kinds == {"train", "eval", "test"}
    evaluation = next(r for r in records if r["kind"] == "eval")
    assert {"valid_loss", "valid_accuracy", "valid_bleu"} <= set(evaluation)
    test = next(r for r in records if r["kind"] == "test")
    assert test["beam_size"] == 2 and test["sentences"] == 20
    # The run is seeded and repeatable (measured: greedy 0.75, beam 1.27 BLEU; at step 150 valid loss
    # 3.23, accuracy 0.29). An untrained or broken model scores 0 BLEU with a loss near ln(122) = 4.8.
    assert 0.3 <= test["bleu_greedy"] <= 10 and 0.3 <= test["bleu_beam"] <= 10, test
    last = [r for r in records if r["kind"] == "eval"][-1]
    assert last["step"] == 150 and last["valid_loss"] < 3.6 and last["valid_accuracy"] > 0.25, last
    run = load_run(tiny_run)
    assert run.model.config.d_model == 32 and not run.model.training


@pytest.mark.parametrize("unknown_words, schedule", [
    (dict(), "budget"), (dict(unk_rate=0.3), "budget"), (dict(unk_rate=0.5, tokenizer="bpe", bpe_merges=100), "budget"),
    (dict(), "noam")])
def test_resuming_reproduces_the_uninterrupted_losses_exactly(tmp_path, monkeypatch, unknown_words, schedule):
    """200 training pairs make epochs of a few batches, so the 40 steps cross epoch
    boundaries and the resumption lands inside a later epoch. With ``unk_rate`` the words
    made unknown (<unk>, or invented words with BPE) are drawn anew each epoch, and a resumed
    run draws the same ones. The run is stopped by Ctrl-C (sent by its 23rd step) and resumed with
    the same budget, so the budget schedule's learning rates are the same too."""
    from npformer.tasks.translation import trainer as trainer_module

    small = dict(max_pairs=200, dropout=0.3, schedule=schedule, **unknown_words)
    assert train(options(tmp_path, "straight", max_steps=40, **small), stream=io.StringIO()) == 0
    real_step, calls = trainer_module.train_step, []

    def pressed_during_step_23(*args, **kwargs):
        calls.append(True)
        if len(calls) == 23:
            os.kill(os.getpid(), signal.SIGINT)  # the first press: stop after this step
            time.sleep(0.05)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", pressed_during_step_23)
    assert train(options(tmp_path, "resumed", max_steps=40, **small), stream=io.StringIO()) == 130
    monkeypatch.setattr(trainer_module, "train_step", real_step)
    log = io.StringIO()
    assert train(options(tmp_path, "resumed", max_steps=40, resume=True, **small), stream=log) == 0
    assert "resuming" in log.getvalue() and "at step 23" in log.getvalue()
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert sorted(resumed) == list(range(1, 41))
    with open(tmp_path / "straight" / "metrics.jsonl", encoding="utf-8") as file:
        assert max(json.loads(line).get("epoch", 0) for line in file) >= 3
    assert [resumed[s] for s in range(1, 41)] == [straight[s] for s in range(1, 41)]


def test_a_resumed_run_keeps_its_own_settings_and_the_hint_continues_it(tmp_path, monkeypatch):
    """Resumed with only its name, a run trains with the settings it was started with (config.json), not
    the defaults: a warm-up of 5 and a budget of 30 steps, not 300 and 900 (the learning rate once jumped
    at the resumption); the Ctrl-C hint is that command. A flag that conflicts with the run is refused in
    one line; a longer budget is taken, said and kept in config.json."""
    from npformer.tasks.translation import trainer as trainer_module

    mine = dict(max_steps=30, warmup=5, lr=3e-3, max_pairs=200)
    assert train(options(tmp_path, "straight", **mine), stream=io.StringIO()) == 0
    real_step, calls = trainer_module.train_step, []

    def pressed_during_step_11(*args, **kwargs):
        calls.append(True)
        if len(calls) == 11:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", pressed_during_step_11)
    log = io.StringIO()
    assert train(options(tmp_path, "resumed", **mine), stream=log) == 130
    assert f"continue with: npformer train --name resumed --runs-dir {tmp_path} --resume" in log.getvalue()
    monkeypatch.setattr(trainer_module, "train_step", real_step)
    with pytest.raises(RunError, match=r"--warmup 7 differs from the run's own 5"):
        train(options(tmp_path, "resumed", resume=True, warmup=7), stream=io.StringIO())
    assert train(options(tmp_path, "resumed", resume=True, max_steps=None), stream=io.StringIO()) == 0  # as typed
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert [resumed[s] for s in range(1, 31)] == [straight[s] for s in range(1, 31)]
    with np.load(tmp_path / "straight" / "checkpoint.npz") as one, np.load(tmp_path / "resumed" / "checkpoint.npz") as two:
        assert sorted(one.files) == sorted(two.files) and len(one.files) > 10
        for name in set(one.files) - {"meta"}:       # the parameters and Adam's moments, bit for bit (meta: times)
            assert np.array_equal(one[name], two[name]), name
    log = io.StringIO()
    assert train(options(tmp_path, "resumed", resume=True, max_steps=40), stream=log) == 0
    assert "resuming with changed settings: max_steps 30 -> 40" in log.getvalue()
    config = json.loads((tmp_path / "resumed" / "config.json").read_text())
    assert config["resumed"] == [{"max_steps": 40}] and config["train"]["warmup"] == 5
    assert sorted(train_losses(tmp_path / "resumed")) == list(range(1, 41))


def test_a_resumed_time_budget_is_the_runs_own():
    from npformer.tasks.translation.options import resumed_options

    recorded = {**TrainOptions(minutes=5.0, warmup=40).__dict__}
    resumed, changed = resumed_options(TrainOptions(name="r", resume=True), recorded)
    assert resumed.minutes == 5.0 and resumed.max_steps is None and resumed.warmup == 40 and not changed


def test_a_timed_run_resumed_halfway_continues_its_clock_and_its_schedule(tmp_path, monkeypatch):
    """A --minutes run on a clock that moves one second a step: 30 steps in half a minute. Stopped by
    Ctrl-C at step 11 and resumed by name, it trains the other 19 with the learning rates of the run
    that was never stopped (a resumption that restarted its clock trained another 30, the schedule
    started over: a slip no test caught)."""
    from types import SimpleNamespace

    from npformer.tasks.translation import trainer as trainer_module

    clock, real_step, calls = [0.0], trainer_module.train_step, []
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def one_second_a_step(*args, **kwargs):
        calls.append(True)
        if len(calls) == 11 and stopping:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        clock[0] += 1.0
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", one_second_a_step)
    mine = dict(max_steps=None, minutes=0.5, warmup=5, lr=3e-3, max_pairs=200, schedule="budget")
    stopping = False
    assert train(options(tmp_path, "straight", **mine), stream=io.StringIO()) == 0
    stopping, calls[:] = True, []
    assert train(options(tmp_path, "resumed", **mine), stream=io.StringIO()) == 130
    stopping, clock[0] = False, 1000.0            # another day: the clock has moved on
    assert train(options(tmp_path, "resumed", resume=True, max_steps=None), stream=io.StringIO()) == 0
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert sorted(straight) == list(range(1, 31)) and sorted(resumed) == sorted(straight), sorted(resumed)
    assert [resumed[s] for s in range(1, 31)] == [straight[s] for s in range(1, 31)]


def test_a_new_run_never_overwrites_an_old_one_and_resume_needs_a_checkpoint(tmp_path):
    assert train(options(tmp_path, "once", max_steps=2), stream=io.StringIO()) == 0
    with pytest.raises(RunError, match="already holds a run"):
        train(options(tmp_path, "once", max_steps=2), stream=io.StringIO())
    with pytest.raises(RunError, match="nothing to resume"):
        train(options(tmp_path, "never", resume=True), stream=io.StringIO())


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    trainer = Trainer(options(tmp_path, "nan", max_steps=50, eval_every=4), stream=io.StringIO())
    original_loss = ops.current().cross_entropy_forward

    def poisoned_loss(logits, targets, *args, **kwargs):
        """The training loss turns NaN from the fifth step on (validation is left alone)."""
        value, cache = original_loss(logits, targets, *args, **kwargs)
        if trainer.model.training and trainer.optimizer.step_count >= 4:
            value = value * np.nan
        return value, cache

    with ops.using({"cross_entropy_forward": poisoned_loss}, name="poisoned"):
        assert trainer.run() == 1
    assert "the loss is nan at step 5" in trainer.stream.getvalue()
    assert checkpoint.load_checkpoint(str(tmp_path / "nan" / "checkpoint.npz"), trainer.model)["step"] == 4


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    command = [sys.executable, "-m", "npformer", "train", "--runs-dir", str(tmp_path), "--name", "stop",
               "--max-steps", "100000", "--d-model", "16", "--d-ff", "32", "--layers", "1",
               "--heads", "2", "--token-budget", "256", "--eval-every", "100000"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "stop" / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted at step" in stderr and "--resume" in stderr and "Traceback" not in stderr
    saved = json.loads((tmp_path / "stop" / "checkpoint.json").read_text())
    assert saved["step"] >= 10
    resumed = subprocess.run(command[:-6] + ["--max-steps", str(saved["step"] + 3), "--resume",
                                             "--test-sentences", "5", "--beam", "2"],
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {tmp_path / 'stop'} at step {saved['step']}" in resumed.stderr


TINY_COMMAND = ["--d-model", "16", "--d-ff", "32", "--layers", "1", "--heads", "2", "--token-budget", "256",
                "--eval-every", "100000", "--test-sentences", "5", "--beam", "2"]


def test_minutes_stops_the_run_on_time_and_says_so(tmp_path):
    command = [sys.executable, "-m", "npformer", "train", "--runs-dir", str(tmp_path), "--name", "timed",
               "--minutes", "0.02", *TINY_COMMAND]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "the time budget of 0.02 minutes is spent" in result.stderr, result.stderr
    saved = json.loads((tmp_path / "timed" / "checkpoint.json").read_text())
    assert 1.2 <= saved["elapsed_seconds"] <= 1.2 + 20  # 0.02 minutes, plus at most the last step
    assert 1 <= saved["step"] < 900  # not the default 900-step budget
    assert time.perf_counter() - started < 90


def test_a_second_ctrl_c_stops_at_once_and_keeps_the_last_checkpoint(tmp_path, monkeypatch, capsys):
    """Both presses land inside one step (sent by the step itself, so no timing is involved): the
    first asks for a stop after the step, the second stops at once, and nothing is saved."""
    from npformer.tasks.translation import trainer as trainer_module

    arguments = ["train", "--runs-dir", str(tmp_path), "--name", "twice", "--d-model", "16", "--d-ff", "32",
                 "--layers", "1", "--heads", "2", "--eval-every", "100000", "--test-sentences", "1", "--beam", "1"]
    assert cli.main([*arguments, "--max-steps", "1"]) == 0
    folder = tmp_path / "twice"
    before = (folder / "checkpoint.npz").read_bytes(), (folder / "checkpoint.json").read_bytes()
    real_step, presses = trainer_module.train_step, []

    def step_with_two_presses(*args, **kwargs):
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs between two bytecodes
            presses.append(True)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", step_with_two_presses)
    capsys.readouterr()
    handler = signal.getsignal(signal.SIGINT)  # Python's, or SIG_IGN where the suite runs in the background
    assert cli.main([*arguments, "--max-steps", "100", "--resume"]) == 130
    error = capsys.readouterr().err
    assert len(presses) == 1  # the second press raised inside the first step
    assert "npformer train: interrupted" in error and "interrupted at step" not in error  # nothing saved
    assert signal.getsignal(signal.SIGINT) is handler  # the handler is restored
    assert ((folder / "checkpoint.npz").read_bytes(), (folder / "checkpoint.json").read_bytes()) == before
    assert not [name for name in os.listdir(folder) if name.startswith(".tmp-")]
    run = load_run(str(folder))
    assert checkpoint.load_checkpoint(str(folder / "checkpoint.npz"), run.model)["step"] == 1


def test_train_step_hands_the_optimizer_clipped_gradients_and_returns_the_norm_before():
    from npformer import gradcheck
    from npformer.tokens import PAD_ID
    from npformer.training import train_step

    def norm(grads):
        return float(np.sqrt(sum(float((g * g).sum()) for g in grads.values())))

    class Recorder:
        """An optimizer that changes nothing and keeps the gradients it is given."""
        lr = 0.0

        def step(self):
            self.seen = {name: grad.copy() for name, grad in model.grads().items()}

    model, src, tgt_in, tgt_out = gradcheck.model_case(seed=0, dropout=0.0)
    model.zero_grad()
    _, cache = ops.cross_entropy_forward(model.forward(src, tgt_in), tgt_out, ignore_index=PAD_ID)
    model.backward(ops.cross_entropy_backward(1.0, cache))
    raw = {name: grad.copy() for name, grad in model.grads().items()}
    raw_norm = norm(raw)
    assert raw_norm > 0
    for max_norm, clipped in ((raw_norm / 4, True), (raw_norm * 4, False)):
        optimizer = Recorder()
        result = train_step(model, (src, tgt_in), tgt_out, optimizer, ignore_index=PAD_ID, max_norm=max_norm)
        assert result.grad_norm == pytest.approx(raw_norm, rel=1e-9)  # the norm before clipping
        assert norm(optimizer.seen) <= max_norm * (1 + 1e-9)
        scale = max_norm / (raw_norm + 1e-6) if clipped else 1.0
        for name, grad in optimizer.seen.items():
            np.testing.assert_allclose(backend.to_numpy(grad), backend.to_numpy(raw[name]) * scale,
                                       rtol=1e-9, atol=1e-15, err_msg=name)


# --- translate and evaluate ----------------------------------------------------------------

def test_translate_sentences_from_arguments_and_stdin(tiny_run, capsys, monkeypatch):
    assert cli.main(["translate", "--run", tiny_run, "--beam", "1", "the black cat eats the apple.",
                     "where is the dog?"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(lines)
    monkeypatch.setattr(sys, "stdin", io.StringIO("the black cat eats the apple.\n\nwhere is the dog?\n"))
    assert cli.main(["translate", "--run", tiny_run]) == 0
    stdin_lines = capsys.readouterr().out.splitlines()
    assert len(stdin_lines) == 3 and stdin_lines[1] == ""


@pytest.mark.parametrize("arguments, stdin, message", [
    (["the cat", "  "], None, "sentence 2 is empty"),
    ([], "\n \n", "nothing to translate: the input is empty"),
])
def test_translate_rejects_empty_input(tiny_run, capsys, monkeypatch, arguments, stdin, message):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert cli.main(["translate", "--run", tiny_run, *arguments]) == 2
    assert capsys.readouterr().err.strip() == f"npformer translate: {message}"


def test_missing_or_incomplete_runs_give_one_line_errors(tmp_path, capsys):
    assert cli.main(["translate", "--run", str(tmp_path / "nowhere"), "hello"]) == 2
    assert capsys.readouterr().err.strip() == f"npformer translate: no run folder at {tmp_path / 'nowhere'}"
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert cli.main(["evaluate", "--run", str(tmp_path / "half")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("npformer evaluate:") and "missing" in error and "\n" not in error


def test_an_incompatible_run_gives_a_one_line_error(tiny_run, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_run, broken)
    config = json.loads((broken / "config.json").read_text())
    config["model"]["d_model"] = 48
    (broken / "config.json").write_text(json.dumps(config))
    assert cli.main(["translate", "--run", str(broken), "the cat"]) == 2
    error = capsys.readouterr().err.strip()
    assert "does not fit" in error and "\n" not in error


def test_evaluate_reports_greedy_and_beam_bleu(tiny_run, capsys):
    assert cli.main(["evaluate", "--run", tiny_run, "--beam", "2", "--max-sentences", "30"]) == 0
    output = capsys.readouterr().out
    assert "30 sentence pairs" in output and "BLEU greedy" in output and "BLEU beam 2" in output


def test_attention_command_draws_every_kind_and_rejects_bad_input(tiny_run, tmp_path, capsys):
    out = tmp_path / "att.png"
    assert cli.main(["attention", "--run", tiny_run, "the black cat eats the apple.", "--kind", "all",
                     "--out", str(out), "--beam", "1"]) == 0
    printed = capsys.readouterr().out
    for kind in ("encoder", "decoder", "cross"):
        path = tmp_path / f"att-{kind}.png"
        assert path.is_file() and path.stat().st_size > 10_000 and str(path) in printed
    assert cli.main(["attention", "--run", tiny_run, " "]) == 2
    assert capsys.readouterr().err.strip() == "npformer attention: a sentence is empty"
    assert cli.main(["attention", "--run", tiny_run, "the cat.", "the dog."]) == 2
    assert "use --html for several" in capsys.readouterr().err
    assert cli.main(["attention", "--run", tiny_run]) == 2
    assert "give a sentence" in capsys.readouterr().err
    assert cli.main(["attention", "--run", tiny_run, "--score", "the cat."]) == 2
    assert "give no sentence" in capsys.readouterr().err
    assert cli.main(["attention", "--run", str(tmp_path / "none"), "the cat"]) == 2
    assert "no run folder" in capsys.readouterr().err


def test_attention_html_writes_one_explorer_of_several_sentences(tiny_run, tmp_path, capsys):
    out = tmp_path / "explorer.html"
    assert cli.main(["attention", "--run", tiny_run, "the black cat eats the apple.", "where is the dog?",
                     "--html", str(out), "--beam", "1"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "the black cat eats the apple." in page and "where is the dog?" in page and "<svg" not in page
    assert str(out) in capsys.readouterr().out


def test_attention_score_prints_every_head_and_draws_the_table(tiny_run, tmp_path, capsys):
    figure = tmp_path / "aer.png"
    assert cli.main(["attention", "--run", tiny_run, "--score", "--max-pairs", "40", "--out", str(figure)]) == 0
    output = capsys.readouterr().out
    run = load_run(tiny_run)
    heads = [line for line in output.splitlines() if line.startswith("| layer") and "head average" not in line]
    assert len(heads) == run.model.config.n_layers * run.model.config.n_heads
    assert "| rollout |" in output and "| saliency (gradient x input) |" in output and "on 40 sentence pairs" in output
    assert figure.is_file() and figure.stat().st_size > 10_000


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_the_step_projects_only_real_targets_and_equals_the_textbook_step(label_smoothing):
    """``train_step(..., only_counted_targets=True)`` asks the Transformer for the logits of the real
    targets only (the packed layout, ``forward(..., only_at=...)``); the loss and every gradient equal the textbook step's (all
    logits, padding ignored by the loss), and the model keeps no state between the two calls."""
    from npformer import gradcheck
    from npformer.tokens import PAD_ID
    from npformer.training import train_step

    model, src, tgt_in, tgt_out = gradcheck.model_case(seed=3, dropout=0.0)
    assert bool((tgt_out == PAD_ID).any()), "the case must have padded targets"

    class Recorder:
        lr = 0.0

        def step(self):
            self.seen = {name: backend.to_numpy(grad).copy() for name, grad in model.grads().items()}

    recorder = Recorder()
    fast = train_step(model, (src, tgt_in), tgt_out, recorder, ignore_index=PAD_ID, label_smoothing=label_smoothing,
                      only_counted_targets=True)
    logits = model.forward(src, tgt_in)  # the textbook step
    loss, cache = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID, label_smoothing=label_smoothing)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    assert fast.loss == pytest.approx(float(loss), rel=1e-12)
    for name, grad in model.grads().items():
        np.testing.assert_allclose(recorder.seen[name], backend.to_numpy(grad), rtol=1e-10, atol=1e-14, err_msg=name)
    keep = tgt_out != PAD_ID
    np.testing.assert_allclose(backend.to_numpy(model.forward(src, tgt_in, only_at=keep)),
                               backend.to_numpy(logits[keep]), rtol=1e-12, atol=1e-14)
    with pytest.raises(TypeError, match="only_counted_targets needs an npformer Transformer"):
        train_step(object(), (src, tgt_in), tgt_out, recorder, ignore_index=PAD_ID, only_counted_targets=True)


def test_the_budget_schedule_warms_up_and_lands_at_zero():
    from npformer import optim

    schedule = optim.BudgetSchedule(peak_lr=2e-3, warmup_steps=10)
    assert schedule(5, 0.0) == pytest.approx(1e-3)  # half-way through the warm-up
    assert schedule(10, 0.0) == pytest.approx(2e-3)  # the peak
    assert schedule(500, 0.5) == pytest.approx(1e-3)  # half the budget spent: half the peak
    assert schedule(1000, 1.0) == pytest.approx(0.0, abs=1e-18)  # the budget spent: zero
    with pytest.raises(ValueError, match="spent must be in"):
        schedule(3, 1.5)


@pytest.mark.parametrize("schedule", ["budget", "noam"])
def test_the_learning_rate_at_the_last_step_of_a_budget(tmp_path, schedule):
    """``--schedule budget`` (the default with ``--data``) ends a 40-step budget at a learning rate near
    zero; the paper's ``noam`` (the default on the embedded corpus) is still at ``lr * sqrt(warmup / step)``."""
    assert TrainOptions().learning_rate_schedule() == "noam"
    assert TrainOptions(data="fra.txt").learning_rate_schedule() == "budget"
    status = train(options(tmp_path, schedule, max_steps=40, warmup=10, log_every=1, schedule=schedule),
                   stream=io.StringIO())
    assert status == 0
    with open(tmp_path / schedule / "metrics.jsonl", encoding="utf-8") as file:
        rates = {r["step"]: r["lr"] for r in map(json.loads, file) if r["kind"] == "train"}
    if schedule == "budget":
        assert rates[10] == pytest.approx(2e-3 * 0.5 * (1 + np.cos(np.pi * 9 / 40)))
        assert rates[40] < 2e-3 * 0.01
    else:
        assert rates[40] == pytest.approx(2e-3 * np.sqrt(10 / 40))


def test_average_last_makes_the_final_model_the_mean_of_the_last_snapshots(tmp_path):
    """``--average-last 3`` with evaluations at steps 10, 20, 30 and a last step 35: the final model is
    the mean of the parameters at 20, 30 and 35, and metrics.jsonl holds both validations."""
    from npformer.training import Snapshots, checkpoint as checkpoints

    status = train(options(tmp_path, "avg", max_steps=35, eval_every=10, average_last=3), stream=io.StringIO())
    assert status == 0
    folder = tmp_path / "avg"
    snapshots = Snapshots(str(folder / "snapshots.npz"), 3)
    assert snapshots.steps == [20, 30, 35]
    arrays = checkpoints.read_arrays(str(folder / "checkpoint.npz"))
    for key, mean in snapshots.mean().items():
        np.testing.assert_allclose(arrays[f"param/{key}"], mean, rtol=1e-6, atol=1e-7, err_msg=key)
        assert not np.array_equal(mean, snapshots.params[-1][key]) or key.endswith(".b")
    with open(folder / "metrics.jsonl", encoding="utf-8") as file:
        average = [r for r in map(json.loads, file) if r["kind"] == "average"]
    assert average and average[0]["steps"] == [20, 30, 35] and "valid_loss" in average[0]["averaged"]
