"""The exercise grader: a student's backward pass against npformer's and against finite differences."""

from __future__ import annotations

from typing import Any, Callable

import numpy

from ..backend import xp
from .cases import op_case
from .engine import as_float64_inputs, as_tuple, check_gradients, floating_names, upstream_gradient
from .report import DEFAULT_TOL, GradcheckReport, TensorCheck, _judge


def check_exercise(name: str, student_backward: Callable, seed: int = 0,
                   tol: float = DEFAULT_TOL, **sizes: Any) -> GradcheckReport:
    """Check a student's own backward pass for the op ``name`` of ``OP_CASES``.

    Two rows per input tensor: the student's gradient against npformer's
    reference backward (``vs reference``), and against finite differences
    (``vs finite differences``). Example, in a lesson::

        def my_layernorm_backward(dy, cache): ...
        print(gradcheck.check_exercise("layernorm", my_layernorm_backward))
    """
    forward, reference_backward, inputs = op_case(name, seed, sizes, caller="check_exercise")
    report = check_gradients(forward, student_backward, inputs, name=f"{name} vs finite differences",
                             seed=seed, tol=tol)
    args = list(as_float64_inputs(inputs).values())
    dout = upstream_gradient(numpy.random.default_rng(seed), forward(*args)[0])
    reference = as_tuple(reference_backward(xp.array(dout, copy=True), forward(*args)[1]))
    student = as_tuple(student_backward(xp.array(dout, copy=True), forward(*args)[1]))
    op = f"{name} vs reference"
    pairs = []
    for key, expected, got in zip(floating_names(inputs), reference, student):
        shape = tuple(expected.shape)
        if got is None or tuple(got.shape) != shape:
            report.results.append(TensorCheck.failed(op, key, shape, "wrong shape or missing"))
            continue
        pairs.append((key, shape, got, expected, ""))
    report.extend(_judge(op, pairs, tol))
    return report
