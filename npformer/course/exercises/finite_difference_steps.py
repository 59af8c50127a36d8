"""The auto-graded part of lesson 1's open question 2: the step at which a finite difference is most
accurate, and its error there, for an error model that balances truncation against rounding::

    E(h) = truncation * h**power + rounding * unit_roundoff / h

(``power`` 2 for the central difference, 4 for the fourth-order form). The reference finds the
minimum numerically, by bisection on the sign of E's slope over log h, so that no closed form is
stored here; the student derives it by hand.
"""

from __future__ import annotations

import numpy

from ..hints import Hint
from .base import Case, Exercise, WrongSolution


def _error(h, truncation, power, rounding, unit_roundoff):
    return truncation * h ** power + rounding * unit_roundoff / h


def _most_accurate_step(truncation, power, rounding, unit_roundoff):
    """The h > 0 that minimises E(h), found by bisecting the sign of dE/dh (E is convex in h > 0), and E there."""
    def slope(h):
        return power * truncation * h ** (power - 1) - rounding * unit_roundoff / h ** 2

    low, high = 1e-300 ** (1 / (power + 1)), 1e300 ** (1 / (power + 1))
    for _ in range(400):
        middle = numpy.sqrt(low * high)                     # bisect over log h
        low, high = (middle, high) if slope(middle) < 0 else (low, middle)
    step = numpy.sqrt(low * high)
    return step, _error(step, truncation, power, rounding, unit_roundoff)


def _inputs(truncation, power, rounding, unit_roundoff):
    return {"truncation": truncation, "power": power, "rounding": rounding, "unit_roundoff": unit_roundoff}


FLOAT64, FLOAT32 = float(numpy.finfo(numpy.float64).eps), float(numpy.finfo(numpy.float32).eps)


def _step_cases(rng):
    return [Case("central difference of sin at 1 in float64: cos(1)/6 h^2 against sin(1) eps/h",
                 _inputs(numpy.cos(1.0) / 6, 2, numpy.sin(1.0), FLOAT64)),
            Case("fourth-order form, float64: h^4/30 against eps/h", _inputs(1 / 30, 4, 1.0, FLOAT64)),
            Case("central difference in float32, unit constants", _inputs(1.0, 2, 1.0, FLOAT32))]


def _unseen_step(rng):
    power = int(rng.choice([1, 2, 4, 6]))
    truncation, rounding = float(10 ** rng.uniform(-3, 1)), float(10 ** rng.uniform(-2, 2))
    roundoff = float(rng.choice([FLOAT64, FLOAT32, float(numpy.finfo(numpy.float16).eps)]))
    return [Case(f"power {power}, constants {truncation:.2g} and {rounding:.2g}, unit roundoff {roundoff:.1e}",
                 _inputs(truncation, power, rounding, roundoff))]


def _step_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got))
    truncation, power = inputs["truncation"], inputs["power"]
    rounding, roundoff = inputs["rounding"], inputs["unit_roundoff"]
    if output == "step" and got > 0 and not numpy.isclose(got, expected, rtol=1e-6, atol=0):
        if numpy.isclose(truncation * got ** power, rounding * roundoff / got, rtol=1e-6, atol=0):
            return Hint(f"at your step the two errors are equal, yet E's slope there is not zero: the "
                        f"smallest E lies at {expected / got:.3g} times your step",
                        "minimise E: set dE/dh = 0, do not equate the two terms")
        ratio = numpy.log(got) / numpy.log(expected)
        return Hint(f"log of your step / log of the best step = {ratio:.3g}: check how the step scales with "
                    f"the unit roundoff (the exponent)")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("most_accurate_step",
             "most_accurate_step(truncation, power, rounding, unit_roundoff) -> (step, smallest_error): the h > 0 "
             "that minimises E(h) = truncation * h**power + rounding * unit_roundoff / h, and E(h) there",
             "01", _most_accurate_step, _step_cases, ("step", "smallest_error"), hints=(_step_hint,),
             unseen=_unseen_step, question=2),
]


def _where_equal(truncation, power, rounding, unit_roundoff):
    step = (rounding * unit_roundoff / truncation) ** (1 / (power + 1))
    return step, _error(step, truncation, power, rounding, unit_roundoff)


def _cube_root_always(truncation, power, rounding, unit_roundoff):
    step = (rounding * unit_roundoff / (2 * truncation)) ** (1 / 3)
    return step, _error(step, truncation, power, rounding, unit_roundoff)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("most_accurate_step", "the step where the two errors are equal, not the minimum", _where_equal,
                  "the two errors are equal"),
    WrongSolution("most_accurate_step", "the central difference's exponent 1/3 for every power", _cube_root_always,
                  "the exponent"),
]
