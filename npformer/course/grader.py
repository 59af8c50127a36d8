"""The autograder: a student's function, run where the answer is not, against the reference.

``check("layernorm_backward", my_layernorm_backward)`` grades the student's function on every case
of the exercise (``exercises.EXERCISES``):

1. this process draws the cases and computes, for each, the reference's outputs and (for a
   backward pass) the fourth-order finite differences of the reference forward
   (``gradcheck.numerical_gradient``);
2. the grading worker (``course.worker``, a separate process where npformer cannot be imported
   and no file can be opened) receives the function and the inputs only, calls it, and sends back
   what it returned;
3. this process compares each returned tensor with the reference and the finite differences
   (``exercise_report.compare``: a worst relative error below ``1e-6``, with a hint when it fails).

A student graded with variants (``course.variants``: their file, ``variant_file``, or ``variant=``)
gets the exercise as their variant poses it: its reference is the finite differences of the
variant's forward, and there is no other. Each check grades the public cases (the same every time),
an unseen one, drawn with a new seed for every check (the report prints it; ``unseen_seed=`` repeats
it), and, for a backward pass, a timed case (``variants.timed``): a function slower than a thousand
forward passes there fails, since a numerical gradient is. ``course grade`` adds the
instructor's hidden cases (``hidden_cases``), drawn from a secret that no report prints. Unseen and
hidden cases are ``separable``: no axis of length 1, no two axes of the same length.

A stub that raises ``NotImplementedError`` is "not implemented yet"; any other exception is
reported as a failure with its message and line. ``check`` never raises for the student's
mistakes, so a lesson runs to the end whatever the student wrote, unless ``NPFORMER_GRADER=strict``
asks it to raise on a failure (the tests run the published lessons that way). Grading runs on
NumPy, whatever the active backend.

Nothing the worker sends back is trusted: a reply whose fields are not of their kind fails the
exercise with a reason. Every text from the student's side (an exception's type and message, what
the function printed, a line of its source) is made printable (``inert.printable``) before it
reaches a report; a line is shown only from the student's own submitted text (``course grade``) or
from the checked function's own file (``check``), never from another path the student's code named.
Of an instructor's hidden case a report shows only whether it passed and, when it raised, the type
of a built-in exception: never its inputs, shapes, values, hints, message or printing.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from typing import Any, Callable

from ..gradcheck.arguments import check_callable, check_int, check_known, check_number, check_type
from .cases import Prepared, new_seed, outputs, prepare, prepared_public, unseen_case
from .inert import printable
from .exercises import DERIVATIONS, EXERCISES, Exercise
from .hints import FIX_AFTER
from .isolation import IsolationUnavailable
from . import worklog
from .lesson_script import remember
from .variant_file import my_variant
from .variants import FAMILY_OF, TEXTBOOK_FORM, posed, timed
from .replies import SHOWN_CHARACTERS, OwnLines, case_words, fail, is_hidden, malformed, stop
from .exercise_report import ExerciseReport, compare
from .wire import Status
from .worker import Reply, Worker, WorkerUnavailable, shared

# What stops a whole grading, never one exercise: the machine cannot run the worker, or cannot
# isolate it. Everything else that goes wrong while a student's function is graded is that exercise's.
MACHINE_ERRORS = (WorkerUnavailable, IsolationUnavailable)

class ExerciseFailed(AssertionError):
    """Raised by ``check`` under ``NPFORMER_GRADER=strict`` when an exercise fails."""


class UnknownExercise(KeyError, ValueError):
    """``check`` was given a name that no exercise has: a ``ValueError`` (bad input), and a
    ``KeyError`` as well, since ``EXERCISES[name]`` would raise one."""

    def __str__(self) -> str:
        return str(self.args[0])  # one line, not KeyError's quoted repr


def check(name: str, student_fn: Callable, seed: int = 0, strict: bool | None = None,
          unseen_seed: int | None = None, time_limit: float = 60.0, steps: tuple | None = None,
          variant: str | None = None, reveal: bool | None = None) -> ExerciseReport:
    """Grade ``student_fn`` for the exercise ``name`` (see ``exercises.EXERCISES``).

    The function runs in the grading worker (``course.worker``), a separate process where npformer
    cannot be imported; this process draws the cases, computes the references and compares. It is
    the light worker, not isolated by the kernel: it runs on the student's own machine, where all a
    function could fool is the student (``course grade`` isolates it: ``course.isolation``).
    Returns an ``ExerciseReport``: print it for the table, one row per returned tensor per case,
    and its verdict line; ``report.passed`` is True when every tensor of every case agrees.
    ``seed`` draws the public cases; ``unseen_seed`` the unseen one (None: a new seed, printed in
    the report). ``strict``: raise ``ExerciseFailed`` on a failure; None (the default) follows
    ``NPFORMER_GRADER=strict``. A lesson that shows a mistake on purpose passes ``strict=False``.
    ``time_limit``: seconds the function may take over all the cases. ``steps``: for an exercise
    derived in steps (``exercises.DERIVATIONS``: ``softmax_backward``, ``layernorm_backward``,
    ``attention_backward``), the student's step functions in order; each is graded on its own and
    the report names the first wrong one. Once the exercise passes, the report shows npformer's
    textbook form of it. ``variant``: the form of the exercise to grade against (``course.variants``);
    None (the default) takes the student's from their variants file (``variant_file``: the one their
    instructor gave them, beside the lessons), else the lesson's own form ("textbook").
    ``reveal``: the hints teach before they tell (``hints.Hint``): first what property of the answer
    fails, the fix itself only with ``reveal=True``, or, with None (the default), once the exercise has
    failed ``hints.FIX_AFTER`` checks in this session; False never names it.

    Called from a lesson run as a script (``python 04_layer_normalization.py``), the checks are
    remembered, and when the script ends a table of them is printed; the script then exits with
    status 1 if one failed (``NPFORMER_GRADER=keep-going`` keeps status 0).

    Checked before any grading (the only errors ``check`` raises for its arguments): ``name`` an
    exercise (``UnknownExercise``, a ``ValueError`` and a ``KeyError``, offering the close names),
    ``student_fn`` callable, ``seed`` an int >= 0, ``unseen_seed`` an int >= 0 or None, ``strict``
    a bool or None, ``time_limit`` a positive number. A function that takes the wrong arguments is
    the student's mistake: graded as a failure, not raised.
    """
    _check_arguments(name, student_fn, seed, strict, unseen_seed, time_limit)
    if reveal is not None:
        check_type("check", "reveal", reveal, bool, "a bool or None")
    steps = _check_steps(name, steps)
    variant = _checked_variant(name, variant)
    if unseen_seed is None:
        unseen_seed = new_seed()  # the exercise and its steps draw their unseen cases alike
    report = _grade_public(posed(name, variant), student_fn, seed, unseen_seed, time_limit)
    report.steps = [_grade_public(posed(step_name, variant), step_fn, seed, unseen_seed, time_limit)
                    for step_name, step_fn in zip(DERIVATIONS.get(name, ()), steps)]
    _offer_fixes(report, reveal)
    worklog.record(report)
    remember(report, strict, sys._getframe(1).f_globals.get("__name__") == "__main__")
    if strict is None:
        strict = os.environ.get("NPFORMER_GRADER") == "strict"
    if report.failed and strict:
        raise ExerciseFailed(str(report))
    return report


def _grade_public(exercise: Exercise, function: Callable, seed: int, unseen_seed: int, time_limit: float
                  ) -> ExerciseReport:
    """``function`` graded on the exercise's public cases and its unseen one."""
    unseen, unseen_seed = unseen_case(exercise, unseen_seed)
    return grade(exercise, prepared_public(exercise, seed) + prepare(exercise, unseen), function=function,
                 time_limit=time_limit, unseen_seed=unseen_seed)


# exercise name -> its failed checks in this session (a student's kernel or script), for ``reveal``
failed_checks: collections.Counter = collections.Counter()


def _offer_fixes(report: ExerciseReport, reveal: bool | None) -> None:
    """Whether the report (and its steps') names the fixes its hints hold back (see ``check``)."""
    if report.failed:
        failed_checks[report.exercise.name] += 1
    shown = reveal if reveal is not None else failed_checks[report.exercise.name] >= FIX_AFTER
    for each in (report, *report.steps):
        each.reveal = shown


def _check_arguments(name: Any, student_fn: Any, seed: Any, strict: Any, unseen_seed: Any, time_limit: Any) -> None:
    """The checks ``check`` makes before any grading (see its docstring)."""
    check_known("check", "name", name, EXERCISES, error=UnknownExercise)
    check_callable("check", "student_fn", student_fn)
    check_int("check", "seed", seed)
    check_int("check", "unseen_seed", unseen_seed, optional=True)
    if strict is not None:
        check_type("check", "strict", strict, bool, "a bool or None")
    check_number("check", "time_limit", time_limit)


def _checked_variant(name: str, variant: Any) -> str:
    """The variant to grade ``name`` against: ``variant`` checked, or the student's file's."""
    if variant is None:
        return my_variant(name)
    check_type("check", "variant", variant, str, "a variant's name or None")
    family = FAMILY_OF.get(name)
    if variant == TEXTBOOK_FORM:
        return variant
    if family is None:
        raise ValueError(f"check: {name} has no variants; drop variant=")
    family.variant(variant)  # a ValueError naming the family's variants
    return variant


def _check_steps(name: str, steps: Any) -> tuple:
    """``steps`` as a tuple: None gives none; else one callable per step of ``name``'s derivation, in
    order. A derivation of one step also takes its function alone (``steps=(f)`` is ``f`` in Python)."""
    if steps is None:
        return ()
    if name not in DERIVATIONS:
        derived = ", ".join(DERIVATIONS)
        raise ValueError(f"check: {name} is not derived in steps (those that are: {derived}); drop steps=")
    expected = DERIVATIONS[name]
    if callable(steps) and len(expected) == 1:
        steps = (steps,)
    if not isinstance(steps, (tuple, list)) or len(steps) != len(expected):
        one = " ((f) is f itself: a tuple of one is (f,))" if callable(steps) else ""
        raise ValueError(f"check: steps must be {len(expected)} functions, in order: {', '.join(expected)}; "
                         f"got {steps!r:.80}{one}")
    for index, step in enumerate(steps):
        check_callable("check", f"steps[{index}] ({expected[index]})", step)
    return tuple(steps)


def grade(exercise: Exercise, prepared: list[Prepared], *, function: Callable | None = None,
          source: str | None = None, filename: str = "<submission>", time_limit: float = 60.0,
          worker: Worker | None = None, unseen_seed: int | None = None) -> ExerciseReport:
    """Run the student's ``function`` (or the function ``exercise.name`` defined by ``source``) in
    the worker on the prepared cases' inputs, and compare what comes back with the references
    (``unseen_seed``: the seed that drew the unseen cases, for the report to print).
    The instructor's hidden cases run in a job of their own, once the others have all replied with
    a result: no process that can put text in the feedback (a message, a printing) ever holds their
    inputs. Whatever comes back, it is this exercise's verdict: only ``MACHINE_ERRORS`` are raised."""
    worker = worker or shared()
    own_lines = OwnLines(source, filename, function)
    report = ExerciseReport(exercise, Status.PASSED, unseen_seed=unseen_seed,
                            hidden=sum(is_hidden(item.case.label) for item in prepared))
    deadline = time.monotonic() + time_limit   # ``time_limit`` covers both jobs
    for items in ([item for item in prepared if not is_hidden(item.case.label)],
                  [item for item in prepared if is_hidden(item.case.label)]):
        seconds = max(1.0, deadline - time.monotonic())
        if items and not _graded(report, items, worker, own_lines, time_limit, function=function, source=source,
                                 name=exercise.name, filename=filename, pointwise=exercise.pointwise,
                                 in_place=exercise.in_place,
                                 time_limit=seconds):
            break
    if report.passed and not all(row.passed for row in report.rows):
        report.status = Status.WRONG
    return report


def _graded(report: ExerciseReport, items: list[Prepared], worker: Worker, own_lines: OwnLines, whole_limit: float,
            **job) -> bool:
    """One job of ``grade``: the student's function on ``items``, each reply compared or turned into
    the verdict, in ``report`` (``whole_limit``: the exercise's time limit, as a timeout names it).
    Returns whether every case replied with a result."""
    exercise = report.exercise
    try:
        result = worker.run([item.case.inputs for item in items], **job)
    except MACHINE_ERRORS:
        raise
    except Exception as error:  # noqa: BLE001 - a reply the worker could not read: its state is unknown
        worker.close()          # the next job starts a fresh worker
        fail(report, "", Status.UNREADABLE,
             f"{Status.UNREADABLE.words} ({printable(type(error).__name__)[:80]})")
        return False
    replies = result.replies if isinstance(result.replies, list) else []
    for item, reply in zip(items, replies):
        label, hidden = item.case.label, is_hidden(item.case.label)
        wrong_field = malformed(reply)
        if wrong_field:
            fail(report, label, Status.MALFORMED, f"{case_words(label)}: {Status.MALFORMED.words} ({wrong_field})")
            return False
        report.printed_total += reply.printed
        if hidden:
            report.printed_hidden += reply.printed
        elif reply.printed and not report.printed:
            shown = printable(repr(reply.shown[:SHOWN_CHARACTERS]))
            report.printed = f"case {label} printed {reply.printed} characters: {shown}"
        if reply.status is not Status.RETURNED:
            stop(report, item.case, reply, own_lines)
            return False
        try:
            got = outputs(exercise, reply.output, item.case.inputs)
        except Exception as error:  # noqa: BLE001 - the student's result is not of the kind asked for
            raised = Reply(Status.RAISED, error_type=type(error).__name__, message=str(error))
            stop(report, item.case, raised, own_lines)
            return False
        if len(got) != len(exercise.outputs):
            count = "the wrong number of values" if hidden else f"{len(got)} value(s)"
            fail(report, label, Status.WRONG, f"{case_words(label)}: returned {count}, expected "
                                              f"{len(exercise.outputs)}: {', '.join(exercise.outputs)}")
            return False
        slow = timed.too_slow(reply.microseconds / 1e6, item.forward_seconds) if item.forward_seconds else ""
        if slow:
            fail(report, label, Status.TOO_SLOW, f"{case_words(label)}: {slow}")
            return False
        try:
            report.rows += [compare(exercise, item.case, output, got_tensor, expected_tensor, item.numeric.get(wrt))
                            for output, got_tensor, expected_tensor, wrt in zip(
                                exercise.outputs, got, item.expected, exercise.wrt or (None,) * len(exercise.outputs))]
        except Exception as error:  # noqa: BLE001 - whatever the result holds, it is this exercise's failure
            fail(report, label, Status.NOT_COMPARED,
                 f"{case_words(label)}: {Status.NOT_COMPARED.words} ({printable(type(error).__name__)[:80]})")
            return False
    if len(replies) < len(items):  # no reply for a case: the job was stopped
        end = printable(result.end)[:100] if isinstance(result.end, str) else "ended"
        if end == "timed out":
            fail(report, "", Status.TIMED_OUT, detail=f"after {whole_limit:g} s")
        else:
            fail(report, "", Status.ENDED, detail=end)
        return False
    return True
