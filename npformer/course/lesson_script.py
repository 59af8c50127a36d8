"""A lesson run as a script (``python 04_layer_normalization.py``): a table of its checks at the
end, and its exit status.

``check`` hands each report to ``remember``; when the script ends, ``script_table`` lists one verdict
per check (a mistake shown on purpose, ``strict=False``, says so and is not counted) and the script
exits with status 1 if one failed (``NPFORMER_GRADER=keep-going`` keeps status 0). Notebooks, tests
and interactive sessions are left alone.
"""

from __future__ import annotations

import atexit
import os
import sys

from .wire import Status

_SCRIPT_REPORTS: list[tuple] = []
_STOPPED: list[str] = []  # the error that ended the script before its end, if one did


def remember(report, strict: bool | None, from_script: bool) -> None:
    """Keep the checks of a lesson run as a script (not a notebook, not a test) for its last table."""
    if not from_script or "ipykernel" in sys.modules or sys.flags.interactive:
        return
    if not _SCRIPT_REPORTS:
        atexit.register(_finish_script)
        sys.excepthook = _stopped_by(sys.excepthook)
    _SCRIPT_REPORTS.append((report, strict is False))


def _stopped_by(previous):
    def hook(kind, error, trace):
        _STOPPED.append(f"{kind.__name__}: {str(error)[:200]}")
        previous(kind, error, trace)
    return hook


def script_table(reports: list[tuple]) -> str:
    """The exercises a script checked: one verdict each (a mistake shown on purpose says so)."""
    lines = ["", "exercises checked in this run:"]
    for report, on_purpose in reports:
        shown = on_purpose and report.failed
        lines.append(f"  {report.verdict}{'  (a mistake shown on purpose: not counted)' if shown else ''}")
    failed = sum(report.failed and not on_purpose for report, on_purpose in reports)
    todo = sum(report.status is Status.NOT_IMPLEMENTED for report, _ in reports)
    lines.append(f"{failed} failed, {todo} not implemented yet, "
                 f"{sum(report.passed for report, _ in reports)} passed")
    if _STOPPED:
        lines.append(f"the lesson stopped before its end ({_STOPPED[0]}): the exercises after that were not checked")
    return "\n".join(lines)


def _finish_script() -> None:
    print(script_table(_SCRIPT_REPORTS))
    failed = any(report.failed and not on_purpose for report, on_purpose in _SCRIPT_REPORTS)
    if _STOPPED:
        return  # Python exits with status 1 for the error already
    if failed and os.environ.get("NPFORMER_GRADER") != "keep-going":
        print("exit status 1: an exercise failed (NPFORMER_GRADER=keep-going keeps status 0)")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
