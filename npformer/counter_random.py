"""The random generator of the device backends: numbers as a hash of (key, position).

NumPy's ``Generator`` keeps its state on the host as a small dict, which a checkpoint stores as
JSON. CuPy's keeps one cuRAND state per GPU thread in device memory (48 bytes for each of a few
hundred thousand threads, a count that depends on the card), behind a ``state()`` method that
returns a pointer: nothing a checkpoint can hold, nor move to another card or to a CPU. So on
CuPy (and on the strict stand-in, ``npformer.strict_backend``) ``backend.default_rng`` returns this
counter-based generator instead. The ``i``-th number it ever draws is a fixed function of its key
and of ``i``, SplitMix64 (Steele, Lea and Flood, 2014)::

    z = key + (i + 1) * 0x9E3779B97F4A7C15                 (mod 2^64)
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    z =  z ^ (z >> 31)
    u = (z >> 40) / 2^24     (float32)    or    (z >> 11) / 2^53    (float64),   u in [0, 1)

so its whole state is two integers, ``{"key", "position"}`` (how many numbers it has drawn): JSON
in a checkpoint, the same on every card, and the same uniform numbers on NumPy, on the stand-in and
on CuPy for the same key (its normal numbers go through ``log1p``, ``cos`` and ``sqrt``, which the
GPU may round one ulp apart). Each draw is one pass over its output (one fused kernel on CuPy), with no
state to read or write on the device.

It offers what npformer draws on the device: ``random`` (dropout's masks) and
``standard_normal``, and, like a NumPy ``Generator``, ``bit_generator.state`` to read and set.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

NAME = "npformer.SplitMix64Counter"
_GAMMA, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1

# The same hash as one CuPy kernel: ``i`` is the output's flat index (CuPy's ElementwiseKernel).
CUDA_UNIFORM = """
unsigned long long z = key + (start + (unsigned long long)i + 1ull) * 0x9E3779B97F4A7C15ull;
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
z = z ^ (z >> 31);
out = (sizeof(T) == 4) ? (T)((double)(z >> 40) * (1.0 / 16777216.0))
                       : (T)((double)(z >> 11) * (1.0 / 9007199254740992.0));
"""
_kernels: dict[str, Any] = {}


class CounterState:
    """``generator.bit_generator``: the state, as NumPy's bit generators show theirs (a dict)."""

    def __init__(self, key: int) -> None:
        self.key, self.position = key, 0

    @property
    def state(self) -> dict:
        return {"bit_generator": NAME, "key": self.key, "position": self.position}

    @state.setter
    def state(self, value: dict) -> None:
        if not isinstance(value, dict) or value.get("bit_generator") != NAME:
            got = value.get("bit_generator") if isinstance(value, dict) else type(value).__name__
            raise ValueError(f"state must be a {NAME} state, got one of {got!r}")
        key, position = int(value["key"]), int(value["position"])
        if not (0 <= key <= _MASK64 and position >= 0):
            raise ValueError(f"state: key must be in [0, 2^64) and position >= 0, got {key}, {position}")
        self.key, self.position = key, position


class CounterGenerator:
    """A seeded generator whose numbers are SplitMix64 of (key, position), on the array ``module``
    given (CuPy, or the strict stand-in; NumPy works too, and gives the same numbers)."""

    def __init__(self, seed: Any, module: Any) -> None:
        key = int(numpy.random.SeedSequence(seed).generate_state(1, numpy.uint64)[0])
        self.bit_generator = CounterState(key)
        self._module = module

    def __repr__(self) -> str:
        state = self.bit_generator
        return f"CounterGenerator(key={state.key:#x}, position={state.position})"

    def reserve(self, count: int) -> tuple[int, int]:
        """Reserve the next ``count`` positions of the stream: ``(key, first position)``, for a kernel
        that computes the numbers itself (``npformer.ops.gpu.dropout``)."""
        start = self.bit_generator.position
        self.bit_generator.position = start + count
        return self.bit_generator.key, start

    def random(self, size: Any = None, dtype: Any = numpy.float64) -> Any:
        """Uniform numbers in ``[0, 1)`` of shape ``size`` (float32 or float64)."""
        dtype = numpy.dtype(dtype)
        if dtype not in (numpy.float32, numpy.float64):
            raise TypeError(f"random: dtype must be float32 or float64, got {dtype}")
        shape = _shape(size)
        count = math.prod(shape)
        _, start = self.reserve(count)
        xp = self._module
        if getattr(xp, "__name__", "") == "cupy":
            out = xp.empty(shape, dtype=dtype)
            _uniform_kernel(xp)(numpy.uint64(self.bit_generator.key), numpy.uint64(start), out)
            return out
        z = (xp.arange(1, count + 1, dtype=xp.uint64) + numpy.uint64(start)) * numpy.uint64(_GAMMA)
        z = z + numpy.uint64(self.bit_generator.key)                               # key + (i + 1) gamma
        z = (z ^ (z >> numpy.uint64(30))) * numpy.uint64(_MIX1)
        z = (z ^ (z >> numpy.uint64(27))) * numpy.uint64(_MIX2)
        z = z ^ (z >> numpy.uint64(31))
        if dtype == numpy.float32:
            uniform = (z >> numpy.uint64(40)).astype(numpy.float64) * (1.0 / (1 << 24))
        else:
            uniform = (z >> numpy.uint64(11)).astype(numpy.float64) * (1.0 / (1 << 53))
        return uniform.astype(dtype).reshape(shape)

    def standard_normal(self, size: Any = None, dtype: Any = numpy.float64) -> Any:
        """Normal numbers (Box-Muller on pairs of uniforms) of shape ``size``."""
        shape = _shape(size)
        count = math.prod(shape)
        xp = self._module
        u1, u2 = self.random((2, count), dtype=numpy.float64)
        normal = xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos(2.0 * math.pi * u2)      # log1p(-u): u < 1, never log(0)
        return normal.astype(dtype).reshape(shape)


def _shape(size: Any) -> tuple[int, ...]:
    """NumPy's ``size`` argument as a shape: None is one number, an int a vector."""
    return () if size is None else (tuple(size) if isinstance(size, (tuple, list)) else (int(size),))


def _uniform_kernel(cupy: Any) -> Any:
    if "uniform" not in _kernels:
        _kernels["uniform"] = cupy.ElementwiseKernel("uint64 key, uint64 start", "T out", CUDA_UNIFORM,
                                                     "npformer_splitmix64_uniform")
    return _kernels["uniform"]
