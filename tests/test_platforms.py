"""The instructor's three platforms, each with a class of stand-in students (one who solved the
problem set, one with a classic mistake, one who handed in the stubs): Gradescope's autograder zip run
as Gradescope runs it, GitHub Classroom's workflow command run as the runner runs it, and nbgrader's
own commands on the course folder (there, the mistake and a stub in one student's notebooks); then
every week of the syllabus released by nbgrader, each with its points and the lessons' own code."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from npformer.course import BEGIN, END, EXERCISES, instructor_edition, student_edition
from npformer.course import syllabus

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
REQUIRED = os.environ.get("NPFORMER_REQUIRE_COURSE") == "1"
WEEK = 3        # layer norm, positions, the embedding: a derivation in steps and two backward passes
MISTAKE = ("04_layer_normalization.py", "layernorm_backward")


def _npformer(*args, cwd, env=None, timeout=300):
    done = subprocess.run([sys.executable, "-m", "npformer", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _with_a_mistake(folder: Path) -> None:
    """layer norm's dx without the path through the mean: a classic mistake."""
    lesson, name = MISTAKE
    path = folder / lesson
    text = path.read_text()
    start = text.index(f"def {name}(")
    begin, end = text.index(BEGIN, start), text.index(END, start)
    body = ("    mean = x.mean(axis=-1, keepdims=True)\n"
            "    var = x.var(axis=-1, keepdims=True)\n"
            "    x_hat = (x - mean) / np.sqrt(var + 1e-5)\n"
            "    rows = dout.reshape(-1, x.shape[-1])\n"
            "    dx = dout * gamma / np.sqrt(var + 1e-5)\n"
            "    return dx, (rows * x_hat.reshape(rows.shape)).sum(axis=0), rows.sum(axis=0)\n    ")
    path.write_text(text[:begin + len(BEGIN) + 1] + body + text[end:])


def _class_of_three(folder: Path, lessons: list[str]) -> dict[str, Path]:
    """solved: the instructor's solutions; mistake: the same with layer norm's classic mistake;
    stubs: the student edition handed in untouched."""
    students = {name: folder / name for name in ("solved", "mistake", "stubs")}
    instructor_edition(LESSONS, students["solved"], only=lessons)
    instructor_edition(LESSONS, students["mistake"], only=lessons)
    _with_a_mistake(students["mistake"])
    student_edition(LESSONS, students["stubs"], only=lessons)
    return students


# -- Gradescope ---------------------------------------------------------------------------------------

# Gradescope's documented results.json (gradescope-autograders.readthedocs.io, "Autograder Specifications"):
# a score at the top or on every test, and the four visibilities.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
GRADESCOPE_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": VISIBILITY, "stdout_visibility": VISIBILITY, "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "properties": {"score": {"type": "number"}, "max_score": {"type": "number"},
                           "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
                           "number": {"type": "string"}, "output": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}}, "visibility": VISIBILITY,
                           "extra_data": {"type": "object"}},
            "required": ["score", "max_score", "name"],
            "additionalProperties": False}},
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "additionalProperties": False,
}


def test_the_gradescope_autograder_grades_a_class_of_three_into_valid_results(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    secret = tmp_path / "secret.txt"
    _npformer("course", "secret", str(secret), cwd=tmp_path)
    _npformer("course", "gradescope", "autograder.zip", "--set", str(WEEK), "--seed", "4", "--secret", str(secret),
              cwd=tmp_path)
    exercises = syllabus.problem_set(WEEK)
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        names = archive.namelist()
        assert {"setup.sh", "run_autograder", "config.json", "secret.txt"} <= set(names)
        assert all(archive.getinfo(name).external_attr >> 16 & 0o111 for name in ("setup.sh", "run_autograder"))
        assert not [name for name in names if "data/pretrained/" in name or name.endswith(".pyc")]
        archive.extractall(tmp_path / "source")
    for script in ("setup.sh", "run_autograder"):
        assert subprocess.run(["bash", "-n", str(tmp_path / "source" / script)]).returncode == 0
    assert "cloudpickle" in (tmp_path / "source" / "setup.sh").read_text()

    students = _class_of_three(tmp_path / "class", list(syllabus.week(WEEK).lessons))
    totals = {}
    for name, folder in students.items():
        root = tmp_path / "gradescope" / name   # Gradescope's /autograder, one per submission
        (root / "submission").mkdir(parents=True)
        os.symlink(tmp_path / "source", root / "source")
        for lesson in folder.iterdir():
            (root / "submission" / lesson.name).write_bytes(lesson.read_bytes())
        done = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results = json.loads((root / "results" / "results.json").read_text())
        jsonschema.validate(results, GRADESCOPE_SCHEMA)
        graded = [test for test in results["tests"] if test["max_score"] > 0]
        assert [test["name"].split(": ")[1] for test in graded] == exercises
        assert results["score"] == sum(test["score"] for test in graded)
        hidden = [test for test in results["tests"] if test["name"].startswith("hidden cases")]
        assert len(hidden) == 1 and hidden[0]["visibility"] == "after_due_date" and hidden[0]["max_score"] == 0
        assert all("hidden 1" not in test["output"] for test in graded), "hidden rows stay out of the visible tests"
        assert secret.read_text().strip() not in json.dumps(results)
        totals[name] = results["score"]
    full = syllabus.points(exercises)
    assert totals == {"solved": full, "mistake": full - EXERCISES[MISTAKE[1]].points, "stubs": 0}


def test_the_gradescope_autograder_grades_each_submitter_against_their_own_variants(tmp_path):
    """With a roster in the zip, a submission is graded against its submitters' variants (their ids or
    e-mails in Gradescope's submission_metadata.json): the lesson's forms score 0 there, the tests name
    the variant, and a submitter who is not on the roster is told so. --hidden-visibility reaches
    the results."""
    from npformer.course.variants import FAMILY_OF, assignment, graded_with_variants
    secret = tmp_path / "secret.txt"
    _npformer("course", "secret", str(secret), cwd=tmp_path)
    (tmp_path / "roster.csv").write_text("student,submission\nada,12345\nada,ada@uni.edu\n")
    _npformer("course", "gradescope", "autograder.zip", "--set", str(WEEK), "--seed", "4", "--secret", str(secret),
              "--roster", "roster.csv", "--hidden-visibility", "visible", cwd=tmp_path)
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        assert "roster.csv" in archive.namelist()
        archive.extractall(tmp_path / "source")
    assert "--hidden-visibility visible" in (tmp_path / "source" / "run_autograder").read_text()
    solved = _class_of_three(tmp_path / "class", list(syllabus.week(WEEK).lessons))["solved"]
    drawn = assignment(secret.read_text().strip(), "ada")
    graded = [name for name in syllabus.problem_set(WEEK) if graded_with_variants(name)]
    for user, expected in (({"id": 12345, "email": "ada@uni.edu", "name": "Ada"}, "variants"),
                           ({"id": 999, "email": "eve@uni.edu", "name": "Eve"}, "not on the roster")):
        root = tmp_path / "gradescope" / str(user["id"])
        (root / "submission").mkdir(parents=True)
        os.symlink(tmp_path / "source", root / "source")
        for lesson in solved.iterdir():
            (root / "submission" / lesson.name).write_bytes(lesson.read_bytes())
        (root / "submission_metadata.json").write_text(json.dumps({"users": [user]}))
        done = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results = json.loads((root / "results" / "results.json").read_text())
        tests = [test for test in results["tests"] if test["max_score"] > 0]
        assert [test["name"].split(": ")[1].split(" (")[0] for test in tests] == graded
        assert results["score"] == 0  # the lesson's forms, in every variant-graded exercise
        assert all(test["visibility"] == "visible" for test in results["tests"])
        if expected == "variants":
            assert all(f"({drawn[FAMILY_OF[name].name]})" in test["name"] for name, test in zip(graded, tests))
        else:
            assert all("not on the roster" in test["output"] for test in tests)


def test_an_empty_gradescope_submission_gets_zero_and_the_reason(tmp_path):
    (tmp_path / "empty").mkdir()
    _npformer("course", "autograde", "empty", "--set", "1", "--seed", "0", "--format", "gradescope", "--results",
              "results.json", cwd=tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["score"] == 0 and "holds no lesson" in results["output"]


# -- GitHub Classroom ---------------------------------------------------------------------------------

def test_the_classroom_workflow_command_reports_the_points_of_a_class_of_three(tmp_path):
    import yaml

    _npformer("course", "classroom", "template", "--set", str(WEEK), "--seed", "4", cwd=tmp_path)
    template = tmp_path / "template"
    workflow = yaml.safe_load((template / ".github" / "workflows" / "classroom.yml").read_text())
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    grading = next(step for step in steps if step.get("id") == "npformer")
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter")
    assert reporter["with"]["runners"] == "npformer" and "steps.npformer.outputs.result" in reporter["env"]["NPFORMER_RESULTS"]
    assert sorted(path.name for path in template.glob("*.py")) == sorted(
        path.name for path in LESSONS.glob("*.py") if path.name[:2] in syllabus.week(WEEK).lessons)
    assert all(BEGIN not in path.read_text() for path in template.glob("*.py"))
    assert (template / ".npformer" / "npformer" / "course" / "grader.py").is_file()   # the grader, brought along
    assert "PYTHONPATH=.npformer python -m npformer course autograde" in grading["run"]

    exercises = syllabus.problem_set(WEEK)
    full = syllabus.points(exercises)
    students = _class_of_three(tmp_path / "class", list(syllabus.week(WEEK).lessons))
    points = {}
    for name, folder in students.items():
        output = tmp_path / f"github_output_{name}"
        output.write_text("earlier=1\n")   # $GITHUB_OUTPUT already holds other steps' lines
        shutil.copytree(template / ".npformer", folder / ".npformer")   # the student's repository holds the copy
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"   # `python`: this interpreter
        done = subprocess.run(["bash", "-e", "-c", grading["run"]], cwd=folder, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "GITHUB_OUTPUT": str(output), "PATH": path})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        [line] = [line for line in output.read_text().splitlines() if line.startswith("result=")]
        result = json.loads(base64.b64decode(line[len("result="):]))
        # what Classroom's reporter does with it: the tests' scores summed, out of max_score
        assert result["version"] == 1 and result["max_score"] == full
        assert [test["name"].split(": ")[1] for test in result["tests"]] == exercises
        assert all(test["status"] in ("pass", "fail") for test in result["tests"])
        points[name] = sum(test["score"] for test in result["tests"])
        assert result["status"] == ("pass" if points[name] == full else "fail")
        assert "exercise layernorm_backward" in done.stdout   # the Actions log shows the reports
    assert points == {"solved": full, "mistake": full - EXERCISES[MISTAKE[1]].points, "stubs": 0}


# -- nbgrader ---------------------------------------------------------------------------------------

def _nbgrader_tools():
    try:
        import nbformat
        import nbgrader  # noqa: F401
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("nbgrader is not installed (the course extra)")
    return nbformat


def _solved_from_source(source_cell: str) -> str:
    """A source cell's solution, as a student would write it: nbgrader's markers taken out."""
    return "".join(line for line in source_cell.splitlines(keepends=True) if line.strip() not in (BEGIN, END))


def _autograde(course: Path, week: int, students: dict[str, callable]) -> dict[str, dict[str, float]]:
    """generate_assignment, then each student's released notebooks changed by their function, then
    autograde; returns student -> {grade cell id: score}."""
    nbformat = _nbgrader_tools()
    assignment = f"week{week:02d}"
    config = course / "nbgrader_config.py"
    text = config.read_text().replace(
        "# c.CourseDirectory.db_students = [dict(id=\"ada\"), dict(id=\"bo\")]",
        f"c.CourseDirectory.db_students = [{', '.join(f'dict(id={name!r})' for name in students)}]")
    config.write_text(text)
    run = dict(cwd=course, capture_output=True, text=True, timeout=900,
               env={**os.environ, "MPLBACKEND": "Agg", "NPFORMER_LESSONS": str(LESSONS)})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], **run)
    assert done.returncode == 0, done.stderr[-3000:]
    for student, change in students.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        for released in sorted((course / "release" / assignment).glob("*.ipynb")):
            notebook = nbformat.read(released, as_version=4)
            source = nbformat.read(course / "source" / assignment / released.name, as_version=4)
            change(notebook, source)
            nbformat.write(notebook, folder / released.name)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"], **run)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Timeout" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {student: {grade.name: grade.score for notebook in gradebook.find_submission(assignment, student).notebooks
                          for grade in notebook.grades}
                for student in students}


def _solve(notebook, source) -> None:
    by_id = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in source.cells if "nbgrader" in cell.metadata}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = _solved_from_source(by_id[meta["grade_id"]].source)


def _test_cells(points: dict[str, float]) -> dict[str, float]:
    return {name: score for name, score in points.items() if "_check_" in name}


def test_the_nbgrader_course_is_built_only_from_the_lessons_with_their_solutions(tmp_path, monkeypatch, capsys):
    """nbgrader's source is the solved assignment: from the student edition (the installed package's)
    its "solved" source held the stubs and scored 0 of 7. That edition is refused in one line, exit
    2, naming --lessons of a checkout; by default the checkout npformer was installed from is used."""
    from npformer.cli import main
    from npformer.course import edition

    student_edition(LESSONS, tmp_path / "installed", only=list(syllabus.week(1).lessons))
    monkeypatch.setattr(edition, "lessons_folder", lambda: tmp_path / "installed")
    for checkout, lessons in ((None, ["--lessons", str(tmp_path / "installed")]), (None, [])):
        monkeypatch.setattr(edition, "source_checkout_lessons", lambda: checkout)
        assert main(["course", "nbgrader", str(tmp_path / "course"), "--set", "1", *lessons]) == 2
        error = capsys.readouterr().err.strip()
        assert "student edition (no solutions)" in error and "--lessons CLONE/lessons" in error, error
        assert len(error.splitlines()) == 1 and not (tmp_path / "course").exists()
    pytest.importorskip("jupytext")
    monkeypatch.setattr(edition, "source_checkout_lessons", lambda: LESSONS)   # pip install . from a checkout
    assert main(["course", "nbgrader", str(tmp_path / "course"), "--set", "1"]) == 0
    assert all(BEGIN in path.read_text() for path in (tmp_path / "course" / "source" / "week01").glob("*.ipynb"))


@pytest.mark.slow
def test_nbgrader_releases_the_def_line_and_grades_a_class(tmp_path):
    """Week 1 through nbgrader itself: the released cell keeps the function's signature and docstring
    (nbgrader replaces only the body), and the students get their points: one solved everything; the
    other got ReLU's backward wrong and left GELU's stub untouched (a class of two stands for three:
    each notebook a student hands in is one more kernel run, 5 s)."""
    nbformat = _nbgrader_tools()
    from npformer.course import nbgrader_course

    course = tmp_path / "course"
    nbgrader_course.write_course(course, [1], lessons_dir=LESSONS)
    assert "c.Execute.timeout = " in (course / "nbgrader_config.py").read_text()

    def mistake_and_stub(notebook, source):
        stub = {cell.source for cell in notebook.cells if cell.source.startswith("def gelu_backward(")}
        _solve(notebook, source)
        for cell in notebook.cells:
            if cell.source.startswith("def relu_backward("):
                cell.source = cell.source.replace("return dout * (x > 0)", "return (x > 0) * 1.0")  # dout left out
            if cell.source.startswith("def gelu_backward("):
                [cell.source] = stub  # as released: raise NotImplementedError

    scores = _autograde(course, 1, {"solved": _solve, "mistake": mistake_and_stub})
    released = nbformat.read(course / "release" / "week01" / "02_linear_and_relu.ipynb", as_version=4)
    stubs = [cell.source for cell in released.cells if cell.metadata.get("nbgrader", {}).get("solution")
             and cell.cell_type == "code"]
    assert stubs and all(re.match(r"def \w+\(.*\):\n    \"\"\"", stub) and "raise NotImplementedError" in stub
                         for stub in stubs), stubs
    points = {student: sum(_test_cells(cells).values()) for student, cells in scores.items()}
    full = syllabus.points(syllabus.problem_set(1))
    wrong_or_missing = EXERCISES["relu_backward"].points + EXERCISES["gelu_backward"].points
    assert points == {"solved": full, "mistake": full - wrong_or_missing}, points
    # for the record: the same notebooks graded by course grade, which finds them in nbgrader's subfolders
    from npformer.course import grade_class

    graded = grade_class(course / "submitted", tmp_path / "week01.csv", seed=7, exercises=syllabus.problem_set(1))
    assert {grades.student: grades.total for grades in graded} == points


def _code_cells(notebook) -> list[str]:
    """A notebook's code, cell by cell, without nbgrader's solution markers."""
    return [_solved_from_source(cell.source).strip() for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.slow
def test_nbgrader_releases_every_week_with_its_points_and_the_lessons_own_code(tmp_path):
    """Every week of the syllabus through nbgrader's generate_assignment (in this process, as
    nbgrader's own API runs it): each released test cell is worth its exercise's points, every
    exercise of the problem set has one, and a solved release holds the lesson's code exactly as
    the instructor's edition runs it, less the instructor's cells, so the lessons' notebook run
    (tests/test_lessons.py, instructor cells kept away from the student's names) and week 1's class
    autograded above cover what autograding every week would run (it took 8 minutes of
    the suite's 16)."""
    nbformat = _nbgrader_tools()
    import jupytext
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from npformer.course import nbgrader_course

    course = tmp_path / "course"
    nbgrader_course.write_course(course, lessons_dir=LESSONS)
    config = Config()
    config.CourseDirectory.root = str(course)
    api = NbGraderAPI(config=config)
    for week in syllabus.WEEKS:
        assignment = nbgrader_course.assignment_name(week.number)
        result = api.generate_assignment(assignment, force=True)
        assert result["success"], (assignment, result.get("error"), result.get("log", "")[-2000:])
        released = sorted((course / "release" / assignment).glob("*.ipynb"))
        assert [path.name[:2] for path in released] == list(week.lessons), assignment
        points = {}
        for path in released:
            notebook = nbformat.read(path, as_version=4)
            source = nbformat.read(course / "source" / assignment / path.name, as_version=4)
            for cell in notebook.cells:
                meta = cell.metadata.get("nbgrader", {})
                if meta.get("grade") and not meta.get("solution") and "_check_" in meta.get("grade_id", ""):
                    points[meta["grade_id"]] = meta["points"]
            _solve(notebook, source)
            lesson = jupytext.reads((LESSONS / f"{path.stem}.py").read_text(encoding="utf-8"), fmt="py:percent")
            lesson.cells = [cell for cell in lesson.cells if "instructor" not in cell.metadata.get("tags", [])]
            solved, own = _code_cells(notebook), _code_cells(lesson)
            assert len(solved) == len(own), f"{assignment}/{path.name}: {len(solved)} code cells, not {len(own)}"
            for released_cell, lesson_cell in zip(solved, own):  # a test cell also asserts its check's pass
                assert released_cell == lesson_cell or released_cell.startswith(lesson_cell + "\nassert check("), (
                    f"{assignment}/{path.name}: the solved release runs {released_cell[:300]!r}, the lesson "
                    f"{lesson_cell[:300]!r}")
        expected = {name: EXERCISES[name].points for name in syllabus.problem_sets()[week.number]}
        assert sum(points.values()) == sum(expected.values()), (assignment, points, expected)
        assert all(any(name in grade_id for grade_id in points) for name in expected), (assignment, points)


# -- the instructor's guide -------------------------------------------------------------------------

def test_the_syllabus_in_the_instructors_guide_is_the_one_the_code_computes():
    from npformer.course.difficulty import answer_lines, minutes

    record = json.loads((ROOT / "benchmarks" / "lesson_times.json").read_text())
    seconds = {mode: {stem: entry["seconds"] for stem, entry in record[mode].items()} for mode in ("quick", "full")}
    exercise_minutes = {name: minutes(name, lines) for name, lines in answer_lines(LESSONS).items()}
    table = syllabus.syllabus_table(exercise_minutes, seconds["quick"], seconds["full"], LESSONS)
    page = (ROOT / "docs" / "instructor.md").read_text()
    shown = page.split("<!-- syllabus -->\n", 1)[1].split("\n<!-- end of the syllabus -->", 1)[0]
    assert shown == table, "docs/instructor.md's syllabus is out of date: paste syllabus.syllabus_table(...)"
    for week in syllabus.WEEKS:
        assert f"| {week.number} | {week.title} | {', '.join(week.lessons)} | {week.goals} |" in page


def test_every_lesson_is_in_exactly_one_week_and_every_exercise_in_one_problem_set():
    lessons = [number for week in syllabus.WEEKS for number in week.lessons]
    assert lessons == [path.name[:2] for path in sorted(LESSONS.glob("[0-9][0-9]_*.py"))]
    in_sets = [name for names in syllabus.problem_sets().values() for name in names]
    assert sorted(in_sets) == sorted(EXERCISES)
    assert syllabus.problem_set(14) == [name for name, exercise in EXERCISES.items() if exercise.lesson == "28"]
    with pytest.raises(ValueError, match="no week 15"):
        syllabus.problem_set(15)


def test_the_project_handout_is_the_one_the_guide_quotes():
    from npformer.course import project

    page = (ROOT / "docs" / "instructor.md").read_text()
    quoted = project.PROJECT_TEXT.replace("\n## ", "\n### ").replace("# The final project", "## The final project", 1)
    assert quoted in page
