"""CPU threads: npformer splits its hot loops over rows, one block per core.

NumPy runs every elementwise operation (``exp``, ``max``, ``+=``) on one core, and
its BLAS parallelises only the matrix products, whose threads then spin, waiting
for the next product, on the cores the elementwise work could have used. So
npformer does its own splitting. An op that works row by row writes its body
once, as a function of a block of rows, and hands it to ``parallel_rows``::

    def normalise(rows):                      # rows: a slice of the first axis
        xp.subtract(z[rows], z[rows].max(axis=-1, keepdims=True), out=shifted[rows])
        ...
    threads.parallel_rows(normalise, n_rows, row_size=z.shape[-1])

``parallel_rows`` calls the body once per block of consecutive rows, each block
on its own thread (NumPy releases the GIL inside its loops and BLAS calls), and
returns when all are done. Rows never interact inside one call, so the result
is the same as one call over every row: the split is a schedule, not new math.
With one thread (``set_threads(1)``, or CuPy, or a small array) it *is* one call
over every row, the textbook form.

While a call splits its rows over threads, BLAS is held to one thread (through
``threadpoolctl``), so that npformer's threads and BLAS's do not compete for the
same cores; BLAS gets its threads back as soon as the call returns. Every fast
form that calls BLAS (linear, attention, layer norm's backward) holds BLAS to one
thread while it runs (``with_blas_on_one_thread``), whichever loop calls it; a training
step or a decoding loop on the fast op set holds it once for all its calls. The hold is the
process's: BLAS's thread count is one setting for all threads, so while one thread
runs a fast op, a textbook set in another thread also gets one BLAS thread. Outside npformer's own calls, and after ``import npformer``, every thread
pool of the process is as it was.

The number of threads: ``NPFORMER_THREADS`` if set, else the cores this process
may run on, at most 8. ``threadpoolctl`` is a dependency of npformer; where it is
missing anyway, the default is one thread and npformer's blocks are not used.
These threads serve the fast op set (``npformer/ops/fast/``); the textbook ops
never split.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

from .backend import is_cupy

__all__ = ["set_threads", "get_threads", "parallel_rows", "parallel_row_pairs", "parallel_items", "blas_on_one_thread",
           "with_blas_on_one_thread", "MIN_BLOCK_SIZE"]

# A block smaller than this many array elements is not worth a thread: handing
# work to another thread costs tens of microseconds, about what NumPy needs for
# 30,000 additions.
MIN_BLOCK_SIZE = 1 << 15

_blas_controllers: Any = None  # threadpoolctl's BLAS controllers, found at the first hold
_holders = 0  # how many holds of BLAS at one thread are open (any thread); BLAS is held while > 0
_saved_counts: list = []  # each BLAS library's threads before the first hold
_hold_lock = threading.Lock()
_inside = threading.local()  # set while a thread runs a block: nested calls stay serial


def _has_threadpoolctl() -> bool:
    import importlib.util

    return importlib.util.find_spec("threadpoolctl") is not None


def _default_threads() -> int:
    if not _has_threadpoolctl():
        return 1
    requested = os.environ.get("NPFORMER_THREADS", "").strip()
    if requested:
        if not requested.isdigit() or int(requested) < 1:
            raise ValueError(f"NPFORMER_THREADS must be a whole number >= 1, got {requested!r}")
        return int(requested)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    """``workers`` background threads; the calling thread runs one block itself."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="npformer")


def set_threads(count: int | None = None) -> None:
    """Use ``count`` threads (None: the default above); 1 = one call over all rows."""
    global _threads
    count = _default_threads() if count is None else count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"set_threads: count must be an integer >= 1, got {count!r}")
    if count > 1 and not _has_threadpoolctl():
        raise ImportError("set_threads: more than one thread needs threadpoolctl, to hold BLAS to one "
                          "thread meanwhile: pip install threadpoolctl")
    _threads = count


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process, found once."""
    global _blas_controllers
    if _blas_controllers is None:
        from threadpoolctl import ThreadpoolController

        _blas_controllers = ThreadpoolController().select(user_api="blas").lib_controllers
    return _blas_controllers


def _hold() -> None:
    """One more holder of BLAS at one thread; the first sets every BLAS library to one thread."""
    global _holders, _saved_counts
    with _hold_lock:
        if _holders == 0:
            libraries = _blas_libraries()
            _saved_counts = [library.get_num_threads() for library in libraries]
            for library in libraries:
                library.set_num_threads(1)
        _holders += 1


def _release() -> None:
    """One holder fewer; the last gives every BLAS library its threads back."""
    global _holders
    with _hold_lock:
        _holders -= 1
        if _holders == 0:
            for library, count in zip(_blas_libraries(), _saved_counts):
                library.set_num_threads(count)


def _needs_hold() -> bool:
    """Whether BLAS should be held: npformer splits over more than one thread, on the CPU."""
    return _threads > 1 and not is_cupy()


@contextlib.contextmanager
def blas_on_one_thread(when: bool = True) -> Iterator[None]:
    """Hold BLAS to one thread inside the block (if ``when``), and give its threads back at the end.

    Every fast form that calls BLAS holds it while it runs (``with_blas_on_one_thread``), so that
    whichever loop calls them, BLAS never runs on all cores between npformer's split calls: a BLAS call on all cores wakes
    BLAS's own threads, which then spin for a while on the cores that npformer's next split
    needs (measured: the linear layer's forward and backward took 2x as long). A caller about
    to make many fast calls (a training step, a decoding loop) may hold it once around all of
    them, which saves a few microseconds per call. Holds nest (a count; the last one out gives
    the threads back); with one thread, or on CuPy, it does nothing (more than one thread needs
    threadpoolctl: ``set_threads`` and the default make sure of it).
    """
    if not when or not _needs_hold():
        yield
        return
    _hold()
    try:
        yield
    finally:
        _release()


def with_blas_on_one_thread(function: Callable) -> Callable:
    """Decorator: ``function`` runs with BLAS held to one thread (``blas_on_one_thread``). Every
    fast form that calls BLAS (``npformer/ops/fast/``: linear, attention, layer norm's backward)
    wears it; it costs a few microseconds per outermost call."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _needs_hold():  # one thread, or CuPy: nothing to hold, and no context manager to enter
            return function(*args, **kwargs)
        with blas_on_one_thread():
            return function(*args, **kwargs)

    return call


def with_blas_on_one_thread_when(holds: Callable[[], bool]) -> Callable:
    """Decorator factory: the function runs with BLAS held to one thread whenever ``holds()`` is true
    at the time of the call. ``training.train_step`` and greedy and beam decoding wear it with
    ``ops.holds_blas`` (the active set's products are npformer's threaded ones): one hold around all
    their calls, beside each fast form's own (``with_blas_on_one_thread``)."""

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with blas_on_one_thread(when=holds()):
                return function(*args, **kwargs)

        return call

    return decorate


def get_threads() -> int:
    """How many threads ``parallel_rows`` uses at most."""
    return _threads


def _serial() -> bool:
    """Whether work runs on this thread alone: one thread set, inside a block already (nested calls
    stay serial), or CuPy (one kernel launch over every row; the GPU does the parallel part)."""
    return _threads == 1 or getattr(_inside, "active", False) or is_cupy()


def _blocks(n_rows: int, row_size: int, at_most: int | None = None) -> list[slice]:
    """Consecutive row slices, one per thread (at most ``at_most``), each at least ``MIN_BLOCK_SIZE``
    elements."""
    if n_rows == 0 or _serial():
        return [slice(0, n_rows)]
    count = min(at_most or _threads, n_rows, max(1, n_rows * max(row_size, 1) // MIN_BLOCK_SIZE))
    edges = [n_rows * index // count for index in range(count + 1)]
    return [slice(start, stop) for start, stop in zip(edges[:-1], edges[1:])]


def _run_marked(block: Callable[[Any], None], part: Any) -> None:
    _inside.active = True
    try:
        block(part)
    finally:
        _inside.active = False


def parallel_items(block: Callable[[Any], None], parts: list) -> None:
    """``block(part)`` for every part, the first on this thread and the others on the pool.

    The parts must be independent (no part reads what another writes). Waits for
    all of them; an exception in any part is raised here, after every part ended.
    With one thread, inside a block, or on CuPy (``_serial``), the parts run one after another here.
    """
    if len(parts) <= 1 or _serial():
        for part in parts:
            block(part)
        return
    with blas_on_one_thread():
        # Each worker runs in a copy of the caller's context: the caller's op set (``ops.using``) holds there.
        pending = [_pool(_threads - 1).submit(contextvars.copy_context().run, _run_marked, block, part)
                   for part in parts[1:]]
        try:
            _run_marked(block, parts[0])
        finally:
            errors = [future.exception() for future in pending]
    for error in errors:
        if error is not None:
            raise error


def parallel_rows(block: Callable[[slice], None], n_rows: int, row_size: int = 1) -> None:
    """``block(rows)`` over consecutive slices ``rows`` that together cover ``range(n_rows)``.

    Args:
        block: writes the results of its rows (into arrays made before the call);
            it must not read what another block writes.
        n_rows: the length of the axis being split.
        row_size: about how many array elements one row touches; blocks smaller
            than ``MIN_BLOCK_SIZE`` elements are merged, so small arrays run as one call.
    """
    parallel_items(block, _blocks(n_rows, row_size))


def parallel_row_pairs(first: Callable[[slice], None], n_first: int, first_size: int,
                       second: Callable[[slice], None], n_second: int, second_size: int) -> None:
    """Two independent loops of equal cost at once, half the threads on each: ``first(rows)`` over
    the blocks of ``range(n_first)`` and ``second(rows)`` over those of ``range(n_second)``.

    One hand-over to the threads instead of two (each costs tens of microseconds), and on two
    cores each loop runs whole on its own core (a linear layer's ``dX`` and ``dW``: one
    full-size product each, measured 4-26% faster than each product split in two).
    """
    half = max(_threads // 2, 1)
    parts = ([(first, rows) for rows in _blocks(n_first, first_size, half)]
             + [(second, rows) for rows in _blocks(n_second, second_size, half)])
    parallel_items(lambda part: part[0](part[1]), parts)


_threads = _default_threads()
