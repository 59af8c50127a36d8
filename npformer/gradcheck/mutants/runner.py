"""The catalogue and its runner: ``MUTANTS``, ``run_mutants`` and the table of what caught what.

``run_mutants`` applies each mutant in turn, runs its check (and the fast directional one for blocks
and models) and diagnoses the report; ``results_table`` prints one line per mutant and the catch rate
(the command ``npformer gradcheck --mutants``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from ..report import GradcheckReport
from .blocks import BLOCK_MUTANTS
from .checks import run_check
from .mutant import Mutant
from .ops import OP_MUTANTS
from .optimizer import OPTIMIZER_MUTANTS

MUTANTS: list[Mutant] = OP_MUTANTS + BLOCK_MUTANTS + OPTIMIZER_MUTANTS


@dataclass
class MutantResult:
    """What the checks said about one mutant."""

    mutant: Mutant
    caught: bool
    caught_fast: bool | None
    diagnosis: str
    report: GradcheckReport


def run_mutants(mutants: list[Mutant] | None = None, seed: int = 0, fast: bool = True,
                tol: float | None = None) -> list[MutantResult]:
    """Apply each mutant and run its check (and, for blocks and models, the fast directional check)."""
    results = []
    for mutant in mutants or MUTANTS:
        with mutant.applied():
            report = with_tolerance(run_check(mutant.check, seed), tol)
            fast_report = None
            if fast and mutant.check.partition(":")[0] in ("module", "model"):
                fast_report = with_tolerance(run_check(mutant.check, seed, directions=2), tol)
        diagnosis = _diagnosis(report)
        results.append(MutantResult(mutant, not report.passed,
                                    None if fast_report is None else not fast_report.passed, diagnosis, report))
    return results


def _hint(note: str) -> str:
    """The diagnosis part of a row's note (not the sampling or resolution remarks)."""
    parts = [part for part in note.split("; ") if not part.endswith(("entries", "direction(s)"))]
    return parts[-1] if parts else ""


def _diagnosis(report: GradcheckReport) -> str:
    """``"3 tensor(s) wrong (q, k, v); q: <its hint>"``: which tensors failed, and the most telling hint
    (a recognisable pattern before a mere "wrong at k of n entries")."""
    failures = report.failures
    if not failures:
        return ""
    names = [row.tensor for row in failures]
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    telling = sorted(failures, key=lambda row: _hint(row.note).startswith("wrong at") or not _hint(row.note))
    return f"{len(names)} tensor(s) wrong ({shown}); {telling[0].tensor}: {_hint(telling[0].note)}"


def with_tolerance(report: GradcheckReport, tol: float | None) -> GradcheckReport:
    """The same report judged with a looser tolerance (to show which mutants a weaker checker lets through)."""
    if tol is None:
        return report
    weakened = GradcheckReport(tol=tol)
    for row in report.results:
        passed = row.passed or (numpy.isfinite(row.max_rel_error) and row.max_rel_error < tol)
        weakened.results.append(type(row)(row.op, row.tensor, row.shape, row.max_rel_error, passed,
                                          row.worst_index, row.note))
    return weakened


def results_table(results: list[MutantResult]) -> str:
    """One line per mutant: caught or ESCAPED, by which check, fast check, and the diagnosis."""
    header = ("mutant", "where", "check", "caught", "fast", "diagnosis")
    rows = [(r.mutant.name, r.mutant.where, r.mutant.check, "yes" if r.caught else "ESCAPED",
             "-" if r.caught_fast is None else ("yes" if r.caught_fast else "ESCAPED"),
             r.diagnosis) for r in results]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
             for row in [header, *rows]]
    caught = sum(r.caught for r in results)
    fast = [r.caught_fast for r in results if r.caught_fast is not None]
    lines.append(f"caught {caught} of {len(results)} mutants ({100 * caught / len(results):.0f}%); "
                 f"the fast directional check caught {sum(fast)} of the {len(fast)} block and model mutants")
    return "\n".join(lines)
