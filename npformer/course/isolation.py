"""Isolation by the kernel: where a student's code runs when a class is graded.

A Python audit hook is no boundary (PEP 578 says so: code that writes memory through NumPy
disarms it). The grading worker (``sandbox.py``) is therefore confined by the operating system,
with established tools, and the hook is kept only for its clear messages:

* **bubblewrap** (``bwrap``, Debian's ``bubblewrap``), the sandbox of Flatpak: the worker runs in
  new user, PID, network, IPC and UTS namespaces, on a root file system that holds only, read-only,
  the system's libraries, the Python interpreter and its standard library (every ``site-packages``
  hidden), NumPy and cloudpickle, the worker's own script, a private ``/proc`` and ``/dev``, and a
  64 MB ``/tmp``; no submissions, no secret, no instructor's file, no npformer. It dies with the
  grader (``--die-with-parent``), in a session of its own. Inside, it is uid 65534.
* **seccomp filters built with libseccomp** (``pyseccomp``), never written by hand: one for the
  whole worker (``worker_filter``), loaded by bubblewrap, and a stricter one that the worker
  installs in each child before the student's code loads (``job_filter``). Both kill the process
  on a system call of another architecture (i386 ``int 0x80``, x32), so no call escapes them by
  its number.
* **an unprivileged user**, where bubblewrap cannot make namespaces (a Docker container such as
  Gradescope's, which refuses ``unshare``) and the grader is root: the worker runs as uid 65534
  under the same filters. It then reads what every user may read, so grading refuses to start
  while npformer's folder, the submissions or the outputs are open to others (``require``;
  ``run_autograder`` closes ``/autograder/source``); it opens no socket and writes no file (the
  filters).

``mode()`` says which holds here; ``unavailable()`` why none does. ``course grade`` refuses to
grade without one unless told ``--no-isolation`` (``grade_class(..., isolated=False)``).
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

SANDBOX_UID = 65534          # "nobody": the user a student's code runs as
SCRATCH_BYTES = 64 * 2**20   # the private /tmp
SITE = "/sandbox/site"       # where NumPy and cloudpickle are seen, inside bubblewrap
SCRIPT = "/sandbox/sandbox.py"
MODES = ("bubblewrap", "user")

# System calls no part of the worker makes: reaching the kernel's machinery, other processes'
# memory, the network, new namespaces, anonymous files that could be loaded as code.
WORKER_REFUSED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "unshare", "setns", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
    "request_key", "socket", "socketpair", "memfd_create", "memfd_secret", "open_by_handle_at",
    "name_to_handle_at", "swapon", "swapoff", "acct", "quotactl", "syslog", "iopl", "ioperm",
    "modify_ldt", "personality", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "vhangup", "fanotify_init", "lookup_dcookie", "migrate_pages", "move_pages", "sethostname",
    "setdomainname",
)
# ... and what a child that runs a student's code may not do either: start a process or a thread,
# run a program, signal anyone, change its limits or identity, change the file system.
JOB_REFUSED = WORKER_REFUSED + (
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "kill", "tkill", "tgkill",
    "pidfd_open", "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "setrlimit",
    "prlimit64", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "capset", "prctl", "seccomp", "rename", "renameat", "renameat2", "mkdir",
    "mkdirat", "rmdir", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "chmod",
    "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "utime", "utimes",
    "utimensat", "futimesat", "mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",
)


class IsolationUnavailable(RuntimeError):
    """No kernel isolation can be made on this machine: one line says why and what to do."""


def _program(refused: tuple[str, ...], read_only: bool = False) -> bytes:
    """A seccomp program built by libseccomp: every call allowed but ``refused`` (EPERM), and any
    call of an architecture other than the native one kills the process. ``read_only``: opening a
    file to write, create or truncate it is refused too (by the flags of ``open``/``openat``), so
    that no file is written even where the file system would let this user write."""
    import errno
    import tempfile

    import pyseccomp

    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    rules.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    refuse = pyseccomp.ERRNO(errno.EPERM)
    for name in refused + (("creat", "openat2") if read_only else ()):
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):
            pass  # a call this kernel's libseccomp does not know: none can make it either
    if read_only:
        for call, flags_argument in (("open", 1), ("openat", 2)):
            for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC):
                rules.add_rule(refuse, call, pyseccomp.Arg(flags_argument, pyseccomp.MASKED_EQ, flag, flag))
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)
        file.seek(0)
        return file.read()


@functools.cache
def worker_filter() -> bytes:
    """The filter of the whole worker (bubblewrap loads it before the worker starts)."""
    return _program(WORKER_REFUSED)


@functools.cache
def job_filter() -> bytes:
    """The filter of a child that runs a student's code (the worker installs it after the fork): it
    opens no file to write either."""
    return _program(JOB_REFUSED, read_only=True)


@functools.cache
def filters_unavailable() -> str | None:
    """Why libseccomp's filters cannot be built here, or None (asked once: the answer is the machine's)."""
    if not sys.platform.startswith("linux"):
        return f"kernel isolation needs Linux (this is {sys.platform})"
    try:
        worker_filter()
        job_filter()
    except ImportError:
        return "pyseccomp is not installed (pip install pyseccomp; it needs Debian's libseccomp2)"
    except Exception as error:  # noqa: BLE001 - libseccomp missing or refusing: one line, whatever it is
        return f"libseccomp could not build the filters ({type(error).__name__}: {error})"
    return None


def _masked_paths(extra: list[Path]) -> list[Path]:
    """What must not be seen even inside the bound trees: every site-packages (npformer may be
    installed there), npformer's own folder, and the instructor's paths (``extra``)."""
    package = Path(__file__).resolve().parents[1]  # npformer's own folder
    paths = [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"], package, *extra]
    return sorted({Path(path).resolve() for path in paths if path and Path(path).exists()})


_SYSTEM_TOPS = ("/lib", "/lib64", "/lib32", "/bin", "/sbin")  # a folder of its own, or (merged /usr) a link


def _system_binds() -> list[str]:
    """``bwrap`` arguments that show the system's programs and libraries, read-only, as they are here:
    ``/usr``, and each of ``_SYSTEM_TOPS`` bound, or made the same link into ``/usr``."""
    arguments = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOPS:
        if Path(top).is_symlink():
            arguments += ["--symlink", os.readlink(top), top]
        elif Path(top).exists():
            arguments += ["--ro-bind", top, top]
    return arguments


def _system_trees() -> list[Path]:
    """The folders that ``_system_binds`` binds."""
    return [Path("/usr"), *(Path(top) for top in _SYSTEM_TOPS if Path(top).exists() and not Path(top).is_symlink())]


def _interpreter_home() -> list[Path]:
    """The interpreter's home, when the system's trees do not already hold it (pyenv, a build in /opt)."""
    home = Path(sys.base_prefix).resolve()
    return [] if any(home.is_relative_to(tree) for tree in _system_trees()) else [home]


def _module_folder(name: str) -> Path:
    import importlib
    return Path(importlib.import_module(name).__file__).resolve().parent


def bubblewrap_command(python: str, script: str, hidden: list[Path], seccomp_fd: int) -> list[str]:
    """The ``bwrap`` command line that runs ``python -I -S script`` as described above; ``hidden``:
    the instructor's paths (submissions, secret, outputs), masked where a bound tree holds them."""
    command = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID),
               "--gid", str(SANDBOX_UID), "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--clearenv", "--chdir", "/"]
    for name, value in environment().items():
        command += ["--setenv", name, value]
    command += _system_binds()
    for home in _interpreter_home():
        command += ["--ro-bind", str(home), str(home)]
    command += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc", "--dev", "/dev",
                "--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp"]
    trees = _system_trees() + _interpreter_home()
    for path in _masked_paths(hidden):
        if any(path.is_relative_to(tree) for tree in trees):
            command += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    numpy_folder = _module_folder("numpy")
    command += ["--ro-bind", str(numpy_folder), f"{SITE}/numpy"]
    libraries = numpy_folder.parent / "numpy.libs"  # the wheel's OpenBLAS, found by its rpath
    if libraries.is_dir():
        command += ["--ro-bind", str(libraries), f"{SITE}/numpy.libs"]
    command += ["--ro-bind", str(_module_folder("cloudpickle")), f"{SITE}/cloudpickle",
                "--ro-bind", script, SCRIPT, "--ro-bind", str(Path(script).with_name("wire.py")), "/sandbox/wire.py",
                "--remount-ro", "/", "--seccomp", str(seccomp_fd),
                "--", python, "-I", "-S", SCRIPT, SITE]
    return command


def environment() -> dict[str, str]:
    """The worker's whole environment: an allow-list, never the instructor's (tokens, paths)."""
    return {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}


def interpreter() -> str:
    """The real interpreter behind ``sys.executable`` (a virtual environment's is a link to it)."""
    return os.path.realpath(sys.executable)


@functools.cache
def _bubblewrap_works() -> str | None:
    """Why bubblewrap cannot run here (a trial run of ``true`` in the same namespaces), or None."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian and Ubuntu: apt-get install bubblewrap)"
    trial = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", *_system_binds(),
             "--proc", "/proc", "--dev", "/dev", "--", "/bin/true" if Path("/bin/true").exists() else "true"]
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap did not run ({error})"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot make namespaces here ({why})"
    return None


def mode() -> str | None:
    """The isolation this machine gives: "bubblewrap", "user" (an unprivileged user, when the grader
    is root and bubblewrap cannot run), or None. ``NPFORMER_ISOLATION=user`` asks for the second
    where both work (a test of what Gradescope's container gives)."""
    if filters_unavailable() is not None:
        return None
    wanted = os.environ.get("NPFORMER_ISOLATION", "")
    if wanted not in ("", *MODES):
        raise IsolationUnavailable(f"NPFORMER_ISOLATION={wanted!r}: use one of {', '.join(MODES)}, or unset it")
    if wanted != "user" and _bubblewrap_works() is None:
        return "bubblewrap"
    if os.geteuid() == 0 and _open_to_others(sys.executable):
        return "user"
    return None


def unavailable() -> str | None:
    """Why no kernel isolation can be made here (one line, with what to do), or None."""
    why = filters_unavailable()
    if why is not None or mode() is not None:
        return why
    as_user = ("only a grader running as root can run students' code as an unprivileged user"
               if os.geteuid() != 0 else
               f"{_closed_folder(sys.executable) or sys.executable} is closed to other users, so uid {SANDBOX_UID} "
               f"cannot run {sys.executable}")
    if os.environ.get("NPFORMER_ISOLATION") == "user":
        return f"NPFORMER_ISOLATION=user, but {as_user}"
    return f"{_bubblewrap_works()}; without it, {as_user}"


def require(hidden: tuple = ()) -> str:
    """The mode this machine gives, or ``IsolationUnavailable`` saying in one line why there is none.
    As an unprivileged user (no namespaces to hide anything), npformer's folder and ``hidden`` (the
    submissions, the outputs) must be closed to other users, or the students' code could read them."""
    why = unavailable()
    if why is None and mode() == "user":
        package = Path(__file__).resolve().parents[1]
        exposed = [path for path in (package, *hidden) if _open_to_others(Path(path))]
        if exposed:
            why = (f"as uid {SANDBOX_UID}, with no namespace to hide it, the students' code could read {exposed[0]}; "
                   "make it readable by its owner only (chmod -R go-rwx), or use bubblewrap")
    if why is not None:
        raise IsolationUnavailable(f"students' code cannot be isolated here: {why} (docs/instructor.md; "
                                   "--no-isolation grades without it, for work you trust)")
    return mode()


def _closed_folder(path: str | Path) -> Path | None:
    """The first folder above ``path``, or above the file its links lead to, that other users cannot
    search (so they cannot reach ``path``), or None."""
    import stat

    for candidate in (Path(os.path.abspath(path)), Path(path).resolve()):
        for folder in candidate.parents:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return folder
    return None


def _open_to_others(path: str | Path) -> bool:
    """Whether a user other than its owner (and not in its group) can reach ``path``: no folder above
    it closed to them (``_closed_folder``), and it readable or searchable by them."""
    import stat

    path = Path(path)
    return (path.exists() and _closed_folder(path) is None
            and bool(path.resolve().stat().st_mode & (stat.S_IROTH | stat.S_IXOTH)))


def drop_to_sandbox_user() -> None:
    """``preexec_fn`` of the worker in the "user" mode (run in the forked process, before exec):
    become uid and gid 65534 with no other group, then load the worker's filter."""
    os.setgroups([])
    os.setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    from . import sandbox
    if not sandbox.install_filter(worker_filter()):
        raise OSError("the seccomp filter could not be installed")
