"""A strict stand-in for CuPy: NumPy underneath, CuPy's rules at the device boundary.

No GPU is needed to find the bugs that only a GPU would show. ``backend.set_backend("strict")``
(or ``NPFORMER_BACKEND=strict``) makes ``xp`` this module: every array it returns is a
``StrictArray``, a NumPy array kept out of reach, which behaves as a CuPy array does where the
two libraries differ:

* **no implicit trip to the host**: ``numpy.asarray(a)``, ``numpy.array(a)``, or a NumPy function
  that needs a host array raises ``TypeError``, with CuPy's message; only ``backend.to_numpy``
  (``a.get()``) crosses. ``float(a)``, ``int(a)``, ``bool(a)``, ``a.item()`` and ``a.tolist()`` work,
  as in CuPy (each is one explicit scalar or list copied back);
* **no host arrays in device math**: an operator or an ``xp`` function given a NumPy array of one
  or more dimensions raises ``TypeError``, as CuPy does; ``xp.asarray`` (``backend.asarray``) moves
  host data to the device, and assigning a host array into a slice is allowed, as in CuPy;
* a reduction returns a 0-dimensional array, not a NumPy scalar;
* ``xp.random.default_rng(seed)`` returns a generator with CuPy's interface (``cupy.random.Generator``
  on an ``XORWOW`` bit generator, as CuPy 14's ``cupy/random/_generator_api.pyx`` and
  ``_bit_generator.pyx`` define them): ``random``, ``uniform``, ``integers``, ``standard_normal``
  and a few more distributions, no ``normal``, ``choice`` or ``permutation``, and a
  ``bit_generator`` whose ``state`` is a *method* that returns a device pointer, not NumPy's dict of
  the state: code that saves ``generator.bit_generator.state`` fails here as it fails on CuPy.

NumPy's ufuncs and functions called on ``StrictArray`` go through the same rules
(``__array_ufunc__``, ``__array_function__``), as they do for CuPy arrays. ``used_names()`` lists
the ``xp`` attributes that were looked up, so a test can check that CuPy has each of them.
"""

from __future__ import annotations

import operator
import types
from typing import Any

import numpy

IMPLICIT_CONVERSION = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
                       "construct a NumPy array explicitly.")
# Functions that take host data by design, as in CuPy.
_FROM_HOST = {"asarray", "array", "asanyarray", "ascontiguousarray"}
_used: set[str] = set()


class HostArrayError(TypeError):
    """A host (NumPy) array met a device array where CuPy would refuse it."""


def used_names() -> set[str]:
    """The ``xp`` attributes looked up so far (``"matmul"``, ``"random.default_rng"``, ...)."""
    return set(_used)


def _to_device(value: Any, where: str) -> Any:
    """The NumPy value under ``value``: device arrays unwrapped, containers walked, host arrays
    with dimensions refused."""
    if isinstance(value, StrictArray):
        return value._data
    if isinstance(value, numpy.ndarray) and value.ndim > 0:
        raise HostArrayError(f"{where}: got a NumPy array of shape {value.shape}, a host array; CuPy refuses "
                             "it here (move it with npformer.backend.asarray)")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(item, where) for item in value)
    if isinstance(value, dict):
        return {key: _to_device(item, where) for key, item in value.items()}
    return value


def _index(value: Any) -> Any:
    """An index: device arrays unwrapped; slices, ints and host index arrays as they are."""
    if isinstance(value, StrictArray):
        return value._data
    if isinstance(value, tuple):
        return tuple(_index(item) for item in value)
    return value


def _wrap(value: Any) -> Any:
    """NumPy results back onto the "device": arrays and NumPy scalars become ``StrictArray``."""
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return StrictArray(numpy.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(item) for item in value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


def _device_function(function: Any, name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        if name.rsplit(".", 1)[-1] in _FROM_HOST:
            args = tuple(a._data if isinstance(a, StrictArray) else a for a in args)
        else:
            args, kwargs = _to_device(args, f"xp.{name}"), _to_device(kwargs, f"xp.{name}")
        return _wrap(function(*args, **kwargs))

    call.__name__ = name
    return call


class _StrictObject:
    """An object of the stand-in (a module, a random generator): its functions take and return
    device arrays."""

    def __init__(self, target: Any, name: str) -> None:
        self._target, self._name = target, name

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._target, attribute)
        full = f"{self._name}.{attribute}" if self._name else attribute
        if isinstance(self._target, types.ModuleType):
            _used.add(full)
        if attribute == "ndarray":
            return StrictArray
        if full == "random.default_rng":
            return _default_rng
        if isinstance(value, types.ModuleType):
            return _StrictObject(value, full)
        if hasattr(value, "__getitem__") and type(value).__name__ in ("RClass", "CClass"):  # xp.r_, xp.c_
            return _StrictConcatenator(value, full)
        if isinstance(value, (type, numpy.ufunc)) or not callable(value):
            return value  # dtypes, constants, ufuncs (their calls reach __array_ufunc__)
        return _device_function(value, full)

    def __repr__(self) -> str:
        return f"<npformer strict stand-in for {self._name or 'cupy'}>"


class _StrictBitGenerator:
    """CuPy's ``XORWOW``: its state lives on the device; ``state()`` is a method giving its address."""

    def __init__(self, seed: Any) -> None:
        self._seed_seq = numpy.random.SeedSequence(seed)
        self._state = numpy.zeros(48, dtype=numpy.int8)          # stands for the per-thread cuRAND states

    def state(self) -> int:
        return self._state.ctypes.data

    def random_raw(self, size: Any = None, output: bool = True) -> Any:
        raise NotImplementedError("the strict stand-in does not draw raw bits")


class _StrictGenerator:
    """``cupy.random.Generator``: the distributions CuPy's offers, on device arrays."""

    def __init__(self, seed: Any = None) -> None:
        self.bit_generator = _StrictBitGenerator(seed)
        self._numpy = numpy.random.Generator(numpy.random.PCG64(self.bit_generator._seed_seq))

    def random(self, size: Any = None, dtype: Any = numpy.float64, out: Any = None) -> Any:
        if numpy.dtype(dtype).char not in "fd":
            raise TypeError(f"Unsupported dtype {numpy.dtype(dtype).name} for random")  # CuPy: float32, float64
        return self._into(self._numpy.random(size, dtype=dtype), out)

    def standard_normal(self, size: Any = None, dtype: Any = numpy.float64, out: Any = None) -> Any:
        return self._into(self._numpy.standard_normal(size, dtype=dtype), out)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = numpy.float64) -> Any:
        return _wrap(numpy.asarray(self._numpy.uniform(low, high, size), dtype=dtype))

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = numpy.int64,
                 endpoint: bool = False) -> Any:
        return _wrap(numpy.asarray(self._numpy.integers(low, high, size, dtype=dtype, endpoint=endpoint)))

    def __getattr__(self, name: str) -> Any:
        # the other distributions of CuPy's Generator, drawn by NumPy's
        if name in ("beta", "binomial", "chisquare", "dirichlet", "exponential", "f", "gamma", "geometric",
                    "hypergeometric", "logseries", "poisson", "power", "standard_exponential", "standard_gamma"):
            method = getattr(self._numpy, name)
            return lambda *args, **kwargs: _wrap(numpy.asarray(method(*_to_device(args, name),
                                                                      **_to_device(kwargs, name))))
        raise AttributeError(f"'cupy.random.Generator' object has no attribute {name!r}")

    @staticmethod
    def _into(values: Any, out: Any) -> Any:
        values = numpy.asarray(values)
        if out is None:
            return _wrap(values)
        out[...] = _wrap(values)
        return out


def _default_rng(seed: Any = None) -> _StrictGenerator:
    """``cupy.random.default_rng``: a ``Generator`` on ``XORWOW``."""
    if isinstance(seed, StrictArray):
        seed = seed.get()
    return _StrictGenerator(seed)


class _StrictConcatenator:
    """``xp.r_`` and ``xp.c_``: NumPy's index-style concatenation, on device arrays."""

    def __init__(self, target: Any, name: str) -> None:
        self._target, self._name = target, name

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._target[_to_device(key, f"xp.{self._name}")])


class StrictArray:
    """A device array of the stand-in: NumPy underneath, never converted to NumPy implicitly."""

    __slots__ = ("_data",)
    __array_priority__ = 100

    def __init__(self, data: numpy.ndarray) -> None:
        self._data = data

    # -- the device boundary ---------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> numpy.ndarray:
        raise TypeError(IMPLICIT_CONVERSION)

    def get(self) -> numpy.ndarray:
        """A host copy (``cupy.ndarray.get``); ``backend.to_numpy`` calls it."""
        return self._data.copy()

    def __array_ufunc__(self, ufunc: numpy.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        where = f"numpy.{ufunc.__name__}"
        inputs = _to_device(inputs, where)
        if "out" in kwargs:
            kwargs["out"] = _to_device(kwargs["out"], where)
        result = getattr(ufunc, method)(*inputs, **kwargs)
        return None if method == "at" else _wrap(result)

    def __array_function__(self, function: Any, kinds: Any, args: Any, kwargs: Any) -> Any:
        where = f"numpy.{function.__name__}"
        return _wrap(function(*_to_device(args, where), **_to_device(kwargs, where)))

    # -- what CuPy allows: explicit scalars and lists -----------------------------------------------
    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Any:
        return (_wrap(row) for row in self._data)

    def __repr__(self) -> str:
        text = repr(self._data)
        return "strict" + text.removeprefix("array") if text.startswith("array") else text

    # -- indexing -------------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._data[_index(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[_index(key)] = value._data if isinstance(value, StrictArray) else value

    # -- attributes and methods: NumPy's, on device arrays ----------------------------------------------
    @property
    def T(self) -> "StrictArray":
        return StrictArray(self._data.T)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # never NumPy's __array_interface__ and the like: no way around get()
            raise AttributeError(name)
        value = getattr(self._data, name)
        if callable(value):
            return _device_function(value, f"ndarray.{name}")
        return _wrap(value) if isinstance(value, numpy.ndarray) else value


def _operator(name: str) -> Any:
    return getattr(operator, name + "_" if name in ("and", "or", "not") else name)


def _binary(name: str) -> Any:
    function = _operator(name)

    def method(self: StrictArray, other: Any) -> Any:
        return _wrap(function(self._data, _to_device(other, f"the operator {name}")))

    return method


def _reflected(name: str) -> Any:
    function = _operator(name)

    def method(self: StrictArray, other: Any) -> Any:
        return _wrap(function(_to_device(other, f"the operator {name}"), self._data))

    return method


def _in_place(name: str) -> Any:
    function = getattr(operator, f"i{name}")

    def method(self: StrictArray, other: Any) -> StrictArray:
        self._data = function(self._data, _to_device(other, f"the operator i{name}"))
        return self

    return method


def _unary(name: str) -> Any:
    function = getattr(operator, name)

    def method(self: StrictArray) -> StrictArray:
        return _wrap(function(self._data))

    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lshift", "rshift"):
    setattr(StrictArray, f"__{_name}__", _binary(_name))
    setattr(StrictArray, f"__r{_name}__", _reflected(_name))
    setattr(StrictArray, f"__i{_name}__", _in_place(_name))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(StrictArray, f"__{_name}__", _binary(_name))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(StrictArray, f"__{_name}__", _unary(_name))
StrictArray.__hash__ = None  # like NumPy's and CuPy's arrays

module = _StrictObject(numpy, "")
