"""The whole ``npformer train --data`` workflow on the active backend, as a user runs it.

Train with a checkpoint at every evaluation; the same run stopped by Ctrl-C and resumed with
``--resume`` ends where the uninterrupted one does, bit for bit; ``--average-last`` makes the final
model; then ``evaluate``, ``translate`` and the attention explorer (``attention --html``) read the
run. A run written on the device resumes on the CPU and back.

On NumPy this is the workflow ``tests/test_train.py`` tests piece by piece. Its point is the other
backends: ``tests/test_strict_backend.py`` runs it under the strict stand-in (CuPy's generator
interface, device arrays that never become host arrays), and ``benchmarks/gpu_check.sh`` runs it
under CuPy on a GPU (``NPFORMER_BACKEND=cupy``). It is what found that a checkpoint written on
CuPy could not be saved: CuPy's ``bit_generator.state`` is a method, not NumPy's dict.
"""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import pytest

from npformer import backend, cli
from npformer.data.toy_corpus import toy_corpus
from npformer.tasks.translation import trainer as trainer_module
from npformer.training import checkpoint

STEPS, STOP_AT = 24, 13
MODEL = ["--d-model", "16", "--d-ff", "32", "--layers", "1", "--heads", "2", "--token-budget", "256"]
BUDGET = ["--eval-every", "8", "--average-last", "2", "--schedule", "noam", "--warmup", "10", "--dropout", "0.3",
          "--eval-sentences", "10", "--test-sentences", "5", "--beam", "2"]


@pytest.fixture
def pairs_file(tmp_path):
    splits = toy_corpus(n_train=300, n_valid=30, n_test=30, seed=3)
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{en}\t{fr}\n" for en, fr in splits.train + splits.valid + splits.test), encoding="utf-8")
    return str(path)


def train(pairs_file, runs, name, *extra):
    return cli.main(["train", "--data", pairs_file, "--runs-dir", str(runs), "--name", name, *MODEL, *BUDGET,
                     "--max-steps", str(STEPS), *extra])


def losses(folder):
    with open(folder / "metrics.jsonl", encoding="utf-8") as file:
        return {r["step"]: r["loss"] for r in map(json.loads, file) if r["kind"] == "train"}


def parameters(folder):
    return {name: value for name, value in checkpoint.read_arrays(str(folder / "checkpoint.npz")).items()
            if name.startswith("param/")}


def test_train_interrupt_resume_average_evaluate_translate_and_explore(pairs_file, tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    device = backend.get_backend()
    assert train(pairs_file, runs, "straight") == 0

    real_step, calls = trainer_module.train_step, []

    def ctrl_c_during_step(*args, **kwargs):
        calls.append(True)
        if len(calls) == STOP_AT:
            os.kill(os.getpid(), signal.SIGINT)      # the first press: finish this step, save, stop
            time.sleep(0.05)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", ctrl_c_during_step)
    assert train(pairs_file, runs, "resumed") == 130
    monkeypatch.setattr(trainer_module, "train_step", real_step)
    saved = json.loads((runs / "resumed" / "checkpoint.json").read_text())
    assert saved["step"] == STOP_AT
    if device != "numpy":   # npformer's counter generator: its state is where its stream stands
        assert saved["dropout_rng_state"]["bit_generator"] == "npformer.SplitMix64Counter"
        assert saved["dropout_rng_state"]["position"] > 0
    assert train(pairs_file, runs, "resumed", "--resume") == 0
    assert f"resuming {runs / 'resumed'} at step {STOP_AT}" in capsys.readouterr().err

    straight, resumed = losses(runs / "straight"), losses(runs / "resumed")
    assert sorted(resumed) == sorted(straight) and resumed == straight
    final_straight, final_resumed = parameters(runs / "straight"), parameters(runs / "resumed")
    for name, value in final_straight.items():   # the averaged model, bit for bit
        np.testing.assert_array_equal(final_resumed[name], value, err_msg=name)

    run = str(runs / "resumed")
    assert cli.main(["evaluate", "--run", run, "--beam", "2", "--max-sentences", "10"]) == 0
    assert "BLEU beam 2" in capsys.readouterr().out
    sentences = ["the black cat eats the apple .", "where is the dog ?"]
    assert cli.main(["translate", "--run", run, "--beam", "1", *sentences]) == 0
    on_device = capsys.readouterr().out.splitlines()
    assert len(on_device) == 2 and all(on_device)
    explorer = tmp_path / "explorer.html"
    assert cli.main(["attention", "--run", run, *sentences, "--html", str(explorer), "--beam", "1"]) == 0
    assert sentences[0] in explorer.read_text(encoding="utf-8")
    capsys.readouterr()

    # The run moves to the CPU and back: a device checkpoint resumes on NumPy, a NumPy one on the device.
    try:
        backend.set_backend("numpy")
        assert cli.main(["translate", "--run", run, "--beam", "1", *sentences]) == 0
        on_cpu = capsys.readouterr().out.splitlines()
        if device == "cupy" and on_cpu != on_device:   # float32 sums in another order can flip a near tie
            print(f"greedy translations differ on the GPU and the CPU: {on_device} / {on_cpu}")
        else:
            assert on_cpu == on_device
        assert train(pairs_file, runs, "resumed", "--resume", "--max-steps", str(STEPS + 4)) == 0
        note = capsys.readouterr().err
        assert ("dropout stream drawn on another backend" in note) == (device != "numpy"), note
    finally:
        backend.set_backend(device)
    assert train(pairs_file, runs, "resumed", "--resume", "--max-steps", str(STEPS + 8)) == 0
    assert f"at step {STEPS + 4}" in capsys.readouterr().err
