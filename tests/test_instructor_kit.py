"""The course as an instructor uses it: two editions from one source, a class graded in one command,
nbgrader's own tools on the student notebooks, and the lessons inside the installed package."""

import csv
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from npformer.course import EXERCISES, grade_class, instructor_edition, student_edition
from npformer.course.edition import (_stub_solutions, cells, instructor_only, is_instructor_cell, open_questions,
                                     student_source)

ROOT = pathlib.Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
LESSON_FILES = sorted(LESSONS.glob("[0-9][0-9]_*.py"))
REQUIRED = os.environ.get("NPFORMER_REQUIRE_COURSE") == "1"


def _solution_lines(text):
    kept = "".join(cell for cell in cells(text) if not is_instructor_cell(cell))
    return _stub_solutions(kept, "lesson", keep=False)[1].splitlines()


@pytest.mark.parametrize("lesson", LESSON_FILES, ids=lambda path: path.stem)
def test_the_student_edition_leaves_out_every_solution_mistake_and_answer(lesson):
    text = lesson.read_text(encoding="utf-8")
    student = student_source(text, lesson.name)
    student_lines = {line.strip() for line in student.splitlines()}
    # no line of a solution (a stub's own lines excepted)
    leaked = [line.strip() for line in _solution_lines(text) if len(line.strip()) >= 12 and line.strip() in student_lines]
    assert not leaked, leaked
    for cell in cells(text):
        if not is_instructor_cell(cell):
            continue
        header, *body = cell.splitlines()
        if "[markdown]" in header:  # an answer's or a mistake's prose
            leaked = [line for line in body if len(line.strip()) >= 20 and line.strip() in student_lines]
            assert not leaked, leaked
        else:  # a near-solution's definition
            for name in re.findall(r"^def (\w+)", cell, re.MULTILINE):
                assert f"def {name}(" not in student, name
    assert "### BEGIN SOLUTION" not in student and 'tags=["instructor"]' not in student
    assert instructor_only(text).strip() and instructor_only(text) not in student


@pytest.mark.parametrize("lesson", LESSON_FILES, ids=lambda path: path.stem)
def test_every_deliberate_mistake_is_in_an_instructor_cell(lesson):
    """A cell that grades a function under another exercise's name, on purpose (strict=False), shows a
    near-solution: it must be tagged, or the student edition would show it."""
    for cell in cells(lesson.read_text(encoding="utf-8")):
        for name, function in re.findall(r"""check\(\s*["'](\w+)["']\s*,\s*(\w+)[^\n]*strict=False""", cell):
            if name != function:
                assert is_instructor_cell(cell), f"{lesson.name}: check({name!r}, {function}) is not tagged"


@pytest.mark.parametrize("lesson", LESSON_FILES, ids=lambda path: path.stem)
def test_every_open_question_has_an_answer_in_the_instructor_edition(lesson):
    text = lesson.read_text(encoding="utf-8")
    answers = [cell for cell in cells(text) if is_instructor_cell(cell) and "### Answers" in cell]
    assert len(answers) == 1, f"{lesson.name}: one '### Answers' instructor cell after '## Exercises'"
    numbered = re.findall(r"^# (\d+)\. ", answers[0], re.MULTILINE)
    assert [int(n) for n in numbered] == list(range(1, open_questions(text) + 1)), numbered
    assert text.index("# ## Exercises") < text.index(answers[0])


def test_the_two_editions_from_the_installed_lessons(tmp_path):
    student = student_edition(None, tmp_path / "student")
    instructor = instructor_edition(None, tmp_path / "instructor")
    assert [path.name for path in student] == [path.name for path in instructor] == [p.name for p in LESSON_FILES]
    assert all((tmp_path / "instructor" / path.name).read_text() == path.read_text() for path in LESSON_FILES)
    assert (tmp_path / "student" / "README.md").exists()


# -- grading a class ------------------------------------------------------------------------------

def _checksums(folder):
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def _replace_stub(path, function, body):
    text = path.read_text(encoding="utf-8")
    start = text.index(f"def {function}(")
    stub = text.index("raise NotImplementedError", start)
    path.write_text(text[:stub] + body + text[stub + len("raise NotImplementedError"):], encoding="utf-8")


@pytest.mark.slow
def test_a_class_of_three_is_graded_in_one_command(tmp_path, capsys):
    from npformer.cli import main

    submissions = tmp_path / "submissions"
    instructor_edition(LESSONS, submissions / "ada")              # the published solutions
    student_edition(LESSONS, submissions / "bo")                  # the untouched student edition
    broken = submissions / "cy"
    student_edition(LESSONS, broken)
    relu = broken / "02_linear_and_relu.py"                       # a syntax error
    relu.write_text(relu.read_text().replace("def relu_backward(x, dout):\n",
                                             "def relu_backward(x, dout):\n    return dout * (x > 0\n", 1))
    _replace_stub(broken / "04_layer_normalization.py", "layernorm_backward", "while True:\n        pass")
    _replace_stub(broken / "03_softmax_and_cross_entropy.py", "softmax_backward",
                  "from npformer import ops\n    return ops.softmax_backward(dout, ops.softmax_forward(x)[1])")
    _replace_stub(broken / "06_masks.py", "causal_mask",
                  "print('x' * 2_000_000)\n    return np.tril(np.ones((length, length), dtype=bool))")
    _replace_stub(broken / "05_positional_encoding.py", "embedding_backward", "return 1 / 0")
    before = _checksums(submissions)

    out = tmp_path / "grades.csv"
    assert main(["course", "grade", str(submissions), "--out", str(out), "--timeout", "4", "--seed", "3",
                 "--reasons"]) == 0
    assert _checksums(submissions) == before, "grading must not write into the submissions"
    rows = {row["student"]: row for row in csv.DictReader(out.open())}
    full = sum(exercise.points for exercise in EXERCISES.values())
    assert rows["ada"]["total"] == str(full) and all(rows["ada"][name] == str(e.points) for name, e in EXERCISES.items())
    assert rows["bo"]["total"] == "0" and all(rows["bo"][name] == "0" for name in EXERCISES)
    for row in rows.values():  # numbers only: a spreadsheet reads the sheet as it is
        assert all(value.isdigit() for key, value in row.items() if key != "student"), row
    assert rows["cy"]["total"] == "0" and rows["cy"]["max"] == str(full)
    cy = {row["student"]: row for row in csv.DictReader((tmp_path / "grades_reasons.csv").open())}["cy"]
    assert cy["relu_backward"] == "syntax error"
    assert cy["layernorm_backward"] == "timed out after 4 s"
    assert cy["softmax_backward"] == "uses npformer"
    assert cy["causal_mask"].startswith("printed ") and cy["causal_mask"].endswith(" MB")
    assert cy["embedding_backward"] == "raised ZeroDivisionError"
    assert cy["gelu_backward"] == "not implemented yet" and cy["linear_backward"] == "not implemented yet"
    feedback = (tmp_path / "grades_feedback" / "cy.txt").read_text()
    assert "uses npformer" in feedback and "does not parse" in feedback and "seed 3" in feedback
    printed = capsys.readouterr().out
    assert re.search(rf"ada\s+{full}/{full}", printed) and "cy" in printed


@pytest.mark.parametrize("argv, words", [
    (["course", "grade"], "needs the folder of submissions"),
    (["course", "grade", "nowhere"], "is not a folder of submissions"),
    (["course", "gradescope", "week01.zip"], "needs the problem set"),
    (["course", "gradescope", "week01.txt", "--set", "1"], "should end in .zip"),
    (["course", "autograde", ".", "--set", "0"], "must be > 0, got 0"),
    (["course", "classroom", "template", "--set", "99"], "no week 99"),
    (["course", "grade", ".", "--set", "15"], "no week 15"),
])
def test_the_grade_command_fails_in_one_line(argv, words, tmp_path, monkeypatch, capsys):
    from npformer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert words in error and len(error.splitlines()) == 1, error


def test_the_grades_are_never_written_into_the_submissions(tmp_path):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    with pytest.raises(ValueError, match="inside the submissions"):
        grade_class(tmp_path / "class", tmp_path / "class" / "grades.csv")


# -- nbgrader ---------------------------------------------------------------------------------------

def _nbgrader():
    try:
        import nbgrader  # noqa: F401
        from nbgrader.nbgraderformat import MetadataValidator
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("nbgrader is not installed (the course extra)")
    return MetadataValidator


def test_the_student_notebooks_carry_nbgrader_metadata_that_nbgrader_accepts(tmp_path):
    import nbformat

    validator = _nbgrader()()
    from npformer.course import lesson_notebooks

    points = {"tests": 0, "answers": 0}
    for path in lesson_notebooks(LESSONS, tmp_path, execute=False, student=True):
        notebook = nbformat.read(path, as_version=4)
        validator.validate_nb(notebook)
        for cell in notebook.cells:
            meta = cell.metadata["nbgrader"]
            if meta["grade"]:
                points["answers" if meta["solution"] else "tests"] += meta["points"]
    assert points["tests"] == sum(exercise.points for exercise in EXERCISES.values())
    assert points["answers"] == sum(open_questions(path.read_text()) for path in LESSON_FILES)


# nbgrader's generate_assignment and autograde on every lesson, and a class of three through them:
# tests/test_platforms.py


# -- the lessons inside the wheel ------------------------------------------------------------------

def test_a_wheel_installed_without_the_repository_writes_the_student_edition_and_translates(tmp_path):
    source = tmp_path / "source"  # a copy: building in the repository would leave build/ behind
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", ".pytest_tmp",
                                                                 ".pytest_run", "runs", "__pycache__", ".hypothesis",
                                                                 "figures"))
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(wheels)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = wheels.glob("npformer-*.whl")
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-m", "npformer", "course", "student", "edition"], cwd=elsewhere,
                          env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = sorted(path.name for path in (elsewhere / "edition").glob("*.py"))
    assert written == [path.name for path in LESSON_FILES]
    assert str(target) in subprocess.run([sys.executable, "-c", "import npformer.course as c; print(c.lessons_folder())"],
                                         cwd=elsewhere, env=environment, capture_output=True, text=True).stdout
    assert all("### BEGIN SOLUTION" not in (elsewhere / "edition" / name).read_text() for name in written)
    translated = subprocess.run([sys.executable, "-m", "npformer", "translate", "--pretrained", "toy", "--beam", "1",
                                 "the black cat eats the white apple."], cwd=elsewhere, env=environment,
                                capture_output=True, text=True, timeout=300)
    assert translated.returncode == 0 and "le chat noir mange la pomme blanche." in translated.stdout, translated.stderr


def test_one_lesson_as_a_notebook_with_its_figures_inline_whatever_mplbackend_says(tmp_path, monkeypatch, capsys):
    pytest.importorskip("nbclient")
    import nbformat

    from npformer.cli import main

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    assert main(["course", "notebooks", "out", "--lesson", "4", "--quick", "--lessons", str(LESSONS)]) == 0
    assert "wrote 1 executed notebook to out" in capsys.readouterr().out
    [written] = (tmp_path / "out").glob("*.ipynb")
    notebook = nbformat.read(written, as_version=4)
    assert written.name == "04_layer_normalization.ipynb"
    assert any("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.outputs)
    assert main(["course", "notebooks", "out", "--lesson", "99", "--lessons", str(LESSONS)]) == 2
    assert "no lesson numbered 99" in capsys.readouterr().err
