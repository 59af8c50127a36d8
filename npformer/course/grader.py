"""The autograder: a student's function, called with public inputs, against the reference.

``check("layernorm_backward", my_layernorm_backward)`` calls the student's function
on every case of the exercise (``exercises.EXERCISES``) and compares each returned
tensor with the reference's, and, for a backward pass, with the fourth-order finite
differences of the reference forward (``gradcheck.numerical_gradient``). A tensor
passes when its worst relative error ``|a - b| / (|a| + |b|)`` is below ``1e-6``
(the rule of ``gradcheck.report``); masks and counts must be equal. A failing tensor
gets a hint (``gradcheck.hints.diagnose`` and the exercise's own hints): off by a
constant factor, transposed, wrong sign, a missing sum over a broadcast axis,
gradient leaking into masked positions, repeated ids overwriting each other.

Each check grades the public cases (``exercises.EXERCISES``, the same every time) and an
unseen one, drawn with a new seed for every check (the report prints it; ``unseen_seed=``
repeats it). While the student's function runs, npformer's own answer to the exercise (its
``library`` functions, their fast twins, the reference, and for a gradient the finite
differences) is unavailable: a call to it stops the function, and the exercise fails with a
message that names what was called.

A stub that raises ``NotImplementedError`` is "not implemented yet"; any other
exception is reported as a failure with its message. ``check`` never raises for
the student's mistakes, so a lesson runs to the end whatever the student wrote,
unless ``NPFORMER_GRADER=strict`` asks it to raise on a failure (the tests run the
published lessons that way). Grading runs on NumPy, whatever the active backend.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy

from .. import backend, ops
from ..gradcheck.arguments import check_callable, check_int, check_known, check_type
from ..gradcheck.engine import numerical_gradient
from ..gradcheck.hints import diagnose
from ..gradcheck.report import DEFAULT_TOL, TensorCheck, _judge
from .exercises import EXERCISES, Case, Exercise

PASSED, FAILED, NOT_IMPLEMENTED = "passed", "FAILED", "not implemented yet"


class ExerciseFailed(AssertionError):
    """Raised by ``check`` under ``NPFORMER_GRADER=strict`` when an exercise fails."""


class UnknownExercise(KeyError, ValueError):
    """``check`` was given a name that no exercise has: a ``ValueError`` (bad input), and a
    ``KeyError`` as well, since ``EXERCISES[name]`` would raise one."""

    def __str__(self) -> str:
        return str(self.args[0])  # one line, not KeyError's quoted repr


class LibraryAnswerUsed(Exception):
    """Raised inside a student's function when it calls npformer's own answer to the exercise."""


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
    """The outcome of one exercise: ``status`` is "passed", "FAILED" or "not implemented yet"."""

    exercise: Exercise
    status: str
    rows: list[Row] = field(default_factory=list)
    message: str = ""
    unseen_seed: int | None = None
    reason: str = ""  # the verdict's short form of ``message``
    error: str = ""   # a failure that is an error, not a wrong answer: the class's grade sheet shows it

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def verdict(self) -> str:
        """One line: ``exercise layernorm_backward: passed (9 tensors in 3 cases)``."""
        name = self.exercise.name
        if self.status == NOT_IMPLEMENTED:
            return f"exercise {name}: {NOT_IMPLEMENTED}"
        cases = len({row.case for row in self.rows})
        if self.status == PASSED:
            return f"exercise {name}: {PASSED} ({len(self.rows)} tensors in {cases} cases)"
        wrong = sorted({row.tensor for row in self.rows if not row.passed})
        detail = f"{', '.join(wrong)} wrong" if wrong else (self.reason or self.message)
        return f"exercise {name}: {FAILED} ({detail})"

    def table(self) -> str:
        lines = [self.exercise.signature]
        if self.status == NOT_IMPLEMENTED:
            lines.append("  not implemented yet: write the function body, then run this cell again")
            return "\n".join(lines + [self.verdict])
        if self.message:
            lines.append(f"  {self.message}")
        if self.unseen_seed is not None:
            lines.append(f"  unseen cases drawn with seed {self.unseen_seed} "
                         f"(check(..., unseen_seed={self.unseen_seed}) draws them again)")
        if self.rows:
            header = ("case", "tensor", "shape", "against the reference", "against finite differences")
            cells = [header] + [(row.case, row.tensor, str(row.shape), _cell(row.reference),
                                 _cell(row.finite_differences)) for row in self.rows]
            widths = [max(len(cell[i]) for cell in cells) for i in range(len(header))]
            for cell in cells:
                lines.append("  " + "  ".join(text.ljust(width) for text, width in zip(cell, widths)).rstrip())
            for row in self.hints():
                lines.append(f"  hint for {row.tensor} ({row.case}): {row.hint}")
        return "\n".join(lines + [self.verdict])

    def hints(self) -> list[Row]:
        """One row per wrong tensor, for its hint: the first case whose hint names a mistake of this
        exercise, else the first case with a generic hint."""
        chosen: dict[str, Row] = {}
        for row in self.rows:
            if row.hint and (row.tensor not in chosen or (row.named and not chosen[row.tensor].named)):
                chosen[row.tensor] = row
        return list(chosen.values())

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


def _as_outputs(values: Any, count: int) -> tuple:
    """What a function returned, as a tuple of ``count`` outputs (one output stays whole, even a list)."""
    return tuple(values) if isinstance(values, (tuple, list)) and count > 1 else (values,)


def _call(exercise: Exercise, fn: Callable, inputs: dict) -> tuple:
    arguments = copy.deepcopy(inputs)  # the student's function may write into its inputs
    if exercise.call is not None:
        return exercise.call(fn, arguments)
    return _as_outputs(fn(*arguments.values()), len(exercise.outputs))


def library_answers(exercise: Exercise) -> dict[Any, str]:
    """The code objects of npformer's own answers to ``exercise`` -> their dotted names: its
    ``library`` functions and their fast twins (``npformer.ops.fast.<module>``), its reference,
    and for a gradient the finite differences (``gradcheck.engine.numerical_gradient``).
    ``exercise`` must be an ``Exercise`` (checked)."""
    check_type("library_answers", "exercise", exercise, Exercise, "an npformer.course.Exercise")
    functions = list(exercise.library) + [exercise.reference]
    if exercise.forward is not None:
        functions.append(numerical_gradient)
    for function in exercise.library:
        module = getattr(function, "__module__", "") or ""
        if module.startswith("npformer.ops.") and not module.startswith("npformer.ops.fast"):
            try:
                fast = importlib.import_module(module.replace("npformer.ops.", "npformer.ops.fast.", 1))
            except ImportError:
                continue
            if callable(getattr(fast, function.__name__, None)):
                functions.append(getattr(fast, function.__name__))
    # A decorated function (the fast forms wear ``threads.holding_blas``) is known by its own code,
    # not by the wrapper's, which every decorated function shares.
    functions = [inspect.unwrap(function) for function in functions]
    return {function.__code__: f"{function.__module__}.{function.__qualname__}"
            for function in functions if hasattr(function, "__code__")}


def _call_without_library(exercise: Exercise, fn: Callable, inputs: dict) -> tuple:
    """``_call`` with npformer's own answers unavailable: a call to one raises ``LibraryAnswerUsed``
    (and is remembered, should the student's code catch it)."""
    answers, called = library_answers(exercise), []

    def refuse(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in answers:
            called.append(answers[frame.f_code])
            raise LibraryAnswerUsed(answers[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(refuse)
    try:
        result = _call(exercise, fn, inputs)
    finally:
        sys.setprofile(previous)
    if called:
        raise LibraryAnswerUsed(called[0])
    return result


def _finite_differences(exercise: Exercise, case: Case) -> dict[str, numpy.ndarray]:
    """The gradient of ``sum(forward(inputs) * dout)`` for each ``wrt`` input."""
    forward_inputs = {key: value for key, value in case.inputs.items() if key not in ("dout", "dloss")}
    dout = case.inputs.get("dout", case.inputs.get("dloss"))
    arrays = {key: numpy.array(value, dtype=numpy.float64) if key in exercise.wrt else value
              for key, value in forward_inputs.items()}
    return {key: numerical_gradient(lambda: numpy.asarray(exercise.forward(*arrays.values())), arrays[key],
                                    numpy.asarray(dout)) for key in exercise.wrt}


def _compare(exercise: Exercise, case: Case, name: str, got: Any, expected: Any,
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
        row = Row(case.label, name, shape, _judge("", [(name, shape, got, expected, "")], DEFAULT_TOL).results[0])
        if numeric is not None:
            row.finite_differences = _judge("", [(name, shape, got, numeric, "")], DEFAULT_TOL).results[0]
    if not row.passed:
        hints = [_try_hint(hint, got, expected, case.inputs, name) for hint in exercise.hints]
        generic = _mask_hint(got, expected) if expected.dtype == bool else diagnose(got, expected)
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


def check(name: str, student_fn: Callable, seed: int = 0, strict: bool | None = None,
          unseen_seed: int | None = None) -> ExerciseReport:
    """Grade ``student_fn`` for the exercise ``name`` (see ``exercises.EXERCISES``).

    Returns an ``ExerciseReport``: print it for the table, one row per returned
    tensor per case, and its verdict line; ``report.passed`` is True when every
    tensor of every case agrees. ``seed`` draws the public cases; ``unseen_seed`` the
    unseen ones (None: a new seed, printed in the report). ``strict``: raise
    ``ExerciseFailed`` on a failure; None (the default) follows ``NPFORMER_GRADER=strict``.
    A lesson that shows a mistake on purpose passes ``strict=False``.

    Checked before any grading (the only errors ``check`` raises for its arguments): ``name`` an
    exercise (``UnknownExercise``, a ``ValueError`` and a ``KeyError``, offering the close names),
    ``student_fn`` callable, ``seed`` an int >= 0, ``unseen_seed`` an int >= 0 or None, ``strict``
    a bool or None. A function that takes the wrong arguments is the student's mistake: graded
    as a failure, not raised.
    """
    _check_arguments(name, student_fn, seed, strict, unseen_seed)
    exercise = EXERCISES[name]
    active = backend.get_backend()
    backend.set_backend("numpy")  # the student writes NumPy, and the cases are NumPy arrays
    try:
        with ops.using("textbook"):  # the references: npformer's textbook ops, whatever set is active
            report = _grade(exercise, student_fn, seed, unseen_seed)
    finally:
        backend.set_backend(active)
    if strict is None:
        strict = os.environ.get("NPFORMER_GRADER") == "strict"
    if report.status == FAILED and strict:
        raise ExerciseFailed(str(report))
    return report


def _check_arguments(name: Any, student_fn: Any, seed: Any, strict: Any, unseen_seed: Any) -> None:
    """The checks ``check`` makes before any grading (see its docstring)."""
    check_known("check", "name", name, EXERCISES, error=UnknownExercise)
    check_callable("check", "student_fn", student_fn)
    check_int("check", "seed", seed)
    check_int("check", "unseen_seed", unseen_seed, optional=True)
    if strict is not None:
        check_type("check", "strict", strict, bool, "a bool or None")


def _cases(exercise: Exercise, seed: int, unseen_seed: int | None) -> tuple[list[Case], int | None]:
    """The public cases, then the unseen ones (labelled "unseen: ..."), and the seed they were drawn with."""
    cases = list(exercise.cases(numpy.random.default_rng(seed)))
    if exercise.unseen is None:
        return cases, None
    if unseen_seed is None:
        unseen_seed = int(numpy.random.SeedSequence().entropy % 1_000_000)
    unseen = exercise.unseen(numpy.random.default_rng(unseen_seed))
    return cases + [Case(f"unseen: {case.label}", case.inputs) for case in unseen], unseen_seed


def _grade(exercise: Exercise, student_fn: Callable, seed: int, unseen_seed: int | None) -> ExerciseReport:
    cases, unseen_seed = _cases(exercise, seed, unseen_seed)
    report = ExerciseReport(exercise, PASSED, unseen_seed=unseen_seed)
    for case in cases:
        expected = _call(exercise, exercise.reference, case.inputs)
        try:
            got = _call_without_library(exercise, student_fn, case.inputs)
        except NotImplementedError:
            report.status = NOT_IMPLEMENTED
            break
        except LibraryAnswerUsed as used:
            report.status = FAILED
            report.reason = f"calls npformer's own answer, {used}"
            report.error = "calls npformer's answer"
            report.message = (f"calls {used}, npformer's own answer to this exercise: it is unavailable while "
                              "your function is graded; write the computation yourself, with NumPy")
            break
        except Exception as error:  # the student's bug, reported rather than raised
            where = traceback.extract_tb(error.__traceback__)[-1]
            report.status = FAILED
            report.error = f"raised {type(error).__name__}"
            report.message = (f"case {case.label}: raised {type(error).__name__}: {error} "
                              f"(line {where.lineno}: {where.line})")
            break
        if len(got) != len(exercise.outputs):
            report.status = FAILED
            report.message = (f"case {case.label}: returned {len(got)} value(s), expected "
                              f"{len(exercise.outputs)}: {', '.join(exercise.outputs)}")
            break
        numeric = _finite_differences(exercise, case) if exercise.forward is not None else {}
        for output, got_tensor, expected_tensor, wrt in zip(
                exercise.outputs, got, expected, exercise.wrt or (None,) * len(exercise.outputs)):
            report.rows.append(_compare(exercise, case, output, got_tensor, expected_tensor, numeric.get(wrt)))
    if report.status == PASSED and not all(row.passed for row in report.rows):
        report.status = FAILED
    return report
