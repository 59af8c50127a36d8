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

The CSV holds only numbers, so that a spreadsheet or a learning platform reads it as it is: one row
per student, the points of each exercise (its full points when it passed, 0 otherwise: a wrong
answer, a stub, or an error), then the total and the most a student can get. Why an exercise got 0
("failed", "not implemented yet", "syntax error", "timed out after 20 s", "raised ZeroDivisionError",
"printed 3.1 MB", "uses npformer", "missing") goes to the feedback, ``<out>_feedback/<student>.txt``,
each student's full reports to hand back, and, with ``reasons=True``, to ``<out>_reasons.csv``, the
same grid with the status in each cell. One student's error is one exercise's 0, never the end of
the run. ``exercises`` grades a problem set (``syllabus.problem_set``) instead of the whole course.

Nothing a submission holds is trusted. A student folder that is a symbolic link is not followed
(every exercise "missing", and why), nor is a linked subfolder; each lesson file is read by
``collect.read_lesson`` (no link, pipe, device or file over ``collect.MAX_LESSON_BYTES``), and a
file that is not read, not a notebook or too deeply nested is that lesson's exercises' 0 with a
one-line reason ("file not read", "syntax error"). The outputs are inert: every text from a student
(a folder's name, an exception, what a function printed) is made printable
(``inert.printable``: no terminal escape reaches the screen or a file), and a CSV cell that a
spreadsheet would read as a formula (``=2+5``, ``@SUM(...)``) starts with a quote. Each file is
written whole (a temporary file beside it, then renamed) once the grading is done, and a feedback
file is named after its student in a safe form, inside the feedback folder whatever the name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .collect import collect
from .submissions import submission_lessons
from .exercises import EXERCISES
from .cases import ClassCases, new_seed
from .grader import MACHINE_ERRORS, ExerciseReport, grade
from . import isolation
from .inert import csv_text, feedback_file_name, printable, write_atomically
from .roster import NotOnRoster, Variants
from .variants import graded_with_variants, posed, variant_for
from .wire import Status
from .worker import Worker

PRINT_LIMIT = 1_000_000  # bytes a student's function may print while one exercise is graded


@dataclass
class Result:
    """One exercise of one student: ``status`` why it got its points (``wire.Status``: PASSED, WRONG,
    NOT_IMPLEMENTED or what went wrong, said with ``detail``), ``report`` the full text, and
    ``graded`` the grader's report (None when nothing could be graded)."""

    exercise: str
    max_points: int
    status: Status
    report: str
    graded: ExerciseReport | None = None
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def points(self) -> int:
        """What the grade sheet holds: ``max_points`` or 0."""
        return self.max_points if self.passed else 0

    @property
    def reason(self) -> str:
        """The status in the grade sheet's words: "passed", "failed", "raised ZeroDivisionError"."""
        return printable(self.status.said(self.detail))

    @property
    def title(self) -> str:
        """How a platform names this exercise's test: ``lesson 04: layernorm_backward`` (and its variant's name)."""
        variant = self.graded.exercise.variant if self.graded is not None else ""
        return f"lesson {EXERCISES[self.exercise].lesson}: {self.exercise}" + (f" ({variant})" if variant else "")


@dataclass
class StudentGrades:
    student: str
    results: dict[str, Result] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    variants: dict[str, str] = field(default_factory=dict)  # family -> the variant graded (none: the lesson's)

    @property
    def total(self) -> int:
        return sum(result.points for result in self.results.values())

    @property
    def max_points(self) -> int:
        return sum(result.max_points for result in self.results.values())


def _chosen(exercises: list[str] | None) -> list[str]:
    """The exercises to grade, in course order: all of them by default; an unknown name is a ValueError."""
    if exercises is None:
        return list(EXERCISES)
    unknown = [name for name in exercises if name not in EXERCISES]
    if unknown:
        raise ValueError(f"no exercise {', '.join(unknown)} (npformer course exercises lists them)")
    return [name for name in EXERCISES if name in exercises]


def prepared_cases(seed: int, secret: str | None, exercises: list[str] | None = None,
                   variants: Variants | None = None) -> ClassCases:
    """Each exercise's cases (default: every exercise) for the whole class, with their references:
    the public ones, the unseen and timed ones (``seed``), and, with an instructor's ``secret``, the
    hidden ones; per variant, when first needed. Graded with ``variants`` (not "off"), only the
    exercises that have variants are graded (``variants.graded_with_variants``): the others are practice."""
    names = _chosen(exercises)
    if variants is not None and variants.mode != "off":
        names = [name for name in names if graded_with_variants(name)]
    return ClassCases(names, seed, secret)


def practice_under_variants(exercises: list[str] | None = None) -> list[str]:
    """The exercises (default: all) that a class graded with variants leaves out: no variant changes
    their answer, so copying one would earn its points."""
    return [name for name in _chosen(exercises) if not graded_with_variants(name)]


def _grade_student(folder: Path, prepared: ClassCases, timeout: float, worker: Worker, seed: int, name: str,
                   variants: Variants | None = None, roster_names: tuple[str, ...] = (),
                   reveal_fixes: bool = False) -> StudentGrades:
    """One student: their functions collected (parsed, never run here), each graded in the worker
    against their variants (none: the lesson's forms). Whatever their files hold, the result is their
    grades: only the machine's errors are raised."""
    assigned: dict[str, str] = {}
    if variants is not None and variants.mode != "off":
        try:
            _, assigned = variants.of(*(roster_names or (name,)))
        except NotOnRoster as error:
            return _refused(name, str(error), prepared, Status.NOT_ON_ROSTER)
    try:
        files, notes = submission_lessons(folder)
        collected = collect(folder, None, files={path.name: path for path in files})
    except (FileNotFoundError, ValueError) as error:  # not a folder, no lesson, a lesson twice
        return _refused(name, str(error), prepared, variants=assigned)
    except Exception as error:  # noqa: BLE001 - anything else in this student's files is theirs alone
        why = f"the submission could not be read ({printable(type(error).__name__)})"
        return _refused(name, why, prepared, variants=assigned)
    # a problem set grades some lessons: the others' absence (refused without a file) is no problem here
    grades = StudentGrades(printable(name), variants=assigned, problems=notes + [
        str(refused) for refused in collected.refusals if refused.file or set(refused.names) & set(prepared)])
    for name in prepared:
        variant = variant_for(name, assigned)
        exercise, found = posed(name, variant), collected.exercises[name]
        refused = found.refused
        if refused is not None:
            report = refused if refused.status is Status.SYNTAX_ERROR else \
                f"exercise {name}: {refused.status.words} ({refused})"
            grades.results[name] = Result(name, exercise.points, refused.status, printable(report))
            continue
        try:
            report = grade(exercise, prepared.of(name, variant), source=found.source, unseen_seed=seed,
                           filename=f"{grades.student}/{printable(found.file)}:{name}", time_limit=timeout,
                           worker=worker)
        except MACHINE_ERRORS:
            raise  # the machine cannot grade anyone: not this student's 0
        except Exception as error:  # noqa: BLE001 - a failure of the grader on this student's work
            why = f"({printable(type(error).__name__)[:80]})"
            report = f"exercise {name}: not graded: {Status.GRADING_ERROR.said(why)}"
            grades.results[name] = Result(name, exercise.points, Status.GRADING_ERROR, report, detail=why)
            continue
        report.reveal = True if reveal_fixes else None  # the hints' fixes only where the instructor asks
        status, detail = _status(report)
        grades.results[name] = Result(name, exercise.points, status, printable(report, lines=True), report, detail)
    return grades


def _status(report: ExerciseReport) -> tuple[Status, str]:
    """An exercise's status on the grade sheet, and its detail: the report's, unless the function
    printed too much. What a hidden case printed is counted, but only what the public cases printed
    is measured in it."""
    shown = report.printed_total - report.printed_hidden
    if shown > PRINT_LIMIT:
        return Status.PRINTED, f"{shown / 1e6:.1f} MB"
    if report.printed_total > PRINT_LIMIT:
        return Status.PRINTED, f"more than {PRINT_LIMIT / 1e6:g} MB"
    return report.status, report.detail


def _students(submissions: Path) -> list[Path]:
    """The student folders of ``submissions``, by name (hidden ones left out). A symbolic link to a
    folder is listed too, to be refused when graded, so that it shows in the grade sheet."""
    if not submissions.is_dir():
        raise FileNotFoundError(f"course grade: {submissions} is not a folder of submissions")
    students = sorted(path for path in submissions.iterdir() if path.is_dir() and not path.name.startswith("."))
    if not students:
        raise FileNotFoundError(f"course grade: {submissions} holds no student folder (one folder per student)")
    return students


def _refused(name: str, why: str, prepared: ClassCases, status: Status = Status.MISSING,
             variants: dict[str, str] | None = None) -> StudentGrades:
    """A student whose folder is not read (or, with variants, not on the roster): every exercise 0
    with ``status``, and why. ``variants``: the student's, when known."""
    grades = StudentGrades(printable(name), problems=[printable(why)], variants=variants or {})
    for exercise in prepared:
        grades.results[exercise] = Result(exercise, EXERCISES[exercise].points, status,
                                          f"exercise {exercise}: {status.words} ({grades.problems[0]})")
    return grades


def read_secret(path: str | Path, submissions: str | Path | None = None) -> str:
    """The instructor's secret: the text of ``path`` (kept outside the students' folders; checked).
    ``npformer course secret PATH`` writes a new one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no secret file {path}: give the one you wrote for this term (npformer course "
                                "secret FILE writes a new one, but a new secret changes every hidden case)")
    if submissions is not None and path.resolve().is_relative_to(Path(submissions).resolve()):
        raise ValueError(f"the secret {path} is inside the submissions; keep it where students cannot read it")
    secret = path.read_text(encoding="utf-8").strip()
    if len(secret) < 8:
        raise ValueError(f"the secret in {path} is {len(secret)} characters; use at least 8 "
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


def grade_submission(folder: str | Path, prepared: ClassCases, *, seed: int,
                     timeout: float = 30.0, worker: Worker | None = None, name: str | None = None,
                     isolated: bool = True, variants: Variants | None = None,
                     roster_names: tuple[str, ...] = (), reveal_fixes: bool = False) -> StudentGrades:
    """One student's folder graded on ``prepared`` (``prepared_cases``): what Gradescope's and
    GitHub Classroom's autograders run for each submission. A ``worker`` is started (and closed)
    when none is given, isolated by the kernel unless ``isolated=False`` (``worker.Worker``).
    ``variants``: graded against the variants of the roster's student for ``roster_names`` (default:
    ``name``, the folder's whole name; Gradescope's submitters' ids and e-mails). ``reveal_fixes``: as
    ``grade_class``'s."""
    folder = Path(folder)   # not a folder, or no lesson in it: every exercise "missing", and why
    own = worker is None
    worker = Worker(isolated=isolated) if own else worker
    try:
        return _grade_student(folder, prepared, timeout, worker, seed, folder.name if name is None else name,
                              variants, roster_names, reveal_fixes)
    finally:
        if own:
            worker.close()


def autograde(submission: str | Path, exercises: list[str], *, seed: int, secret: str | None = None,
              timeout: float = 30.0, isolated: bool = True, variants: Variants | None = None,
              roster_names: tuple[str, ...] = ()) -> StudentGrades:
    """One submission graded on ``exercises`` (a problem set), as an autograder of a platform runs it:
    the cases prepared here, the student's functions run in a worker of their own. ``roster_names``:
    the submitters' names on the roster (default: the folder's)."""
    return grade_submission(submission, prepared_cases(seed, secret, exercises, variants), seed=seed,
                            timeout=timeout, name=Path(submission).resolve().name, isolated=isolated,
                            variants=variants, roster_names=roster_names)


def grade_class(submissions: str | Path, out: str | Path, *, timeout: float = 30.0, seed: int | None = None,
                secret: str | None = None, exercises: list[str] | None = None, reasons: bool = False,
                progress=None, isolated: bool = True, variants: Variants | None = None,
                reveal_fixes: bool = False) -> list[StudentGrades]:
    """Grade every student folder of ``submissions``; write ``out`` (CSV, numbers only) and the
    feedback files.

    ``timeout``: seconds one exercise may take. ``seed``: the unseen cases' seed, the same for the
    whole class (None: drawn once; written in the feedback). ``secret``: the instructor's secret
    (``read_secret``): it adds ``cases.HIDDEN_CASES`` hidden cases to each exercise, never shown
    in feedback. ``exercises``: the ones to grade (a problem set; default all). ``reasons``: also
    write ``<out>_reasons.csv``, each exercise's status. ``progress``: called with each student's
    name (printable) before they are graded. ``isolated``: run the students' code isolated by the
    kernel (``worker.Worker``; the default, and what a class needs); False only for work you trust.
    ``variants``: each student graded against their own variants (``roster.Variants``); the exercises
    without variants are then practice and left out, and ``<out>_variants.csv`` names each student's.
    ``reveal_fixes``: the feedback's hints name their fixes too (``hints.Hint``); by default a grade
    sheet's hints say only what property of the answer fails, as a student's first checks do.
    A student folder that is a symbolic link is not followed: every exercise "missing", and why.
    The files are written once every student is graded and the worker is closed.
    """
    submissions, out = Path(submissions), Path(out)
    students = _students(submissions)
    if out.exists() and out.is_dir():
        raise IsADirectoryError(f"course grade: --out {out} is a folder; give a .csv file")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise ValueError(f"course grade: --out {out} is inside the submissions, which are never written to")
    if seed is None:
        seed = new_seed()
    hidden = (submissions, out.parent)  # masked wherever the sandbox sees them
    if isolated:
        isolation.require(hidden)  # before any work: one line on what is missing
    prepared = prepared_cases(seed, secret, exercises, variants)
    worker = Worker(isolated=isolated, hidden=hidden)
    graded, twice = [], _one_student_twice(students, variants)
    try:
        for student in students:
            if progress is not None:
                progress(printable(student.name))
            if student.name in twice:
                graded.append(_refused(student.name, twice[student.name], prepared, Status.ONE_STUDENT_TWICE))
            elif student.is_symlink():
                graded.append(_refused(student.name, f"{student.name} is a symbolic link: not followed", prepared))
            else:
                graded.append(grade_submission(student, prepared, seed=seed, timeout=timeout, worker=worker,
                                               variants=variants, reveal_fixes=reveal_fixes))
    finally:
        worker.close()
    _write(graded, list(prepared), out, seed, reasons)
    return graded


def _one_student_twice(students: list[Path], variants: Variants | None) -> dict[str, str]:
    """With a roster, the folders that map to a student another folder maps to too, and why they are
    refused: which of them is the student's is the instructor's call, not the grader's."""
    if variants is None or variants.roster is None:
        return {}
    owners: dict[str, list[str]] = {}
    for folder in students:
        try:
            owners.setdefault(variants.roster.student(folder.name), []).append(folder.name)
        except NotOnRoster:
            pass
    return {name: f"{', '.join(map(printable, names))} are all {printable(student)} on the roster: keep one folder"
            for student, names in owners.items() if len(names) > 1 for name in names}


def _write(graded: list[StudentGrades], names: list[str], out: Path, seed: int, reasons: bool) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    grids = [(out, lambda result: result.points)]
    if reasons:
        grids.append((out.with_name(out.stem + "_reasons.csv"), lambda result: result.reason))
    for path, cell in grids:
        rows = [["student", *names, "total", "max"]]
        rows += [[grades.student, *(cell(grades.results[name]) for name in names), grades.total, grades.max_points]
                 for grades in graded]
        write_atomically(path, csv_text(rows))
    if any(grades.variants for grades in graded):
        families = sorted({family for grades in graded for family in grades.variants})
        rows = [["student", *families]] + [[grades.student, *(grades.variants.get(family, "") for family in families)]
                                           for grades in graded]
        write_atomically(out.with_name(out.stem + "_variants.csv"), csv_text(rows))
    feedback = out.with_name(out.stem + "_feedback")
    feedback.mkdir(exist_ok=True)
    taken: set[str] = set()
    for grades in graded:
        target = feedback / feedback_file_name(grades.student, taken)
        if target.parent != feedback:  # cannot happen with the name above; never write elsewhere
            raise ValueError(f"a feedback file outside {feedback}: {printable(target)}")
        write_atomically(target, feedback_text(grades, seed))


def feedback_text(grades: StudentGrades, seed: int) -> str:
    """What a student gets back: the total, any note on their files, then each exercise's report
    (printable: no control character but newlines and tabs)."""
    lines = [f"{printable(grades.student)}: {grades.total} of {grades.max_points} points (unseen cases drawn "
             f"with seed {seed})", ""]
    lines += [f"note: {printable(problem)}" for problem in grades.problems]
    if grades.variants:
        lines.append("your variants: " + ", ".join(f"{family} '{variant}'" for family, variant in grades.variants.items()))
    for result in grades.results.values():
        lines += ["", printable(result.report, lines=True)]
    return "\n".join(lines) + "\n"


def summary(graded: list[StudentGrades]) -> str:
    """One line per student (total, passed, why the others got 0), then each exercise's pass count."""
    if not graded:
        return "no student graded"
    names = list(graded[0].results)
    width = max(len("student"), *(len(printable(grades.student)) for grades in graded))
    lines = [f"{'student'.ljust(width)}  total  passed  not passed"]
    for grades in graded:
        passed = sum(result.passed for result in grades.results.values())
        errors = sorted({f"{r.exercise}: {r.reason}" for r in grades.results.values()
                         if not r.passed and r.status not in (Status.WRONG, Status.NOT_IMPLEMENTED)})
        others = sum(not r.passed for r in grades.results.values()) - len(errors)
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        why = ", ".join(part for part in (f"{others} failed or not written" if others else "", shown) if part)
        lines.append(f"{printable(grades.student).ljust(width)}  {grades.total:>3}/{grades.max_points:<3} "
                     f"{passed:>4}/{len(names):<3} "
                     f"{why or '-'}")
    counts = {name: sum(g.results[name].passed for g in graded) for name in names}
    lines.append("passed by: " + ", ".join(f"{name} {count}/{len(graded)}" for name, count in counts.items()))
    return "\n".join(lines)
