"""A class graded with variants (``course grade --roster FILE --secret FILE``), as the instructor runs it:
each student graded against their own variant of every derivation of lessons 2, 3, 4 and 7.

- ada answers her own variants right (a stand-in for derived answers: her file returns the numbers
  the grader expects, for every case, hidden and timed ones included, since no derived solution of a
  variant may be written anywhere in this public repository);
- bo hands in the instructor's solutions, the lesson's form (what a posted solution or npformer's
  own ops give): 0 on every exercise;
- cy hands in ada's file: full points exactly where his variant is ada's;
- dee is ada's twin in every way, except that her layer norm backward is a numerical gradient of her
  variant's forward: right numbers, 0 points;
- eve is not on the roster: 0, and why.

Graded with variants off, the same class is graded as before: bo's lesson's forms score full.
"""

import csv
import inspect
import shutil

import numpy as np
import pytest

from npformer.course import grade_class, grading, instructor_edition
from npformer.course.cases import ClassCases
from npformer.course.exercises import EXERCISES
from npformer.course.roster import Variants, read_roster
from npformer.course.variants import FAMILY_OF, assignment, graded_with_variants, layer_norm, timed

from lesson_solutions import LESSONS, replace_solution
from numerical_student import numerical_backward

SECRET = "the instructor's secret of this term"
SEED = 7
LESSON_OF = {"02": "02_linear_and_relu.py", "03": "03_softmax_and_cross_entropy.py",
             "04": "04_layer_normalization.py", "07": "07_scaled_dot_product_attention.py"}
GRADED = [name for name in EXERCISES if graded_with_variants(name) and EXERCISES[name].lesson in LESSON_OF]


def _listed(array):
    return [None if np.isnan(value) else float(value) for value in np.asarray(array, dtype=float).ravel()]


def _oracle(name: str, variant: str, cases: ClassCases) -> str:
    """A function body that returns, for each case the grader will send, the answer it expects."""
    answers = {}
    for item in cases.of(name, variant):
        key = repr([round(float(np.sum(value)), 6) for value in item.case.inputs.values()
                    if isinstance(value, np.ndarray) and value.dtype.kind == "f"])
        answers[key] = [(_listed(output), list(np.shape(output))) for output in item.expected]
    return f"""
        import numpy as np
        arguments = [value for value in locals().values() if isinstance(value, np.ndarray) and value.dtype.kind == "f"]
        key = repr([round(float(np.sum(value)), 6) for value in arguments])
        outputs = [np.array(values, dtype=float).reshape(shape) for values, shape in {answers!r}[key]]
        return tuple(outputs) if len(outputs) > 1 else outputs[0]
    """


def _numerical_layernorm(variant: str) -> str:
    """dee's layer norm backward: central differences of her variant's forward, written out."""
    forward = getattr(layer_norm, variant.replace("-", "_"))
    source = inspect.getsource(layer_norm._statistics) + inspect.getsource(forward)
    return f"""
        def keep(name, value):
            return value
        EPS = 1e-5
        namespace = {{"np": np, "numpy": np, "keep": keep, "EPS": EPS}}
        exec({source!r}, namespace)
        forward = namespace[{forward.__name__!r}]
        exec({inspect.getsource(numerical_backward)!r}, namespace)
        return namespace["numerical_backward"](forward, (0, 1, 2), x, gamma, beta, dout)
    """


def _hand_in(folder, bodies: dict) -> None:
    folder.mkdir(parents=True)
    for lesson in LESSON_OF.values():
        shutil.copyfile(folder.parent.parent / "instructor" / lesson, folder / lesson)
    for name, body in bodies.items():
        replace_solution(folder / LESSON_OF[EXERCISES[name].lesson], name, body)


# The timed cases, smaller and differenced at every entry, so that the grader's answers are the same in
# every preparation and ada's file can hold them all; layer norm's keeps 1,152 entries, so that dee's
# numerical gradient still takes over a thousand forward passes.
def _small(**shapes):
    return lambda rng: {name: make(rng) for name, make in shapes.items()}


def _normal(*shape, scale=1.0, shift=0.0):
    return lambda rng: shift + scale * rng.standard_normal(shape)


SMALL_TIMED = {
    "linear_backward": _small(x=_normal(2, 4, 8), W=_normal(8, 6), b=_normal(6)),
    "relu_backward": _small(x=_normal(8, 16, scale=2)), "gelu_backward": _small(x=_normal(8, 16, scale=2)),
    "softmax_backward": _small(x=_normal(2, 64, scale=2)),
    "cross_entropy_backward": lambda rng: {"logits": 2 * rng.standard_normal((2, 2, 32)),
                                           "targets": rng.integers(1, 32, size=(2, 2))},
    "smoothed_cross_entropy_backward": lambda rng: {"logits": 2 * rng.standard_normal((2, 2, 32)),
                                                    "targets": rng.integers(1, 32, size=(2, 2)),
                                                    "label_smoothing": 0.1},
    "layernorm_backward": _small(x=_normal(16, 64, scale=2, shift=3), gamma=_normal(64, scale=0.5, shift=1),
                                 beta=_normal(64)),
    **{step: _small(x=_normal(64, 4, scale=2, shift=3), gamma=_normal(4, scale=0.5, shift=1), beta=_normal(4))
       for step in ("layernorm_dvar", "layernorm_dmean")},
    **{name: lambda rng: {"q": rng.standard_normal((1, 1, 4, 8)), "k": rng.standard_normal((1, 1, 4, 8)),
                          "v": rng.standard_normal((1, 1, 4, 8)), "mask": np.tril(np.ones((4, 4), dtype=bool))}
       for name in ("attention_backward", "attention_dv", "attention_d_scores")},
}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timed, "LARGE", SMALL_TIMED)
        patch.setattr(timed, "SAMPLED", 10**9)  # every entry, the same in every preparation
        yield _graded_term(tmp_path_factory)


def _graded_term(tmp_path_factory):
    root = tmp_path_factory.mktemp("variant-term")
    instructor_edition(LESSONS, root / "instructor", only=list(LESSON_OF))
    roster_file = root / "roster.csv"
    roster_file.write_text("student,submission\nada,ada\nbo,bo\ncy,cy\ndee,dee\n", encoding="utf-8")
    variants = Variants("student", SECRET, read_roster(roster_file))
    cases = ClassCases(GRADED, SEED, SECRET)
    drawn = {student: assignment(SECRET, student) for student in ("ada", "bo", "cy", "dee")}

    def own(student, name):
        return drawn[student][FAMILY_OF[name].name]

    submissions = root / "submissions"
    ada = {name: _oracle(name, own("ada", name), cases) for name in GRADED}
    _hand_in(submissions / "ada", ada)
    _hand_in(submissions / "bo", {})
    _hand_in(submissions / "cy", ada)
    dee = {name: _oracle(name, own("dee", name), cases) for name in GRADED}
    dee["layernorm_backward"] = _numerical_layernorm(own("dee", "layernorm_backward"))
    _hand_in(submissions / "dee", dee)
    _hand_in(submissions / "eve", ada)
    out = root / "grades.csv"
    with pytest.MonkeyPatch.context() as patch:  # the class's cases, prepared once: the oracle's
        patch.setattr(grading, "prepared_cases", lambda *args, **options: cases)
        graded = {grades.student: grades for grades in grade_class(
            submissions, out, seed=SEED, secret=SECRET, timeout=30, exercises=GRADED, reasons=True, variants=variants)}
        for student in ("ada", "bo"):
            shutil.copytree(submissions / student, root / "off" / student)
        off = {grades.student: grades for grades in grade_class(root / "off", root / "off.csv", seed=SEED,
                                                                    secret=SECRET, timeout=30, exercises=GRADED)}
    return graded, off, drawn, root


def test_the_sheet_grades_only_the_exercises_that_have_variants(term):
    graded, _, _, root = term
    assert list(graded["ada"].results) == GRADED
    assert {"layernorm_dx_hat", "attention_d_weights", "softmax", "attention"}.isdisjoint(graded["ada"].results)
    with open(root / "grades_variants.csv") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert rows["ada"]["layernorm"] == term[2]["ada"]["layernorm"]
    feedback = (root / "grades_feedback" / "ada.txt").read_text()
    assert f"layernorm '{term[2]['ada']['layernorm']}'" in feedback
    assert SECRET not in feedback and "your variant, layernorm" in feedback


def test_right_answers_to_ones_own_variants_score_full(term):
    ada = term[0]["ada"]
    assert ada.total == ada.max_points == sum(EXERCISES[name].points for name in GRADED), \
        {name: result.reason for name, result in ada.results.items() if not result.passed}


def test_the_lessons_form_scores_nothing(term):
    bo = term[0]["bo"]
    assert bo.total == 0, {name: result.reason for name, result in bo.results.items() if result.passed}
    assert "the textbook form's answer, not your variant's" in bo.results["layernorm_backward"].report


def test_a_classmates_file_scores_only_where_the_variants_agree(term):
    graded, _, drawn, _ = term
    shared = [name for name in GRADED if drawn["cy"][FAMILY_OF[name].name] == drawn["ada"][FAMILY_OF[name].name]]
    assert len(shared) < len(GRADED)
    assert graded["cy"].total == sum(EXERCISES[name].points for name in shared)


def test_a_numerical_gradient_scores_nothing(term):
    dee = term[0]["dee"]
    result = dee.results["layernorm_backward"]
    assert result.points == 0 and result.reason == "slower than a derived backward pass", result.reason
    assert "a backward pass by finite differences costs two forward passes per input entry" in result.report
    assert dee.total == dee.max_points - 2


def test_a_student_not_on_the_roster_gets_nothing_and_is_told_why(term):
    eve = term[0]["eve"]
    assert eve.total == 0
    assert {result.reason for result in eve.results.values()} == {"not on the roster"}
    assert "not on the roster: eve" in eve.problems[0]


def test_with_variants_off_the_class_is_graded_on_the_lessons_forms(term):
    off = term[1]
    assert off["bo"].total == off["bo"].max_points
    assert not off["bo"].variants
    assert off["ada"].total < off["ada"].max_points
