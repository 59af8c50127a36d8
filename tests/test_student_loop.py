"""The student's training loop (lesson 13's ``train_loop``): graded against the reference on a small
NumPy model (in place, with its state), every realistic mistake failed with a first-tier hint; and
plugged into ``npformer train --ops``, where it takes the steps, says so, matches npformer's own loop,
resumes after Ctrl-C exactly, and is refused when it fails its exercise."""

import io
import json
import os
import pathlib
import signal
import time

import numpy as np
import pytest

from npformer import cli, ops
from npformer.course import EXERCISES, check, collect, load_student_ops
from npformer.course.cases import prepared_public
from npformer.course.exercises import training_loop
from npformer.course.grader import grade
from npformer.course.wrong_solutions import Outcome
from npformer.tasks.translation import TrainOptions, Trainer, train
from npformer.training import checkpoint

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"
TINY = dict(d_model=16, d_ff=32, n_layers=1, n_heads=2, token_budget=512, eval_every=10_000, eval_sentences=5,
            test_sentences=5, beam_size=2, log_every=1, max_pairs=200, dropout=0.3, schedule="noam", warmup=4)
reference = training_loop.train_loop_reference


def options(folder, name, **overrides):
    return TrainOptions(**{**TINY, "name": name, "runs_dir": str(folder), "max_steps": 8, **overrides})


def train_losses(folder):
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as file:
        return {r["step"]: r["loss"] for r in map(json.loads, file) if r["kind"] == "train"}


@pytest.fixture(scope="module")
def lesson_loop_source():
    """The module ``course collect`` makes of lesson 13's ``train_loop`` alone (the instructor's)."""
    return collect(LESSONS, None).sources["train_loop"]


def test_the_reference_passes_and_every_wrong_loop_fails_with_a_first_tier_hint():
    for unseen_seed in range(3):
        assert check("train_loop", reference, unseen_seed=unseen_seed).passed
    for wrong in training_loop.WRONG_SOLUTIONS:
        outcome = Outcome(wrong, check("train_loop", wrong.function, strict=False, unseen_seed=0, reveal=False))
        assert outcome.caught and outcome.hinted and outcome.named, (wrong.mistake, str(outcome.report))
    hinted = check("train_loop", training_loop.WRONG_SOLUTIONS[0].function, strict=False, reveal=False)
    assert "ratio drifts toward 1" in str(hinted) and "bias correction" not in str(hinted), "the fix is held back"


def test_the_loop_collected_from_lesson_13_is_graded_from_its_source_with_params_and_state_sent_back(
        lesson_loop_source):
    exercise = EXERCISES["train_loop"]
    assert exercise.points >= 2 and exercise.in_place == ("params", "state")
    report = grade(exercise, prepared_public(exercise, 0), source=lesson_loop_source)
    assert report.passed, report
    rebinding = lesson_loop_source.replace("param -= lr * m_hat", "params[name] = param - lr * m_hat")
    assert rebinding != lesson_loop_source
    report = grade(exercise, prepared_public(exercise, 0), source=rebinding)
    assert not report.passed and "the model never saw your updates" in str(report), report


def test_train_ops_runs_the_students_loop_says_so_and_matches_npformers_losses(tmp_path, capsys, lesson_loop_source):
    module = tmp_path / "my_npformer.py"
    module.write_text(lesson_loop_source)
    settings = ["--runs-dir", str(tmp_path), "--max-steps", "20", "--d-model", "16", "--d-ff", "32", "--layers", "1",
                "--heads", "2", "--token-budget", "512", "--max-pairs", "200", "--eval-every", "1000",
                "--eval-sentences", "5", "--test-sentences", "5", "--warmup", "4"]
    assert cli.main(["train", "--name", "npformers", *settings]) == 0
    assert cli.main(["train", "--name", "yours", "--ops", str(module), *settings]) == 0
    output = capsys.readouterr()
    assert "the training loop is yours" in output.out and "train_loop" in output.out      # the op set's report
    assert "the training loop yours (train_loop, lesson 13)" in output.out                # after the run
    assert "training loop: yours (train_loop, lesson 13)" in output.err                   # the trainer's header
    theirs, yours = train_losses(tmp_path / "npformers"), train_losses(tmp_path / "yours")
    assert sorted(yours) == [10, 20] and sorted(theirs) == sorted(yours)  # the command logs every 10 steps
    np.testing.assert_allclose([yours[s] for s in theirs], [theirs[s] for s in theirs], rtol=1e-5, atol=0)
    meta = json.loads((tmp_path / "yours" / "checkpoint.json").read_text())
    assert meta["train_loop"] == "yours" and meta["optimizer"]["step_count"] == 20


def pressed_during_step(step):
    """The reference loop, with Ctrl-C pressed while it trains on its ``step``-th batch."""
    def loop(params, batches, *rest):
        def batches_pressing():
            for number, batch in enumerate(batches, 1):
                if number == step:
                    os.kill(os.getpid(), signal.SIGINT)  # the first press: stop after this step
                    time.sleep(0.05)
                yield batch
        return reference(params, batches_pressing(), *rest)
    return loop


def test_a_run_on_the_students_loop_resumes_after_ctrl_c_as_if_never_stopped(tmp_path):
    """Stopped at step 5 and resumed on the state the checkpoint kept (its step count and moments), the
    run's losses are those of the run never stopped, to the last bit; so are those of a run resumed
    with npformer's own loop, the checkpoint being the same either way."""
    assert train(options(tmp_path, "straight", max_steps=12), stream=io.StringIO(), loop=reference) == 0
    for name, resumed_with in (("resumed", reference), ("resumed-by-npformer", None)):
        assert train(options(tmp_path, name, max_steps=12), stream=io.StringIO(), loop=pressed_during_step(5)) == 130
        log = io.StringIO()
        assert train(options(tmp_path, name, max_steps=12, resume=True), stream=log, loop=resumed_with) == 0
        assert "at step 5" in log.getvalue()
    straight = train_losses(tmp_path / "straight")
    assert sorted(straight) == list(range(1, 13))
    assert train_losses(tmp_path / "resumed") == straight
    assert train_losses(tmp_path / "resumed-by-npformer") == pytest.approx(straight, rel=1e-5)


def test_a_failing_loop_is_refused_unless_allowed_and_then_named(tmp_path, capsys, lesson_loop_source):
    module = tmp_path / "mine.py"
    module.write_text(lesson_loop_source.replace("m_hat = m[name] / (1 - beta1 ** step)", "m_hat = m[name]"))
    assert module.read_text() != lesson_loop_source
    assert cli.main(["train", "--ops", str(module), "--runs-dir", str(tmp_path / "runs")]) == 2
    error = capsys.readouterr().err
    assert "train_loop (lesson 13) fails its exercise" in error and "--allow-failing" in error, error
    assert not (tmp_path / "runs").exists()
    student = load_student_ops(str(module), allow_failing=True)
    assert student.train_loop is not None and student.loop_exercise.status == "failing"
    assert "train_loop" in student.report() and "FAILING its exercise" in student.report()


def test_a_loop_that_does_not_take_its_step_or_meets_a_non_finite_loss_stops_the_run_named(tmp_path):
    def takes_every_batch_first(params, batches, *rest):
        return reference(params, list(batches), *rest)

    trainer = Trainer(options(tmp_path, "listed"), stream=io.StringIO(), loop=takes_every_batch_first)
    assert trainer.run() == 1
    assert "your train_loop did not take its step" in trainer.stream.getvalue(), trainer.stream.getvalue()

    trainer = Trainer(options(tmp_path, "nan", max_steps=20, eval_every=4), stream=io.StringIO(), loop=reference)
    original_loss = ops.current().cross_entropy_forward

    def poisoned_loss(logits, targets, *args, **kwargs):
        value, cache = original_loss(logits, targets, *args, **kwargs)
        if trainer.model.training and trainer.loop_state["step"] >= 4:  # from the fifth step on
            value = value * np.nan
        return value, cache

    with ops.using({"cross_entropy_forward": poisoned_loss}, name="poisoned"):
        assert trainer.run() == 1
    assert "the loss is nan at step 5" in trainer.stream.getvalue()
    assert checkpoint.load_checkpoint(str(tmp_path / "nan" / "checkpoint.npz"), trainer.model)["step"] == 4
