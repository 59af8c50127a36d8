"""Slips in the grader that the rest of the suite once let through (issue 65): each was planted alone
in a copy of today's code and the whole suite passed on it. A function that answers the public cases
and then runs past its time on the unseen or a hidden case must fail; a hidden case is passed only
when every tensor it returns is right, not its last one."""

import json

import pytest

from npformer.course import gradescope
from npformer.course.cases import HIDDEN_CASES, hidden_cases, prepare, prepared_public, unseen_case
from npformer.course.exercises import EXERCISES
from npformer.course.grader import grade
from npformer.course.grading import Result, StudentGrades
from npformer.course.wire import Status

SECRET = "a secret for the slips"
SEED, UNSEEN_SEED = 3, 11


def _prepared(name):
    """The public cases, the unseen (and timed) ones and the hidden ones of ``name``, as ``course grade`` runs them."""
    exercise = EXERCISES[name]
    unseen, _ = unseen_case(exercise, UNSEEN_SEED)
    return exercise, prepared_public(exercise, SEED) + prepare(exercise, unseen) + \
        prepare(exercise, hidden_cases(exercise, SECRET))


def _function(source, name):
    namespace = {}
    exec(source, namespace)
    return namespace[name]


@pytest.mark.parametrize("late", ["unseen", "hidden"])
def test_running_out_of_time_after_the_public_cases_fails(late):
    exercise, prepared = _prepared("relu_backward")
    firsts = [float(item.case.inputs["x"].ravel()[0]) for item in prepared if item.case.label.startswith(late)]
    relu_backward = _function(
        "def relu_backward(x, dout):\n"
        f"    if float(x.ravel()[0]) in {firsts!r}:\n"
        "        while True:\n"
        "            pass\n"
        "    return dout * (x > 0)\n", "relu_backward")
    report = grade(exercise, prepared, function=relu_backward, time_limit=1.5)
    assert any(row.passed for row in report.rows), "the public cases were answered"
    assert report.failed and report.status is Status.TIMED_OUT, report
    if late == "hidden":
        assert not any(report.hidden_verdicts().values()), report.hidden_verdicts()


def test_a_hidden_case_with_one_wrong_tensor_fails_on_gradescope():
    """``linear_backward`` returns dx, dW, db: a dx wrong on the hidden cases, with db right (the
    last tensor), fails every hidden case, in the report and in Gradescope's test of them."""
    exercise, prepared = _prepared("linear_backward")
    firsts = [float(item.case.inputs["x"].ravel()[0]) for item in prepared if item.case.label.startswith("hidden")]
    linear_backward = _function(
        "def linear_backward(x, W, b, dout):\n"
        "    rows, grads = x.reshape(-1, x.shape[-1]), dout.reshape(-1, dout.shape[-1])\n"
        "    dx = dout @ W.T\n"
        f"    if float(x.ravel()[0]) in {firsts!r}:\n"
        "        dx = 2 * dx\n"
        "    return dx, rows.T @ grads, grads.sum(axis=0)\n", "linear_backward")
    report = grade(exercise, prepared, function=linear_backward, time_limit=30.0)
    hidden_rows = [row for row in report.rows if row.case.startswith("hidden")]
    assert [row.passed for row in hidden_rows if row.tensor == "db"] == [True] * HIDDEN_CASES
    assert report.hidden_verdicts() == {f"hidden {n}": False for n in range(1, HIDDEN_CASES + 1)}
    result = Result("linear_backward", 1, report.status, str(report), graded=report)
    tests = gradescope.results(StudentGrades("ada", {"linear_backward": result}))["tests"]
    [hidden] = [test for test in tests if test["name"].startswith("hidden cases")]
    assert hidden["output"] == "linear_backward: hidden 1 FAIL, hidden 2 FAIL, hidden 3 FAIL", json.dumps(hidden)
    assert report.failed and tests[0]["status"] == "failed"
