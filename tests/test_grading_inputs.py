"""A class graded with ``npformer course grade`` whose students hand in what is meant to stop, hang
or fool the grader (issue 60): files that are not lessons (a named pipe, symbolic links to another
student's lesson and to /dev/zero, a sparse file of 8 GB, a linked student folder), notebooks that
are not notebooks, code nested too deeply for Python, a folder named like a spreadsheet formula, an
exception whose class name holds terminal escapes, a line named in another file, and hidden cases
asked to give themselves away. Each costs its student the exercise, with a one-line reason; the
honest students are graded as usual; the run completes. Two cheap exercises of lesson 02 only."""

import csv
import json
import os
import re

import numpy as np
import pytest

from npformer.course import grade_class, grading, instructor_edition
from npformer.course import gradescope
from npformer.course.cases import HIDDEN_CASES, hidden_cases, prepared_public
from npformer.course.exercises import EXERCISES
from npformer.course.grader import grade
from npformer.course.wire import Status
from npformer.course.worker import JobResult, Reply

from lesson_solutions import LESSONS, replace_solution

GRADED = ["linear_backward", "relu_backward"]   # the course's order
LESSON = "02_linear_and_relu.py"
NOTEBOOK = "02_linear_and_relu.ipynb"
SECRET = "the instructor's secret, never shown"
SECRET_LINE = "a line of the grader's secret file, never shown"


def _with_body(folder, function, body):
    """``folder``'s lesson with ``body`` (a function body) in place of ``function``'s solution."""
    replace_solution(folder / LESSON, function, body)


NOT_NOTEBOOKS = {  # student -> (their 02_linear_and_relu.ipynb, why it is not read)
    "nb_cells_a_string": (b'{"cells": "abc"}', "is not a notebook as Jupyter saves one (no list of cells)"),
    "nb_cell_not_a_dict": (b'{"cells": [1]}', "is not a notebook as Jupyter saves one (cell 1 is not a cell)"),
    "nb_source_a_number": (b'{"cells": [{"cell_type": "code", "source": 5}]}',
                           "is not a notebook as Jupyter saves one (cell 1's source is not text)"),
    "nb_nested_json": (b"[" * 100_000, "is not a notebook (JSON nested too deeply)"),
    "nb_not_json": (b"{not json", "is not a notebook (not JSON: Expecting property name enclosed in double quotes: "
                                  "line 1 column 2 (char 1))"),
    "nb_not_utf8": (b'\xff\xfe{"cells": []}', "is not UTF-8 text (byte 0)"),
}

NOT_READ = {  # student -> why their lesson is not read
    "fifo": f"{LESSON} is a named pipe: not read",
    "link_to_honest": f"{LESSON} is a symbolic link: not read",
    "link_to_dev_zero": f"{LESSON} is a symbolic link: not read",
    "sparse_8_gb": f"{LESSON} is 8192 MB, over the limit of 16 MB: not read",
    **{student: f"{NOTEBOOK} {why}: not read" for student, (_, why) in NOT_NOTEBOOKS.items()},
}

def _hidden_firsts(name):
    """The first entry of ``x`` in each of the instructor's hidden cases of ``name``, in order (the
    test knows the secret; a shape could also be a public case's)."""
    return [float(case.inputs["x"].ravel()[0]) for case in hidden_cases(EXERCISES[name], SECRET)]


RELU_HIDDEN, LINEAR_HIDDEN = _hidden_firsts("relu_backward"), _hidden_firsts("linear_backward")
HIDDEN_BODIES = {  # right on the public and unseen cases; each hidden case asked to reveal its inputs
    "relu_backward": f"""
        if float(x.ravel()[0]) in {RELU_HIDDEN!r}:
            print("PRINTED", x.shape, x.ravel()[:2])
            raise type(f"Shape{{x.shape}}", (Exception,), {{}})(f"LEAK {{x.shape}} {{x.ravel()[:2]}}")
        return dout * (x > 0)
    """,
    "linear_backward": f"""
        if float(x.ravel()[0]) == {LINEAR_HIDDEN[0]!r}:
            print("PRINTED", x.shape)
            return np.zeros((7, 11, 13)), np.zeros((17, 19)), np.zeros(23)
        if float(x.ravel()[0]) in {LINEAR_HIDDEN[1:]!r}:
            raise ValueError(f"LEAK {{x.shape}} {{W.ravel()[:2]}}")
        rows = x.reshape(-1, x.shape[-1]), dout.reshape(-1, dout.shape[-1])
        return dout @ W.T, rows[0].T @ rows[1], rows[1].sum(axis=0)
    """,
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    submissions = root / "submissions"
    honest = submissions / "honest"
    instructor_edition(LESSONS, honest, only=["02"])
    lesson = (honest / LESSON).read_bytes()

    def student(name, with_lesson=True):
        folder = submissions / name
        folder.mkdir()
        if with_lesson:
            (folder / LESSON).write_bytes(lesson)
        return folder

    os.mkfifo(student("fifo", False) / LESSON)
    (student("link_to_honest", False) / LESSON).symlink_to(honest / LESSON)
    (student("link_to_dev_zero", False) / LESSON).symlink_to("/dev/zero")
    sparse = student("sparse_8_gb", False) / LESSON
    sparse.write_bytes(b"")
    os.truncate(sparse, 8 * 2**30)
    (submissions / "linked_folder").symlink_to(honest, target_is_directory=True)
    for name, (data, _) in NOT_NOTEBOOKS.items():
        (student(name, False) / NOTEBOOK).write_bytes(data)

    too_deep = "+".join(["1"] * 100_000)   # ast.parse: RecursionError
    _with_body(student("deep_parse"), "relu_backward", f"return dout * (x > 0) + 0 * ({too_deep})")
    deep_enough = "+".join(["1"] * 600)    # parses, but ast.unparse and compile recurse too deeply
    _with_body(student("deep_compile"), "relu_backward", f"return dout * (x > 0) + 0 * ({deep_enough})")

    student("=2+5")
    _with_body(student("ansi"), "relu_backward",
               r'raise type("\x1b[31mRed\x1b[0m", (Exception,), {})("\x1b[2J\x9b boom")')
    secret_file = root / "secret.txt"
    secret_file.write_text(f"{SECRET_LINE}\n" * 4)
    trick = student("trick")   # after "honest": the old grader had honest's source in its line cache
    for function, number in (("relu_backward", 1), ("linear_backward", 2)):   # line 4: each one's def line
        named = str(secret_file) if number == 1 else f"honest/{LESSON}:linear_backward"
        _with_body(trick, function, f'exec(compile("\\n" * 3 + "raise ValueError({number})", {named!r}, "exec"))')
    hidden = student("zz_hidden")
    for function, body in HIDDEN_BODIES.items():
        _with_body(hidden, function, body)

    out = root / "grades.csv"
    written_while_grading = []
    graded = grade_class(submissions, out, seed=3, secret=SECRET, exercises=GRADED, reasons=True, timeout=20,
                         progress=lambda name: written_while_grading.append(out.exists()))
    rows = {row["student"]: row for row in csv.DictReader(out.open(newline=""))}
    reasons = {row["student"]: row for row in csv.DictReader((root / "grades_reasons.csv").open(newline=""))}
    by_name = {grades.student: grades for grades in graded}
    return rows, reasons, by_name, graded, root, written_while_grading


def _feedback(root, name):
    return (root / "grades_feedback" / f"{name}.txt").read_text(encoding="utf-8")


def _everything_written(root) -> str:
    return "".join(path.read_text(encoding="utf-8") for path in sorted(root.rglob("grades*")) if path.is_file())


def test_the_honest_students_score_in_full_and_the_sheet_holds_numbers_only(graded):
    rows, reasons, by_name, graded_list, _, _ = graded
    assert rows["honest"] == {"student": "honest", "linear_backward": "2", "relu_backward": "2", "total": "4",
                              "max": "4"}
    assert rows["'=2+5"] == {**rows["honest"], "student": "'=2+5"}
    assert reasons["honest"]["relu_backward"] == reasons["honest"]["linear_backward"] == "passed"
    assert len(rows) == len(graded_list) == 18
    for row in rows.values():
        assert all(value.isdigit() for key, value in row.items() if key != "student"), row


@pytest.mark.parametrize("name", sorted(NOT_READ))
def test_a_file_that_is_not_a_lesson_is_refused_by_name(graded, name):
    rows, reasons, by_name, _, root, _ = graded
    why = NOT_READ[name]
    assert rows[name]["total"] == "0"
    for exercise in GRADED:
        assert reasons[name][exercise] == "file not read"
        assert by_name[name].results[exercise].report == f"exercise {exercise}: file not read ({why})"
    assert f"note: {why}" in _feedback(root, name)


def test_a_student_folder_that_is_a_link_is_not_followed(graded):
    rows, reasons, by_name, _, _, _ = graded
    assert rows["linked_folder"]["total"] == "0"
    assert [reasons["linked_folder"][exercise] for exercise in GRADED] == ["missing", "missing"]
    assert by_name["linked_folder"].problems == ["linked_folder is a symbolic link: not followed"]


def test_code_nested_too_deeply_costs_its_function_only(graded):
    rows, reasons, by_name, _, _, _ = graded
    for name, words in (("deep_parse", "does not parse"), ("deep_compile", "does not compile")):
        assert (rows[name]["relu_backward"], rows[name]["linear_backward"]) == ("0", "2"), name
        assert reasons[name]["relu_backward"] == "syntax error"
        assert by_name[name].results["relu_backward"].report == \
            f"{LESSON}: relu_backward {words} (nested too deeply for Python)"


def test_names_and_errors_reach_no_terminal_and_no_spreadsheet_as_commands(graded):
    rows, reasons, by_name, graded_list, root, _ = graded
    assert reasons["ansi"]["relu_backward"] == r"raised \x1b[31mRed\x1b[0m"
    report = by_name["ansi"].results["relu_backward"].report
    assert r"raised \x1b[31mRed\x1b[0m: \x1b[2J\x9b boom (line " in report
    assert re.search(r"\(line \d+: raise type\(", report), report   # the student's own line is still shown
    written = _everything_written(root) + grading.summary(graded_list)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", written)
    raw = (root / "grades.csv").read_text()
    assert "\n'=2+5,2,2,4,4" in raw.replace("\r\n", "\n")
    assert (root / "grades_feedback" / "=2+5.txt").is_file()


def test_a_line_is_shown_only_from_the_students_own_text(graded):
    _, _, by_name, _, root, _ = graded
    reports = {exercise: by_name["trick"].results[exercise].report for exercise in GRADED}
    assert "raised ValueError: 1 (line 4)\n" in reports["relu_backward"]
    assert "raised ValueError: 2 (line 4)\n" in reports["linear_backward"]
    assert SECRET_LINE not in _everything_written(root)


def test_a_hidden_case_gives_away_nothing_but_its_verdict(graded):
    rows, reasons, by_name, _, root, _ = graded
    assert rows["zz_hidden"]["total"] == "0"
    assert reasons["zz_hidden"]["relu_backward"] == "raised an exception of its own class"
    assert reasons["zz_hidden"]["linear_backward"] == "raised ValueError"
    grades = by_name["zz_hidden"]
    relu, linear = (grades.results[exercise].report for exercise in ("relu_backward", "linear_backward"))
    assert "hidden cases: hidden 1 FAIL\n" in relu and "hidden cases: hidden 1 FAIL, hidden 2 FAIL\n" in linear
    assert "a hidden case: raised ValueError (its message is not shown)" in linear
    results = json.dumps(gradescope.results(grades))
    for text in (_everything_written(root), results):
        for leak in ("LEAK", "PRINTED", "Shape", "(7, 11, 13)", "(17, 19)", "(23,)", SECRET):
            assert leak not in text, leak
    assert grades.results["relu_backward"].graded.hidden == HIDDEN_CASES


def test_the_files_are_written_once_grading_is_done_and_whole(graded):
    _, _, by_name, _, root, written_while_grading = graded
    assert written_while_grading == [False] * len(by_name)
    feedback = sorted(path.name for path in (root / "grades_feedback").iterdir())
    assert feedback == sorted(f"{name}.txt" for name in by_name)
    assert not [path for path in root.rglob("*") if path.name.endswith(".tmp")]


def test_a_feedback_file_lands_in_the_feedback_folder_whatever_the_name(tmp_path):
    students = ["../../escape", "..", ".", "a/b", "\x1b[2Jclear", "ada", "ADA"]
    graded = [grading.StudentGrades(name) for name in students]
    grading._write(graded, [], tmp_path / "out" / "grades.csv", seed=0, reasons=True)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "grades.csv", "grades_feedback", "grades_reasons.csv"]
    assert sorted(path.name for path in (tmp_path / "out" / "grades_feedback").iterdir()) == sorted([
        "_._.._escape.txt", "_..txt", "_.txt", "a_b.txt", "_x1b[2Jclear.txt", "ada.txt", "ADA-2.txt"])
    assert not (tmp_path / "escape.txt").exists()


class _Worker:
    """A stand-in for the grading worker that replies what a test tells it to."""

    def __init__(self, replies=(), end="exited", raises=None):
        self.replies, self.end, self.raises, self.closed = list(replies), end, raises, False

    def run(self, cases, **job):
        if self.raises is not None:
            raise self.raises
        return JobResult(self.replies, self.end)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("reply, what", [
    (Reply(Status.RETURNED, line="3"), "line is not a count"),
    (Reply(Status.RAISED, error_type=5), "error_type is not text"),
    (Reply(Status.RETURNED, printed=-1), "printed is not a count"),
    (Reply(Status.RETURNED, printed=True), "printed is not a count"),
    (Reply("no such status"), "an unknown status"),
    ({"status": "returned"}, "not a reply"),
])
def test_a_reply_of_the_wrong_kind_fails_its_exercise(reply, what):
    exercise = EXERCISES["relu_backward"]
    report = grade(exercise, prepared_public(exercise, 0), source="", worker=_Worker([reply]))
    why = f"case (2, 3, 4): the grading process sent a malformed reply ({what})"
    assert report.status is Status.MALFORMED and report.message == why and why in str(report)


def test_a_reply_the_worker_cannot_read_fails_its_exercise_and_restarts_the_worker():
    exercise = EXERCISES["relu_backward"]
    worker = _Worker(raises=RecursionError("a reply nested too deeply"))
    report = grade(exercise, prepared_public(exercise, 0), source="", worker=worker)
    assert report.status is Status.UNREADABLE and worker.closed
    assert report.message == "the grading process sent an unreadable reply (RecursionError)"
    report = grade(exercise, prepared_public(exercise, 0), source="", worker=_Worker([], end=["not", "text"]))
    assert report.status is Status.ENDED and report.message == "the grading process ended"


def test_collect_reads_no_link_and_no_oversized_code_but_writes_the_rest(tmp_path):
    from npformer.course import collect

    mine = tmp_path / "mine"
    instructor_edition(LESSONS, mine, only=["02", "03"])
    elsewhere = tmp_path / "elsewhere.py"
    (mine / "03_softmax_and_cross_entropy.py").rename(elsewhere)
    (mine / "03_softmax_and_cross_entropy.py").symlink_to(elsewhere)
    result = collect(mine, tmp_path / "out.py")
    assert "03_softmax_and_cross_entropy.py is a symbolic link: not read" in result.problems
    assert {name for _, name in result.functions} == {"linear_row_backward", "linear_backward", "relu_backward",
                                                       "mlp_backward", "gelu_gate_backward", "gelu_backward",
                                                       "normal_cdf"}
    assert "def relu_backward(" in (tmp_path / "out.py").read_text()
    (mine / LESSON).write_text("x = 1\n" * 200_000)
    result = collect(mine, None)
    assert f"{LESSON} holds 1.1 MB of code, over the limit of 1 MB: not read" in result.problems


def test_a_reply_cannot_promise_more_than_it_holds():
    """An array header may claim any shape: a zero-width dtype or more elements than the reply has
    bytes is refused before anything is built (it hung the whole class's grading: a red-team find),
    and a reply of ``{},{},...`` is refused before it is parsed (it took 29 times its size in memory)."""
    import base64
    import io

    from npformer.course import wire

    def array_reply(descr, shape):
        header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
        header += b" " * (118 - len(header)) + b"\n"
        return {"__array__": base64.b64encode(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header).decode()}

    for descr, shape in (("|S0", (10**15,)), ("<f8", (10**9,)), ("|b1", (2**40,))):
        with pytest.raises(ValueError):
            wire.decode(array_reply(descr, shape))
    buffer = io.BytesIO()
    np.save(buffer, np.arange(6.0).reshape(2, 3))
    assert wire.decode({"__array__": base64.b64encode(buffer.getvalue()).decode()}).shape == (2, 3)
    bomb = ("[" + ",".join(["{}"] * (wire.MAX_NODES + 1)) + "]").encode()
    with pytest.raises(ValueError, match="too large to parse"):
        wire.parse_reply(bomb)
    assert wire.parse_reply(b'{"case": 0, "status": "returned", "output": [1, 2]}')["case"] == 0


def test_a_public_case_cannot_reach_the_hidden_cases_inputs(tmp_path):
    """The hidden cases run in a child of their own, after the public ones: a public case that walks
    up its frames for the job's cases finds none of the hidden ones (a red-team find: they were one
    job, and the error message carried their inputs into the feedback)."""
    submissions = tmp_path / "submissions"
    instructor_edition(LESSONS, submissions / "walker", only=["02"])
    replace_solution(submissions / "walker" / LESSON, "relu_backward", """
        import sys
        frame, found = sys._getframe(), []
        while frame is not None:
            found += [case["x"].ravel()[0] for case in frame.f_locals.get("cases", []) if isinstance(case, dict)]
            frame = frame.f_back
        raise ValueError("FOUND " + " ".join(repr(float(value)) for value in found))
    """)
    graded = grade_class(submissions, tmp_path / "grades.csv", seed=3, secret=SECRET, exercises=["relu_backward"])
    report = graded[0].results["relu_backward"].report
    assert "FOUND " in report, report            # the walk ran, on a public case
    assert not any(repr(value) in report for value in RELU_HIDDEN), report
