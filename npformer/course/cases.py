"""The cases of an exercise and what the grader holds for them.

The public cases (``exercise.cases``, the same every time), an unseen one drawn with a seed (a new
one for every ``check``, printed), and the instructor's hidden ones (``hidden_cases``, drawn from
a secret and never printed). Unseen and hidden cases are drawn ``separable`` where the exercise
allows: no axis of length 1, no two axes of the same length, so that a transposed result or a sum
over the wrong axis cannot pass by having the right shape.

``prepare`` computes, in the grader's process, each case's reference outputs and (for a gradient)
its finite differences: ``Prepared``. Only a case's inputs ever reach the grading worker.
``prepared_public`` keeps the public cases' ``Prepared`` for the rest of the process: a check run
again, or another class graded by the same process, reuses them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy

from .. import backend, ops
from . import sandbox
from .exercises import Case, Exercise
from .exercises.base import from_secret
from .variants import TEXTBOOK_FORM, posed, timed
from .variants.base import input_gradients


def _as_outputs(values: Any, count: int) -> tuple:
    """What a function returned, as a tuple of ``count`` outputs (one output stays whole, even a list)."""
    return tuple(values) if isinstance(values, (tuple, list)) and count > 1 else (values,)


def outputs(exercise: Exercise, result: Any, inputs: dict) -> tuple:
    """A function's result (called once, or once per point) as the tuple of outputs the grader compares."""
    if exercise.pointwise is not None:
        if not isinstance(result, list) or len(result) != len(inputs[exercise.pointwise]):
            raise TypeError(f"expected one number per {exercise.pointwise}")
        try:
            result = numpy.array([float(value) for value in result])
        except (TypeError, ValueError) as error:
            raise TypeError(f"returned {type(result[0]).__name__}, not a number, for one {exercise.pointwise}") \
                from error
        return (result,)
    if exercise.convert is not None:
        return tuple(exercise.convert(result, inputs))
    return _as_outputs(result, len(exercise.outputs))


def _call_here(exercise: Exercise, function: Callable, inputs: dict) -> tuple:
    """Call npformer's reference in this process (never the student's function), as the worker
    calls the student's."""
    return outputs(exercise, sandbox.call(function, copy.deepcopy(inputs), exercise.pointwise,
                                                 exercise.in_place), inputs)


def _finite_differences(exercise: Exercise, case: Case) -> dict[str, numpy.ndarray]:
    """The gradient of ``sum(forward(inputs) * dout)`` for each ``wrt`` input (``variants.base``'s)."""
    answers = input_gradients(exercise.forward, case.inputs, exercise.wrt, trusted=False)
    return dict(zip(exercise.wrt, answers))


@dataclass(frozen=True)
class Prepared:
    """A case and what the grader holds for it: the reference's outputs and, for a gradient, the
    finite differences. It stays in the grader's process; only ``case.inputs`` reach the worker."""

    case: Case
    expected: tuple
    numeric: dict
    forward_seconds: float | None = None  # a timed case's: how long its forward pass takes here


def prepare(exercise: Exercise, cases: list[Case]) -> list[Prepared]:
    """The references of ``cases``, computed with npformer's textbook ops on NumPy (whatever set and
    backend are active), once: a class's grading reuses them for every student."""
    active = backend.get_backend()
    if active != "numpy":
        backend.set_backend("numpy")
    try:
        with ops.using("textbook"):
            return [_prepared(exercise, case) for case in cases]
    finally:
        if active != "numpy":
            backend.set_backend(active)


def _prepared(exercise: Exercise, case: Case) -> Prepared:
    """One case's answers (a timed case's at some entries, and no finite-difference column: its
    reference alone) and, for a timed case, its forward's time."""
    with timed.answering(case.label):
        numeric = _finite_differences(exercise, case) if exercise.forward is not None \
            and not timed.is_timed(case.label) else {}
        return Prepared(case, _call_here(exercise, exercise.reference, case.inputs), numeric,
                        _forward_seconds(exercise, case))


def _forward_seconds(exercise: Exercise, case: Case) -> float | None:
    """How long the exercise's forward pass takes on a timed case, here (None for another case)."""
    forward = timed.forward_of(exercise)
    return timed.forward_seconds(forward, case.inputs) if timed.is_timed(case.label) and forward else None


# -- the cases: public, unseen, and the instructor's hidden ones -------------------------------------

def separable(inputs: dict, one_token: tuple[str, ...] = ()) -> bool:
    """Every array of numbers among ``inputs`` has each axis at least 2 long and no two axes of the
    same length, so that a transposed result, a sum over the wrong axis or a missing sum cannot
    pass by having the right shape. A square matrix (a ``(D, D)`` projection) is square by nature:
    its values, drawn at random, still tell a transposed gradient apart. The inputs named in
    ``one_token`` (a single new token) keep their axis of length 1."""
    for name, value in inputs.items():
        if isinstance(value, numpy.ndarray) and value.dtype.kind == "f" and value.ndim >= 1:
            shape = tuple(n for n in value.shape if n != 1) if name in one_token else value.shape
            if shape and (min(shape) < 2 or (len(shape) > 2 and len(set(shape)) != len(shape))):
                return False
    return True


def _drawn(exercise: Exercise, rng: numpy.random.Generator, count: int) -> list[Case]:
    """``count`` cases from the exercise's ``unseen`` drawer, separable ones first (up to 3000 draws)."""
    chosen, fallback = [], []
    for _ in range(3000):
        for case in exercise.unseen(rng):
            (chosen if separable(case.inputs, exercise.one_token) else fallback).append(case)
        if len(chosen) >= count:
            break
    return (chosen + fallback)[:count]


def new_seed() -> int:
    """A fresh seed for unseen cases, short enough to be typed back (``unseen_seed=``, ``--seed``)."""
    return int(numpy.random.SeedSequence().entropy % 1_000_000)


def unseen_case(exercise: Exercise, unseen_seed: int | None) -> tuple[list[Case], int | None]:
    """The unseen case (labelled "unseen: ..."; none for an exercise without a drawer), then the timed
    case of a backward pass that has one (``variants.timed``), and their seed (None: a new one)."""
    if exercise.unseen is None:
        return [], None
    if unseen_seed is None:
        unseen_seed = new_seed()
    unseen = _drawn(exercise, numpy.random.default_rng(unseen_seed), 1)
    drawn = [Case(f"unseen: {case.label}", case.inputs) for case in unseen]
    return drawn + timed.timed_case(exercise, unseen_seed), unseen_seed


_PREPARED_PUBLIC: dict[tuple[str, str, int], tuple[Exercise, list[Prepared]]] = {}


def prepared_public(exercise: Exercise, seed: int) -> list[Prepared]:
    """``prepare`` of the public cases drawn with ``seed``, computed once per exercise and seed in a
    process: they are the same every time, so checking a function again waits only for the unseen
    case's references."""
    kept = _PREPARED_PUBLIC.get((exercise.name, exercise.variant, seed))
    if kept is None or kept[0] is not exercise:
        kept = (exercise, prepare(exercise, list(exercise.cases(numpy.random.default_rng(seed)))))
        _PREPARED_PUBLIC[exercise.name, exercise.variant, seed] = kept
    return list(kept[1])


HIDDEN_CASES = 3
HIDDEN_LABEL = "hidden"  # a hidden case's label is this and its number, nothing else


def hidden_cases(exercise: Exercise, secret: str, count: int = HIDDEN_CASES) -> list[Case]:
    """The instructor's hidden cases of ``exercise``: drawn from a seed made of ``secret`` and the
    exercise's name (so each exercise gets its own), separable (``separable``), labelled only
    "hidden 1", "hidden 2"...: a report never shows the secret, the seed or the inputs."""
    if exercise.unseen is None:
        return []
    drawn = _drawn(exercise, numpy.random.default_rng(from_secret(secret, exercise.name)), count)
    return [Case(f"{HIDDEN_LABEL} {index}", case.inputs) for index, case in enumerate(drawn, 1)]


class ClassCases(Mapping):
    """Each exercise's prepared cases for a whole class (``grading.prepared_cases``): ``cases[name]``
    the lesson's form's, ``cases.of(name, variant)`` a variant's (``course.variants``), prepared when
    first asked for and kept, so each variant's references are computed once for the class."""

    def __init__(self, names: list[str], seed: int, secret: str | None):
        self.names, self.seed, self.secret = list(names), seed, secret
        self._kept: dict[tuple[str, str], list[Prepared]] = {}

    def of(self, name: str, variant: str = TEXTBOOK_FORM) -> list[Prepared]:
        if (name, variant) not in self._kept:
            exercise = posed(name, variant)
            cases, _ = unseen_case(exercise, self.seed)
            if self.secret is not None:
                cases += hidden_cases(exercise, self.secret)
            with timed.sampled_with(self.secret, self.seed, name, variant):
                self._kept[name, variant] = prepared_public(exercise, 0) + prepare(exercise, cases)
        return self._kept[name, variant]

    def __getitem__(self, name: str) -> list[Prepared]:
        if name not in self.names:
            raise KeyError(name)
        return self.of(name)

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)
