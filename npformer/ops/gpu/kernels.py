"""Compiling the CUDA kernels of ``npformer.ops.gpu``: the row-wise ones from one source for two dtypes, the
elementwise ones through ``elementwise_kernel``; each made once.

Each row-wise kernel gives one block of threads to one row (a layer norm row of ``D`` values, an
attention row of ``Tk`` scores, a vocabulary row of logits): the threads stride along the row, and
``block_sum`` and ``block_max`` combine their partial results in shared memory. Sums accumulate in
double precision whatever ``real`` is, so a float32 row of 30,000 logits loses nothing to its
length. A source is compiled once per dtype (``real`` is ``float`` or ``double``) by CuPy's NVRTC
and cached on disk by CuPy.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy

MAX_THREADS = 256

HEADER = r"""
typedef REAL real;

// -inf as a double (NVRTC defines no INFINITY): the IEEE bits of minus infinity.
__device__ inline double minus_infinity() { return __longlong_as_double(0xfff0000000000000LL); }

// The sum of every thread's value, in every thread. blockDim.x is a power of two <= 256.
__device__ double block_sum(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads();                       // shared is free again for the next reduction
    return total;
}

// The largest of every thread's value, in every thread.
__device__ double block_max(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + half]);
        __syncthreads();
    }
    double largest = shared[0];
    __syncthreads();
    return largest;
}
"""


@functools.cache
def _module(source: str, dtype_name: str) -> Any:
    import cupy

    real = {"float32": "float", "float64": "double"}[dtype_name]
    return cupy.RawModule(code=HEADER.replace("REAL", real) + source, options=("--std=c++14",))


def row_kernel(source: str, name: str, dtype: Any) -> Any:
    """The kernel ``name`` of ``source`` compiled for ``dtype`` (float32 or float64)."""
    dtype = numpy.dtype(dtype)
    if dtype.name not in ("float32", "float64"):
        raise TypeError(f"npformer's GPU kernels take float32 or float64 arrays, got {dtype}")
    return _function(source, name, dtype.name)


@functools.cache
def _function(source: str, name: str, dtype_name: str) -> Any:
    return _module(source, dtype_name).get_function(name)


@functools.cache
def elementwise_kernel(in_params: str, out_params: str, body: str, name: str) -> Any:
    """``cupy.ElementwiseKernel(in_params, out_params, body, name)``, made once (CuPy compiles it at
    its first call for each dtype)."""
    import cupy

    return cupy.ElementwiseKernel(in_params, out_params, body, name)


def threads_for(row_length: int) -> int:
    """Threads per row: the power of two at or above the row length, between 32 and 256."""
    threads = 32
    while threads < min(row_length, MAX_THREADS):
        threads *= 2
    return threads


def launch_rows(kernel: Any, n_rows: int, row_length: int, arguments: tuple) -> None:
    """One block per row."""
    if n_rows > 0:
        kernel((n_rows,), (threads_for(row_length),), arguments)
