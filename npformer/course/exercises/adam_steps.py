"""The step of Adam's update (lesson 12) that is derived, not defined: the bias correction.

Adam's moments are exponential moving averages started at zero (``m_t = beta m_{t-1} + (1 - beta) g_t``,
``m_0 = 0``), too small on the first steps. ``adam_bias_correction(beta, step)`` is the factor ``c_t``
that makes ``c_t m_t`` equal ``g`` when every gradient so far was ``g``: the student unrolls the
recursion into a geometric sum. ``adam_step`` (``blocks_and_training``) is graded with it as its step;
the update's compact form is shown once it passes.
"""

from __future__ import annotations

import numpy

from .base import Case, Exercise, WrongSolution, size


def _adam_bias_correction(beta, step):
    """c_t = 1 / (1 - beta^t): m_t = (1 - beta^t) g when every gradient was g, from m_0 = 0."""
    return 1.0 / (1.0 - beta**step)


def _correction_cases(rng):
    return [Case("beta = 0.9, steps 1 .. 1000", {"step": [1, 2, 3, 10, 100, 1000], "beta": 0.9}),
            Case("beta = 0.98 (the paper's beta2), steps 1 .. 5000", {"step": [1, 7, 50, 5000], "beta": 0.98}),
            Case("beta = 0.5, steps 1 .. 4", {"step": [1, 2, 3, 4], "beta": 0.5})]


def _unseen_correction(rng):
    beta = float(rng.uniform(0.8, 0.999))
    steps = sorted({1, *(size(rng, 2, 50) for _ in range(3)), size(rng, 20000, 40000)})
    return [Case(f"beta = {beta:.4f}, {len(steps)} steps from 1 to {steps[-1]}", {"step": steps, "beta": beta})]


def _correction_hint(got, expected, inputs, output):
    """What a wrong sequence of factors does (the steps are in increasing order, the last far out)."""
    if got.shape != expected.shape or not numpy.all(numpy.isfinite(got)):
        return ""
    right = numpy.isclose(got, expected, rtol=1e-9, atol=0.0)
    if numpy.all(got <= 1) and numpy.any(got < 1):
        return ("your factor is below 1 (never above it): it makes the corrected moment smaller than m_t, and "
                "m_t, started at m_0 = 0, is already smaller than g")
    if got.size > 1 and numpy.allclose(got, got[0], rtol=1e-12) and not right.all():
        return ("your factor does not change with the step: right at step 1 only, while m_t comes closer to g "
                "step after step")
    if not numpy.isclose(got[-1], 1.0, rtol=1e-6):
        return ("your factor does not tend to 1 as the step grows: after many steps m_t has forgotten its start "
                "at 0")
    if inputs["step"][0] == 1 and not right[0]:
        return ("right where the step is large, wrong at step 1: unroll the recursion once by hand, from m_0 = 0, "
                "and compare m_1 with g")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("adam_bias_correction", "adam_bias_correction(beta, step) -> the factor c_t, a float", "12",
             _adam_bias_correction, _correction_cases, ("factor",), hints=(_correction_hint,), pointwise="step",
             unseen=_unseen_correction),
]

DERIVATIONS: dict[str, tuple[str, ...]] = {"adam_step": ("adam_bias_correction",)}

TEXTBOOK: dict[str, str] = {
    "adam_step": ("m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; m_hat = m / (1 - beta1^t), "
                  "v_hat = v / (1 - beta2^t); param = param - lr * m_hat / (sqrt(v_hat) + eps)"),
}


WRONG_SOLUTIONS = [
    WrongSolution("adam_bias_correction", "1 - beta^t: the fraction m_t holds, not its inverse",
                  lambda beta, step: 1.0 - beta**step, "below 1"),
    WrongSolution("adam_bias_correction", "1 / (1 - beta): the first step's factor at every step",
                  lambda beta, step: 1.0 / (1.0 - beta), "does not change with the step"),
    WrongSolution("adam_bias_correction", "1 / beta^t: the decay undone, not the start at zero",
                  lambda beta, step: 1.0 / beta**step, "does not tend to 1"),
    WrongSolution("adam_bias_correction", "1 / (1 - beta^(t + 1)): one step late",
                  lambda beta, step: 1.0 / (1.0 - beta ** (step + 1)), "wrong at step 1"),
]
