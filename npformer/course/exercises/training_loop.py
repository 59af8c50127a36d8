"""The exercise of lesson 13: the training loop, the part of ``npformer train`` that turns batches
into parameter updates (the loss and its gradients, the gradients clipped by their global norm, the
step counted, the learning rate of the schedule, Adam with bias correction, in place).

``train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state)`` is graded on a
small NumPy model defined here (``TinyClassifier``: a two-layer perceptron with a softmax
cross-entropy), whose ``loss_and_grads`` is a bound method and whose schedule is an object, so that
both travel to the grading worker by value and need no npformer there. The model reads its own
dict of the parameter arrays, as npformer's models do (``Module.params()`` hands out the arrays, not
the model's storage): an update that replaces ``params[name]`` by a new array is never seen by it,
and the losses after the first step show it. The function updates ``params`` and ``state`` in place
and returns the losses; the grader receives all three (``Exercise.in_place``) and compares the
losses, the parameters, the step count and both moments with the reference's.

What a student gets wrong here is written as ``WRONG_SOLUTIONS`` (no bias correction, each tensor
clipped on its own, every step rescaled to ``max_norm``, a clipping that never reaches the update, a
resumed state started afresh, a new array in place of the model's, the step counted after the
learning rate is read); ``loop_mistake_hint`` recognises each from the parameters it produced.
"""

from __future__ import annotations

import copy
import math

import numpy

from ..hints import Hint, explains
from .base import Case, Exercise, WrongSolution, size

__all__ = ["EXERCISES", "WRONG_SOLUTIONS", "TinyClassifier", "Schedule", "train_loop_reference", "TEXTBOOK"]

BETAS = (0.9, 0.98)   # what npformer's trainer uses (the paper's)


class TinyClassifier:
    """``logits = tanh(x W1 + b1) W2 + b2``, mean softmax cross-entropy over a batch ``(x (N, D), y (N,))``.

    It keeps its own dict of the arrays it was built with (``weights``), so it sees only the updates
    made in those arrays. A parameter it does not use (``frozen`` in a case) gets a zero gradient."""

    def __init__(self, params: dict) -> None:
        self.weights = dict(params)

    def loss_and_grads(self, params: dict, batch: tuple) -> tuple[float, dict]:
        """``(loss, {name: gradient, the shape of params[name]})`` at the model's current weights."""
        x, y = batch
        w = self.weights
        hidden = numpy.tanh(x @ w["W1"] + w["b1"])                    # (N, H)
        logits = hidden @ w["W2"] + w["b2"]                            # (N, C)
        shifted = logits - logits.max(axis=1, keepdims=True)
        probabilities = numpy.exp(shifted) / numpy.exp(shifted).sum(axis=1, keepdims=True)
        rows = numpy.arange(len(y))
        loss = float(-numpy.log(probabilities[rows, y]).mean())
        dlogits = probabilities.copy()
        dlogits[rows, y] -= 1.0
        dlogits /= len(y)
        dhidden = (dlogits @ w["W2"].T) * (1.0 - hidden**2)
        grads = {name: numpy.zeros_like(value) for name, value in w.items()}
        grads.update(W2=hidden.T @ dlogits, b2=dlogits.sum(axis=0), W1=x.T @ dhidden, b1=dhidden.sum(axis=0))
        return loss, grads


class Schedule:
    """A warm-up to ``peak`` over ``warmup`` steps, then a decay as 1/sqrt(step); steps count from 1."""

    def __init__(self, peak: float, warmup: int) -> None:
        self.peak, self.warmup = peak, warmup

    def __call__(self, step: int) -> float:
        if not step >= 1:
            raise ValueError(f"lr_at({step!r}): the steps are counted from 1 (the first update is step 1)")
        return self.peak * min(step / self.warmup, math.sqrt(self.warmup / step))


# -- the reference, and the mistakes it can make on request (for the hints) ---------------------------

def _loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state, mistake=""):
    """The reference with one of the mistakes of ``HINTS`` made on purpose (``mistake`` "": none)."""
    beta1, beta2 = betas
    if mistake == "fresh state":
        state.clear()
    state.setdefault("step", 0)
    first, second = state.setdefault("m", {}), state.setdefault("v", {})
    losses = []
    for batch in batches:
        loss, grads = loss_and_grads(params, batch)
        losses.append(float(loss))
        grads = _clipped(grads, max_norm, mistake)
        if mistake == "lr before the count":
            lr = lr_at(state["step"])
        state["step"] += 1
        step = state["step"]
        if mistake != "lr before the count":
            lr = lr_at(step)
        for name, param in params.items():
            grad = grads[name]
            first[name] = beta1 * first.get(name, 0.0) + (1.0 - beta1) * grad
            second[name] = beta2 * second.get(name, 0.0) + (1.0 - beta2) * grad * grad
            corrected = mistake != "no bias correction"
            m_hat = first[name] / (1.0 - beta1**step) if corrected else first[name]
            v_hat = second[name] / (1.0 - beta2**step) if corrected else second[name]
            update = lr * m_hat / (numpy.sqrt(v_hat) + eps)
            if mistake == "a new array":
                params[name] = param - update
            else:
                param -= update
    return losses


def _clipped(grads, max_norm, mistake):
    if max_norm is None or mistake == "clipping not applied":
        return grads
    if mistake == "each clipped":
        return {name: grad * min(1.0, max_norm / (numpy.sqrt(numpy.sum(grad * grad)) + 1e-6))
                for name, grad in grads.items()}
    scale = max_norm / (math.sqrt(sum(float(numpy.sum(grad * grad)) for grad in grads.values())) + 1e-6)
    if scale >= 1.0 and mistake != "always rescaled":
        return grads
    return {name: grad * scale for name, grad in grads.items()}


def train_loop_reference(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state):
    """The losses of one pass over ``batches``; ``params`` and ``state`` updated in place."""
    return _loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state)


def _flat(result, inputs):
    """``(losses, params, state)`` as the arrays compared: the losses, every parameter, the step
    count, every first and every second moment (the parameters in name order)."""
    if not isinstance(result, tuple) or len(result) != 3:
        raise TypeError("train_loop's result could not be read back with params and state")
    losses, params, state = result
    if not isinstance(losses, (list, tuple, numpy.ndarray)):
        raise TypeError(f"train_loop must return the list of losses, one per batch; got {type(losses).__name__}")
    if not isinstance(state, dict) or not all(key in state for key in ("step", "m", "v")):
        raise TypeError("state must hold 'step' (the steps taken), 'm' and 'v' (a moment per parameter name) "
                        "after the loop")
    names = sorted(inputs["params"])

    def moments(key):
        missing = [name for name in names if name not in state[key]]
        if missing:
            raise TypeError(f"state[{key!r}] has no moment for {', '.join(missing)}: every parameter has one, "
                            "even one whose gradient is zero")
        return numpy.concatenate([numpy.ravel(numpy.asarray(state[key][name], dtype=float)) for name in names])

    return (numpy.array([float(loss) for loss in losses]),
            numpy.concatenate([numpy.ravel(numpy.asarray(params[name], dtype=float)) for name in names]),
            numpy.array(float(state["step"])), moments("m"), moments("v"))


def _run(inputs, mistake):
    """The flattened result of the reference making ``mistake``, on a copy of ``inputs``."""
    inputs = copy.deepcopy(inputs)
    losses = _loop(*inputs.values(), mistake=mistake)
    return _flat((losses, inputs["params"], inputs["state"]), inputs)


# -- the hints: what fails, then (second tier) the mistake named ----------------------------------------

def _bias_words(inputs):
    beta1, beta2 = inputs["betas"]
    step = int(inputs["state"].get("step", 0)) + 1  # the first step this case takes (a resumed state is ahead)
    ratio = (1 - beta1**step) / math.sqrt(1 - beta2**step)
    return Hint(f"the update at step {step} is {ratio:.2f} times the size it should be, and the ratio drifts "
                "toward 1 as the steps go on: a factor that depends on the step",
                "no bias correction: divide m by 1 - beta1^step and v by 1 - beta2^step (step = the one taken)")


HINTS = {
    "no bias correction": _bias_words,
    "each clipped": lambda inputs: Hint(
        "the case without clipping passes; with max_norm set, the gradients that reach Adam have a norm, all "
        "parameters together, above max_norm",
        "each tensor was clipped by its own norm: the norm is of all the gradients together (one norm, one "
        "scale for every tensor)"),
    "always rescaled": lambda inputs: Hint(
        "a step whose gradients' norm is already below max_norm was changed by the clipping",
        "the gradients were rescaled to max_norm at every step: scale them only when max_norm / norm < 1"),
    "clipping not applied": lambda inputs: Hint(
        "the parameters are those of a run without clipping (max_norm None), though max_norm is below the "
        "gradients' norm here",
        "the clipped gradients never reach the update (g = g * scale in a loop rebinds a name and changes "
        "nothing in grads): build the clipped dict, or scale the arrays in place"),
    "fresh state": lambda inputs: Hint(
        f"the cases that start from an empty state pass; this one resumes at step {inputs['state'].get('step')} "
        "with its moments, and your result is that of a run started afresh",
        "the state given was thrown away: continue its step count and its moments, create them only when "
        "missing"),
    "a new array": lambda inputs: Hint(
        "the losses after the first batch are those of the starting parameters: the model never saw your "
        "updates, though the params you return moved",
        "params[name] = param - update puts a new array in the dict and leaves the model's array as it was: "
        "update it in place (params[name] -= update, or params[name][...] = ...)"),
    "lr before the count": lambda inputs: Hint(
        "each step's update has the size of the step before's learning rate",
        "lr_at was called before the step was counted: count the step first, then read lr_at(step)"),
}


def loop_mistake_hint(got, expected, inputs, output):
    """Which of ``HINTS``'s mistakes gives the parameters ``got`` (checked on the params only)."""
    if output != "params":
        return ""
    if explains(numpy.concatenate([numpy.ravel(inputs["params"][name]) for name in sorted(inputs["params"])]), got):
        return Hint("the parameters come back as they went in: no step changed them",
                    "apply each step's update to every params[name], in place")
    for mistake, words in HINTS.items():
        if mistake == "fresh state" and not inputs["state"]:
            continue
        if mistake in ("each clipped", "always rescaled", "clipping not applied") and inputs["max_norm"] is None:
            continue
        try:
            candidate = _run(inputs, mistake)[1]
        except (ValueError, ZeroDivisionError, FloatingPointError):
            continue
        if not explains(expected, candidate) and explains(candidate, got):
            return words(inputs)
    return ""


# -- the cases -------------------------------------------------------------------------------------

def _classifier(rng, features, hidden, classes, frozen=False):
    """Parameters (a ``frozen`` one the model never uses) and the model reading the same arrays."""
    params = {"W1": rng.standard_normal((features, hidden)) / math.sqrt(features), "b1": 0.1 * rng.standard_normal(hidden),
              "W2": rng.standard_normal((hidden, classes)) / math.sqrt(hidden), "b2": 0.1 * rng.standard_normal(classes)}
    if frozen:
        params["frozen"] = rng.standard_normal((2, 3))
    return params, TinyClassifier(params)


def _batches(rng, count, rows, features, classes, scale=1.0):
    return [(scale * rng.standard_normal((rows, features)), rng.integers(0, classes, size=rows)) for _ in range(count)]


def _case(label, params, model, batches, max_norm, state=None, lr=0.05, warmup=2, eps=1e-8, betas=BETAS):
    return Case(label, {"params": params, "batches": iter(batches), "loss_and_grads": model.loss_and_grads,
                        "lr_at": Schedule(lr, warmup), "max_norm": max_norm, "betas": betas, "eps": eps,
                        "state": {} if state is None else state})


def _resumed(rng, label, done, more, max_norm):
    """A state left by ``done`` steps of the reference, and ``more`` batches to continue with."""
    params, model = _classifier(rng, 3, 5, 4)
    state = {}
    train_loop_reference(params, iter(_batches(rng, done, 6, 3, 4, 3.0)), model.loss_and_grads, Schedule(0.05, 2),
                         max_norm, BETAS, 1e-8, state)
    return _case(label, params, model, _batches(rng, more, 6, 3, 4, 3.0), max_norm, state)


def _cases(rng):
    clipped = _classifier(rng, 4, 5, 3)
    off = _classifier(rng, 3, 4, 5)
    one = _classifier(rng, 5, 3, 4)
    frozen = _classifier(rng, 4, 6, 3, frozen=True)
    # Inputs of a growing scale: the gradients' norm is below max_norm at first, above it later.
    growing = [(scale * rng.standard_normal((6, 4)), rng.integers(0, 3, size=6)) for scale in (0.3, 0.5, 4.0, 6.0, 8.0)]
    return [_case("5 batches, max_norm 0.6: clipping on for the later steps, off for the first", *clipped, growing, 0.6),
            _case("3 batches, max_norm None: no clipping", *off, _batches(rng, 3, 5, 3, 5, 2.0), None),
            _case("one batch, max_norm 100 (not reached)", *one, _batches(rng, 1, 4, 5, 4), 100.0),
            _resumed(rng, "a resumed state: 3 steps done, 3 more batches, max_norm 0.5", 3, 3, 0.5),
            _case("a parameter whose gradient is zero ('frozen'), max_norm 0.5, eps 1e-3", *frozen,
                  _batches(rng, 4, 5, 4, 3, 3.0), 0.5, eps=1e-3)]


def _unseen(rng):
    features, hidden, classes = size(rng, 2, 6), size(rng, 2, 6), size(rng, 2, 5)
    max_norm = None if rng.random() < 0.25 else float(rng.uniform(0.2, 1.5))
    betas = (float(rng.uniform(0.8, 0.95)), float(rng.uniform(0.95, 0.999)))
    params, model = _classifier(rng, features, hidden, classes, frozen=bool(rng.integers(2)))
    count, warmup = size(rng, 2, 5), size(rng, 1, 4)
    state = {}
    if rng.random() < 0.5:  # a resumed state
        train_loop_reference(params, iter(_batches(rng, size(rng, 1, 3), 5, features, classes, 3.0)),
                             model.loss_and_grads, Schedule(0.03, warmup), max_norm, betas, 1e-8, state)
    label = (f"{count} batches, D={features}, H={hidden}, C={classes}, max_norm "
             f"{'None' if max_norm is None else f'{max_norm:.2f}'}, betas ({betas[0]:.3f}, {betas[1]:.3f})"
             + (f", resumed at step {state['step']}" if state else ""))
    return [_case(label, params, model, _batches(rng, count, 5, features, classes, 3.0), max_norm, state,
                  lr=0.03, warmup=warmup, betas=betas)]


# -- wrong solutions, as a student would write them ---------------------------------------------------

def _student(mistake):
    def train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state):
        return _loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state, mistake=mistake)
    return train_loop


def _losses_only(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state):
    """The losses, and no update at all (a loop that only evaluates)."""
    return [loss_and_grads(params, batch)[0] for batch in batches]


WRONG_SOLUTIONS = [
    WrongSolution("train_loop", "Adam without bias correction", _student("no bias correction"), "no bias correction"),
    WrongSolution("train_loop", "each gradient clipped by its own norm", _student("each clipped"), "its own norm"),
    WrongSolution("train_loop", "gradients rescaled to max_norm at every step", _student("always rescaled"),
                  "at every step"),
    WrongSolution("train_loop", "clipping computed but never applied", _student("clipping not applied"),
                  "never reach the update"),
    WrongSolution("train_loop", "a resumed state thrown away", _student("fresh state"), "thrown away"),
    WrongSolution("train_loop", "params[name] = param - update (a new array)", _student("a new array"), "in place"),
    WrongSolution("train_loop", "lr_at read before the step is counted", _student("lr before the count"),
                  "counted from 1"),
    WrongSolution("train_loop", "no update (only the losses)", _losses_only),
]

EXERCISES = [
    Exercise("train_loop", "train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state) -> "
             "losses (one float per batch; params and state updated in place)", "13", train_loop_reference, _cases,
             ("losses", "params", "step", "m", "v"), hints=(loop_mistake_hint,), convert=_flat, unseen=_unseen,
             points=3, in_place=("params", "state")),
]

_COMPACT = """
for batch in batches:
    loss, grads = loss_and_grads(params, batch)
    if max_norm is not None:                       # one norm over every gradient
        scale = max_norm / (sqrt(sum((g * g).sum() for g in grads.values())) + 1e-6)
        grads = {k: g * min(scale, 1.0) for k, g in grads.items()}
    state['step'] += 1; t = state['step']; lr = lr_at(t)
    for k, p in params.items():                    # Adam, bias-corrected, in place
        m[k] = b1 m[k] + (1 - b1) g;  v[k] = b2 v[k] + (1 - b2) g^2
        p -= lr * (m[k] / (1 - b1^t)) / (sqrt(v[k] / (1 - b2^t)) + eps)"""

TEXTBOOK = {"train_loop": _COMPACT.replace("\n", "\n    ")}
