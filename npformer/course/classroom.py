"""GitHub Classroom: the template repository of one problem set, and the result its workflow reports.

``npformer course classroom OUT --set N`` writes the folder to push as the assignment's template
repository: the student edition of week N's lessons, a README saying what to do,
``.github/workflows/classroom.yml``, and the grader itself in ``.npformer/`` (npformer's installed
package, without its trained models: npformer is installed from a clone, not from an index, so the
workflow brings its own copy and installs only NumPy, Matplotlib, tqdm, threadpoolctl and
cloudpickle; ``install`` names a pip requirement to install instead, such as a Git URL of your
copy). On every push the workflow grades the student's lessons with ``npformer course autograde .
--set N --format classroom`` and hands the result to GitHub Classroom's reporter action
(``classroom-resources/autograding-grading-reporter``), which reads it from the step's output
``result``: base64-encoded JSON, ``{"version": 1, "status", "max_score", "tests": [{"name",
"status", "score", "message", ...}]}``, the format of Classroom's own graders. Classroom's points
are the sum of the tests' scores out of ``max_score``, so an exercise counts its points, as on the
grade sheet.

A student can edit anything in their repository, the workflow and ``.npformer/`` included, and the
template carries no secret (the students can read it): its cases are the public ones and an unseen
one drawn with the seed written in the workflow. Take the points it reports as feedback, and grade
for the record by collecting the repositories at the deadline and running ``npformer course grade``
on them with your secret.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from .edition import lesson_files, student_source
from . import vendoring
from .grading import StudentGrades

VENDORED = ".npformer"  # the grader's own copy, in the template repository

WORKFLOW = """name: Autograding Tests
"on":
  - push
  - workflow_dispatch
  - repository_dispatch
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
      - name: Checkout code
        uses: actions/checkout@v4
      - name: Set up Python
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the grader's dependencies
        run: python -m pip install --quiet {install}
      - name: Problem set {week}
        id: npformer
        # --no-isolation: the student owns this repository, its workflow and this runner; no secret
        # is here to protect, so the kernel's isolation would guard nothing (grade for the record
        # with npformer course grade, isolated, on the collected repositories)
        run: {runner} course autograde . --set {week} --seed {seed} --timeout {timeout:g} --format classroom --results "$GITHUB_OUTPUT" --no-isolation
      - name: Autograding Reporter
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
          NPFORMER_RESULTS: "${{{{ steps.npformer.outputs.result }}}}"
        with:
          runners: npformer
"""

README = """# Problem set {week}: {title}

Lessons: {lessons}. Write each graded function where the lesson's stub raises `NotImplementedError`,
run the lesson's check cell until it passes, then commit and push: GitHub grades every push
(the "Actions" tab shows each exercise's report; {points} points in all).

Graded here: {exercises}.
"""


def results(grades: StudentGrades) -> dict:
    """One student's grades in the format of GitHub Classroom's graders (before base64)."""
    tests = [{"name": result.title,
              "status": "pass" if result.passed else "fail", "score": result.points,
              "max_score": result.max_points, "message": result.report, "line_no": 0,
              "test_code": f"check({result.exercise!r}, {result.exercise})"}
             for result in grades.results.values()]
    passed = all(result.passed for result in grades.results.values())
    return {"version": 1, "status": "pass" if passed else "fail", "max_score": grades.max_points, "tests": tests}


def output_line(grades: StudentGrades) -> str:
    """The line a step appends to ``$GITHUB_OUTPUT``: ``result=<base64 JSON>``."""
    encoded = base64.b64encode(json.dumps(results(grades)).encode()).decode()
    return f"result={encoded}\n"


def write_template(out: str | Path, week: int, *, seed: int, timeout: float = 30.0, install: str | None = None,
                   lessons_dir: str | Path | None = None) -> list[Path]:
    """Write the template repository of problem set ``week`` into ``out``; returns the files written.
    ``install``: a pip requirement for npformer that the workflow installs (a Git URL of your copy,
    ``git+https://github.com/ORG/npformer@TAG``); default: the installed package, copied into
    ``.npformer/``."""
    from . import syllabus

    chosen = syllabus.week(week)
    exercises = syllabus.problem_set(week)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in lesson_files(lessons_dir):
        if path.name[:2] in chosen.lessons:
            target = out / path.name
            target.write_text(student_source(path.read_text(encoding="utf-8"), path.name), encoding="utf-8")
            written.append(target)
    workflow = out / ".github" / "workflows" / "classroom.yml"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    if install is None:
        vendoring.copy_package(out / VENDORED)
        requirements = " ".join(f"'{item}'" for item in vendoring.requirements())
        runner = f"PYTHONPATH={VENDORED} python -m npformer"
    else:
        requirements, runner = f"'{install}' cloudpickle", "npformer"
    workflow.write_text(WORKFLOW.format(install=requirements, runner=runner, week=week, seed=seed, timeout=timeout),
                        encoding="utf-8")
    readme = out / "README.md"
    readme.write_text(README.format(week=week, title=chosen.title, lessons=", ".join(chosen.lessons),
                                    points=syllabus.points(exercises),
                                    exercises=", ".join(f"`{name}`" for name in exercises)), encoding="utf-8")
    return written + [workflow, readme]
