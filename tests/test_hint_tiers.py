"""Hints teach before they tell: a wrong answer first gets the property it breaks; the named fix comes
only on request or after ``hints.FIX_AFTER`` failed checks of the exercise, and never on a class's
grade sheet."""

import numpy as np
import pytest

from npformer.course import check, grader, hints
from npformer.course.cases import prepared_public
from npformer.course.exercises import EXERCISES

FIX = "P dout instead of P^T dout"


def dv_untransposed(q, k, v, mask, dout):
    """attention_dv with the transpose missing (square cases: right shape, wrong rows)."""
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), scores, -1e30)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ dout


def attention_with_dv_untransposed(q, k, v, mask, dout):
    """attention's backward pass, right but for dv (written out: the worker cannot import the tests)."""
    scale = 1 / np.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2) * scale
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), scores, -1e30)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    d_weights = dout @ v.swapaxes(-1, -2)
    d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
    return d_scores @ k * scale, d_scores.swapaxes(-1, -2) @ q * scale, weights @ dout


def test_the_first_checks_say_what_fails_and_hold_the_fix_back():
    report = check("attention_backward", attention_with_dv_untransposed, strict=False)
    text = str(report)
    assert "hint for dv" in text and "belongs to key j" in text
    assert FIX not in text and "reveal=True" in text
    assert FIX in report.with_fixes()


def test_asked_for_or_after_repeated_failures_the_hint_names_the_fix():
    texts = [str(check("attention_backward", attention_with_dv_untransposed, strict=False))
             for _ in range(hints.FIX_AFTER)]
    assert [FIX in text for text in texts] == [False] * (hints.FIX_AFTER - 1) + [True]
    grader.failed_checks.clear()
    assert FIX in str(check("attention_backward", attention_with_dv_untransposed, strict=False, reveal=True))
    assert FIX not in str(check("attention_backward", attention_with_dv_untransposed, strict=False, reveal=False))


def test_a_failing_step_holds_its_fix_back_too():
    steps = ("attention_dv", "attention_d_weights", "attention_d_scores")
    from lesson_solutions import solution
    functions = tuple(dv_untransposed if step == "attention_dv" else solution(step) for step in steps)
    report = check("attention_backward", attention_with_dv_untransposed, steps=functions, strict=False)
    assert "first wrong step: attention_dv" in str(report) and FIX not in str(report)
    assert FIX in report.with_fixes()


def test_a_class_grade_sheet_never_names_the_fix():
    exercise = EXERCISES["attention_backward"]
    report = grader.grade(exercise, prepared_public(exercise, 0), function=attention_with_dv_untransposed)
    assert report.failed and "belongs to key j" in str(report)
    assert FIX not in str(report) and "reveal=True" not in str(report)


def test_reveal_must_be_a_bool():
    with pytest.raises(TypeError, match="reveal"):
        check("attention_backward", attention_with_dv_untransposed, reveal="yes")


def test_a_hint_without_a_second_tier_is_a_plain_sentence():
    assert hints.fix_of("wrong at every entry") == "" and hints.fix_of(hints.Hint("a", "b")) == "b"
    assert str(hints.Hint("a", "b")) == "a"


@pytest.mark.parametrize("reveal_fixes", [False, True])
def test_course_grade_names_the_fix_only_when_the_instructor_asks(tmp_path, reveal_fixes):
    import inspect

    from npformer.course import grade_class

    student = tmp_path / "class" / "ada"
    student.mkdir(parents=True)
    source = "import numpy as np\n\n\n" + inspect.getsource(attention_with_dv_untransposed)
    (student / "07_scaled_dot_product_attention.py").write_text(source.replace("attention_with_dv_untransposed",
                                                                               "attention_backward"))
    [graded] = grade_class(tmp_path / "class", tmp_path / "grades.csv", seed=1, exercises=["attention_backward"],
                           isolated=False, reveal_fixes=reveal_fixes)
    feedback = graded.results["attention_backward"].report
    assert "belongs to key j" in feedback and (FIX in feedback) == reveal_fixes
    assert "reveal=True" not in feedback
