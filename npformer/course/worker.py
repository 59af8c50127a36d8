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
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import isolation, sandbox, wire

MEMORY_MB = 2048  # the address space a job may use (NumPy and OpenBLAS take about 400 MB of it)


class WorkerUnavailable(RuntimeError):
    """The grading worker could not start or stopped answering: a problem of the machine, not of the student."""


@dataclass
class Reply:
    """One case's reply: ``status`` is one a reply may say (``wire.FROM_WIRE``: returned, raised, not
    implemented, uses npformer, load failed, too big, grader error); a case without a reply shows in
    ``JobResult.end`` instead."""

    status: wire.Status
    output: Any = None
    error_type: str = ""
    message: str = ""
    file: str = ""
    line: int = 0
    module: str = ""
    printed: int = 0
    shown: str = ""
    microseconds: int = 0  # how long the function took on this case, measured in the worker


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
    """The worker process and the lock that gives it one job at a time.

    ``isolated=True`` (what ``course grade`` and the platforms' autograders use) runs it isolated by
    the kernel (``isolation.mode()``: bubblewrap, else an unprivileged user), and refuses to start
    where neither can be made (``IsolationUnavailable``, one line). ``isolated=False`` is the light
    worker of a student's own ``check``: a separate process with the descriptor lock, the audit
    hook and, where libseccomp is installed, the job's filter; it can only fool the student who
    runs it. ``hidden``: the instructor's paths (submissions, secret, outputs), masked inside the
    sandbox wherever a tree it sees holds them."""

    def __init__(self, isolated: bool = True, hidden: tuple = ()) -> None:
        self.isolated = isolated
        self.hidden = [Path(path) for path in hidden]
        self.mode = None   # "bubblewrap", "user", or None (the light worker)
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._script_copy: tempfile.TemporaryDirectory | None = None

    def _start(self) -> subprocess.Popen:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if self.isolated:
            self.mode = isolation.require(tuple(self.hidden))
        try:
            self._process = self._spawn()
        except OSError as error:
            raise WorkerUnavailable(f"the grading worker did not start: {error}") from error
        return self._process

    def _spawn(self) -> subprocess.Popen:
        """The worker process: in bubblewrap, as an unprivileged user, or (the light worker) plain."""
        options = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       cwd=os.path.abspath(os.sep), env=isolation.environment(),
                       start_new_session=True)  # a group of its own: killed whole, and no signal reaches the grader
        if self.mode == "bubblewrap":
            read_end, write_end = os.pipe()  # the filter's program, read by bubblewrap once
            os.write(write_end, isolation.worker_filter())
            os.close(write_end)
            try:
                command = isolation.bubblewrap_command(isolation.interpreter(), sandbox.__file__, self.hidden, read_end)
                return subprocess.Popen(command, pass_fds=(read_end,), **options)
            finally:
                os.close(read_end)
        script = sandbox.__file__
        if self.mode == "user":  # a copy that uid 65534 can read, outside npformer's folder
            self._script_copy = tempfile.TemporaryDirectory(prefix="npformer-worker-")
            os.chmod(self._script_copy.name, 0o755)
            for source in (sandbox.__file__, wire.__file__):
                os.chmod(shutil.copy(source, self._script_copy.name), 0o644)
            script = os.path.join(self._script_copy.name, "sandbox.py")
            options["preexec_fn"] = isolation.drop_to_sandbox_user
        return subprocess.Popen([sys.executable, "-I", script], **options)

    def close(self) -> None:
        """Stop the worker and everything it started: asked to end (its input closed), then its
        process group killed while it is still unreaped (bubblewrap's PID namespace, and with it
        every process inside, goes with bubblewrap: ``--die-with-parent``)."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                try:
                    process.stdin.close()
                    process.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:
                    process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self._script_copy is not None:
            self._script_copy.cleanup()
            self._script_copy = None

    def run(self, cases: list[dict], *, function: Callable | None = None, source: str | None = None,
            name: str = "", filename: str = "<submission>", pointwise: str | None = None,
            in_place: tuple = (), time_limit: float = 60.0, memory_mb: int = MEMORY_MB) -> JobResult:
        """Run one job: ``function`` (an object) or ``source`` (text defining ``name``) on ``cases``."""
        result = JobResult()
        with self._lock:
            process = self._start()
            job = {"cases": [_pickled(inputs) for inputs in cases], "name": name, "filename": filename,
                   "source": source, "pointwise": pointwise, "in_place": list(in_place), "time_limit": time_limit,
                   "memory_mb": memory_mb,
                   "function": None, "isolated": self.mode is not None,
                   "seccomp": isolation.job_filter() if isolation.filters_unavailable() is None else None}
            if function is not None:
                try:
                    job["function"] = _pickled(function)
                except Exception as error:  # noqa: BLE001 - what cannot be pickled is reported, not raised
                    result.replies.append(Reply(wire.Status.LOAD_FAILED, error_type=type(error).__name__,
                                                message=f"could not be sent to the grading process: {error}"))
                    return result
            try:
                header = {"cases": len(cases), "time_limit": time_limit}  # what the worker reads; the job, its child
                wire.write_message(process.stdin.fileno(), json.dumps(header).encode("utf-8"))
                wire.write_message(process.stdin.fileno(), pickle.dumps(job))
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
                    end, code = entry.get("end"), entry.get("code")
                    ended = end == "timed out" or (end == "exited" and code == 0)
                    result.end = str(end) if ended else f"died ({str(code)[:80]})"
                    return result
                reply = _reply(entry, len(result.replies))
                if reply is None:  # the worker checks each reply; this is a second look, never trusted
                    result.end = "died (a malformed reply)"
                    self.close()
                    return result
                result.replies.append(reply)

    def _read(self, process: subprocess.Popen, deadline: float) -> dict | None:
        try:
            return wire.parse_reply(wire.read_message(process.stdout.fileno(), limit=wire.MAX_MESSAGE,
                                                   deadline=deadline))
        except (EOFError, OSError, ValueError, RecursionError, MemoryError):  # TimeoutError is an OSError
            return None


def _reply(entry: dict, case: int) -> Reply | None:
    """A case's reply as a ``Reply``, its status read into a ``wire.Status``, or None when it is
    malformed (a field missing or of another type, an unknown status, an output that ``encode``
    could not have written)."""
    if wire.check_reply(entry, case) is not None:
        return None
    status = wire.FROM_WIRE[entry["status"]]
    try:
        output = wire.decode(entry["output"]) if status is wire.Status.RETURNED else None
    except Exception:  # noqa: BLE001 - whatever the bytes are, they are not an output
        return None
    return Reply(status, output, entry.get("type", ""), entry.get("message", ""), entry.get("file", ""),
                 entry.get("line", 0), entry.get("module", ""), entry.get("printed", 0), entry.get("shown", ""),
                 entry.get("microseconds", 0))


_SHARED: Worker | None = None


def shared() -> Worker:
    """The process's light worker (``check`` uses it; ``course grade`` starts an isolated one)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Worker(isolated=False)
        atexit.register(_SHARED.close)
    return _SHARED
