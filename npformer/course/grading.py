"""Grading a class: a folder of submissions in, one CSV row per student out.

``npformer course grade SUBMISSIONS --out grades.csv``: ``SUBMISSIONS`` holds one folder per
student, each with that student's lessons (``NN_topic.py``, or ``NN_topic.ipynb`` as Jupyter
saved them). For each student:

1. ``collect`` reads their graded functions (parsing only: nothing of the student's runs in
   this process) as one small module per exercise; nothing in the submissions is written;
2. each exercise's module is sent, as text, to the grading worker (``course.worker``): a child
   process made for that one exercise runs it, where npformer cannot be imported and no file
   outside the Python installation can be opened, under a time and a memory limit; it receives the
   inputs of the cases and sends back what the function returned;
3. this process compares the results with the references it computed itself, once for the whole
   class (``prepared_cases``): the public cases, an unseen one (``seed``) and, with the
   instructor's secret, hidden ones.

A cell of the CSV holds the exercise's points when it passed, 0 when it failed or is a stub, and
a short error otherwise ("syntax error", "timed out after 20 s", "raised ZeroDivisionError",
"printed 3.1 MB", "uses npformer", "missing"), so one student's error is one cell,
never the end of the run. The last columns are the total and the most a student can get. Beside
the CSV, ``<out>_feedback/<student>.txt`` holds each student's full reports, to hand back.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from .collect import collect
from .exercises import EXERCISES
from .cases import Prepared, hidden_cases, new_seed, prepare, public_cases
from .grader import grade
from .worker import Worker

PRINT_LIMIT = 1_000_000  # bytes a student's function may print while one exercise is graded


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


def prepared_cases(seed: int, secret: str | None) -> dict[str, list[Prepared]]:
    """Every exercise's cases for the whole class, with their references: the public ones, the unseen
    one (``seed``), and, with an instructor's ``secret``, the hidden ones."""
    prepared = {}
    for name, exercise in EXERCISES.items():
        cases, _ = public_cases(exercise, 0, seed)
        if secret is not None:
            cases += hidden_cases(exercise, secret)
        prepared[name] = prepare(exercise, cases)
    return prepared


def _grade_student(student: Path, prepared: dict[str, list[Prepared]], timeout: float, worker: Worker,
                   seed: int) -> StudentGrades:
    """One student: their functions collected (parsed, never run here), each graded in the worker."""
    grades = StudentGrades(student.name)
    try:
        collected = collect(student, None)
        grades.problems = collected.problems
    except (FileNotFoundError, SyntaxError, ValueError, UnicodeDecodeError) as error:
        grades.problems = [str(error)]
        collected = None
    lessons = dict((name, lesson) for lesson, name in collected.functions) if collected else {}
    for name, exercise in EXERCISES.items():
        unparsed = [problem for problem in grades.problems
                    if problem.split(": ", 1)[-1].startswith(f"{name} does not parse")]
        if unparsed:
            grades.results[name] = Result(name, exercise.points, "syntax error", unparsed[0])
        elif collected is None or name not in collected.sources:
            why = grades.problems[0] if collected is None else f"no function {name} in the submission"
            grades.results[name] = Result(name, exercise.points, "missing", f"exercise {name}: missing ({why})")
        else:
            report = grade(exercise, prepared[name], source=collected.sources[name],
                           filename=f"{student.name}/{lessons[name]}:{name}", time_limit=timeout, worker=worker)
            report.unseen_seed = seed
            cell = report.error or (exercise.points if report.passed else 0)
            if report.printed_total > PRINT_LIMIT:
                cell = f"printed {report.printed_total / 1e6:.1f} MB"
            grades.results[name] = Result(name, exercise.points, cell, str(report))
    return grades


def _students(submissions: Path) -> list[Path]:
    if not submissions.is_dir():
        raise FileNotFoundError(f"course grade: {submissions} is not a folder of submissions")
    students = sorted(path for path in submissions.iterdir() if path.is_dir() and not path.name.startswith("."))
    if not students:
        raise FileNotFoundError(f"course grade: {submissions} holds no student folder (one folder per student)")
    return students


def read_secret(path: str | Path, submissions: str | Path | None = None) -> str:
    """The instructor's secret: the text of ``path`` (kept outside the students' folders; checked).
    ``npformer course secret PATH`` writes a new one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"course grade: no secret file {path} (npformer course secret {path} writes one)")
    if submissions is not None and path.resolve().is_relative_to(Path(submissions).resolve()):
        raise ValueError(f"course grade: the secret {path} is inside the submissions; keep it where students cannot read it")
    secret = path.read_text(encoding="utf-8").strip()
    if len(secret) < 8:
        raise ValueError(f"course grade: the secret in {path} is {len(secret)} characters; use at least 8 "
                         f"(npformer course secret {path} writes 32)")
    return secret


def write_secret(path: str | Path) -> str:
    """Write a new instructor's secret (32 random hex digits) to ``path``, readable by its owner only;
    refuses to overwrite one (the hidden cases would change). Returns what to tell the instructor."""
    import secrets
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"course secret: {path} exists; a new secret would change every hidden case")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return (f"wrote a new secret to {path}: keep it outside the students' folders and pass it to every "
            f"grading of the term (npformer course grade SUBMISSIONS --secret {path})")


def grade_class(submissions: str | Path, out: str | Path, *, timeout: float = 30.0, seed: int | None = None,
                secret: str | None = None, progress=None) -> list[StudentGrades]:
    """Grade every student folder of ``submissions``; write ``out`` (CSV) and the feedback files.

    ``timeout``: seconds one exercise may take. ``seed``: the unseen cases' seed, the same for the
    whole class (None: drawn once; written in the feedback). ``secret``: the instructor's secret
    (``read_secret``): it adds ``grader.HIDDEN_CASES`` hidden cases to each exercise, never shown
    in feedback. ``progress``: called with each student's name before they are graded.
    """
    submissions, out = Path(submissions), Path(out)
    students = _students(submissions)
    if out.exists() and out.is_dir():
        raise IsADirectoryError(f"course grade: --out {out} is a folder; give a .csv file")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise ValueError(f"course grade: --out {out} is inside the submissions, which are never written to")
    if seed is None:
        seed = new_seed()
    prepared = prepared_cases(seed, secret)
    worker = Worker()
    graded = []
    try:
        for student in students:
            if progress is not None:
                progress(student.name)
            graded.append(_grade_student(student, prepared, timeout, worker, seed))
    finally:
        worker.close()
    _write(graded, list(EXERCISES), out, seed)
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

