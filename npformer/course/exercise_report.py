"""What ``check`` and ``course grade`` say about one exercise: a row per returned tensor and case
(against the answer and, for a gradient, finite differences), its hint, the verdict, the steps of a
derivation, and the table a student reads.

``compare`` makes one row: a tensor passes when its worst relative error ``|a - b| / (|a| + |b|)`` is
below ``1e-6`` (``gradcheck.report``'s rule); masks and counts must be equal. A failing tensor gets a
hint: the exercise's own (a mistake only it can make) or ``gradcheck.hints.diagnose``'s (a constant
factor, a transpose, a sign, a missing sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy

from ..gradcheck.hints import diagnose
from ..gradcheck.report import DEFAULT_TOL, TensorCheck, judge
from .exercises import DERIVATIONS, TEXTBOOK, Case, Exercise
from .hints import FIX_AFTER, fix_of
from .replies import is_hidden
from .variants import timed
from .wire import Status

TEXTBOOK_SHOWN = "now that yours passes: "  # before the compact form a passing check prints


@dataclass
class Row:
    """One returned tensor of one case: against the reference and (gradients) finite differences."""

    case: str
    tensor: str
    shape: tuple
    reference: TensorCheck
    finite_differences: TensorCheck | None = None
    hint: str = ""
    named: bool = False  # the hint names a mistake of this exercise (not a generic pattern)

    @property
    def passed(self) -> bool:
        return self.reference.passed and (self.finite_differences is None or self.finite_differences.passed)


@dataclass(repr=False)
class ExerciseReport:
    """The outcome of one exercise: ``status`` is PASSED, NOT_IMPLEMENTED, WRONG or how it failed
    otherwise (``wire.Status``), said on the grade sheet with ``detail`` ("ZeroDivisionError")."""

    exercise: Exercise
    status: Status
    rows: list[Row] = field(default_factory=list)
    message: str = ""
    unseen_seed: int | None = None
    hidden: int = 0   # the instructor's hidden cases among the rows (``course grade --secret``)
    printed: str = ""  # the first public case's printing, to be shown
    printed_total: int = 0
    printed_hidden: int = 0  # of printed_total, what the hidden cases printed (never shown)
    stopped_at: str = ""     # the label of the case whose reply ended the grading, if one did
    steps: list = field(default_factory=list)  # the derivation's steps' reports (``check(..., steps=...)``)
    reason: str = ""  # the verdict's short form of ``message``
    detail: str = ""  # what the grade sheet says after the status's words (``Status.said``)
    # the hints' second tier (``hints.Hint.fix``): None never mentioned (a class's grade sheet), False
    # offered (``check``: on request or after ``hints.FIX_AFTER`` failed checks), True shown
    reveal: bool | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def failed(self) -> bool:
        """Neither passed nor still a stub: a wrong answer, or an error."""
        return self.status not in (Status.PASSED, Status.NOT_IMPLEMENTED)

    @property
    def verdict(self) -> str:
        """One line: ``exercise layernorm_backward: passed (9 tensors in 3 cases)``."""
        name = self.exercise.name
        if self.status is Status.NOT_IMPLEMENTED:
            return f"exercise {name}: not implemented yet"
        cases = len({row.case for row in self.rows})
        if self.passed:
            return f"exercise {name}: passed ({len(self.rows)} tensors in {cases} cases)"
        wrong = sorted({row.tensor for row in self.rows if not row.passed and not is_hidden(row.case)})
        failed_hidden = not all(self.hidden_verdicts().values())
        detail = (f"{', '.join(wrong)} wrong" if wrong else self.reason or self.message
                  or ("wrong on a hidden case" if failed_hidden else ""))
        step = self.first_wrong_step()
        if step is not None:
            detail += f"; first wrong step: {step.exercise.name}"
        return f"exercise {name}: FAILED ({detail})"

    def hidden_verdicts(self) -> dict[str, bool]:
        """Each hidden case graded, by label (``hidden 2``): whether it passed. All a report ever
        says of one."""
        verdicts: dict[str, bool] = {}
        for row in self.rows:
            if is_hidden(row.case):
                verdicts[row.case] = verdicts.get(row.case, True) and row.passed
        if is_hidden(self.stopped_at):
            verdicts[self.stopped_at] = False
        return verdicts

    def first_wrong_step(self) -> ExerciseReport | None:
        """The first of the derivation's steps that fails (None: none given, or all pass)."""
        return next((step for step in self.steps if not step.passed), None)

    def table(self, hidden_rows: bool = True) -> str:
        """The report: the signature, the notes, one row per tensor and public case, the hints, each
        hidden case's pass or FAIL, the verdict. A hidden case never shows its shapes, errors or
        hints. ``hidden_rows=False`` leaves out the hidden cases' verdicts too (Gradescope shows them
        in a test of their own, after the due date)."""
        lines = [self.exercise.signature]
        if self.status is Status.NOT_IMPLEMENTED:
            lines.append("  not implemented yet: write the function body, then run this cell again")
            return "\n".join(lines + [self.verdict])
        if self.message:
            lines.append(f"  {self.message}")
        if self.unseen_seed is not None:
            lines.append(f"  unseen cases drawn with seed {self.unseen_seed} "
                         f"(check(..., unseen_seed={self.unseen_seed}) draws them again)")
        if self.hidden:
            lines.append(f"  {self.hidden} hidden cases of your instructor's (their inputs are not shown)")
        if self.printed:
            lines.append(f"  your function printed: {self.printed}")
        rows = [row for row in self.rows if not is_hidden(row.case)]
        if rows:
            header = ("case", "tensor", "shape", "against the reference", "against finite differences")
            cells = [header] + [(row.case, row.tensor, str(row.shape), _cell(row.reference),
                                 _cell(row.finite_differences)) for row in rows]
            if self.exercise.variant:  # the reference is the finite differences of the variant's forward
                cells = [("case", "tensor", "shape", "against finite differences of your variant's forward")] + [
                    cell[:4] for cell in cells[1:]]
            widths = [max(len(cell[i]) for cell in cells) for i in range(len(cells[0]))]
            for cell in cells:
                lines.append("  " + "  ".join(text.ljust(width) for text, width in zip(cell, widths)).rstrip())
            lines += [self._hint_line(row, "  ") for row in self.hints()]
            lines += self._fix_offer(self.hints())
        verdicts = self.hidden_verdicts()
        if hidden_rows and verdicts:
            lines.append("  hidden cases: " + ", ".join(f"{case} {'passed' if passed else 'FAIL'}"
                                                        for case, passed in verdicts.items()))
        lines += self._derivation_lines()
        return "\n".join(lines + [self.verdict])

    def _derivation_lines(self) -> list[str]:
        """The steps of a derivation: each one's verdict, the first wrong one's hints; once the exercise
        passes, npformer's textbook form of it."""
        name, lines = self.exercise.name, []
        if self.steps:
            lines.append("  the derivation's steps:")
            lines += [f"    {index}. {step.verdict}" for index, step in enumerate(self.steps, 1)]
            step = self.first_wrong_step()
            if step is not None:
                lines.append(f"  first wrong step: {step.exercise.name} ({step.exercise.signature})")
                lines += [step._hint_line(row, "    ") for row in step.hints()]
                lines += step._fix_offer(step.hints(), "    ")
                if step.message:
                    lines.append(f"    {step.message}")
        elif self.failed and name in DERIVATIONS:
            names = ", ".join(DERIVATIONS[name])
            lines.append(f"  derive it in steps ({names}): check(\"{name}\", {name}, steps=({names})) "
                         "names the first wrong one")
        if self.passed and name in TEXTBOOK and self.first_wrong_step() is None:
            whose = "the lesson's form (yours is a variant of it)" if self.exercise.variant else "npformer's form"
            lines.append(f"  {whose}, {TEXTBOOK_SHOWN}{TEXTBOOK[name]}")
        return lines

    def _hint_line(self, row: Row, indent: str) -> str:
        """A wrong tensor's hint: its first tier, and its second when the report reveals fixes."""
        line = f"{indent}hint for {row.tensor} ({row.case}): {row.hint}"
        return f"{line}\n{indent}  the fix: {fix_of(row.hint)}" if self.reveal and fix_of(row.hint) else line

    def _fix_offer(self, rows: list[Row], indent: str = "  ") -> list[str]:
        """How to see the fix that a hint holds back (only where ``check`` offers it)."""
        if self.reveal is False and any(fix_of(row.hint) for row in rows):
            return [f"{indent}(reason from the hint first; check(..., reveal=True), or {FIX_AFTER} failed checks "
                    "of this exercise in one session (a notebook's kernel: a script run starts afresh), also "
                    "names the fix)"]
        return []

    def hints(self) -> list[Row]:
        """One row per wrong tensor, for its hint: the first public case whose hint names a mistake
        of this exercise, else the first public case with a generic hint (a hidden case gives none)."""
        chosen: dict[str, Row] = {}
        for row in self.rows:
            if not row.hint or is_hidden(row.case):
                continue
            if row.tensor not in chosen or (row.named and not chosen[row.tensor].named):
                chosen[row.tensor] = row
        return list(chosen.values())

    def with_fixes(self) -> str:
        """The report with its hints' second tier shown, as ``check(..., reveal=True)`` prints it."""
        steps = [replace(step, reveal=True) for step in self.steps]
        return replace(self, reveal=True, steps=steps).table()

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__  # a notebook cell ending in check(...) shows the table


def _cell(check: TensorCheck | None) -> str:
    if check is None:
        return "-"
    if not numpy.isfinite(check.max_rel_error):
        return f"FAIL ({check.note})" if check.note else "FAIL"
    where = f" at {check.worst_index}" if not check.passed and check.worst_index else ""
    return f"{'pass' if check.passed else 'FAIL'} {check.max_rel_error:.1e}{where}"


def compare(exercise: Exercise, case: Case, name: str, got: Any, expected: Any,
             numeric: numpy.ndarray | None) -> Row:
    expected = numpy.asarray(expected)
    shape = tuple(expected.shape)
    try:
        got = numpy.asarray(got, dtype=bool if exercise.exact and expected.dtype == bool else numpy.float64)
    except (TypeError, ValueError):
        failed = TensorCheck.failed("", name, shape, f"not an array of numbers: {type(got).__name__}")
        return Row(case.label, name, shape, failed)
    if got.shape != shape:
        row = Row(case.label, name, shape, TensorCheck.failed("", name, shape, f"shape {got.shape}"))
    elif exercise.exact:
        equal = got == expected
        worst = None if equal.all() else tuple(int(i) for i in numpy.argwhere(~equal)[0])
        row = Row(case.label, name, shape, TensorCheck("", name, shape, 0.0 if worst is None else 1.0,
                                                       worst is None, worst))
    else:
        tol = timed.TOLERANCE if timed.is_timed(case.label) else DEFAULT_TOL
        row = Row(case.label, name, shape, judge("", [(name, shape, got, expected, "")], tol).results[0])
        if numeric is not None:
            row.finite_differences = judge("", [(name, shape, got, numeric, "")], tol).results[0]
    if not row.passed:
        hints = [_try_hint(hint, got, expected, case.inputs, name) for hint in exercise.hints]
        generic = (_mask_hint(got, expected) if got.dtype == bool and expected.dtype == bool
                   else diagnose(got, numpy.asarray(expected, dtype=numpy.float64)))
        row.hint = next((text for text in hints if text), "") or generic
        row.named = any(hints)
    return row


def _try_hint(hint: Callable, got: numpy.ndarray, expected: numpy.ndarray, inputs: dict, name: str) -> str:
    """An exercise's hint, or "" when its wrong formula does not even apply to these shapes."""
    try:
        with numpy.errstate(all="ignore"):
            return hint(got, expected, inputs, name)
    except (ValueError, IndexError, TypeError, ZeroDivisionError):
        return ""


def _mask_hint(got: numpy.ndarray, expected: numpy.ndarray) -> str:
    """What a wrong boolean mask allows or forbids (True = may attend)."""
    if got.shape != expected.shape:
        return f"shape {got.shape} instead of {expected.shape}: a mask must broadcast against (B, H, Tq, Tk)"
    allows, forbids = int((got & ~expected).sum()), int((~got & expected).sum())
    if allows and not forbids:
        return f"True at {allows} entries that must be False: lets a query see padding or the future"
    if forbids and not allows:
        return f"False at {forbids} entries that must be True: hides keys a query may see"
    return f"{allows} entries True that must be False and {forbids} False that must be True"
