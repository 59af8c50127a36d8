"""The grader's side of the grading worker (``sandbox.py``): start it, send a job, read the replies.

A job is one student's function for one exercise, with the inputs of every case; the reply is,
per case, what the function returned (or raised, or printed). The function travels either as an
object (``check`` in a lesson: pickled by value with cloudpickle, helpers and closures included)
or as source (``course grade``: the collected text, which this process never executes).

One worker serves a whole process (``shared()``), started on first use; it never runs a
student's code itself (a fresh child per job does), so reusing it is safe.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pickle
import select
import site
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import sandbox

MEMORY_MB = 2048  # the address space a job may use (NumPy and OpenBLAS take about 400 MB of it)


class WorkerUnavailable(RuntimeError):
    """The grading worker could not start or stopped answering: a problem of the machine, not of the student."""


@dataclass
class Reply:
    """One case's reply: ``status`` is "returned", "raised", "not_implemented", "npformer" (asked for
    an npformer module), "load_failed", "too_big" or "grader_error"; a case without a reply shows in
    ``JobResult.end`` instead."""

    status: str
    output: Any = None
    error_type: str = ""
    message: str = ""
    file: str = ""
    line: int = 0
    module: str = ""
    printed: int = 0
    shown: str = ""


@dataclass
class JobResult:
    replies: list[Reply] = field(default_factory=list)
    end: str = "exited"  # or "timed out", "died (...)": the exit status or what went wrong


def _pickled(value: Any) -> bytes:
    """``value`` pickled with cloudpickle, by value for every module the worker could not import:
    the course's own (the cases' made-up models and maps, the catalogue's wrong solutions) and a
    student's files. The rest of npformer is pickled by reference, so that a function that reaches
    for it fails in the worker, where npformer cannot be imported."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__package__])  # npformer.course
    for name, module in list(sys.modules.items()):
        if name in _SEEN:
            continue
        _SEEN.add(name)
        if name.split(".")[0] != "npformer" and getattr(module, "__file__", None) and not _installed(module):
            try:
                cloudpickle.register_pickle_by_value(module)
            except (ValueError, TypeError):
                pass
    return cloudpickle.dumps(value)


_SEEN: set[str] = set()  # the modules already looked at


def _installed(module: Any) -> bool:
    path = getattr(module, "__file__", None)
    return bool(path) and str(Path(path).resolve()).startswith(tuple(_library_roots()))


@functools.cache
def _library_roots() -> list[str]:
    """The Python installation and its packages: a module from there is importable by the worker
    (if preloaded, ``sandbox.PRELOADED``), so it is pickled by reference."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    return sorted(str(Path(root).resolve()) for root in roots)


class Worker:
    """The worker process and the lock that gives it one job at a time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self._process is not None and self._process.poll() is None:
            return self._process
        environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
        environment.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
        try:
            self._process = subprocess.Popen([sys.executable, "-I", sandbox.__file__], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             cwd=os.path.abspath(os.sep), env=environment,  # it opens no file
                                             start_new_session=True)  # a child's signal reaches no grader
        except OSError as error:
            raise WorkerUnavailable(f"the grading worker did not start: {error}") from error
        return self._process

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None

    def run(self, cases: list[dict], *, function: Callable | None = None, source: str | None = None,
            name: str = "", filename: str = "<submission>", pointwise: str | None = None,
            time_limit: float = 60.0, memory_mb: int = MEMORY_MB) -> JobResult:
        """Run one job: ``function`` (an object) or ``source`` (text defining ``name``) on ``cases``."""
        job = {"cases": [_pickled(inputs) for inputs in cases], "name": name, "filename": filename,
               "source": source, "pointwise": pointwise, "time_limit": time_limit, "memory_mb": memory_mb,
               "function": None}
        result = JobResult()
        if function is not None:
            try:
                job["function"] = _pickled(function)
            except Exception as error:  # noqa: BLE001 - what cannot be pickled is reported, not raised
                result.replies.append(Reply("load_failed", error_type=type(error).__name__,
                                            message=f"could not be sent to the grading process: {error}"))
                return result
        with self._lock:
            process = self._start()
            try:
                sandbox.write_message(process.stdin.fileno(), pickle.dumps(job))
            except OSError as error:
                self.close()
                raise WorkerUnavailable(f"the grading worker stopped: {error}") from error
            deadline = time.monotonic() + time_limit + 30  # the worker ends the job at time_limit itself
            while True:
                entry = self._read(process, deadline)
                if entry is None:
                    self.close()
                    result.end = "died (no reply)"
                    return result
                if "end" in entry:
                    end, code = entry["end"], entry.get("code")
                    ended = end == "timed out" or (end == "exited" and code == 0)
                    result.end = end if ended else f"died ({code})"
                    return result
                result.replies.append(_reply(entry))

    def _read(self, process: subprocess.Popen, deadline: float) -> dict | None:
        fd = process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        try:
            return json.loads(sandbox.read_message(fd, limit=sandbox.MAX_MESSAGE))
        except (EOFError, OSError, ValueError):
            return None


def _reply(entry: dict) -> Reply:
    status = entry.get("status", "")
    output = sandbox.decode(entry["output"]) if status == "returned" else None
    return Reply(status, output, entry.get("type", ""), entry.get("message", ""), entry.get("file", ""),
                 int(entry.get("line", 0) or 0), entry.get("module", ""), int(entry.get("printed", 0)),
                 entry.get("shown", ""))


_SHARED: Worker | None = None


def shared() -> Worker:
    """The process's worker (``check`` uses it; ``course grade`` starts its own)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Worker()
        atexit.register(_SHARED.close)
    return _SHARED
