"""How long each platform's autograder takes for one submission, per problem set.

    python benchmarks/autograders.py [--sets 1 3 13] [--nbgrader]

For each problem set: the Gradescope zip built with a secret (three hidden cases per exercise),
unpacked as Gradescope does, and ``run_autograder`` timed on a solved submission (the instructor
edition of the week's lessons); then the GitHub Classroom workflow's grading command on the same
submission. With ``--nbgrader``, also nbgrader's ``autograde`` of the week (the course folder's own
configuration: quick trainings), which runs every cell of the week's notebooks. Needs a source
checkout (the instructor edition) and, for ``--nbgrader``, the course extra.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}


def _run(command: list[str], cwd: Path, **env: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**ENVIRONMENT, **env})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def _npformer(*args: str) -> list[str]:
    return [sys.executable, "-m", "npformer", *args]


def measure(week: int, folder: Path, nbgrader: bool) -> dict[str, float]:
    from npformer.course import instructor_edition, nbgrader_course, syllabus

    lessons = list(syllabus.week(week).lessons)
    secret = folder / "secret.txt"
    secret.write_text("a stand-in instructor's secret\n")
    _run(_npformer("course", "gradescope", "autograder.zip", "--set", str(week), "--seed", "0", "--secret",
                   str(secret)), folder)
    root = folder / "autograder"
    (root / "source").mkdir(parents=True)
    _run(["unzip", "-q", str(folder / "autograder.zip"), "-d", str(root / "source")], folder)
    instructor_edition(LESSONS, root / "submission", only=lessons)
    seconds = {"gradescope": _run(["bash", str(root / "source" / "run_autograder")], folder,
                                  AUTOGRADER_ROOT=str(root), PYTHON=sys.executable)}
    seconds["classroom"] = _run(_npformer("course", "autograde", str(root / "submission"), "--set", str(week),
                                          "--seed", "0", "--format", "classroom", "--results",
                                          str(folder / "github_output")), folder)
    if nbgrader:
        import nbformat

        course = folder / "course"
        nbgrader_course.write_course(course, [week], lessons_dir=LESSONS)
        config = course / "nbgrader_config.py"
        config.write_text(config.read_text().replace("# c.CourseDirectory.db_students = [dict(id=\"ada\"), dict(id=\"bo\")]",
                                                     "c.CourseDirectory.db_students = [dict(id=\"solved\")]"))
        assignment = nbgrader_course.assignment_name(week)
        _run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], course)
        submitted = course / "submitted" / "solved" / assignment
        submitted.mkdir(parents=True)
        for released in sorted((course / "release" / assignment).glob("*.ipynb")):
            notebook = nbformat.read(released, as_version=4)
            source = nbformat.read(course / "source" / assignment / released.name, as_version=4)
            solutions = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in source.cells}
            for cell in notebook.cells:
                meta = cell.metadata.get("nbgrader", {})
                if meta.get("solution") and cell.cell_type == "code":
                    cell.source = "".join(line for line in solutions[meta["grade_id"]].splitlines(keepends=True)
                                          if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
            nbformat.write(notebook, submitted / released.name)
        seconds["nbgrader"] = _run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"], course)
    return seconds


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from npformer.course import syllabus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, nargs="*", default=None, help="problem sets (default: all)")
    parser.add_argument("--nbgrader", action="store_true", help="also time nbgrader's autograde of each week")
    args = parser.parse_args()
    sets = args.sets or [week for week, names in syllabus.problem_sets().items() if names]
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    print(f"{os.cpu_count()} cores, {cpu}; one solved submission per problem set, seconds")
    columns = ["gradescope", "classroom"] + (["nbgrader"] if args.nbgrader else [])
    print("| problem set | exercises | " + " | ".join(columns) + " |")
    print("|---:|---:|" + "---:|" * len(columns))
    for week in sets:
        with tempfile.TemporaryDirectory(prefix="npformer-autograders-") as folder:
            seconds = measure(week, Path(folder), args.nbgrader)
        print(f"| {week} | {len(syllabus.problem_set(week))} | " + " | ".join(f"{seconds[c]:.1f}" for c in columns) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
