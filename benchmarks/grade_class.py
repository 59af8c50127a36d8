"""Grading a class of stand-in students with one command, timed.

    python benchmarks/grade_class.py [--students 30] [--out /tmp/npformer-class] [--variants]

Builds a class from the repository's lessons (a source checkout: the instructor edition is needed):
a quarter of the students complete (the published solutions), a quarter partial (lessons 2-8
done), a quarter with classic mistakes (three backward passes wrong), a quarter untouched (the
student edition). Then times ``npformer course grade`` on it with an instructor's secret (three
hidden cases per exercise), and prints the totals by kind of student and the seconds taken.
``--variants``: graded with each student's own variants (a roster of the class's folders), on the
exercises that have variants: the stand-ins hand in the lessons' forms, so every kind scores 0.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
MISTAKES = {  # lesson file, function, a classic mistake as its body
    ("03_softmax_and_cross_entropy.py", "softmax_backward"):
        "    p = np.exp(x - x.max(axis=-1, keepdims=True))\n    p /= p.sum(axis=-1, keepdims=True)\n"
        "    return dout * p * (1 - p)\n",
    ("04_layer_normalization.py", "layernorm_backward"):
        "    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)\n"
        "    x_hat = (x - x.mean(axis=-1, keepdims=True)) * rstd\n    g = dout * gamma\n"
        "    dx = rstd * (g - g.mean(axis=-1, keepdims=True))\n    D = x.shape[-1]\n"
        "    return dx, (dout * x_hat).reshape(-1, D).sum(0), dout.reshape(-1, D).sum(0)\n",
    ("02_linear_and_relu.py", "linear_backward"):
        "    return dout @ W.T, x.reshape(-1, x.shape[-1]).T @ dout.reshape(-1, dout.shape[-1]), dout.sum(axis=0)\n",
}


def _replace_solution(path: Path, function: str, body: str) -> None:
    text = path.read_text(encoding="utf-8")
    begin = text.index("### BEGIN SOLUTION\n", text.index(f"def {function}(")) + len("### BEGIN SOLUTION\n")
    end = text.index("    ### END SOLUTION", begin)
    path.write_text(text[:begin] + body + text[end:], encoding="utf-8")


def build_class(folder: Path, students: int) -> dict[str, str]:
    """``students`` folders under ``folder``; returns student -> kind."""
    from npformer.course import instructor_edition, student_edition

    complete, blank = folder / ".complete", folder / ".blank"
    instructor_edition(LESSONS, complete)
    student_edition(LESSONS, blank)
    kinds = {}
    for number in range(students):
        kind = ("complete", "partial", "mistakes", "untouched")[number % 4]
        name = f"student{number:02d}-{kind}"
        shutil.copytree(blank if kind in ("partial", "untouched") else complete, folder / name)
        if kind == "partial":
            for lesson in sorted(complete.glob("0[2-8]_*.py")):
                shutil.copyfile(lesson, folder / name / lesson.name)
        if kind == "mistakes":
            for (lesson, function), body in MISTAKES.items():
                _replace_solution(folder / name / lesson, function, body)
        kinds[name] = kind
    shutil.rmtree(complete)
    shutil.rmtree(blank)
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--out", default=None, help="where to build the class (default: a temporary folder)")
    parser.add_argument("--variants", action="store_true", help="grade with each student's own variants")
    args = parser.parse_args()
    folder = Path(args.out or tempfile.mkdtemp(prefix="npformer-class-"))
    submissions = folder / "submissions"
    submissions.mkdir(parents=True, exist_ok=True)
    kinds = build_class(submissions, args.students)
    secret = folder / "secret.txt"
    secret.write_text("a stand-in instructor's secret\n", encoding="utf-8")
    command = [sys.executable, "-m", "npformer", "course", "grade", str(submissions), "--out",
               str(folder / "grades.csv"), "--secret", str(secret), "--seed", "0"]
    if args.variants:
        roster = folder / "roster.csv"
        roster.write_text("student,submission\n" + "".join(f"{name},{name}\n" for name in kinds), encoding="utf-8")
        command += ["--roster", str(roster)]
    start = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    if finished.returncode != 0:
        print(finished.stdout + finished.stderr)
        return 1
    import csv
    rows = list(csv.DictReader((folder / "grades.csv").open()))
    by_kind: dict[str, list[int]] = {}
    for row in rows:
        by_kind.setdefault(kinds[row["student"]], []).append(int(row["total"]))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    print(f"{len(rows)} students graded in {seconds:.1f} s ({seconds / len(rows):.2f} s a student), "
          f"{os.cpu_count()} cores, {cpu}; max {rows[0]['max']} points")
    for kind, totals in sorted(by_kind.items()):
        print(f"  {kind:10s} {len(totals):2d} students, totals {sorted(set(totals))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
