"""GPU form of ``npformer.ops.dropout``: the mask drawn, compared, scaled and applied in one kernel.

What changes: the textbook draws ``u = rng.random(x.shape)``, compares ``u >= p``, scales by
``1 / (1 - p)`` and multiplies by ``x`` (four kernels, two temporaries of the size of ``x``). With
the device generator of ``backend.default_rng`` (``npformer.counter_random``, whose ``i``-th number
is a hash of its key and ``i``), one kernel computes each element's ``u`` from its index and writes
``keep_scale`` and ``out`` together. It reserves the same positions of the generator's stream as the
twin's ``rng.random`` would, so the mask is the twin's, bit for bit, and a generator shared with
textbook code stays in step. Any other generator goes to the twin.
"""

from __future__ import annotations

from typing import Any

import numpy

from ...counter_random import CUDA_UNIFORM, CounterGenerator
from .. import dropout as textbook
from .kernels import elementwise_kernel

# (in, out, body, name) of cupy.ElementwiseKernel: the generator's uniform number for this element,
# then the mask and the output
DROPOUT = ("T x, uint64 key, uint64 start, T p, T scale", "T out, T keep_scale",
           "T uniform;\n" + CUDA_UNIFORM.replace("out =", "uniform =")
           + "keep_scale = uniform >= p ? scale : (T)0;\nout = x * keep_scale;\n", "npformer_dropout")


def dropout_forward(x: Any, p: float, rng: Any, training: bool) -> tuple[Any, dict]:
    """See ``npformer.ops.dropout.dropout_forward``."""
    if not (training and isinstance(rng, CounterGenerator) and isinstance(p, float) and 0.0 < p < 1.0 and x.ndim):
        return textbook.dropout_forward(x, p, rng, training)   # the identity, other generators, bad input
    textbook.check_dropout_inputs(x, p)
    key, start = rng.reserve(x.size)
    dtype = x.dtype.type
    out, keep_scale = elementwise_kernel(*DROPOUT)(x, numpy.uint64(key), numpy.uint64(start), dtype(p), dtype(1.0 / (1.0 - p)))
    return out, {"keep_scale": keep_scale}
