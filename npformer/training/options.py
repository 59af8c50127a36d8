"""The range of every numeric option, by its name: one rule for the library and the command line.

* ``dropout``, ``label_smoothing``, ``unk_rate``: a fraction in ``[0, 1)``;
* ``seed``: an integer ``>= 0``;
* every other number (sizes, steps, budgets, rates, beams, temperatures, tolerances): ``> 0``.

The rule goes by name so that a new option cannot forget its check: it is positive unless it is
listed here. ``npformer``'s argument parser applies it to every numeric flag as it parses, and
``TrainOptions.check`` to every field, before any work starts.
"""

from __future__ import annotations

import math
from typing import Any

FRACTIONS = ("dropout", "label_smoothing", "unk_rate")
NON_NEGATIVE = ("seed",)


def option_bound(name: str) -> str:
    """What values the option ``name`` allows, in words."""
    if name in FRACTIONS:
        return "in [0, 1)"
    if name in NON_NEGATIVE:
        return ">= 0"
    return "> 0"


def check_option(name: str, value: Any) -> None:
    """``ValueError`` naming the option, what it allows and what it got, when ``value`` is out of range."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number {option_bound(name)}, got {value!r}")
    low_ok = value >= 0 if name in FRACTIONS + NON_NEGATIVE else value > 0
    if not low_ok or (name in FRACTIONS and value >= 1):
        raise ValueError(f"{name} must be {option_bound(name)}, got {value!r}")
