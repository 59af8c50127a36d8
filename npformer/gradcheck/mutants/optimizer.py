"""The mutants of the optimizer: two ways to get Adam's bias correction wrong.

``OPTIMIZER_MUTANTS`` names them, each caught by ``check_adam`` (``"optimizer"``: three steps against
the closed-form update).
"""

from __future__ import annotations

from ... import optim
from ...backend import xp
from .mutant import Mutant


def _adam_bias_correction_next_step(original):
    def update(self, param, grad, state):
        self.step_count += 1
        try:
            original(self, param, grad, state)  # the bias correction of step t + 1
        finally:
            self.step_count -= 1
    return update


def _adam_without_bias_correction(original):
    def update(self, param, grad, state):
        beta1, beta2 = self.betas
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= beta1
        m += (1 - beta1) * grad
        v *= beta2
        v += (1 - beta2) * grad * grad
        param -= self.lr * m / (xp.sqrt(v) + self.eps)
    return update


OPTIMIZER_MUTANTS: list[Mutant] = [
    Mutant("adam: bias correction of the next step", "optim.Adam", "1 - beta^(t+1) instead of 1 - beta^t",
           optim.Adam, "_update", _adam_bias_correction_next_step, "optimizer"),
    Mutant("adam: no bias correction", "optim.Adam", "m and v used uncorrected", optim.Adam, "_update",
           _adam_without_bias_correction, "optimizer"),
]
