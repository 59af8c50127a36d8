"""Grading a class: a folder of submissions in, one CSV row per student out.

``npformer course grade SUBMISSIONS --out grades.csv``: ``SUBMISSIONS`` holds one folder per
student, each with that student's lessons (``NN_topic.py``, or ``NN_topic.ipynb`` as Jupyter
saved them). For each student:

1. ``collect`` reads their graded functions (parsing only: nothing of the student's runs in
   this process) into a module in a temporary folder; nothing in the submissions is written;
2. a fresh Python process imports that module and grades one exercise after another with
   ``check``, each against its own time limit; the student's printing goes nowhere but is counted;
3. a process that overruns a limit is killed, that exercise is "timed out", and a new process
   grades the rest.

A cell of the CSV holds the exercise's points when it passed, 0 when it failed or is a stub, and
a short error otherwise ("syntax error", "timed out after 20 s", "raised ZeroDivisionError",
"printed 3.1 MB", "calls npformer's answer", "missing"), so one student's error is one cell,
never the end of the run. The last columns are the total and the most a student can get. Beside
the CSV, ``<out>_feedback/<student>.txt`` holds each student's full reports, to hand back.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .collect import collect
from .exercises import EXERCISES

PRINT_LIMIT = 1_000_000  # bytes a student's function may print while one exercise is graded
PASSED, FAILED, NOT_IMPLEMENTED = "passed", "FAILED", "not implemented yet"


@dataclass
class Result:
    """One exercise of one student: ``cell`` is what the CSV shows, ``report`` the full text."""

    exercise: str
    points: int
    cell: int | str
    report: str


@dataclass
class StudentGrades:
    student: str
    results: dict[str, Result] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(result.cell for result in self.results.values() if isinstance(result.cell, int))


def max_points() -> int:
    return sum(exercise.points for exercise in EXERCISES.values())


def _work(module_path: str, results_path: str, names: list[str], seed: int) -> None:
    """The worker: import the collected module, grade ``names`` in order, one JSON line each."""
    import importlib.util
    import io
    import contextlib

    import numpy

    from .grader import check

    class Counter(io.TextIOBase):
        written = 0

        def write(self, text: str) -> int:
            Counter.written += len(text.encode("utf-8", "replace"))
            return len(text)

    spec = importlib.util.spec_from_file_location("submission", module_path)
    module = importlib.util.module_from_spec(spec)
    with open(results_path, "a", encoding="utf-8") as results:
        def emit(**entry):
            results.write(json.dumps(entry) + "\n")
            results.flush()
        sink = Counter()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                spec.loader.exec_module(module)
        except BaseException as error:  # the module itself fails: every exercise is that error
            for name in names:
                emit(name=name, cell=f"raised {type(error).__name__}", report=f"importing the functions raised "
                     f"{type(error).__name__}: {error}")
            return
        for name in names:
            function = getattr(module, name, None)
            if function is None:
                emit(name=name, cell="missing", report=f"no function {name} in the submission")
                continue
            Counter.written = 0
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), numpy.errstate(all="ignore"):
                report = check(name, function, strict=False, unseen_seed=seed)
            points = EXERCISES[name].points if report.passed else 0
            cell = report.error or points
            if Counter.written > PRINT_LIMIT:
                cell = f"printed {Counter.written / 1e6:.1f} MB"
            emit(name=name, cell=cell, report=str(report))


def _complete_lines(path: Path) -> list[str]:
    """The lines the worker has finished writing to ``path``: a line it is still writing (no newline
    yet, perhaps cut inside a character) is left for the next look."""
    written = path.read_bytes()
    finished = written[: written.rfind(b"\n") + 1]
    return [line for line in finished.decode("utf-8").splitlines() if line.strip()]


def _grade_module(module: Path, names: list[str], timeout: float, seed: int, workdir: Path) -> dict[str, Result]:
    """Grade ``names`` from ``module`` in fresh processes, restarting after each exercise that overruns."""
    results: dict[str, Result] = {}
    remaining = list(names)
    while remaining:
        results_path = workdir / f"results-{len(results)}.jsonl"
        results_path.write_text("", encoding="utf-8")
        command = [sys.executable, "-c", "import sys; from npformer.course.grading import _work; "
                   "_work(sys.argv[1], sys.argv[2], sys.argv[4:], int(sys.argv[3]))",
                   str(module), str(results_path), str(seed), *remaining]
        environment = {**os.environ, "MPLBACKEND": "Agg", "NPFORMER_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        environment.pop("NPFORMER_GRADER", None)
        process = subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   stdin=subprocess.DEVNULL, env=environment)
        done, started = 0, time.monotonic()
        deadline = started + timeout + 15  # the first exercise also pays for importing npformer
        while True:
            finished = process.poll() is not None  # before reading: a worker that has exited wrote all
            lines = _complete_lines(results_path)
            for line in lines[done:]:
                entry = json.loads(line)
                results[entry["name"]] = Result(entry["name"], EXERCISES[entry["name"]].points, entry["cell"],
                                                entry["report"])
                deadline = time.monotonic() + timeout
            done = len(lines)
            if done == len(remaining):
                break
            if finished or time.monotonic() > deadline:
                process.kill()
                process.wait()
                name = remaining[done]
                why = (f"timed out after {timeout:g} s" if not finished else
                       f"the grading process died (exit {process.returncode})")
                results[name] = Result(name, EXERCISES[name].points, why, f"exercise {name}: {why}")
                done += 1
                break
            time.sleep(0.05)
        process.wait()
        remaining = remaining[done:]
    return results


def _students(submissions: Path) -> list[Path]:
    if not submissions.is_dir():
        raise FileNotFoundError(f"course grade: {submissions} is not a folder of submissions")
    students = sorted(path for path in submissions.iterdir() if path.is_dir() and not path.name.startswith("."))
    if not students:
        raise FileNotFoundError(f"course grade: {submissions} holds no student folder (one folder per student)")
    return students


def grade_class(submissions: str | Path, out: str | Path, *, timeout: float = 30.0, seed: int | None = None,
                progress=None) -> list[StudentGrades]:
    """Grade every student folder of ``submissions``; write ``out`` (CSV) and the feedback files.

    ``timeout``: seconds one exercise may take. ``seed``: the unseen cases' seed, the same for the
    whole class (None: drawn once; written in the feedback). ``progress``: called with each
    student's name before they are graded.
    """
    submissions, out = Path(submissions), Path(out)
    students = _students(submissions)
    if out.exists() and out.is_dir():
        raise IsADirectoryError(f"course grade: --out {out} is a folder; give a .csv file")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise ValueError(f"course grade: --out {out} is inside the submissions, which are never written to")
    if seed is None:
        import numpy
        seed = int(numpy.random.SeedSequence().entropy % 1_000_000)
    names = list(EXERCISES)
    graded = []
    with tempfile.TemporaryDirectory(prefix="npformer-grade-") as scratch:
        for student in students:
            if progress is not None:
                progress(student.name)
            workdir = Path(scratch) / student.name
            workdir.mkdir()
            grades = StudentGrades(student.name)
            module = workdir / "submission.py"
            try:
                collected = collect(student, module)
                grades.problems = collected.problems
            except (FileNotFoundError, SyntaxError, ValueError, UnicodeDecodeError) as error:
                grades.problems = [str(error)]
                collected = None
            unparsed = {name for name in names for problem in grades.problems
                        if problem.split(": ", 1)[-1].startswith(f"{name} does not parse")}
            for name in unparsed:
                grades.results[name] = Result(name, EXERCISES[name].points, "syntax error",
                                              next(p for p in grades.problems if f"{name} does not parse" in p))
            to_grade = [name for name in names if name not in unparsed]
            if collected is None:
                for name in to_grade:
                    grades.results[name] = Result(name, EXERCISES[name].points, "missing", grades.problems[0])
            elif to_grade:
                grades.results.update(_grade_module(module, to_grade, timeout, seed, workdir))
            graded.append(grades)
    _write(graded, names, out, seed)
    return graded


def _write(graded: list[StudentGrades], names: list[str], out: Path, seed: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", *names, "total", "max"])
        for grades in graded:
            writer.writerow([grades.student, *(grades.results[name].cell for name in names), grades.total,
                             max_points()])
    feedback = out.with_name(out.stem + "_feedback")
    feedback.mkdir(exist_ok=True)
    for grades in graded:
        lines = [f"{grades.student}: {grades.total} of {max_points()} points "
                 f"(unseen cases drawn with seed {seed})", ""]
        lines += [f"note: {problem}" for problem in grades.problems]
        for name in names:
            lines += ["", grades.results[name].report]
        (feedback / f"{grades.student}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def summary(graded: list[StudentGrades]) -> str:
    """One line per student (total, passed, errors), then each exercise's pass count."""
    if not graded:
        return "no student graded"
    width = max(len("student"), *(len(grades.student) for grades in graded))
    lines = [f"{'student'.ljust(width)}  total  passed  errors"]
    for grades in graded:
        passed = sum(isinstance(r.cell, int) and r.cell > 0 for r in grades.results.values())
        errors = sorted({f"{r.exercise}: {r.cell}" for r in grades.results.values() if isinstance(r.cell, str)})
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        lines.append(f"{grades.student.ljust(width)}  {grades.total:>3}/{max_points():<3} {passed:>4}/{len(EXERCISES):<3} "
                     f"{shown or '-'}")
    counts = {name: sum(isinstance(g.results[name].cell, int) and g.results[name].cell > 0 for g in graded)
              for name in EXERCISES}
    lines.append("passed by: " + ", ".join(f"{name} {count}/{len(graded)}" for name, count in counts.items()))
    return "\n".join(lines)

