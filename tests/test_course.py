"""The course machinery: the grader can pass and fail, its hints, the student edition, the table."""

import pathlib

import numpy as np
import pytest

from npformer import nn, ops, optim
from lesson_solutions import solution
from npformer.course import BEGIN, END, EXERCISES, ExerciseFailed, check, exercise_table, student_source
from npformer.course.edition import graded_exercises
from npformer.course.wire import Status

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"


def _reference(name):
    """The instructor's solution (graded in the worker, which cannot import npformer's references)."""
    return solution(name)


def _scaled(name, factor):
    reference = _reference(name)  # resolved here: the worker cannot read the lessons

    def wrong(*args):
        result = reference(*args)
        return tuple(factor * r for r in result) if isinstance(result, tuple) else factor * result
    return wrong


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_instructors_solution_passes_on_public_and_unseen_cases(name):
    for unseen_seed in range(3):
        report = check(name, solution(name), unseen_seed=unseen_seed)
        assert report.passed, report
        assert report.verdict.startswith(f"exercise {name}: passed")
        assert any(row.case.startswith("unseen: ") for row in report.rows), report


def test_unseen_cases_change_from_check_to_check_and_the_seed_repeats_them():
    first, second = (check("layernorm_backward", _reference("layernorm_backward")) for _ in range(2))
    assert first.unseen_seed != second.unseen_seed and f"unseen_seed={first.unseen_seed}" in str(first)
    again = check("layernorm_backward", _reference("layernorm_backward"), unseen_seed=first.unseen_seed)
    assert [row.case for row in again.rows] == [row.case for row in first.rows]


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_npformers_own_answer_is_unavailable_to_the_graded_function(name):
    def reaches_for_the_reference(*args, **kwargs):
        from npformer.course.exercises import EXERCISES
        return EXERCISES[name].reference(*args, **kwargs)
    report = check(name, reaches_for_the_reference)
    assert report.status is Status.USES_NPFORMER and "uses npformer" in report.verdict, report
    assert "npformer's own code" in str(report), report


def test_a_pass_through_is_caught_however_the_library_function_was_reached():
    from npformer.ops.fast.layernorm import layernorm_backward as fast_backward

    def bound_before_grading(x, gamma, beta, dout):
        return fast_backward(dout, ops.layernorm_forward(x, gamma, beta)[1])

    def through_a_block(x, gamma, beta, dout):
        norm = nn.LayerNorm(x.shape[-1], dtype=np.float64)
        norm.gamma[...], norm.beta[...] = gamma, beta
        norm.forward(x)
        return norm.backward(dout), norm.grad["gamma"], norm.grad["beta"]

    def catches_the_refusal(x, gamma, beta, dout):
        try:
            return ops.layernorm_backward(dout, ops.layernorm_forward(x, gamma, beta)[1])
        except Exception:
            return np.zeros_like(x), np.zeros_like(gamma), np.zeros_like(beta)

    def forward_then_numpy(x, gamma, beta, dout):
        ops.layernorm_forward(x, gamma, beta)  # even a forward pass: graded code does not call npformer
        dx, dgamma = _numpy_layernorm_backward(x, gamma, dout)
        return dx, dgamma, dout.reshape(-1, x.shape[-1]).sum(0)

    for student in (bound_before_grading, through_a_block, catches_the_refusal, forward_then_numpy):
        report = check("layernorm_backward", student)
        assert report.failed and "uses npformer" in report.verdict, (student.__name__, report)

    def numpy_only(x, gamma, beta, dout):
        dx, dgamma = _numpy_layernorm_backward(x, gamma, dout)
        return dx, dgamma, dout.reshape(-1, x.shape[-1]).sum(0)
    assert check("layernorm_backward", numpy_only).passed


def _numpy_layernorm_backward(x, gamma, dout, eps=1e-5):
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    x_hat = (x - x.mean(-1, keepdims=True)) * rstd
    g = dout * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return dx, (dout * x_hat).reshape(-1, x.shape[-1]).sum(0)


@pytest.mark.parametrize("factor, words", [(-1.0, "sign is wrong"), (0.5, "constant factor: got = 0.5")])
def test_hints_name_a_sign_and_a_factor(factor, words):
    report = check("attention_backward", _scaled("attention_backward", factor))
    assert words in str(report), report


def test_a_transposed_gradient_is_named():
    reference = _reference("linear_backward")

    def transposed(x, W, b, dout):
        dx, dW, db = reference(x, W, b, dout)
        return dx, dW.T if dW.shape[0] == dW.shape[1] else dW, db
    report = check("linear_backward", transposed)
    assert "transposed" in str(report) and not report.passed, report


def test_a_stub_is_not_implemented_yet_and_a_crash_is_a_failure_with_its_line():
    def stub(x, dout):
        raise NotImplementedError
    report = check("relu_backward", stub)
    assert report.status is Status.NOT_IMPLEMENTED and report.verdict == "exercise relu_backward: not implemented yet"

    def crashes(x, dout):
        return dout @ np.ones(7)
    report = check("relu_backward", crashes)
    assert report.status is Status.RAISED and "raised ValueError" in str(report) and "dout @ np.ones(7)" in str(report)

    report = check("linear_backward", lambda x, W, b, dout: (dout @ W.T, None))
    assert "returned 2 value(s), expected 3: dx, dW, db" in str(report)


def test_strict_mode_raises_on_a_failure_but_not_on_a_stub(monkeypatch):
    monkeypatch.setenv("NPFORMER_GRADER", "strict")
    with pytest.raises(ExerciseFailed, match="relu_backward"):
        check("relu_backward", lambda x, dout: dout)

    def stub(x, dout):
        raise NotImplementedError
    assert check("relu_backward", stub).status is Status.NOT_IMPLEMENTED


def test_the_student_function_cannot_change_the_cases():
    def writes_into_its_inputs(x, dout):
        result = dout * (x > 0)
        x[...] = 0
        dout[...] = 0
        return result
    assert check("relu_backward", writes_into_its_inputs).passed


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="layernorm_backward"):
        check("layer_norm", lambda: None)


def test_the_adam_exercise_agrees_with_the_optimizer():
    rng = np.random.default_rng(0)
    layer = nn.Linear(3, 2, rng=rng, dtype=np.float64, bias=False)
    adam = optim.Adam(layer, lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    param = layer.W.copy()
    m, v = np.zeros_like(param), np.zeros_like(param)
    for step in range(1, 4):
        grad = rng.standard_normal(param.shape)
        layer.grad["W"][...] = grad
        adam.step()
        param, m, v = EXERCISES["adam_step"].reference(param, grad, m, v, step, 1e-2, 0.9, 0.98, 1e-9)
    np.testing.assert_allclose(layer.W, param, rtol=1e-12)


def test_the_student_source_replaces_each_solution_by_a_stub():
    text = f"def f(x):\n    '''doc'''\n    {BEGIN}\n    return x + 1\n    {END}\n\nprint(f)\n"
    student = student_source(text)
    assert student == "def f(x):\n    '''doc'''\n    # YOUR CODE HERE\n    raise NotImplementedError\n\nprint(f)\n"
    for broken, words in [(f"{BEGIN}\n{BEGIN}\n{END}\n", "inside the block"), (f"{END}\n", "without"),
                          (f"{BEGIN}\nx = 1\n", "never closed")]:
        with pytest.raises(ValueError, match=words):
            student_source(broken, "lesson.py")


def test_every_lesson_solution_is_graded_in_a_later_cell():
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text = path.read_text(encoding="utf-8")
        assert text.count(BEGIN) == text.count(END), path.name
        for name in graded_exercises(text):
            assert name in EXERCISES, (path.name, name)


def test_the_lessons_grade_every_exercise_and_every_math_lesson_has_one():
    graded = {path.name[:2]: graded_exercises(path.read_text(encoding="utf-8"))
              for path in sorted(LESSONS.glob("[0-9][0-9]_*.py"))}
    assert set(EXERCISES) <= {name for names in graded.values() for name in names}
    for lesson in [f"{n:02d}" for n in range(1, 13)] + ["14", "15"]:
        assert graded[lesson], f"lesson {lesson} has no graded exercise"


def test_the_exercise_table_in_the_lessons_readme_is_current():
    readme = (LESSONS / "README.md").read_text(encoding="utf-8")
    assert exercise_table(LESSONS) in readme, "run: npformer course exercises > the table in lessons/README.md"


def test_the_course_command_writes_the_student_edition_and_the_table(tmp_path, capsys):
    from npformer.cli import main

    assert main(["course", "student", str(tmp_path / "student"), "--lessons", str(LESSONS)]) == 0
    written = sorted(path.name for path in (tmp_path / "student").glob("*.py"))
    assert written == sorted(path.name for path in LESSONS.glob("[0-9][0-9]_*.py"))
    assert (tmp_path / "student" / "README.md").exists()
    assert all(BEGIN not in (tmp_path / "student" / name).read_text() for name in written)
    assert main(["course", "exercises", "--lessons", str(LESSONS)]) == 0
    assert exercise_table(LESSONS) in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["course", "student"], "needs an output folder"),
    (["course", "student", "out", "--lessons", "nowhere"], "no lessons (NN_topic.py files) in 'nowhere'"),
])
def test_the_course_command_fails_in_one_line(argv, words, tmp_path, monkeypatch, capsys):
    from npformer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert words in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "out").exists()


def test_a_lesson_run_as_a_script_ends_with_its_table_and_fails_loudly(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "my_lesson.py"
    script.write_text("import numpy as np\nfrom npformer.course import check\n\n"
                      "def relu_backward(x, dout):\n    return dout\n\n"
                      "def gelu_backward(x, dout):\n    raise NotImplementedError\n\n"
                      "print(check('relu_backward', relu_backward).verdict)\n"
                      "print(check('gelu_backward', gelu_backward).verdict)\n"
                      "print('the lesson goes on')\n")
    environment = {key: value for key, value in os.environ.items() if key != "NPFORMER_GRADER"}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the lesson goes on" in run.stdout and "exercises checked in this run:" in run.stdout
    assert "1 failed, 1 not implemented yet, 0 passed" in run.stdout and "keep-going" in run.stdout
    kept = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**environment, "NPFORMER_GRADER": "keep-going"})
    assert kept.returncode == 0 and "1 failed" in kept.stdout
    stubs_only = script.read_text().replace("    return dout\n", "    raise NotImplementedError\n")
    script.write_text(stubs_only)
    untouched = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment,
                               cwd=tmp_path, timeout=120)
    assert untouched.returncode == 0 and "0 failed, 2 not implemented yet" in untouched.stdout
    script.write_text(stubs_only.replace("print('the lesson goes on')", "raise ValueError('a cell went wrong')"))
    stopped = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment,
                             cwd=tmp_path, timeout=120)
    assert stopped.returncode == 1 and "ValueError: a cell went wrong" in stopped.stderr
    assert "the lesson stopped before its end (ValueError: a cell went wrong)" in stopped.stdout


def test_collect_counts_the_functions_written_and_the_stubs(tmp_path):
    from npformer.course import collect, instructor_edition, student_edition

    student_edition(LESSONS, tmp_path / "blank")
    blank = collect(tmp_path / "blank", None)
    assert blank.stubs == [name for _, name in blank.functions] and "0 written" in blank.summary()
    instructor_edition(LESSONS, tmp_path / "done")
    done = collect(tmp_path / "done", None)
    assert done.stubs == [] and f"{len(EXERCISES)} written, 0 still a stub" in done.summary()


def test_collect_takes_a_solved_notebook_over_the_stub_script_of_the_same_lesson(tmp_path):
    """A student who works in Jupyter keeps the handed-out ``04_layer_normalization.py`` (stubs) beside
    the ``.ipynb`` they solved: collecting must take the notebook, whichever name sorts first."""
    pytest.importorskip("jupytext", reason="notebooks need the course extra")
    from npformer.course import collect, instructor_edition, lesson_notebooks, student_edition

    student_edition(LESSONS, tmp_path / "mine", only=["04"])
    instructor_edition(LESSONS, tmp_path / "solved", only=["04"])
    lesson_notebooks(tmp_path / "solved", tmp_path / "mine", execute=False, only=["04"])
    assert sorted(path.name for path in (tmp_path / "mine").glob("04_*")) == [
        "04_layer_normalization.ipynb", "04_layer_normalization.py"]
    result = collect(tmp_path / "mine", None)
    assert result.functions and result.stubs == [], result.summary()
    assert {lesson for lesson, _ in result.functions} == {"04_layer_normalization.ipynb"}


def test_the_difficulty_table_in_the_course_page_is_current():
    from npformer.course.difficulty import SUBSTANTIAL_LINES, answer_lines, derivation_table, difficulty_table

    page = (LESSONS.parent / "docs" / "course.md").read_text(encoding="utf-8")
    assert difficulty_table(LESSONS) in page, "regenerate: npformer.course.difficulty.difficulty_table()"
    assert derivation_table() in page, "regenerate: npformer.course.difficulty.derivation_table()"
    longest: dict[str, int] = {}
    for name, count in answer_lines(LESSONS).items():
        longest[EXERCISES[name].lesson] = max(longest.get(EXERCISES[name].lesson, 0), count)
    short = {lesson: count for lesson, count in longest.items() if count < SUBSTANTIAL_LINES}
    assert not short, f"graded lessons whose longest answer is under {SUBSTANTIAL_LINES} lines: {short}"
    lines = answer_lines(LESSONS)
    assert set(lines) == set(EXERCISES) and lines["layernorm_backward"] >= 8
