"""Optimizers, learning-rate schedules and gradient clipping.

The update rules and defaults are those of ``torch.optim`` (PyTorch 2.x), with
``g`` the gradient, ``p`` the parameter, ``t`` the optimizer step (1, 2, ...):

SGD(lr, momentum=0, dampening=0, weight_decay=0, nesterov=False)::

    g = g + weight_decay * p
    b = g                                  at t = 1
    b = momentum * b + (1 - dampening) * g afterwards      (only if momentum > 0)
    g = g + momentum * b if nesterov else b
    p = p - lr * g

Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0) (Kingma and Ba, 2015)::

    g = g + weight_decay * p               (L2 penalty folded into the gradient)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

The last three lines are the op ``ops.adam_step`` (``npformer/ops/adam.py``), so that
``ops.using`` chooses the update as it chooses every other op.

AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2) (Loshchilov and
Hutter, 2019): the same without the L2 term, and the decay applied to the
parameter directly, before the Adam step::

    p = p * (1 - lr * weight_decay)        (weight matrices and embedding tables only)

AdamW decays the parameters with two or more axes, the weight matrices and the
embedding tables, and leaves the gains and biases (one axis: layer norm's
``gamma`` and ``beta``, every ``b``) alone: pulling a gain towards 0 shrinks
its layer's output, a constraint nobody asked for. PyTorch users get the same
by putting those in a parameter group with ``weight_decay=0`` (as nanoGPT and
most Transformer recipes do); ``torch.optim.AdamW`` itself decays every
parameter it is given.

An optimizer is built on a model and updates ``model.params()`` in place from
``model.grads()``. Its step counter counts calls to ``step()`` (one per
batch), not parameter tensors. ``optimizer.lr`` may be changed between steps;
the schedules below compute it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from . import backend, ops, threads
from .backend import xp


def _split_into(items: list, count: int) -> list[list]:
    """``count`` lists of ``(param, grad, state)`` whose parameters hold about as many numbers
    each (largest first, each to the lightest list so far); empty lists are dropped."""
    groups: list[list] = [[] for _ in range(count)]
    sizes = [0] * count
    for item in sorted(items, key=lambda item: -item[0].size):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(item)
        sizes[lightest] += item[0].size
    return [group for group in groups if group]


def decays(param: Any) -> bool:
    """Whether AdamW decays ``param``: a weight matrix or an embedding table (two or more axes), never a
    gain or a bias (one axis)."""
    return param.ndim >= 2


class Optimizer:
    """Common parts: the parameters, the step counter, per-parameter state, saving."""

    _state_names: tuple[str, ...] = ()

    def __init__(self, model: Any, lr: float) -> None:
        if not lr >= 0:
            raise ValueError(f"{type(self).__name__}: lr must be >= 0, got {lr!r}")
        self.model = model
        self.lr = float(lr)
        self.step_count = 0
        self.state: dict[str, dict[str, Any]] = {
            key: {name: xp.zeros_like(value) for name in self._state_names}
            for key, value in model.params().items()
        }

    def zero_grad(self) -> None:
        self.model.zero_grad()

    def step(self) -> None:
        """Update every parameter once from its gradient.

        On the CPU the parameters are split into one group per thread (``threads``), groups
        of about equal size, and each thread updates its group: the updates are independent,
        and NumPy releases the interpreter lock inside its elementwise loops, so every core
        works. The result is the same as updating them one after another, which is what
        ``threads.parallel_items`` does on CuPy.
        """
        self.step_count += 1
        grads = self.model.grads()
        items = [(param, grads[key], self.state[key]) for key, param in self.model.params().items()]
        threads.parallel_items(self._update_all, _split_into(items, threads.get_threads()))

    def _update_all(self, items: list) -> None:
        for param, grad, state in items:
            self._update(param, grad, state)

    def _update(self, param: Any, grad: Any, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _hyperparameters(self) -> dict[str, Any]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Step count, hyperparameters and host copies of the per-parameter state."""
        return {
            "type": type(self).__name__,
            "step_count": self.step_count,
            "hyperparameters": {"lr": self.lr, **self._hyperparameters()},
            "state": {
                key: {name: backend.to_numpy(value).copy() for name, value in entry.items()}
                for key, entry in self.state.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` saved; keys and shapes must match this model."""
        name = type(self).__name__
        if state.get("type") != name:
            raise ValueError(f"{name}.load_state_dict: state is for {state.get('type')!r}, not {name!r}")
        missing = sorted(set(self.state) - set(state["state"]))
        unexpected = sorted(set(state["state"]) - set(self.state))
        if missing or unexpected:
            raise KeyError(f"{name}.load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for key, entry in state["state"].items():
            for slot, value in entry.items():
                if tuple(value.shape) != tuple(self.state[key][slot].shape):
                    raise ValueError(
                        f"{name}.load_state_dict: {key}.{slot} must have shape "
                        f"{tuple(self.state[key][slot].shape)}, got {tuple(value.shape)}"
                    )
        for key, entry in state["state"].items():
            for slot, value in entry.items():
                self.state[key][slot][...] = backend.asarray(value)
        self.step_count = int(state["step_count"])
        for attribute, value in state["hyperparameters"].items():
            setattr(self, attribute, tuple(value) if attribute == "betas" else value)


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay."""

    _state_names = ("momentum_buffer",)

    def __init__(self, model: Any, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(model, lr)
        self.momentum, self.dampening = momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov

    def _update(self, param: Any, grad: Any, state: dict[str, Any]) -> None:
        g = grad + self.weight_decay * param if self.weight_decay else grad
        if self.momentum:
            buffer = state["momentum_buffer"]
            if self.step_count == 1:
                buffer[...] = g
            else:
                buffer *= self.momentum
                buffer += (1.0 - self.dampening) * g
            g = g + self.momentum * buffer if self.nesterov else buffer
        param -= self.lr * g

    def _hyperparameters(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "dampening": self.dampening,
                "weight_decay": self.weight_decay, "nesterov": self.nesterov}


class Adam(Optimizer):
    """Adam with bias correction; ``weight_decay`` is an L2 penalty added to the gradient."""

    _state_names = ("exp_avg", "exp_avg_sq")
    _decoupled = False

    def __init__(self, model: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        for index, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{type(self).__name__}: betas[{index}] must be in [0, 1), got {beta!r}")
        if not eps >= 0:
            raise ValueError(f"{type(self).__name__}: eps must be >= 0, got {eps!r}")
        super().__init__(model, lr)
        self.betas, self.eps, self.weight_decay = tuple(betas), eps, weight_decay
        self._many_cache: dict = {}   # what adam_step.many keeps between steps (its table of addresses)

    def step(self) -> None:
        """Update every parameter once. When the active ``adam_step`` can update many parameters at
        once (``adam_step.many``: the GPU form, ``npformer/ops/gpu/adam.py``, one kernel launch for
        the whole model), it is given them all; else each parameter is updated on its own."""
        many = getattr(ops.current().adam_step, "many", None)
        if many is None:
            return super().step()
        self.step_count += 1
        grads, params = self.model.grads(), self.model.params()
        beta1, beta2 = self.betas
        many(list(params.values()), [self._gradient(param, grads[key]) for key, param in params.items()],
             [self.state[key]["exp_avg"] for key in params], [self.state[key]["exp_avg_sq"] for key in params],
             self.step_count, self.lr, beta1, beta2, self.eps, cache=self._many_cache)

    def _gradient(self, param: Any, grad: Any) -> Any:
        """The gradient Adam's moments see: AdamW first decays a weight matrix itself; Adam adds the L2 term."""
        if self._decoupled:
            if decays(param):                              # AdamW: decay a weight matrix itself
                param *= 1.0 - self.lr * self.weight_decay
            return grad
        return grad + self.weight_decay * param if self.weight_decay else grad   # Adam: L2 in g

    def _update(self, param: Any, grad: Any, state: dict[str, Any]) -> None:
        g = self._gradient(param, grad)
        beta1, beta2 = self.betas
        new_param, state["exp_avg"], state["exp_avg_sq"] = ops.current().adam_step(
            param, g, state["exp_avg"], state["exp_avg_sq"], self.step_count, self.lr, beta1, beta2, self.eps)
        if new_param is not param:    # the textbook step returns a new array; the fast one updates in place
            param[...] = new_param

    def _hyperparameters(self) -> dict[str, Any]:
        return {"betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` each step for the weight
    matrices and embedding tables (two or more axes), never the gains and biases (one axis)."""

    _decoupled = True

    def __init__(self, model: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(model, lr, betas, eps, weight_decay)

    def param_groups(self) -> list[dict[str, Any]]:
        """The two groups as ``torch.optim.AdamW`` takes them: ``{"name", "keys", "weight_decay"}``
        for the decayed parameters (two or more axes) and for the rest (``weight_decay`` 0)."""
        params = self.model.params()
        decayed = [key for key, value in params.items() if decays(value)]
        return [{"name": "decay", "keys": decayed, "weight_decay": self.weight_decay},
                {"name": "no_decay", "keys": [key for key in params if key not in decayed], "weight_decay": 0.0}]

    def describe_groups(self) -> str:
        """One line per group: how many tensors and numbers, the decay, and the kinds of parameter."""
        params = self.model.params()
        lines = []
        for group in self.param_groups():
            kinds = sorted({key.rsplit(".", 1)[-1] for key in group["keys"]})
            numbers = sum(int(params[key].size) for key in group["keys"])
            lines.append(f"AdamW group {group['name']:<8} weight_decay={group['weight_decay']:g}: "
                         f"{len(group['keys'])} tensors, {numbers:,} numbers ({', '.join(kinds) or 'none'})")
        return "\n".join(lines)


def grad_norm(grads: Any) -> float:
    """The global L2 norm of ``grads`` (arrays, or a dict of them), every entry together."""
    grads = list(grads.values()) if isinstance(grads, dict) else list(grads)
    # Each tensor's sum of squares in its dtype, the partial sums added in float64 on the device:
    # one number copied to the host at the end (on a GPU, one wait instead of one per tensor).
    return math.sqrt(float(sum(xp.sum(grad * grad).astype(xp.float64) for grad in grads)))


def clip_grad_norm(model: Any, max_norm: float) -> float:
    """Scale all gradients in place so that their global L2 norm is at most ``max_norm``.

    The norm is over every gradient entry of the model together. As in
    ``torch.nn.utils.clip_grad_norm_``, the scale is ``max_norm / (norm + 1e-6)``,
    applied only when it is below 1. Returns the norm before clipping.
    """
    if not max_norm > 0:
        raise ValueError(f"clip_grad_norm: max_norm must be > 0, got {max_norm!r}")
    grads = list(model.grads().values())
    total = grad_norm(grads)
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for grad in grads:
            grad *= grad.dtype.type(scale)
    return total


# -- learning-rate schedules: callables from the step (1, 2, ...) to the learning rate ----------


def _check_step(step: int) -> None:
    if isinstance(step, bool) or not isinstance(step, (int, numpy.integer)) or step < 1:
        raise ValueError(f"schedule: step must be an int >= 1, got {step!r}")


class NoamSchedule:
    """The paper's warm-up rule (Vaswani et al., 5.3)::

        lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    It rises linearly for ``warmup`` steps, peaks at ``factor * (d_model * warmup)^-0.5``,
    then decays as ``1 / sqrt(step)``.
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> None:
        if warmup_steps < 1:
            raise ValueError(f"NoamSchedule: warmup_steps must be >= 1, got {warmup_steps!r}")
        self.d_model, self.warmup_steps, self.factor = d_model, warmup_steps, factor

    def __call__(self, step: int) -> float:
        _check_step(step)
        return self.factor * self.d_model**-0.5 * min(step**-0.5, step * self.warmup_steps**-1.5)


class WarmupCosineSchedule:
    """Linear warm-up to ``peak_lr`` over ``warmup_steps``, then cosine decay to ``min_lr``
    at ``total_steps`` (and ``min_lr`` after it)::

        lr = peak_lr * step / warmup_steps                                   step <= warmup
        lr = min_lr + (peak_lr - min_lr) * (1 + cos(pi * progress)) / 2      afterwards,
             progress = (step - warmup_steps) / (total_steps - warmup_steps), at most 1
    """

    def __init__(self, peak_lr: float, warmup_steps: int, total_steps: int,
                 min_lr: float = 0.0) -> None:
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(
                f"WarmupCosineSchedule: need 0 <= warmup_steps < total_steps, "
                f"got {warmup_steps} and {total_steps}"
            )
        self.peak_lr, self.min_lr = peak_lr, min_lr
        self.warmup_steps, self.total_steps = warmup_steps, total_steps

    def __call__(self, step: int) -> float:
        _check_step(step)
        if step <= self.warmup_steps:
            return self.peak_lr * step / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return self.min_lr + (self.peak_lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


class BudgetSchedule:
    """Linear warm-up, then a cosine decay that reaches zero when the training budget is spent::

        lr = peak_lr * min(1, step / warmup_steps) * (1 + cos(pi * spent)) / 2

    ``spent`` is the share of the budget used before this step, from 0 to 1: in steps,
    ``(step - 1) / total_steps``; in time, ``elapsed / allowed``. Under a fixed budget a rate that
    lands at zero at its end trains better than one that is still high when the run is cut (Li
    et al., 2020, "Budgeted training"); ``NoamSchedule`` is still at ``1 / sqrt(step)`` of its peak
    then. A time budget cannot know its number of steps in advance, so it follows the clock,
    which keeps it landing at zero even when evaluations or a busy machine slow some steps.
    """

    def __init__(self, peak_lr: float, warmup_steps: int) -> None:
        if warmup_steps < 1:
            raise ValueError(f"BudgetSchedule: warmup_steps must be >= 1, got {warmup_steps!r}")
        self.peak_lr, self.warmup_steps = peak_lr, warmup_steps

    def __call__(self, step: int, spent: float) -> float:
        _check_step(step)
        if not 0.0 <= spent <= 1.0:
            raise ValueError(f"BudgetSchedule: spent must be in [0, 1], got {spent!r}")
        warmup = min(1.0, step / self.warmup_steps)
        return self.peak_lr * warmup * 0.5 * (1.0 + math.cos(math.pi * spent))


class ConstantSchedule:
    """``lr(step) = lr`` for every step."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def __call__(self, step: int) -> float:
        _check_step(step)
        return self.lr
