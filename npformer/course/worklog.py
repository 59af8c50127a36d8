"""How long exercises take, measured on students who agree to it: a log of their checks, and its table.

The difficulty table's minutes follow a rule of thumb (``difficulty.MINUTES_RULE``). To measure them,
a student sets ``NPFORMER_WORKLOG=FILE`` before working: every ``check`` then appends one line to
FILE, ``{"time": seconds since the epoch, "exercise": name, "status": words}``. Nothing is recorded
without the variable, nothing is sent anywhere, and the line holds no code and no output: a student
who agrees hands the file in with their work.

``npformer course workload FILE...`` reads the logs. Walking one log in time order, the time between
two checks is counted for the exercise of the later one (the student was working towards it), each
gap capped at ``IDLE_MINUTES`` (a break, a night); an exercise's minutes are the time so counted up to
its first pass. A lesson run from the top checks every stub within seconds, so those first checks
count for almost nothing; deriving on paper before a check is counted, since it happens before the
check it leads to.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

ENV = "NPFORMER_WORKLOG"
IDLE_MINUTES = 20.0  # a longer gap between two checks is a break: it counts as this much


def record(report) -> None:
    """Append ``report``'s exercise and status to the student's log, when ``NPFORMER_WORKLOG`` names one."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"time": round(time.time(), 1), "exercise": report.exercise.name,
                       "status": report.status.words})
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError as error:  # a log that cannot be written never stops the lesson
        print(f"NPFORMER_WORKLOG: cannot write {path} ({error.strerror}); the check itself is unaffected")


def read(path: str | Path) -> list[dict]:
    """The entries of one log, in time order; a line that is not an entry is skipped."""
    entries = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            entries.append({"time": float(entry["time"]), "exercise": str(entry["exercise"]),
                            "passed": entry["status"] == "passed"})
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(entries, key=lambda entry: entry["time"])


def minutes_to_pass(entries: list[dict]) -> dict[str, float]:
    """Exercise -> the minutes one student spent on it up to its first pass (see the module's docstring)."""
    spent: dict[str, float] = {}
    done: dict[str, float] = {}
    for before, entry in zip([None] + entries[:-1], entries):
        name = entry["exercise"]
        if name in done:
            continue
        gap = 0.0 if before is None else min((entry["time"] - before["time"]) / 60.0, IDLE_MINUTES)
        spent[name] = spent.get(name, 0.0) + gap
        if entry["passed"]:
            done[name] = spent[name]
    return done


def workload_table(paths: list[str | Path], estimate=None) -> str:
    """A Markdown table: each exercise passed in some log, how many students, the median of their
    minutes, and ``estimate(name)`` (the difficulty rule's minutes) beside it; then the ratio of the
    measured total to the estimated one, over the exercises measured."""
    measured: dict[str, list[float]] = {}
    for path in paths:
        for name, minutes in minutes_to_pass(read(path)).items():
            measured.setdefault(name, []).append(minutes)
    rows = ["| exercise | students | minutes (median) | estimate |", "|---|---:|---:|---:|"]
    total_measured = total_estimated = 0.0
    for name, values in sorted(measured.items()):
        median = statistics.median(values)
        guess = estimate(name) if estimate is not None else None
        rows.append(f"| `{name}` | {len(values)} | {median:.0f} | {'-' if guess is None else guess} |")
        if guess:
            total_measured, total_estimated = total_measured + median, total_estimated + guess
    if total_estimated:
        rows.append(f"\nmeasured / estimated, over these exercises: {total_measured / total_estimated:.2f}")
    return "\n".join(rows)
