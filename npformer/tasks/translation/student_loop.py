"""A student's training loop (lesson 13's ``train_loop``) taking the trainer's steps.

``npformer train --ops my_npformer.py``, with a module holding a ``train_loop`` that passes its
exercise (``course.student_ops``), or ``train(options, loop=...)``: the trainer calls the student's
function once, as the exercise poses it::

    train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state)

* ``params``: the model's parameter arrays (``model.params()``), which the loop updates in place;
* ``batches``: a generator of the run's batches (the same batches, in the same order, as npformer's
  own loop). While the student's loop asks for the next batch, the trainer does what follows each of
  its own steps (``Trainer.after_step``: the progress bar, the log, the evaluation, the checkpoint),
  and the generator ends when the budget is spent or Ctrl-C is pressed;
* ``loss_and_grads(params, batch)``: the forward pass, the active op set's loss (label smoothing,
  only the counted targets) and the backward pass (``training.loss_and_gradients``); it returns
  ``(loss, model.grads())``;
* ``lr_at(step)``: the run's schedule; ``max_norm``: ``--clip``; ``betas`` and ``eps``: those of
  npformer's Adam (0.9, 0.98 and 1e-9, the paper's);
* ``state``: ``{"step", "m", "v"}`` made from the optimizer's state (``state_from``): the step count
  and both moments of every parameter. A checkpoint stores it as the optimizer's (``store_state``),
  so a run resumes with either loop, and a resumed run continues exactly.

A non-finite loss stops the run before the step is taken and keeps the last good checkpoint, as
npformer's loop does. A loop that asks for the next batch before it has trained on the last one (it
read ``list(batches)``), or that did not count its step in ``state``, is stopped with a sentence
saying so; so is one that raises.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

from ... import backend
from ...optim import grad_norm
from ...tokens import PAD_ID
from ...training import loss_and_gradients

__all__ = ["run", "state_from", "store_state", "HEADER"]

HEADER = ("training loop: yours (train_loop, lesson 13): your loop takes every step; npformer hands it the "
          "batches and logs, evaluates and checkpoints between them")


class _NonFiniteLoss(Exception):
    def __init__(self, loss: float) -> None:
        super().__init__(loss)
        self.loss = loss


class _NotAStep(Exception):
    """The student's loop did not take the step it was given a batch for."""


def state_from(optimizer: Any) -> dict:
    """The student's ``state`` from npformer's Adam: its step count, and its moments (the same arrays)."""
    return {"step": optimizer.step_count,
            "m": {key: slots["exp_avg"] for key, slots in optimizer.state.items()},
            "v": {key: slots["exp_avg_sq"] for key, slots in optimizer.state.items()}}


def store_state(optimizer: Any, state: dict) -> None:
    """Put the student's ``state`` into npformer's Adam (what a checkpoint saves)."""
    optimizer.step_count = int(state["step"])
    for key, slots in optimizer.state.items():
        for slot, name in (("exp_avg", "m"), ("exp_avg_sq", "v")):
            value = state[name].get(key)
            if value is not None and value is not slots[slot]:
                slots[slot][...] = value


def run(trainer: Any, batches: Iterator[Any], position: dict, spent: Callable[[], float]) -> int:
    """The student's ``trainer.loop`` on ``batches``; 0 when it ends with the batches, 1 when the run
    stops (a non-finite loss, a loop that did not take its step, or raised)."""
    model, options, optimizer = trainer.model, trainer.options, trainer.optimizer
    state = trainer.loop_state = state_from(optimizer)
    taken = {"calls": 0, "loss": math.nan, "lr": math.nan, "grad_norm": math.nan}

    def loss_and_grads(params: dict, batch: Any) -> tuple[float, dict]:
        loss = loss_and_gradients(model, (backend.asarray(batch.src), backend.asarray(batch.tgt_in)),
                                  backend.asarray(batch.tgt_out), ignore_index=PAD_ID,
                                  label_smoothing=trainer.model_config.label_smoothing, only_counted_targets=True)
        if not math.isfinite(loss):
            raise _NonFiniteLoss(loss)
        grads = model.grads()
        logged = (position["step"] + 1) % options.log_every == 0
        taken.update(calls=taken["calls"] + 1, loss=loss, grad_norm=grad_norm(grads) if logged else math.nan)
        return loss, grads

    def lr_at(step: int) -> float:
        taken["lr"] = trainer.learning_rate(step, spent())
        return taken["lr"]

    def one_at_a_time() -> Iterator[Any]:
        for batch in batches:
            taken["calls"] = 0
            yield batch
            step = position["step"] + 1
            if taken["calls"] != 1:
                raise _NotAStep(f"it asked for the batch after step {step} having called loss_and_grads "
                                f"{taken['calls']} times on that step's batch (once per batch: take the batches "
                                f"one at a time, as they come)")
            if state.get("step") != step:
                raise _NotAStep(f"state['step'] is {state.get('step')!r} after step {step}: the loop counts its "
                                f"steps in state['step']")
            trainer.after_step(position, batch, taken["loss"], taken["grad_norm"], taken["lr"])

    beta1, beta2 = optimizer.betas
    try:
        trainer.loop(model.params(), one_at_a_time(), loss_and_grads, lr_at, options.clip, (beta1, beta2),
                     optimizer.eps, state)
    except _NonFiniteLoss as error:
        return trainer.stop_at_non_finite(error.loss, position)
    except _NotAStep as error:
        return _stopped(trainer, position, f"your train_loop did not take its step: {error}")
    except Exception as error:  # noqa: BLE001 - the student's code: whatever it raises stops the run, named
        return _stopped(trainer, position, f"your train_loop raised {type(error).__name__}: {error}")
    return 0


def _stopped(trainer: Any, position: dict, why: str) -> int:
    trainer.log(f"stopping at step {position['step'] + 1}: {why}; the last good checkpoint "
                f"({trainer.run_folder.checkpoint}) is kept")
    return 1
