"""How a gradient check is judged and shown: the relative error, the pass rule, the table.

The error of one tensor is its worst entry::

    rel_error = max_i |a_i - n_i| / max(|a_i| + |n_i|, 1e-12)

with ``a`` the analytic gradient and ``n`` the numeric one. A failing tensor's note
says what the mistake most likely is when its pattern is recognisable (``hints.py``). An entry passes
below ``tol = 1e-6``, or when ``|a_i - n_i|`` is at most ``1e-9`` of the
largest gradient entry of the check, below which float64 finite differences
cannot resolve anything. Only entries far smaller than the rest need that: an
entry of 1e-8 next to entries of 1 (a cancellation), or attention's key bias,
whose true gradient is exactly zero. The report counts them in its note. A
wrong gradient is off by a fraction of the gradient itself and still fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy

from .. import backend
from .hints import diagnose

DEFAULT_TOL = 1e-6
RESOLUTION = 1e-9  # |a - n| below RESOLUTION * (largest gradient entry) is beyond finite differences
_DENOMINATOR_FLOOR = 1e-12


@dataclass
class TensorCheck:
    """The outcome for one input tensor of one op."""

    op: str
    tensor: str
    shape: tuple
    max_rel_error: float
    passed: bool
    worst_index: tuple | None = None
    note: str = ""

    @classmethod
    def failed(cls, op: str, tensor: str, shape: tuple, note: str) -> "TensorCheck":
        """A row that fails before any comparison: a gradient missing, of the wrong shape or count."""
        return cls(op, tensor, shape, float("inf"), False, None, note)


@dataclass(repr=False)
class GradcheckReport:
    """Every tensor checked, with a readable table (``str(report)``)."""

    results: list[TensorCheck] = field(default_factory=list)
    tol: float = DEFAULT_TOL
    method: str = ""  # how the numeric side was taken, when not entry by entry (said once, under the table)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(result.passed for result in self.results)

    @property
    def failures(self) -> list[TensorCheck]:
        return [result for result in self.results if not result.passed]

    def extend(self, other: "GradcheckReport") -> None:
        self.results.extend(other.results)
        self.method = self.method or other.method

    def table(self) -> str:
        header = ("op", "tensor", "shape", "max rel error", "result")
        rows = [
            (
                r.op,
                r.tensor,
                str(r.shape),
                f"{r.max_rel_error:.2e}",
                ("pass" if r.passed else "FAIL") + (f" ({r.note})" if r.note else ""),
            )
            for r in self.results
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
        lines = []
        for row in [header, tuple("-" * w for w in widths) + ("------",), *rows]:
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            lines.append("  ".join(cells + [row[-1]]))
        n_failed = len(self.failures)
        verdict = "all passed" if self.passed else f"{n_failed} FAILED"
        method = f" ({self.method})" if self.method else ""
        lines.append(f"{len(self.results)} tensors checked{method}, tolerance {self.tol:.0e}: {verdict}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__  # assertion messages and notebooks show the table


def _host(values: Any) -> numpy.ndarray:
    return backend.to_numpy(values).astype(numpy.float64)


def _entry_errors(analytic: numpy.ndarray, numeric: numpy.ndarray,
                  floor: float = _DENOMINATOR_FLOOR) -> numpy.ndarray:
    """Elementwise ``|a - n| / max(|a| + |n|, floor)``; a NaN (a NaN gradient) becomes infinite."""
    errors = numpy.abs(analytic - numeric) / numpy.maximum(
        numpy.abs(analytic) + numpy.abs(numeric), max(floor, _DENOMINATOR_FLOOR)
    )
    return numpy.where(numpy.isnan(errors), numpy.inf, errors)  # a NaN gradient never passes


def _worst(errors: numpy.ndarray, checked: numpy.ndarray) -> tuple[float, tuple | None]:
    """The largest of ``errors`` over the ``checked`` entries, and where it occurs."""
    if not checked.any():
        return 0.0, None
    errors = numpy.where(checked, errors, -1.0)
    worst = int(numpy.argmax(errors))
    where = tuple(int(i) for i in numpy.unravel_index(worst, errors.shape))
    return float(errors.reshape(-1)[worst]), where


def relative_error(analytic: Any, numeric: Any) -> tuple[float, tuple | None]:
    """Worst elementwise ``|a - n| / max(|a| + |n|, 1e-12)`` and where it occurs.

    Entries where ``numeric`` is NaN were not computed and are skipped; a NaN in
    ``analytic`` counts as an infinite error. The two must have the same shape (checked:
    broadcasting would compare the wrong entries).
    """
    analytic, numeric = _host(analytic), _host(numeric)
    if analytic.shape != numeric.shape:
        raise ValueError(f"relative_error: analytic must have the shape of numeric {numeric.shape}, "
                         f"got shape {analytic.shape}")
    return _worst(_entry_errors(analytic, numeric), ~numpy.isnan(numeric))


def judge(op: str, pairs: list[tuple[str, tuple, Any, Any, str]], tol: float) -> GradcheckReport:
    """Report rows for ``(tensor, shape, analytic, numeric, note)`` pairs checked together.

    An entry passes when its relative error is below ``tol``, or when
    ``|a - n| <= RESOLUTION * G`` with ``G`` the largest numeric gradient entry of
    the whole check: below that, float64 finite differences cannot tell values
    apart. Only entries far smaller than the rest need it, such as an entry of
    1e-8 next to entries of 1 (a cancellation), or attention's key bias, whose
    true gradient is exactly zero (softmax ignores a shift shared by a whole row
    of scores). The note counts them. A wrong gradient is off by a fraction of
    the gradient itself, far above the resolution, and still fails.

    The error reported is the one that decides: ``|a - n| / max(|a| + |n|, F)`` with
    ``F = RESOLUTION * G / tol``, a relative error whose denominator never falls below
    a thousandth (at the default ``tol``) of the largest gradient entry. It is below
    ``tol`` exactly when the entry passes by either rule, so a passing row never shows
    an error above the tolerance (a zero gradient checked beside large ones shows 0,
    not 1).
    """
    hosts = [(_host(analytic), _host(numeric)) for _, _, analytic, numeric, _ in pairs]
    largest = max((float(numpy.nanmax(numpy.abs(n), initial=0.0)) for _, n in hosts), default=0.0)
    resolution = RESOLUTION * largest
    report = GradcheckReport(tol=tol)
    for (tensor, shape, _, _, note), (analytic, numeric) in zip(pairs, hosts):
        checked = ~numpy.isnan(numeric)
        within_tol = _entry_errors(analytic, numeric) < tol
        error, worst = _worst(_entry_errors(analytic, numeric, resolution / tol), checked)
        within_resolution = numpy.abs(analytic - numeric) <= resolution
        passed = bool(numpy.all((within_tol | within_resolution)[checked]))
        unresolved = int(numpy.sum((within_resolution & ~within_tol)[checked]))
        if unresolved:
            note = ", ".join(filter(None, [note, f"{unresolved} entries within resolution {resolution:.0e}"]))
        if not passed:  # the diagnosis reads the checked entries only (all, or a flat sample)
            hint = diagnose(analytic, numeric) if checked.all() else diagnose(analytic[checked], numeric[checked])
            note = "; ".join(filter(None, [note, hint]))
        report.results.append(TensorCheck(op, tensor, shape, error, passed, worst, note))
    return report
