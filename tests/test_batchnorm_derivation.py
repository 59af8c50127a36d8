"""Batch norm's backward pass in steps (lesson 24): the steps' references are the finite differences of
the lesson's own forward at its nodes, and a student who gets the variance wrong is told that step, then
sees npformer's compact form once every step is right."""

import numpy as np

from npformer.course import EXERCISES, check
from npformer.course.cases import prepare
from npformer.course.exercises import DERIVATIONS, TEXTBOOK
from npformer.course.variants import FAMILIES
from npformer.course.variants.base import Family, Variant, keep, varied
from npformer.course.variants.batch_norm import _kept, _normalised
from npformer.gradcheck.report import judge

from test_derivations import _namespace


def _lesson_batchnorm(x, gamma, beta, mask, node=keep):
    mask = np.asarray(mask, dtype=bool)
    return _kept(gamma * _normalised(x, mask, node, lambda n: n) + beta, mask)


def test_the_steps_references_are_the_finite_differences_of_the_lessons_form():
    family = FAMILIES["batchnorm"]
    lesson = Family("batchnorm", family.exercises, (Variant("lesson", "the lesson's", _lesson_batchnorm),),
                    family.nodes)
    for name in family.exercises:
        exercise = EXERCISES[name]
        cases = exercise.cases(np.random.default_rng(0)) + exercise.unseen(np.random.default_rng(5))
        by_differences = prepare(varied(lesson, exercise, lesson.variants[0]), cases)
        for mine, reference in zip(by_differences, prepare(exercise, cases)):
            for got, expected in zip(mine.expected, reference.expected):
                assert judge("", [("t", np.shape(expected), got, expected, "")], 1e-8).results[0].passed, \
                    (name, mine.case.label)


def _dvar_doubled(x, gamma, beta, keep, dout, eps=1e-5):
    rows = x[keep]
    centered = x - rows.mean(axis=0)
    return -(dout * gamma * keep[..., None] * centered).reshape(-1, x.shape[-1]).sum(axis=0) \
        * (rows.var(axis=0) + eps) ** -1.5


def test_the_grader_names_the_wrong_variance_step_then_shows_the_compact_form():
    namespace = _namespace("batchnorm_backward")
    steps = DERIVATIONS["batchnorm_backward"]
    right = tuple(namespace[step] for step in steps)
    namespace["batchnorm_dvar"] = _dvar_doubled  # the final calls the steps by name: it goes wrong too
    report = check("batchnorm_backward", namespace["batchnorm_backward"],
                   steps=(right[0], _dvar_doubled, right[2]), strict=False)
    text = str(report)
    assert not report.passed and report.first_wrong_step().exercise.name == "batchnorm_dvar", text
    assert "times the right answer in every feature" in text and TEXTBOOK["batchnorm_backward"] not in text
    namespace["batchnorm_dvar"] = right[1]
    report = check("batchnorm_backward", namespace["batchnorm_backward"], steps=right)
    assert report.passed and TEXTBOOK["batchnorm_backward"] in str(report), report
