"""Each student's own exercise (``course.variants``): every variant changes the answer of every exercise
it grades, its answers come from its forward alone and are accurate, the draw is the roster's and the
secret's, and a numerical gradient scores nothing. The class graded with variants is in
``test_variant_class.py``."""

import dataclasses
import functools
import inspect
import json

import numpy as np
import pytest

from npformer.course import check
from npformer.course.cases import prepare
from npformer.course.exercises import EXERCISES
from npformer.course.roster import NotOnRoster, Variants, read_roster
from npformer.course.variant_file import find_file, my_variant, read_variants, show_variants, write_variants
from npformer.course.variants import (FAMILIES, FAMILY_OF, TEXTBOOK_FORM, assignment, draw, graded_with_variants,
                                      posed, timed)
from npformer.course.variants.base import Family, Held, Variant, input_gradients, keep, node_gradient, varied
from npformer.gradcheck.engine import numerical_gradient
from npformer.gradcheck.report import DEFAULT_TOL, judge

from numerical_student import numerical_backward, numerical_step

GRADED = [(family.name, variant.name, name) for family in FAMILIES.values() for variant in family.variants
          for name in family.exercises if graded_with_variants(name)]


def _public(name):
    return list(EXERCISES[name].cases(np.random.default_rng(0)))


def _agrees(got, expected) -> bool:
    return all(judge("", [("t", np.shape(e), np.asarray(g, dtype=float), np.asarray(e, dtype=float), "")],
                     DEFAULT_TOL).results[0].passed for g, e in zip(got, expected))


def test_every_family_has_four_variants_and_every_exercise_of_it_is_graded_or_practice():
    for family in FAMILIES.values():
        assert len(family.variants) >= 4, family.name
        assert len({variant.name for variant in family.variants}) == len(family.variants)
        assert TEXTBOOK_FORM not in {variant.name for variant in family.variants}
        for name in family.exercises:
            assert name in EXERCISES
            assert name in family.practice or name in family.nodes or EXERCISES[name].forward is not None, name


@pytest.mark.parametrize("family, variant, name", GRADED)
def test_every_variant_changes_the_answer_of_every_exercise_it_grades(family, variant, name):
    """The lesson's form (npformer's op, the instructor's solution, a posted one) fails every variant:
    on at least one public case, the variant's answer and the lesson's disagree beyond the tolerance."""
    cases = _public(name)
    varied_answers = prepare(posed(name, variant), cases)
    textbook_answers = prepare(EXERCISES[name], cases)
    assert any(not _agrees(mine.expected, lesson.expected)
               for mine, lesson in zip(varied_answers, textbook_answers)), (family, variant, name)


def test_two_variants_of_a_family_have_different_answers():
    """A classmate's answer to another variant fails too."""
    for family in FAMILIES.values():
        name = family.exercises[-1]
        answers = {variant.name: prepare(posed(name, variant.name), _public(name)) for variant in family.variants}
        for first in answers:
            for second in answers:
                if first < second:
                    assert any(not _agrees(a.expected, b.expected) for a, b in zip(answers[first], answers[second])), \
                        (name, first, second)


def test_a_variants_answers_follow_its_forward_and_nothing_else():
    """Change a variant's forward and the grader's answers change with it: there is no other source."""
    family = FAMILIES["layernorm"]
    unbiased = family.variant("unbiased")
    doubled = dataclasses.replace(unbiased, forward=lambda x, gamma, beta, node=keep: 2 * unbiased.forward(
        x, gamma, beta, node))
    cases = _public("layernorm_backward")
    before = prepare(varied(family, EXERCISES["layernorm_backward"], unbiased), cases)
    after = prepare(varied(family, EXERCISES["layernorm_backward"], doubled), cases)
    for one, two in zip(before, after):
        for first, second in zip(one.expected, two.expected):
            np.testing.assert_allclose(second, 2 * first, rtol=1e-7, atol=1e-12)


def _textbook_layernorm(x, gamma, beta, node=keep):
    mean = node("mean", x.mean(axis=-1, keepdims=True))
    var = node("var", ((x - mean) ** 2).mean(axis=-1, keepdims=True))
    x_hat = node("x_hat", (x - mean) / np.sqrt(var + 1e-5))
    return gamma * x_hat + beta


def test_finite_differences_of_the_lessons_form_agree_with_its_closed_forms():
    """The answers by finite differences (steps through ``node`` included) equal npformer's closed forms
    of the lesson's own layer norm, far inside the grader's tolerance."""
    lesson = Family("layernorm", FAMILIES["layernorm"].exercises,
                    (Variant("lesson", "the lesson's", _textbook_layernorm),), FAMILIES["layernorm"].nodes)
    for name in lesson.exercises:
        exercise = EXERCISES[name]
        cases = _public(name)
        by_differences = prepare(varied(lesson, exercise, lesson.variants[0]), cases)
        closed = prepare(exercise, cases)
        for mine, reference in zip(by_differences, closed):
            for got, expected in zip(mine.expected, reference.expected):
                assert judge("", [("t", np.shape(expected), got, expected, "")], 1e-8).results[0].passed, name


@pytest.mark.parametrize("family, variant, name", GRADED)
def test_a_variants_finite_differences_are_accurate(family, variant, name):
    """Halving the step changes no answer by more than 1e-8 of it (fourth order: the error is far below
    the grader's 1e-6), so an exact, derived answer passes."""
    the_family = FAMILIES[family]
    forward = the_family.variant(variant).forward_of(name)
    node = the_family.nodes.get(name)
    node = node[0] if isinstance(node, tuple) else node  # a step that returns several: its first
    for case in _public(name)[:2]:
        inputs = {key: value for key, value in case.inputs.items() if key not in ("dout", "dloss")}
        upstream = case.inputs.get("dout", case.inputs.get("dloss"))  # none: a local derivative, ones
        upstream = np.ones(np.shape(forward(*inputs.values()))) if upstream is None else np.asarray(upstream, float)
        if node == "jacobian":
            continue
        target_name = node if node is not None else EXERCISES[name].wrt[0]
        held = Held(target_name)
        if target_name in inputs:
            inputs[target_name] = np.array(inputs[target_name], dtype=float)
            target, run = inputs[target_name], lambda: np.asarray(forward(*inputs.values()))
        else:
            forward(*inputs.values(), node=held)
            target, run = held.value, lambda: np.asarray(forward(*inputs.values(), node=held))
        coarse = numerical_gradient(run, target, upstream, eps=3e-4)
        fine = numerical_gradient(run, target, upstream, eps=1.5e-4)
        scale = max(np.abs(fine).max(), 1e-300)
        assert np.abs(coarse - fine).max() <= 1e-8 * scale, (family, variant, name)


def test_a_node_gradient_is_backpropagations():
    """``dL/dmean`` by ``node`` is the total derivative through the variance too (the chain rule's sum)."""
    rng = np.random.default_rng(3)
    x, gamma, beta, dout = rng.standard_normal((2, 5)), rng.standard_normal(5), rng.standard_normal(5), \
        rng.standard_normal((2, 5))
    inputs = {"x": x, "gamma": gamma, "beta": beta, "dout": dout}
    d_mean = node_gradient(_textbook_layernorm, inputs, "mean")
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    var = (centered ** 2).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(var + 1e-5)
    d_var = (dout * gamma * centered).sum(-1, keepdims=True) * -0.5 * rstd ** 3
    expected = -(dout * gamma * rstd).sum(-1, keepdims=True) + d_var * (-2 * centered).mean(-1, keepdims=True)
    np.testing.assert_allclose(d_mean, expected, rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match="no node"):
        node_gradient(_textbook_layernorm, inputs, "rstd")
    assert input_gradients(_textbook_layernorm, inputs, ("beta",))[0].shape == (5,)


# -- whose variant ------------------------------------------------------------------------------------

def test_the_draw_is_the_secrets_and_the_roster_names_and_each_family_draws_alone():
    names = [f"student{index}" for index in range(400)]
    drawn = {name: assignment("a secret", name) for name in names}
    assert drawn == {name: assignment("a secret", name) for name in names}  # the same every time
    assert all(variant != TEXTBOOK_FORM for variants in drawn.values() for variant in variants.values())
    for family in FAMILIES.values():
        counts = {variant.name: 0 for variant in family.variants}
        for variants in drawn.values():
            counts[variants[family.name]] += 1
        assert min(counts.values()) > 400 / len(counts) * 0.6, (family.name, counts)  # no variant starved
    assert {assignment("another secret", name)["layernorm"] for name in names[:40]} != \
        {drawn[name]["layernorm"] for name in names[:40]} or \
        [assignment("another secret", name) for name in names[:40]] != [drawn[name] for name in names[:40]]
    whole_sets = [tuple(variants.values()) for variants in drawn.values()]
    assert len(set(whole_sets)) > 0.95 * len(whole_sets)  # two students rarely share every variant
    assert len({draw("s", name, "layernorm", "class") for name in names}) == 1
    assert {draw("s", name, "layernorm", "off") for name in names} == {TEXTBOOK_FORM}


def test_the_roster_maps_every_name_of_a_student_and_refuses_what_it_cannot(tmp_path):
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text("student,submission\nada,ada-folder\nada,ada@uni.edu\ngroup7,bo\ngroup7,cy\n")
    roster = read_roster(roster_file)
    assert roster.student("ADA-folder") == roster.student("ada@uni.edu") == "ada"
    assert roster.student("bo", "cy") == "group7"
    with pytest.raises(NotOnRoster, match="not on the roster: eve"):
        roster.student("eve")
    with pytest.raises(NotOnRoster, match="different students"):
        roster.student("ada-folder", "bo")
    variants = Variants("student", "a secret", roster)
    assert variants.of("bo", "cy") == ("group7", assignment("a secret", "group7"))  # Gradescope's submitters
    with pytest.raises(NotOnRoster):  # a folder's name is whole: a comma picks nobody's variants
        variants.of("zed,ada-folder")
    from npformer.course.grading import _one_student_twice
    folders = [tmp_path / name for name in ("ada-folder", "ADA-FOLDER", "bo", "eve")]
    twice = _one_student_twice(folders, variants)
    assert set(twice) == {"ada-folder", "ADA-FOLDER"} and "are all ada on the roster" in twice["ADA-FOLDER"]
    for text, words in [("name,folder\nada,a\n", "header"), ("student,submission\nada,\n", "line 2"),
                        ("student,submission\nada,a\nbo,a\n", "already ada's"), ("student,submission\n", "no student")]:
        roster_file.write_text(text)
        with pytest.raises(ValueError, match=words):
            read_roster(roster_file)
    with pytest.raises(ValueError, match="roster"):
        Variants("student", "a secret", None)


def test_each_student_gets_a_file_that_check_reads(tmp_path, monkeypatch):
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text("student,submission\nada,ada\nbo,bo\n")
    files = write_variants(tmp_path / "variants", roster_file, "a secret")
    assert [path.parent.name for path in files] == ["ada", "bo"]
    data = json.loads(files[0].read_text())
    assert data == {"student": "ada", "variants": assignment("a secret", "ada")}
    assert "a secret" not in files[0].read_text() + (files[0].parent / "variants.txt").read_text()
    lessons = files[0].parent / "lessons" / "week1"
    lessons.mkdir(parents=True)
    monkeypatch.chdir(lessons)
    monkeypatch.delenv("NPFORMER_VARIANTS", raising=False)
    assert find_file() == files[0]
    assert my_variant("layernorm_dvar") == data["variants"]["layernorm"]
    assert my_variant("adam_step") == TEXTBOOK_FORM  # no variants
    files[0].write_text('{"variants": {"layernorm": "made-up", "attention": "alibi"}}')
    assert read_variants(files[0]) == {"layernorm": "made-up", "attention": "alibi"}
    with pytest.raises(ValueError, match="no variant 'made-up'.*another version"):
        my_variant("layernorm_dvar")
    assert my_variant("attention_dv") == "alibi"  # one unknown name stops only its own family
    assert "no variant 'made-up'" in show_variants("04") and "'alibi'" in show_variants("07")


# -- a numerical gradient scores nothing -------------------------------------------------------------

def _numerical_student(forward, positions):
    return functools.partial(numerical_backward, forward, positions)


def test_every_exercise_graded_with_variants_has_a_timed_case_or_says_why_not():
    graded = {name for name in EXERCISES if graded_with_variants(name)}
    assert graded - set(timed.LARGE) == set(timed.UNTIMED), "give it a timed case (timed.LARGE)"


@pytest.mark.parametrize("name", sorted(timed.LARGE))
def test_a_numerical_gradient_of_the_variants_forward_scores_nothing(name):
    family = FAMILY_OF[name]
    variant = next(variant for variant in family.variants if "erfc" not in variant.forward.__code__.co_names
                   and variant.name != "wide")
    node = family.nodes.get(name)
    names = node if isinstance(node, tuple) else (node,)  # a step that returns several gradients: each
    if node is None:
        inputs = list(inspect.signature(EXERCISES[name].forward).parameters)
        student = _numerical_student(variant.forward_of(name), [inputs.index(wrt) for wrt in EXERCISES[name].wrt])
    elif set(names) <= set(inspect.signature(variant.forward_of(name)).parameters):  # inputs' gradients
        inputs = list(inspect.signature(variant.forward_of(name)).parameters)
        student = _numerical_student(variant.forward_of(name), [inputs.index(one) for one in names])
    else:
        student = functools.partial(numerical_step, variant.forward_of(name), node)
    report = check(name, student, variant=variant.name, strict=False, unseen_seed=1)
    assert not report.passed
    assert "finite differences costs two forward passes per input entry" in report.message, report


def test_an_entry_next_to_a_kink_is_not_graded_and_the_rest_is():
    """Within a step of ReLU's kink the derivative is one-sided and differences cannot know it: the
    answer key leaves that entry out (NaN, not compared), and keeps every other."""
    leaky = FAMILIES["relu"].variant("leaky").forward
    x = np.array([[1e-5, 0.7, -0.4]])
    gradient, = input_gradients(leaky, {"x": x, "dout": np.ones_like(x)}, ("x",))
    assert np.isnan(gradient[0, 0]) and np.allclose(gradient[0, 1:], [1.0, 0.1], rtol=1e-9)


def _where_the_grader_used_to_look(array):
    """The 16 entries a seeded draw picks in a large input (every entry of a small one)."""
    return np.random.default_rng(0).choice(array.size, 16, replace=False) if array.size > 1024 else range(array.size)


def test_the_entries_checked_on_the_timed_case_cannot_be_known_in_advance():
    variant = FAMILIES["layernorm"].variant("unbiased")
    # central differences only where a seeded draw would check a large input: right there, 0 elsewhere
    student = functools.partial(numerical_backward, variant.forward, (0, 1, 2), entries=_where_the_grader_used_to_look)
    report = check("layernorm_backward", student, variant="unbiased", strict=False, unseen_seed=3)
    assert not report.passed
    assert {row.case for row in report.rows if not row.passed} == {row.case for row in report.rows
                                                                      if timed.is_timed(row.case)}


def test_a_numerical_step_of_the_lessons_own_derivation_scores_nothing():
    """The lesson's form's steps are timed against their derivation's forward too (a timed case once
    went untimed there: the step has no forward of its own)."""
    student = functools.partial(numerical_step, _textbook_layernorm, "var")
    report = check("layernorm_dvar", student, variant=TEXTBOOK_FORM, strict=False, unseen_seed=2)
    assert not report.passed
    assert "finite differences costs two forward passes per input entry" in report.message, report
