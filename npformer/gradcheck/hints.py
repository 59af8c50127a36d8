"""What a wrong tensor most likely got wrong, read from how it differs from the right one.

``diagnose(got, expected)`` tries the mistakes that hand-written backward passes
make most often, in this order, and names the first one that explains ``got``
(to ``1e-6`` of the largest entry of ``expected``)::

    NaN or inf in got                          a division by zero, an overflow, 0/0 in a masked row
    wrong shape; summing over axes fixes it    the sum over a broadcast axis is missing (a bias)
    got == expected^T (last two axes)          a transpose forgotten in a matrix product's gradient
    got == 0 everywhere                        the gradient is never written
    got == -expected                           the sign is wrong
    got == c * expected, c != 1                off by a constant factor (a 1/N, a 1/sqrt(d_k), ...)
    non-zero only where expected is 0          gradient leaking into masked or padded positions
    zero where expected is not, right elsewhere a path that never reaches these entries

When no pattern fits, it says where the wrong entries sit: every entry, k of n
entries in r of R rows (the last axis is a row), all in one head.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import backend

AGREEMENT = 1e-6  # a pattern fits when it reproduces got to this fraction of the largest entry


def _host(values: Any) -> numpy.ndarray:
    return numpy.asarray(backend.to_numpy(values), dtype=numpy.float64)


def _matches(candidate: numpy.ndarray, target: numpy.ndarray) -> bool:
    """``candidate`` equals ``target`` to ``AGREEMENT`` of target's largest entry."""
    if candidate.shape != target.shape:
        return False
    scale = max(float(numpy.abs(target).max(initial=0.0)), 1e-300)
    return bool(numpy.all(numpy.abs(candidate - target) <= AGREEMENT * scale))


def sum_to_shape(values: numpy.ndarray, shape: tuple) -> numpy.ndarray | None:
    """``values`` summed over the axes that broadcasting would add or stretch to reach
    ``shape``; None when no such sum gives ``shape``."""
    if values.ndim < len(shape):
        return None
    lead = values.ndim - len(shape)
    summed = values.sum(axis=tuple(range(lead))) if lead else values
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and summed.shape[axis] != 1)
    if stretched:
        summed = summed.sum(axis=stretched, keepdims=True)
    return summed if summed.shape == tuple(shape) else None


def _name_factor(factor: float) -> str:
    """``0.125 (1/8 = 1/sqrt(64))``: the factor, and the square root it most likely comes from."""
    text, minus, size = f"{factor:.4g}", "-" if factor < 0 else "", abs(factor)
    if size >= 1 and abs(size - round(size)) < 1e-9:
        return text  # a whole number says it all
    for value, over in ((size, ""), (1 / size, "1/")):
        square = round(value * value)
        if 2 <= square <= 1_000_000 and abs(value * value - square) < 1e-6 * square:
            root = math.isqrt(square)
            whole = f"{minus}{over}{root} = " if root * root == square else ""
            return f"{text} ({whole}{minus}{over}sqrt({square}))"
    return text


def diagnose(got: Any, expected: Any) -> str:
    """A one-line guess at the mistake that turns ``expected`` into ``got`` ("" when none fits)."""
    got, expected = _host(got), _host(expected)
    if not numpy.all(numpy.isfinite(got)):
        bad = numpy.argwhere(~numpy.isfinite(got))[0]
        return (f"NaN or inf at {tuple(int(i) for i in bad)}: a division by zero or an overflow "
                "(a fully masked row must give zeros, not 0/0)")
    if got.shape != expected.shape:
        summed = sum_to_shape(got, expected.shape)
        if summed is not None and _matches(summed, expected):
            return (f"shape {got.shape} instead of {expected.shape}, and summing over the extra axes gives "
                    "the right values: the sum over a broadcast axis is missing")
        return f"shape {got.shape} instead of {expected.shape}"
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and not _matches(got, expected) \
            and _matches(got, expected.swapaxes(-1, -2)):
        return "equals the right answer transposed: a transpose is forgotten (or added) in a matrix product"
    if not numpy.any(expected):
        return "should be exactly zero everywhere"
    if not numpy.any(got):
        return "all zeros: the gradient is never written"
    if _matches(got, -expected):
        return "the sign is wrong: got = -(right answer)"
    factor = float(numpy.sum(got * expected) / numpy.sum(expected * expected))
    if _matches(got, factor * expected):
        return f"off by a constant factor: got = {_name_factor(factor)} x (right answer)"
    scale = float(numpy.abs(expected).max())
    wrong = numpy.abs(got - expected) > AGREEMENT * scale
    if numpy.all(expected[wrong] == 0):
        return (f"non-zero only where the right answer is exactly 0 ({int(wrong.sum())} entries): "
                "gradient leaking into masked, padded or switched-off positions")
    if numpy.all(got[wrong] == 0):
        return (f"zero where the right answer is not ({int(wrong.sum())} entries), right elsewhere: "
                "a path that never reaches these entries")
    return where_wrong(wrong)


def where_wrong(wrong: numpy.ndarray) -> str:
    """Where the wrong entries sit: all of them, some rows (the last axis is a row), one head."""
    count, total = int(wrong.sum()), wrong.size
    if count == total:
        return "wrong at every entry"
    text = f"wrong at {count} of {total} entries"
    if wrong.ndim >= 2:
        rows = wrong.any(axis=-1)
        text += f", in {int(rows.sum())} of {rows.size} rows"
    if wrong.ndim == 4 and wrong.shape[1] > 1:
        heads = numpy.flatnonzero(wrong.any(axis=(0, 2, 3)))
        if len(heads) == 1:
            text += f", all in head {int(heads[0])}"
    return text
