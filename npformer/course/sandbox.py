"""The grading worker: where a student's function runs, in a process that never holds the answer.

The grader (``course.grader``) draws the cases and computes the references itself; this process
only receives a student's function and the inputs of each case, calls the function, and sends
back what it returned. It imports NumPy and cloudpickle, never npformer: the file is run as a
script (``python -I sandbox.py``), so that npformer's answers are not even loaded here.

One long-lived process serves many jobs (a job: one student's function for one exercise, on all
its cases). It loads the modules a graded function may use (``PRELOADED``), then forks a child for
each job, and only the child touches the student's code. When a class is graded, the whole process
is isolated by the kernel (``course.isolation``): that is the boundary. Before the student's code is
loaded, the child, in a process group of its own (killed whole at the job's deadline),

* limits its own memory (``RLIMIT_AS``), CPU time and file size;
* locks its file descriptors (``lock_file_descriptors``: no file can be opened, in the kernel);
* loads the job's seccomp filter (``install_filter``, built by libseccomp in the grader);
* installs ``guard``, an audit hook (PEP 578) that refuses the same and more with a clear message
  (no boundary: code that writes memory through NumPy disarms it).

The child writes to a pipe of its own, which the server relays after checking each reply.
Replies are length-prefixed JSON messages, arrays travelling as ``.npy`` bytes read back without
pickle, so nothing a student's function returns can run code in the grader (``wire.py``, shared
with the grader).
"""

from __future__ import annotations

import ctypes  # loaded before a child locks its files (install_filter uses it)
import io
import json
import os
import pickle
import sys
import time

if __name__ == "__main__":  # run as a script: the wire is the file beside it (in bubblewrap, NumPy and
    sys.path[:0] = sys.argv[1:2]  # cloudpickle are in the folder given first: -S, no site-packages)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    from wire import MAX_REPLY, MAX_MESSAGE, check_reply, encode, parse_reply, read_buffer, read_message, write_message
else:
    from .wire import MAX_REPLY, MAX_MESSAGE, check_reply, encode, parse_reply, read_buffer, read_message, write_message

SERVER_MEMORY = 4 * 2**30  # the worker's own address space; each job's child has its own, lower limit
SHOWN_PRINT = 2000      # characters of a function's printing sent back to be shown
FILE_SIZE = 16 * 2**20  # the largest file a job's child may write (RLIMIT_FSIZE; its filter opens none to write)


# -- the guard ------------------------------------------------------------------------------------

def guard(event: str, args: tuple) -> None:
    """The audit hook of a child, installed before the student's code is loaded.

    Once installed, Python code cannot remove it, and it keeps no state that the student's code
    could change: its rules are literals in its own code, and replacing its code (``__code__``) is
    itself refused. It refuses to open any file (so npformer's source, the lessons, the grader's
    files and an instructor's secret cannot be read; the modules a function may use are loaded
    before, ``PRELOADED``), to import npformer, to start or signal a process, to use ``ctypes``,
    to change resource limits, and to add another hook. Any exception raised here aborts the event.
    """
    if event == "open":
        raise PermissionError("files cannot be opened while your function is graded")
    if event == "import":
        name = args[0]
        if name == "npformer" or name.startswith("npformer."):
            raise ImportError(f"{name} cannot be imported while your function is graded (it holds the answers)")
        return
    if event == "object.__setattr__" and args[1] == "__code__":
        raise PermissionError("a function's code cannot be replaced while your function is graded")
    if event.startswith(("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                         "os.forkpty", "pty.", "os.kill", "os.killpg", "signal.pthread_kill", "os.remove",
                         "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.chown", "shutil.", "socket.",
                         "ctypes.", "resource.setrlimit", "resource.prlimit", "sys.addaudithook",
                         "os.add_dll_directory", "mmap.", "os.listdir", "os.scandir", "os.symlink",
                         "os.link", "os.mkdir", "os.utime", "os.chflags", "os.setxattr", "os.removexattr",
                         "os.mkfifo", "os.mknod", "os.chdir", "os.fchdir", "os.setuid", "os.setgid")):
        raise PermissionError(f"{event} is not allowed while your function is graded")


# What a graded function may import: loaded before any child, since a child cannot open a file.
PRELOADED = ("math", "cmath", "itertools", "functools", "collections", "collections.abc", "heapq", "bisect",
             "operator", "re", "string", "random", "statistics", "copy", "typing", "dataclasses", "numbers",
             "decimal", "fractions", "array", "struct", "json", "warnings", "inspect", "traceback", "linecache",
             "unicodedata", "textwrap", "numpy", "numpy.linalg", "numpy.fft", "numpy.random", "numpy.polynomial",
             "numpy.ma", "numpy.lib.stride_tricks", "cloudpickle")


# -- one job, in a child ----------------------------------------------------------------------------

class Printed(io.TextIOBase):
    """Where the student's printing goes: counted, and its start kept to be shown."""

    def __init__(self) -> None:
        self.count, self.kept = 0, []

    def write(self, text: str) -> int:
        if self.count < SHOWN_PRINT:
            self.kept.append(text[: SHOWN_PRINT - self.count])
        self.count += len(text)
        return len(text)

    def take(self) -> tuple[int, str]:
        count, text = self.count, "".join(self.kept)
        self.count, self.kept = 0, []
        return count, text


def _where(error: BaseException) -> dict:
    """The innermost frame of the student's code in a traceback: file and line (the grader reads the
    line's text; the child cannot open the file)."""
    frame = error.__traceback__
    file, line = "", 0
    while frame is not None:
        if frame.tb_frame.f_code.co_filename != __file__:
            file, line = frame.tb_frame.f_code.co_filename, frame.tb_lineno
        frame = frame.tb_next
    return {"file": file, "line": line}


def _load(job: dict):
    """The student's function: unpickled (a function object sent by ``check``) or executed from its
    source (a collected submission, which the grader never runs)."""
    if job.get("function") is not None:
        return pickle.loads(job["function"])
    namespace = {"__name__": "submission"}
    exec(compile(job["source"], job.get("filename", "<submission>"), "exec"), namespace)
    if job["name"] not in namespace:
        raise NameError(f"no function {job['name']} in the submission")
    return namespace[job["name"]]


def call(function, inputs: dict, pointwise: str | None, in_place: tuple = ()):
    """``function(*inputs.values())``, or with ``pointwise`` one call per point of that input, by
    keyword (the grader calls its references the same way); with ``in_place``, the names of inputs
    the function updates, ``(result, *those inputs after the call)``."""
    if in_place:
        return (function(*inputs.values()), *(inputs[name] for name in in_place))
    if pointwise is None:
        return function(*inputs.values())
    rest = {key: value for key, value in inputs.items() if key != pointwise}
    return [function(**{pointwise: point}, **rest) for point in inputs[pointwise]]


def _reply(fd: int, entry: dict) -> None:
    payload = json.dumps(entry).encode("utf-8")
    if len(payload) > MAX_REPLY:
        payload = json.dumps({**{k: v for k, v in entry.items() if k != "output"}, "status": "too_big",
                              "bytes": len(payload)}).encode("utf-8")
    write_message(fd, payload)


def run_job(job: dict, reply_fd: int) -> None:
    """In the child: load the cases, guard, limit, load the function, call it on each case, reply
    per case."""
    import resource
    cases = [pickle.loads(pickled) for pickled in job["cases"]]  # the grader's inputs, before the guard
    if any(name == "npformer" or name.startswith("npformer.") for name in sys.modules):
        _reply(reply_fd, {"case": 0, "status": "grader_error", "message": "a case's inputs loaded npformer"})
        return
    printed = Printed()
    memory = int(job["memory_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(job["time_limit"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
    lock_file_descriptors()
    if job.get("seccomp") and not install_filter(job["seccomp"]) and job.get("isolated"):
        _reply(reply_fd, {"case": 0, "status": "grader_error", "message": "the seccomp filter was refused"})
        return
    sys.stdout = sys.stderr = printed
    sys.addaudithook(guard)

    def refused(error: BaseException | None) -> dict | None:
        """An npformer import refused by the guard, found in the error's chain (caught or not)."""
        while error is not None:
            if isinstance(error, ImportError) and "cannot be imported while your function is graded" in str(error):
                return {"status": "npformer", "module": str(error).split(" ", 1)[0]}
            error = error.__cause__ or error.__context__
        return None

    try:
        function = _load(job)
    except BaseException as error:  # noqa: BLE001 - the student's module, whatever it raises
        count, text = printed.take()
        _reply(reply_fd, {"case": 0, **(refused(error) or {"status": "load_failed", "type": type(error).__name__,
                                                           "message": str(error)[:500], **_where(error),
                                                           "printed": count, "shown": text})})
        return
    for index, inputs in enumerate(cases):
        try:
            started = time.perf_counter()
            output = call(function, inputs, job.get("pointwise"), tuple(job.get("in_place") or ()))
            microseconds = int((time.perf_counter() - started) * 1e6)
            entry = {"status": "returned", "output": encode(output), "microseconds": microseconds}
        except NotImplementedError:
            entry = {"status": "not_implemented"}
        except BaseException as error:  # noqa: BLE001 - the student's bug, reported
            entry = refused(error) or {"status": "raised", "type": type(error).__name__,
                                       "message": str(error)[:500], **_where(error)}
        count, text = printed.take()
        _reply(reply_fd, {"case": index, **entry, "printed": count, "shown": text})
        if entry["status"] in ("npformer", "not_implemented"):
            return


# -- the server -----------------------------------------------------------------------------------

def _relay(job_read: int, reply_fd: int, pid: int, cases: int, deadline: float) -> dict:
    """Pass the child's replies on, each checked (``check_reply``: well-formed JSON, the next case
    in order, within the size limit), until it closes its pipe or the deadline, which bounds every
    read (half a message and a sleep is a timeout); then kill its process group and reap it.
    Returns the ``end`` message. The child writes only to its own pipe, so it cannot forge a reply
    for another job."""
    import signal
    expected, end = 0, None
    while end is None:
        try:
            payload = read_message(job_read, limit=MAX_MESSAGE, deadline=deadline)
            entry = parse_reply(payload)
            bad = "more replies than cases" if expected >= cases else check_reply(entry, expected)
        except EOFError:
            break  # the child has finished (or died): its exit status says which
        except TimeoutError:
            end = {"end": "timed out"}
            break
        except (ValueError, OSError, RecursionError, MemoryError):
            bad = "an unreadable reply"
        if bad:
            end = {"end": "died", "code": bad}
            break
        write_message(reply_fd, payload)
        expected += 1
    for kill in (os.killpg, os.kill):  # its group (it made one), then itself if that failed
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    status = os.waitpid(pid, 0)[1]
    os.close(job_read)
    if end is None:
        code = os.waitstatus_to_exitcode(status)
        end = {"end": "exited", "code": code}
    return end


def serve(request_fd: int, reply_fd: int) -> None:
    """Read jobs and run each in a forked child that writes to a pipe of its own; relay its replies,
    then one ``{"end": ...}`` message: "exited" with its status, "timed out", or "died".

    A job comes as two messages from the grader (trusted): a JSON header (how many cases, the time
    limit) and the pickled job, which only the child unpickles. This process keeps the job's bytes in
    one buffer and zeroes it once the job is over, so that a later child, forked from it, finds no
    trace of an earlier job (another student's function, an instructor's hidden inputs) in its memory."""
    while True:
        try:
            header = json.loads(read_message(request_fd))
            body = read_buffer(request_fd)
        except EOFError:
            return
        job_read, job_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.setpgid(0, 0)  # a group of its own, killed whole when the job ends
                if sys.platform.startswith("linux"):  # PR_SET_PDEATHSIG: killed if the worker dies first
                    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)
                os.close(request_fd)
                os.close(reply_fd)  # the worker's own pipe: the child never holds it
                os.close(job_read)
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.dup2(quiet, 2)
                run_job(pickle.loads(body), job_write)
            except BaseException:  # noqa: BLE001 - the child always ends here, never in the loop
                code = 70
            os._exit(code)
        os.close(job_write)
        end = _relay(job_read, reply_fd, pid, int(header["cases"]), time.monotonic() + float(header["time_limit"]))
        body[:] = bytes(len(body))
        write_message(reply_fd, json.dumps(end).encode("utf-8"))


def install_filter(program: bytes) -> bool:
    """Load a seccomp program (``isolation.job_filter``: built by libseccomp in the grader, which
    this process cannot import) into this process, for good: ``PR_SET_NO_NEW_PRIVS``, then
    ``PR_SET_SECCOMP`` with the program's instructions (8 bytes each). Returns whether the kernel
    took it (Linux only)."""
    if not sys.platform.startswith("linux") or not program or len(program) % 8:
        return False
    instructions = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    fprog = Program(len(program) // 8, ctypes.addressof(instructions))
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def lock_file_descriptors() -> None:
    """No new file descriptor, by any means: fill every gap below the highest open descriptor with
    /dev/null, then set ``RLIMIT_NOFILE`` (soft and hard) just above it. Opening a file, a pipe, a
    socket, a pidfd or a shared library then fails in the kernel, whatever Python code does, even
    code that gets past the audit hook (which is no security boundary against memory writes)."""
    import resource
    highest = max(int(name) for name in os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 2
    for fd in range(highest + 1):  # the highest may be the listing's own descriptor, closed since
        try:
            os.fstat(fd)
        except OSError:
            filler = os.open(os.devnull, os.O_RDONLY)
            if filler != fd:
                os.dup2(filler, fd)
                os.close(filler)
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, highest + 1))


if __name__ == "__main__":
    import importlib
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (SERVER_MEMORY, SERVER_MEMORY))
    if sys.platform.startswith("linux"):  # PR_SET_DUMPABLE 0: a child cannot read this process's memory or descriptors
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    for module in PRELOADED:  # a child cannot open files: what it may import is loaded now
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    request, reply = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)
    os.dup2(quiet, 1)
    serve(request, reply)
