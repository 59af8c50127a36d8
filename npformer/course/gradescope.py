"""Gradescope: the autograder of one problem set, and the ``results.json`` it writes.

``npformer course gradescope OUT.zip --set N`` builds the zip that Gradescope's "Configure
Autograder" page takes (its documented layout, gradescope-autograders.readthedocs.io):

    setup.sh         run once when Gradescope builds the image: installs npformer's run-time
                     dependencies and cloudpickle with pip
    run_autograder   run for every submission: grades ``/autograder/submission`` (the student's
                     lessons, ``.py`` or ``.ipynb``, at its top or in one folder) on problem set N
                     and writes ``/autograder/results/results.json``
    python/npformer  npformer itself, the installed package copied (no lessons, no trained models)
    config.json      the set, the unseen cases' seed and the time limit, for the record
    secret.txt       the instructor's secret, when given: the hidden cases (students never see the zip)

``results`` turns one student's grades into Gradescope's format: one test per exercise, named
with its lesson, worth the exercise's points, its report as the output (the same text the grade
sheet's feedback holds: never the hidden cases' inputs). With hidden cases, the rows of the hidden
cases are left out of each exercise's output and shown instead in one more test, "hidden cases",
worth nothing on its own, with the visibility ``hidden_visibility`` (default ``after_due_date``):
a student sees their points at once, and which of the instructor's cases failed after the due date.
A hidden case shows only its pass or FAIL there (``ExerciseReport.hidden_verdicts``), and every text
of ``results.json`` is printable (``inert.printable``: no terminal escape from a student's files).
"""

from __future__ import annotations

import json
import stat
import tempfile
import zipfile
from pathlib import Path

from . import vendoring
from .inert import printable
from .grading import StudentGrades

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's four

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image: npformer's run-time
# dependencies, cloudpickle (the grading worker loads it), pyseccomp with libseccomp and bubblewrap
# (they isolate the students' code: docs/instructor.md), nothing else.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip bubblewrap libseccomp2 >/dev/null
python3 -m pip install --quiet {requirements} || \\
    python3 -m pip install --quiet --break-system-packages {requirements}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT and PYTHON are for testing it
# elsewhere (Gradescope's own root is /autograder).
set -uo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="${{PYTHON:-python3}}"
# npformer's copy and the secret: readable by root only, so that the students' code, run as an
# unprivileged user where bubblewrap cannot make namespaces, cannot read them either.
chmod -R go-rwx "$root/source"
mkdir -p "$root/results"
PYTHONPATH="$root/source/python" "$python" -m npformer course autograde "$root/submission" \\
    --set {week} --seed {seed} --timeout {timeout:g} --format gradescope \\
    --results "$root/results/results.json" --hidden-visibility {hidden_visibility} {secret} {variants}
"""


def results(grades: StudentGrades, *, hidden_visibility: str = "after_due_date", execution_time: float | None = None,
            note: str = "") -> dict:
    """One student's grades as Gradescope's ``results.json`` (a dict, ready for ``json.dump``)."""
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"hidden_visibility must be one of {', '.join(VISIBILITIES)}, not {hidden_visibility!r}")
    tests, hidden_lines = [], []
    for number, result in enumerate(grades.results.values(), 1):
        report = result.graded
        has_hidden = report is not None and report.hidden > 0
        output = report.table(hidden_rows=False) if has_hidden else result.report
        if has_hidden:
            hidden_lines.append(_hidden_summary(result.exercise, report))
        tests.append({"name": printable(result.title),
                      "number": str(number), "score": result.points, "max_score": result.max_points,
                      "status": "passed" if result.passed else "failed", "output": printable(output, lines=True),
                      "visibility": "visible"})
    if hidden_lines:
        tests.append({"name": "hidden cases (your instructor's; their inputs are never shown)",
                      "number": str(len(tests) + 1), "score": 0, "max_score": 0,
                      "output": "\n".join(hidden_lines), "visibility": hidden_visibility})
    head = f"{grades.total} of {grades.max_points} points"
    notes = [f"note: {printable(problem)}" for problem in grades.problems] + ([printable(note)] if note else [])
    summary = {"score": grades.total, "output": "\n".join([head, *notes]), "visibility": "visible",
               "stdout_visibility": "hidden", "tests": tests}
    if execution_time is not None:
        summary["execution_time"] = round(execution_time, 1)
    return summary


def _hidden_summary(exercise: str, report) -> str:
    """One line: each hidden case of ``exercise`` graded, pass or FAIL (nothing else of it)."""
    verdicts = report.hidden_verdicts()
    shown = ", ".join(f"{case} {'pass' if passed else 'FAIL'}" for case, passed in verdicts.items())
    return f"{exercise}: {shown or 'not graded (the public cases did not pass)'}"


def submitters(metadata: str | Path) -> list[str]:
    """The names of a submission's submitters in Gradescope's ``submission_metadata.json``: each user's
    id and e-mail, for the roster (a ValueError when the file is not Gradescope's)."""
    try:
        users = json.loads(Path(metadata).read_text(encoding="utf-8"))["users"]
        names = [str(user[key]) for user in users for key in ("id", "email") if user.get(key) not in (None, "")]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{metadata} is not Gradescope's submission metadata ({type(error).__name__})") from None
    if not names:
        raise ValueError(f"{metadata} names no submitter")
    return names


def build_zip(out: str | Path, week: int, *, seed: int, timeout: float = 30.0, secret: str | None = None,
              roster: str | Path | None = None, variants: str = "off",
              hidden_visibility: str = "after_due_date") -> Path:
    """Write the autograder zip of problem set ``week`` to ``out``; returns its path. ``variants``
    "student" (with ``roster``, copied into the zip as ``roster.csv``) or "class": each submission is
    graded against its submitters' variants (``submitters``), drawn from ``secret``.
    ``hidden_visibility``: when students see the test of the hidden cases (``results``)."""
    from . import syllabus

    exercises = syllabus.problem_set(week)
    out = Path(out)
    if out.suffix != ".zip":
        raise ValueError(f"course gradescope: {out} should end in .zip (the file Gradescope takes)")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        vendoring.copy_package(root / "python")
        quoted = " ".join(f"'{item}'" for item in vendoring.requirements())
        (root / "setup.sh").write_text(SETUP.format(requirements=quoted), encoding="utf-8")
        secret_argument = "--secret \"$root/source/secret.txt\"" if secret is not None else ""
        variants_argument = "" if variants == "off" else (
            f"--variants {variants} --metadata \"$root/submission_metadata.json\""
            + (" --roster \"$root/source/roster.csv\"" if variants == "student" else ""))
        if variants == "student":
            (root / "roster.csv").write_bytes(Path(roster).read_bytes())
        (root / "run_autograder").write_text(RUN_AUTOGRADER.format(week=week, seed=seed, timeout=timeout,
                                                                   secret=secret_argument, variants=variants_argument,
                                                                   hidden_visibility=hidden_visibility),
                                             encoding="utf-8")
        if secret is not None:
            (root / "secret.txt").write_text(secret + "\n", encoding="utf-8")
        config = {"problem_set": week, "exercises": exercises, "points": syllabus.points(exercises), "seed": seed,
                  "timeout_s": timeout, "hidden_cases": secret is not None, "variants": variants}
        (root / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, str(path.relative_to(root)))
                    executable = path.name in ("setup.sh", "run_autograder")
                    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, path.read_bytes())
    return out
