"""The array library behind every op: NumPy by default, CuPy on a GPU.

Every op and module does its math through ``xp``, a stand-in that forwards to
the active array module, so one call moves the whole library::

    from npformer import backend
    backend.set_backend("cupy")        # or: NPFORMER_BACKEND=cupy python train.py

``xp`` is looked up at call time, so ``from npformer.backend import xp`` keeps
working after a switch. Arrays made before a switch stay where they were: move
them with ``backend.asarray`` (host -> active module) or ``backend.to_numpy``
(any -> host).

This module also owns

* the default floating dtype (float32 for training; gradient checks use float64),
* seeded random generators (``default_rng``), never global random state.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy

__all__ = [
    "xp",
    "set_backend",
    "get_backend",
    "is_cupy",
    "to_numpy",
    "asarray",
    "default_rng",
    "get_default_dtype",
    "set_default_dtype",
    "default_dtype",
    "BackendUnavailableError",
    "synchronize",
]

_BACKEND_NAMES = ("numpy", "cupy", "strict")


class BackendUnavailableError(RuntimeError):
    """The requested array library cannot run here (CuPy missing, or no GPU)."""


class _ActiveArrayModule:
    """Forwards attribute access to the active array module (numpy or cupy).

    A name is looked up on the module once and then kept on the stand-in, so that the next
    ``xp.<name>`` is a plain attribute read (the ops read ``xp`` millions of times in a gradient
    check); ``_use`` forgets every kept name when the backend changes.
    """

    def __init__(self) -> None:
        self._use(numpy, "numpy")

    def _use(self, module: Any, name: str) -> None:
        """Forward to ``module`` (called ``name``) from now on: the module first, then the names
        kept from the previous one forgotten."""
        self._module: Any = module
        self._name = name
        for kept in [key for key in self.__dict__ if key not in ("_module", "_name")]:
            self.__dict__.pop(kept, None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # introspection (hasattr, copy, inspect) never loads a backend
            raise AttributeError(name)
        _apply_environment()
        module = self._module
        value = getattr(module, name)
        if self._module is module:  # not kept if the backend changed meanwhile (another thread)
            self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        pending = f" (NPFORMER_BACKEND={_from_environment!r} at first use)" if _from_environment else ""
        return f"<npformer active array module: {self._name}{pending}>"


xp = _ActiveArrayModule()
_default_dtype = numpy.dtype(numpy.float32)


def _load_cupy() -> Any:
    """Import CuPy and make sure it can see a GPU; say which part is missing."""
    try:
        import cupy
    except ImportError as error:
        raise BackendUnavailableError(
            "backend 'cupy' needs CuPy, which is not installed "
            f"({error}). Install the cupy-cudaXXx wheel that matches your CUDA (pip install "
            "cupy-cuda12x), or, from a clone of npformer, pip install \".[gpu]\"."
        ) from None
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDA driver missing or broken
        raise BackendUnavailableError(
            f"backend 'cupy': CuPy is installed but no CUDA GPU is usable ({error})."
        ) from None
    if n_devices == 0:
        raise BackendUnavailableError(
            "backend 'cupy': CuPy is installed but no CUDA GPU is visible."
        )
    return cupy


def set_backend(name: str) -> None:
    """Make ``name`` the array library of every op: "numpy", "cupy", or "strict" (NumPy
    underneath, CuPy's rules at the device boundary: ``npformer.strict_backend``, for tests).

    Raises ``ValueError`` for an unknown name and ``BackendUnavailableError``
    (a ``RuntimeError``) when CuPy is not installed or sees no GPU.
    """
    if not isinstance(name, str) or name.lower() not in _BACKEND_NAMES:
        raise ValueError(
            f"set_backend: name must be one of {_BACKEND_NAMES}, got {name!r}"
        )
    global _from_environment
    name = name.lower()
    if name == "cupy":
        module = _load_cupy()
    elif name == "strict":
        from . import strict_backend

        module = strict_backend.module
    else:
        module = numpy
    xp._use(module, name)
    _from_environment = None


def get_backend() -> str:
    """The active backend's name: "numpy", "cupy" or "strict"."""
    _apply_environment()
    return xp._name


def is_cupy() -> bool:
    """True when the active array module is CuPy (on a GPU)."""
    _apply_environment()
    return xp._name == "cupy"


def synchronize() -> None:
    """Wait until the GPU has finished the work queued so far (CuPy's kernels run asynchronously);
    nothing to wait for on NumPy. Timers of GPU work call it before reading the clock."""
    if is_cupy():
        xp._module.cuda.get_current_stream().synchronize()


def to_numpy(array: Any) -> numpy.ndarray:
    """A host NumPy array with the values of ``array`` (NumPy or CuPy)."""
    if hasattr(array, "get") and not isinstance(array, numpy.ndarray):
        return array.get()
    return numpy.asarray(array)


def asarray(array: Any, dtype: Any = None) -> Any:
    """``array`` as an array of the active module (copied to the GPU if needed)."""
    return xp.asarray(array, dtype=dtype)


def default_rng(seed: int | None = None) -> Any:
    """A seeded random generator of the active module.

    On NumPy, NumPy's ``numpy.random.default_rng(seed)``. On CuPy and on the strict stand-in,
    npformer's ``counter_random.CounterGenerator``: CuPy's own generator keeps its state in
    device memory, which no checkpoint can hold, while this one's state is two integers
    (``bit_generator.state``, a dict, as NumPy's) and it draws the same numbers on every card.
    Both offer ``random(size, dtype)`` and ``standard_normal(size, dtype)``.
    """
    if get_backend() == "numpy":
        return numpy.random.default_rng(seed)
    from .counter_random import CounterGenerator

    return CounterGenerator(seed, xp._module)


def get_default_dtype() -> numpy.dtype:
    """The floating dtype that parameters and activations are created in."""
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    """Set the default floating dtype: float32 (training) or float64 (checks)."""
    global _default_dtype
    dtype = numpy.dtype(dtype)
    if dtype not in (numpy.float32, numpy.float64):
        raise TypeError(
            f"set_default_dtype: dtype must be float32 or float64, got {dtype}"
        )
    _default_dtype = dtype


@contextlib.contextmanager
def default_dtype(dtype: Any) -> Iterator[numpy.dtype]:
    """Temporarily use ``dtype`` as the default, e.g. ``with default_dtype(float64):``."""
    previous = _default_dtype
    set_default_dtype(dtype)
    try:
        yield _default_dtype
    finally:
        set_default_dtype(previous)


# ``NPFORMER_BACKEND`` is read when the package is imported but applied at the first use of the
# array module (``xp.<name>``, ``get_backend``, ``is_cupy``), so that importing loads no CuPy and
# cannot fail: a CuPy that is missing or sees no GPU is one ``BackendUnavailableError`` at the
# first use (the command line prints it in one line and exits with status 2). An explicit
# ``set_backend`` wins over the variable.
_from_environment: str | None = os.environ.get("NPFORMER_BACKEND", "").strip() or None


def _apply_environment() -> None:
    """Switch to the backend that ``NPFORMER_BACKEND`` names, once, before its first use."""
    if _from_environment is None:
        return
    name = _from_environment
    if name.lower() not in _BACKEND_NAMES:
        raise BackendUnavailableError(f"NPFORMER_BACKEND={name!r} names no backend; it must be one of "
                                      f"{', '.join(_BACKEND_NAMES)} (or unset, for numpy)")
    set_backend(name)
