"""What an exercise is, and the pieces its cases are drawn with.

An ``Exercise`` is what a student writes (its signature), the reference it is checked against,
the public cases, the unseen ones, and npformer's own answer (unavailable while the student's
function is graded). A ``WrongSolution`` is a realistic mistake the grader must fail.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy

Inputs = dict  # argument name -> value, in the order the student's function takes them


@dataclass(frozen=True)
class Case:
    """One set of inputs, named by what it exercises (``"B=2, T=1: length 1"``)."""

    label: str
    inputs: Inputs


@dataclass(frozen=True)
class Exercise:
    """What a student writes and how it is checked.

    ``reference`` has the student's signature. ``outputs`` names what it returns.
    For a backward pass, ``forward`` (the op's inputs, without ``dout``) gives the
    output whose gradient it is, and ``wrt`` names the input each returned gradient
    belongs to: the grader also checks those against finite differences of ``forward``.
    ``exact`` outputs (masks, counts) must be equal, not close. ``hints`` are extra
    checks ``hint(got, expected, inputs, output_name) -> str`` for mistakes that only
    this exercise can recognise (repeated ids, a bias correction at the wrong step).
    A function is called as ``fn(*inputs.values())``; ``pointwise`` names an input holding a list of
    points, and the function (a scalar rule such as a learning-rate schedule) is then called once per
    point, by keyword. ``convert(result, inputs) -> outputs`` turns what the function returned into
    the tuple of arrays the grader compares (names as positions, BPE's pieces as codes); the grader
    applies it to the result sent back from the worker. ``in_place`` names inputs the function
    updates in place (a training loop's parameters and state): the worker sends them back after the
    call, so ``convert`` receives ``(result, *those inputs)``.
    ``unseen`` draws the cases a student never sees (other shapes and values, from a
    generator seeded per check; the instructor's hidden cases come from it too; ``one_token`` names
    the inputs whose axis of length 1 is so by definition, a single new token). ``points``:
    what the exercise is worth in a class's grades (a backward pass 2, the rest 1). ``variant``: the
    name of the variant this exercise poses (``course.variants``; "" for the lesson's own form), whose
    reference is the finite differences of ``timed_forward``, the forward a backward pass's time is
    compared with (the textbook's is ``forward``). ``question``: the number of the open question (in
    the lesson's ``## Exercises`` section) whose checkable part this exercise grades, 0 for none: a
    question's number, shape, choice or short expression posed as a function of the question's
    setting, so that its reference is computed, never stored.
    """

    name: str
    signature: str
    lesson: str
    reference: Callable
    cases: Callable[[numpy.random.Generator], list[Case]]
    outputs: tuple[str, ...]
    forward: Callable | None = None
    wrt: tuple[str, ...] = ()
    exact: bool = False
    hints: tuple[Callable, ...] = ()
    pointwise: str | None = None
    one_token: tuple[str, ...] = ()
    convert: Callable | None = None
    unseen: Callable[[numpy.random.Generator], list[Case]] | None = None
    points: int = 1
    timed_forward: Callable | None = None
    variant: str = ""
    question: int = 0
    in_place: tuple[str, ...] = ()


def normal(rng: numpy.random.Generator, *shape: int) -> numpy.ndarray:
    return rng.standard_normal(shape)


def with_dout(rng: numpy.random.Generator, inputs: Inputs, forward: Callable) -> Inputs:
    """``inputs`` plus a random upstream gradient shaped like ``forward``'s output."""
    out = numpy.asarray(forward(*inputs.values()))
    return {**inputs, "dout": rng.standard_normal(out.shape)}


def backward_cases(rng: numpy.random.Generator, forward: Callable,
                    shapes: list[tuple[str, Callable[[numpy.random.Generator], Inputs]]]) -> list[Case]:
    return [Case(label, with_dout(rng, make(rng), forward)) for label, make in shapes]


@dataclass(frozen=True)
class WrongSolution:
    """A mistake students make, written as a student would (``function``), for ``exercise``;
    ``hint``: words the grader's report must contain ("" when failing is enough)."""

    exercise: str
    mistake: str
    function: Callable
    hint: str = ""


def from_secret(*keys: object, width: int = 16) -> int:
    """A number no one can find without the instructor's secret (the first of ``keys``): the first
    ``width`` bytes, little-endian, of the SHA-256 of the keys joined by NUL. It seeds the hidden cases,
    picks each student's variants and the entries a timed case checks."""
    digest = hashlib.sha256("\0".join(map(str, keys)).encode("utf-8")).digest()
    return int.from_bytes(digest[:width], "little")


def size(rng, low, high):
    return int(rng.integers(low, high + 1))
