"""How long each lesson takes to run as a script, in quick mode and in full mode.

    python benchmarks/lesson_times.py --mode quick            # all lessons, NPFORMER_QUICK=1
    python benchmarks/lesson_times.py --mode full --lessons 13 26
    python benchmarks/lesson_times.py --table                 # the README's table, from the record

Each lesson runs alone, one after the other, in a fresh Python process in an empty temporary
folder (its `runs/` and figures land there), with `MPLBACKEND=Agg`. The wall time of the process
is recorded in `benchmarks/lesson_times.json` with the CPU, the core count and the date; a
lesson that fails is recorded as failed, not timed. Lessons 17 and 26 in full mode train on
Tatoeba when the folder holds `data/fra-eng/fra.txt`, where a student's `npformer data tatoeba` puts
it (this script links the repository's shared copy there, `$NPFORMER_SHARED/data/fra-eng/fra.txt` or
`../shared/...`, when there is one), and on the embedded corpus otherwise; the record says which.
Run it on a quiet machine: the times are only as good as the machine is idle.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "lesson_times.json"


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def lesson_files(numbers: list[int] | None) -> list[Path]:
    """The lesson scripts, all or those whose number is in ``numbers``."""
    files = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    return [path for path in files if numbers is None or int(path.name[:2]) in numbers]


def time_lesson(path: Path, quick: bool) -> dict:
    """Run one lesson in a fresh process in an empty folder; its wall time and whether it passed."""
    env = dict(os.environ, MPLBACKEND="Agg", NPFORMER_QUICK="1" if quick else "0")
    shared = Path(os.environ.get("NPFORMER_SHARED", ROOT.parent / "shared")) / "data" / "fra-eng" / "fra.txt"
    with tempfile.TemporaryDirectory(prefix="lesson-time-") as folder:
        env["NPFORMER_FIGURES"] = str(Path(folder) / "figures")
        if shared.is_file():  # where `npformer data tatoeba` puts it, in the folder the lesson runs in
            (Path(folder) / "data" / "fra-eng").mkdir(parents=True)
            (Path(folder) / "data" / "fra-eng" / "fra.txt").symlink_to(shared.resolve())
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(path)], cwd=folder, env=env,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
    entry = {"seconds": round(seconds, 1), "passed": done.returncode == 0}
    if "no tatoeba file" in done.stdout.lower():
        entry["data"] = "embedded corpus (no Tatoeba file)"
    if done.returncode != 0:
        entry["error"] = (done.stderr or done.stdout).strip().splitlines()[-1:]
    return entry


def table(record: dict) -> str:
    """A Markdown table of the recorded times, one row per lesson."""
    quick, full = record.get("quick", {}), record.get("full", {})
    lines = ["| lesson | quick mode (s) | full mode (s) |", "|---|---:|---:|"]
    for name in sorted(set(quick) | set(full)):
        cells = []
        for mode in (quick, full):
            entry = mode.get(name)
            cells.append("-" if entry is None else f"{entry['seconds']:.0f}" if entry["passed"] else "failed")
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    totals = [sum(entry["seconds"] for entry in mode.values() if entry["passed"]) for mode in (quick, full)]
    lines.append(f"| all | {totals[0]:.0f} | {totals[1]:.0f} |")
    machine = record.get("machine", {})
    lines.append(f"\nMeasured by `python benchmarks/lesson_times.py` on {machine.get('cpu', '?')}, "
                 f"{machine.get('cores', '?')} cores, {machine.get('date', '?')}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["quick", "full"], help="time the lessons in this mode")
    parser.add_argument("--lessons", type=int, nargs="+", help="only these lesson numbers")
    parser.add_argument("--table", action="store_true", help="print the recorded times as a Markdown table")
    args = parser.parse_args(argv)
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    if args.mode:
        times = record.setdefault(args.mode, {})
        for path in lesson_files(args.lessons):
            entry = time_lesson(path, quick=args.mode == "quick")
            times[path.stem] = entry
            print(f"{args.mode:5s} {path.stem:40s} {entry['seconds']:7.1f} s"
                  + ("" if entry["passed"] else f"  FAILED {entry['error']}"), flush=True)
            record["machine"] = {"cpu": cpu_name(), "cores": os.cpu_count(),
                                 "date": datetime.date.today().isoformat(), "python": platform.python_version()}
            RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    if args.table:
        print(table(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
