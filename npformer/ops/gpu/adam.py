"""GPU form of ``npformer.ops.adam``: a parameter's whole update in one kernel, in place.

What changes: the textbook step is nine array expressions, each a kernel and a temporary the size
of the parameter; the CPU fast form cuts it into 64K-element chunks to stay in the cache, which on
a GPU means hundreds of tiny launches (31.8 of the 84.4 ms of a small-preset step on an H100,
``docs/gpu.md``). Here one elementwise kernel reads ``grad``, ``m`` and ``v`` once and writes
``m``, ``v`` and ``param`` once, and the three arrays it was given come back updated
(``npformer.optim.Adam`` then has nothing to copy). The operations are the CPU fast form's, in its
order, but not bit for bit: ``1 - beta`` is formed in the parameter's dtype from the rounded
``beta`` (for float32 and ``beta2 = 0.999``, 9.9998713e-4 where the twin has 1.0e-3), and the GPU
compiler fuses multiply-adds; the tests hold them equal to float32 rounding.

Even one launch per parameter costs: a launch is about as long on the host as a small parameter's
update on the GPU. ``adam_steps`` updates every parameter of the model in one launch, reading a
table of their addresses; ``npformer.optim.Adam`` uses it when the active ``adam_step`` offers it
(``adam_step.many``), so that a student's own ``adam_step`` still runs one parameter at a time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .kernels import MAX_THREADS, elementwise_kernel, row_kernel

# (in, out, body, name) of cupy.ElementwiseKernel: one parameter's update
ADAM = ("T grad, T beta1, T beta2, T correction2, T step_size, T eps", "T param, T m, T v", """
    m = beta1 * m + ((T)1 - beta1) * grad;                  // m = beta1 m + (1 - beta1) g
    v = beta2 * v + ((T)1 - beta2) * (grad * grad);         // v = beta2 v + (1 - beta2) g^2
    param -= m / (sqrt(v) * correction2 + eps) * step_size; // lr m_hat / (sqrt(v_hat) + eps)
    """, "npformer_adam")


def _corrections(step: int, lr: float, beta1: float, beta2: float) -> tuple[float, float]:
    """``(1 / sqrt(1 - beta2^t), lr / (1 - beta1^t))``: the bias corrections, folded into two factors."""
    return 1.0 / math.sqrt(1.0 - beta2**step), lr / (1.0 - beta1**step)


def adam_step(param: Any, grad: Any, m: Any, v: Any, step: int, lr: float,
              beta1: float, beta2: float, eps: float) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.adam.adam_step``; ``param``, ``m`` and ``v`` are updated in place."""
    real = param.dtype.type
    correction2, step_size = _corrections(step, lr, beta1, beta2)
    elementwise_kernel(*ADAM)(grad, real(beta1), real(beta2), real(correction2), real(step_size), real(eps), param, m, v)
    return param, m, v


# -- many parameters in one launch -------------------------------------------------------------------

# One row per parameter: the addresses of param, grad, m and v, the parameter as (rows, cols) with
# each array's row stride in elements (a column block of a fused weight has rows longer than its
# columns), and the flat index of its first element among all parameters.
SOURCE = r"""
extern "C" __global__ void adam_many(const long long* table, const int n_tensors, const long long total,
                                     const real beta1, const real beta2, const real correction2,
                                     const real step_size, const real eps) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int low = 0, high = n_tensors - 1;          // the last parameter whose offset is <= i
        while (low < high) {
            const int middle = (low + high + 1) / 2;
            if (table[middle * 11 + 10] <= i) low = middle; else high = middle - 1;
        }
        const long long* entry = table + low * 11;
        const long long local = i - entry[10], row = local / entry[5], column = local % entry[5];
        real* param = (real*)entry[0] + row * entry[6] + column;
        const real grad = *((const real*)entry[1] + row * entry[7] + column);
        real* m = (real*)entry[2] + row * entry[8] + column;
        real* v = (real*)entry[3] + row * entry[9] + column;
        *m = beta1 * *m + ((real)1 - beta1) * grad;                  // m = beta1 m + (1 - beta1) g
        *v = beta2 * *v + ((real)1 - beta2) * (grad * grad);         // v = beta2 v + (1 - beta2) g^2
        *param -= *m / (sqrt(*v) * correction2 + eps) * step_size;   // lr m_hat / (sqrt(v_hat) + eps)
    }
}
"""


def _geometry(param: Any) -> tuple[int, int]:
    """The parameter as ``(rows, cols)``: a matrix as it is, anything else as one row."""
    return (param.shape[0], param.shape[1]) if param.ndim == 2 else (1, param.size)


def _row_stride(array: Any, rows: int, cols: int) -> int | None:
    """Elements from one row of ``array`` to the next, read as ``(rows, cols)``, when its last axis is
    contiguous (a whole array, or a column block of a matrix); else None."""
    if array.size != rows * cols or (array.ndim == 2 and tuple(array.shape) != (rows, cols)):
        return None
    if array.flags.c_contiguous:
        return cols
    if array.ndim == 2 and array.strides[1] == array.itemsize and array.strides[0] % array.itemsize == 0:
        return array.strides[0] // array.itemsize
    return None


def adam_steps(params: list, grads: list, ms: list, vs: list, step: int, lr: float,
               beta1: float, beta2: float, eps: float, cache: dict | None = None) -> None:
    """``adam_step`` on every ``(param, grad, m, v)`` of the lists, in place, in one kernel launch for
    all the parameters of a dtype (``npformer.optim.Adam`` calls it when the active ``adam_step`` is
    this module's: ``adam_step.many``). A parameter whose layout the table cannot describe gets its
    own launch of ``adam_step``. ``cache``: a dict the caller keeps (the optimizer's), where the
    table is kept for the next call with the same arrays; None makes it anew."""
    quads = list(zip(params, grads, ms, vs))
    tables, alone = _tables(quads, {} if cache is None else cache)
    for quad in alone:
        adam_step(*quad, step, lr, beta1, beta2, eps)
    correction2, step_size = _corrections(step, lr, beta1, beta2)
    for dtype, (device_table, count, total) in tables.items():
        real = dtype.type
        blocks = max(1, min(-(-total // MAX_THREADS), 65536))
        row_kernel(SOURCE, "adam_many", dtype)((blocks,), (MAX_THREADS,), (
            device_table, numpy.int32(count), numpy.int64(total), real(beta1), real(beta2), real(correction2),
            real(step_size), real(eps)))


def _tables(quads: list, cache: dict) -> tuple[dict, list]:
    """``({dtype: (device table, parameters, elements)}, [quads updated alone])`` for these arrays; the
    answer kept in ``cache`` again when the arrays are the same objects as last time (an optimizer's
    every step, unless Adam's L2 term makes new gradient arrays)."""
    import cupy

    key = tuple(id(array) for quad in quads for array in quad)
    if cache.get("key") == key:
        return cache["tables"], cache["alone"]
    groups: dict[Any, list] = {}
    alone = []
    for quad in quads:
        rows, cols = _geometry(quad[0])
        strides = [_row_stride(array, rows, cols) for array in quad]
        if None in strides or len({array.dtype for array in quad}) != 1:
            alone.append(quad)
            continue
        groups.setdefault(quad[0].dtype, []).append((quad, rows, cols, strides))
    tables = {}
    for dtype, members in groups.items():
        table, offset = [], 0
        for quad, rows, cols, strides in members:
            table.append([array.data.ptr for array in quad] + [rows, cols] + strides + [offset])
            offset += rows * cols
        tables[dtype] = (cupy.asarray(numpy.array(table, dtype=numpy.int64)), len(table), offset)
    # The arrays are kept with the key: their ids stay theirs while the cache holds them.
    cache.update(key=key, tables=tables, alone=alone, arrays=quads)
    return tables, alone


adam_step.many = adam_steps  # type: ignore[attr-defined]
