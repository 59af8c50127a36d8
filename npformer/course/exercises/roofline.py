"""The exercise of lesson 16: the roofline of a GPU, ``roofline``, graded without a GPU.

An op that performs ``flops`` floating-point operations and moves ``bytes_moved`` bytes to and from
memory cannot finish faster than its arithmetic at the card's peak (``flops / peak_flops``) nor
faster than its traffic at the card's bandwidth (``bytes_moved / bandwidth``): the two overlap, so
its floor is the larger of the two. On top of that, each of its ``kernels`` launches costs a fixed
``launch_seconds`` (CuPy's Python dispatch and the driver's launch), however little the kernel does::

    seconds       = max(flops / peak_flops, bytes_moved / bandwidth) + kernels * launch_seconds
    compute_bound = flops / peak_flops > bytes_moved / bandwidth

Each array holds one entry per op, so a whole training step is estimated in one call. Lesson 16
applies it to its own step and compares it with the times recorded on an H100.
"""

from __future__ import annotations

import numpy

from .base import Case, Exercise, WrongSolution, size


def roofline(flops, bytes_moved, kernels, peak_flops, bandwidth, launch_seconds):
    compute = numpy.asarray(flops, dtype=numpy.float64) / peak_flops          # (ops,) seconds of arithmetic
    memory = numpy.asarray(bytes_moved, dtype=numpy.float64) / bandwidth      # (ops,) seconds of traffic
    seconds = numpy.maximum(compute, memory) + numpy.asarray(kernels) * launch_seconds
    return seconds, compute > memory


H100 = {"peak_flops": 67e12, "bandwidth": 3.35e12}   # float32 without tensor cores; HBM3 (NVIDIA's datasheet, SXM)


def _ops(flops, bytes_moved, kernels, launch_seconds=10e-6, card=H100):
    return {"flops": numpy.array(flops, dtype=float), "bytes_moved": numpy.array(bytes_moved, dtype=float),
            "kernels": numpy.array(kernels, dtype=float), **card, "launch_seconds": launch_seconds}


def _roofline_cases(rng):
    return [
        Case("a 4096^3 float32 product, Adam over 10M parameters, one small op (H100)",
             _ops([2 * 4096.0 ** 3, 12 * 10e6, 1e4], [3 * 4096 ** 2 * 4, 7 * 4 * 10e6, 2e4], [1, 10, 1])),
        Case("no launch cost counted: the roofline alone",
             _ops([1e9, 1e6, 5e10], [1e6, 1e9, 8e7], [0, 0, 0], launch_seconds=0.0)),
        Case("one op", _ops([2e12], [4e8], [3])),
        Case("four launch-bound ops: tiny kernels", _ops([1e3, 2e3, 5e2, 4e3], [8e3, 1.6e4, 4e3, 3.2e4], [5, 1, 2, 9])),
    ]


def _unseen_roofline(rng):
    count = size(rng, 2, 7)
    flops = 10 ** rng.uniform(3, 13, size=count)
    bytes_moved = 10 ** rng.uniform(3, 10.5, size=count)
    kernels = rng.integers(0, 40, size=count).astype(float)
    card = {"peak_flops": float(10 ** rng.uniform(12, 14.5)), "bandwidth": float(10 ** rng.uniform(11, 12.7))}
    return [Case(f"{count} ops on a drawn card", _ops(flops, bytes_moved, kernels, float(10 ** rng.uniform(-6, -4.3)), card))]


def _roofline_hint(got, expected, inputs, output):
    compute = inputs["flops"] / inputs["peak_flops"]
    memory = inputs["bytes_moved"] / inputs["bandwidth"]
    launches = inputs["kernels"] * inputs["launch_seconds"]
    got = numpy.asarray(got, dtype=float)
    if output == "seconds" and got.shape == compute.shape:
        if numpy.allclose(got, compute + memory + launches, rtol=1e-9):
            return ("the arithmetic and the memory traffic are added: they overlap on a GPU, so the floor is "
                    "the larger of the two")
        if numpy.allclose(got, numpy.maximum(compute, memory), rtol=1e-9) and launches.any():
            return "no launch cost: each of an op's kernels adds launch_seconds, however small the kernel"
        if numpy.allclose(got, numpy.minimum(compute, memory) + launches, rtol=1e-9):
            return "the smaller of the two times: an op waits for the slower of its arithmetic and its traffic"
    if output == "compute_bound" and got.shape == compute.shape and numpy.array_equal(got.astype(bool), compute < memory):
        return "reversed: an op is compute-bound when its arithmetic takes longer than its memory traffic"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("roofline",
             "roofline(flops, bytes_moved, kernels, peak_flops, bandwidth, launch_seconds) -> (seconds, compute_bound)",
             "16", roofline, _roofline_cases, ("seconds", "compute_bound"), hints=(_roofline_hint,),
             unseen=_unseen_roofline),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _added(flops, bytes_moved, kernels, peak_flops, bandwidth, launch_seconds):
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return compute + memory + kernels * launch_seconds, compute > memory


def _no_launches(flops, bytes_moved, kernels, peak_flops, bandwidth, launch_seconds):
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return numpy.maximum(compute, memory), compute > memory


def _reversed(flops, bytes_moved, kernels, peak_flops, bandwidth, launch_seconds):
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return numpy.maximum(compute, memory) + kernels * launch_seconds, compute < memory


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("roofline", "arithmetic and traffic added", _added, "overlap"),
    WrongSolution("roofline", "the launch cost left out", _no_launches, "no launch cost"),
    WrongSolution("roofline", "compute-bound reversed", _reversed, "reversed"),
]
