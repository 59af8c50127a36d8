"""Derive first: three backward passes taught in steps, each step graded on its own. A student walks
through them wrong, then right; the grader names the first wrong step, with its hint, and shows
npformer's compact form only once the exercise passes."""

import numpy as np
import pytest

from npformer.course import EXERCISES, check
from npformer.course.exercises import DERIVATIONS, TEXTBOOK

from lesson_solutions import sources


def _namespace(name):
    """The instructor's solution to ``name`` with its helpers (the steps), in a namespace of its own."""
    namespace = {"__name__": f"walk_{name}"}
    exec(compile(sources()[name], f"<walk {name}>", "exec"), namespace)
    return namespace


def _dvar_without_half(x, gamma, beta, dout, eps=1e-5):
    centered = x - x.mean(axis=-1, keepdims=True)
    return -(dout * gamma * centered).sum(axis=-1, keepdims=True) * (centered.var(axis=-1, keepdims=True) + eps) ** -1.5


def _jacobian_diagonal_only(x):
    p = np.exp(x - x.max())
    p /= p.sum()
    return np.diag(p * (1 - p))


def _d_weights_transposed(q, k, v, mask, dout):
    return v @ dout.swapaxes(-1, -2)


def _row_weight_transposed(x, W, b, dout):
    return W @ dout, np.outer(dout, x), dout


def _gate_without_half(x, dout):
    return dout * 2 * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


def _one_hot_batch_width(ids, W):
    return np.eye(int(ids.max()) + 1)[ids]


# (final exercise, the step made wrong, the wrong step, words of its hint)
WALKS = [
    ("linear_backward", "linear_row_backward", _row_weight_transposed, "W_kj"),
    ("gelu_backward", "gelu_gate_backward", _gate_without_half, "area"),
    ("softmax_backward", "softmax_jacobian", _jacobian_diagonal_only, "only the diagonal"),
    ("layernorm_backward", "layernorm_dvar", _dvar_without_half, "-1/2"),
    ("embedding_backward", "embedding_one_hot", _one_hot_batch_width, "whether or not"),
    ("attention_backward", "attention_d_weights", _d_weights_transposed, "the transpose"),
]


@pytest.mark.parametrize("final, wrong_step, wrong, words", WALKS, ids=[walk[0] for walk in WALKS])
def test_the_grader_names_the_first_wrong_step_then_shows_the_textbook_form(final, wrong_step, wrong, words):
    namespace = _namespace(final)
    steps = DERIVATIONS[final]
    assert wrong_step in steps and all(step in EXERCISES for step in steps)
    right_steps = tuple(namespace[step] if step in namespace else _namespace(step)[step] for step in steps)

    # wrong: the student's final function builds on the wrong step (softmax's does not call its step)
    namespace[wrong_step] = wrong
    wrong_steps = tuple(wrong if step == wrong_step else function for step, function in zip(steps, right_steps))
    report = check(final, namespace[final], steps=wrong_steps, strict=False)
    first = report.first_wrong_step()
    assert first is not None and first.exercise.name == wrong_step, report
    text = str(report)
    assert f"first wrong step: {wrong_step}" in text and "    hint for " in text, text
    assert words in report.with_fixes(), "the step's hint, with its fix where it holds one"
    assert f"first wrong step: {wrong_step}" in report.verdict or report.passed
    assert TEXTBOOK[final] not in text, "the closed form is shown only once the exercise passes"

    # right: every step passes, and the report shows npformer's form
    namespace.update(zip(steps, right_steps))
    report = check(final, namespace[final], steps=right_steps)
    assert report.passed and report.first_wrong_step() is None, report
    assert all(step.passed for step in report.steps) and TEXTBOOK[final] in str(report)


def test_a_failing_final_without_steps_says_how_to_find_the_wrong_step():
    def dx_only_direct(x, gamma, beta, dout, eps=1e-5):
        rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
        x_hat = (x - x.mean(-1, keepdims=True)) * rstd
        d_model = x.shape[-1]
        return dout * gamma * rstd, (dout * x_hat).reshape(-1, d_model).sum(0), dout.reshape(-1, d_model).sum(0)
    report = check("layernorm_backward", dx_only_direct, strict=False)
    assert "derive it in steps (layernorm_dx_hat, layernorm_dvar, layernorm_dmean)" in str(report), report


@pytest.mark.parametrize("steps, words", [((print,), "3 functions, in order"), ("abc", "3 functions"),
                                          ((print, print, 3), r"steps\[2\]"), (print, r"a tuple of one is \(f,\)")])
def test_steps_are_checked_before_grading(steps, words):
    with pytest.raises((ValueError, TypeError), match=words):
        check("layernorm_backward", print, steps=steps)
    with pytest.raises(ValueError, match="not derived in steps"):
        check("relu_backward", print, steps=(print,))


def test_a_derivation_of_one_step_takes_its_function_alone():
    """``steps=(f)`` is ``f`` in Python: for a derivation of one step it means what it says."""
    namespace = _namespace("softmax_backward")
    (step_name,) = DERIVATIONS["softmax_backward"]
    step = namespace[step_name] if step_name in namespace else _namespace(step_name)[step_name]
    alone = check("softmax_backward", namespace["softmax_backward"], steps=(step))
    assert alone.passed and len(alone.steps) == 1 and alone.steps[0].passed, alone
