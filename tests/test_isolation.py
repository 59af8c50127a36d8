"""The kernel's isolation of students' code (``npformer.course.isolation``): which mode this machine
gives, the one-line refusal where none can be made, the explicit way around it, and the worker's
own confinement seen from inside (what it can list, who it is, what its environment holds).

The attacks themselves, past the audit hook, are in ``test_attacks.py``."""

import os
import subprocess
import sys
import textwrap

import pytest

from npformer.course import isolation
from npformer.course.cases import prepared_public
from npformer.course.exercises import EXERCISES
from npformer.course.grader import grade
from npformer.course.worker import Worker

REQUIRED = os.environ.get("NPFORMER_REQUIRE_ISOLATION") == "1"


@pytest.fixture(scope="module")
def isolated_worker():
    why = isolation.unavailable()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"NPFORMER_REQUIRE_ISOLATION=1, but {why}")
        pytest.skip(why)
    worker = Worker(isolated=True, hidden=(os.getcwd(),))
    yield worker
    worker.close()


def _raised(worker, body):
    """What a relu_backward whose body is ``body`` raised in ``worker`` (its message)."""
    exercise = EXERCISES["relu_backward"]
    source = "import numpy as np\ndef relu_backward(x, dout):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    report = grade(exercise, prepared_public(exercise, 0)[:1], source=source, worker=worker, time_limit=20)
    return report.message


def test_the_worker_sees_only_the_interpreter_numpy_and_its_script(isolated_worker):
    listing = _raised(isolated_worker, 'raise RuntimeError(sorted(__import__("sys").modules["os"].listdir("/sandbox/site")))')
    if "os.listdir is not allowed" in listing:  # the audit hook's message: the kernel's view is shown below
        listing = _raised(isolated_worker, 'import sys\nraise RuntimeError(sorted(sys.path))')
        assert "/sandbox/site" in listing, listing
    else:
        assert "['cloudpickle', 'numpy'" in listing, listing
    import npformer

    assert str(os.path.dirname(npformer.__file__)) not in _raised(isolated_worker, "import sys\nraise RuntimeError(sys.path)")


def test_the_worker_runs_as_nobody_with_an_environment_of_its_own(isolated_worker, monkeypatch):
    message = _raised(isolated_worker, "import os\nraise RuntimeError(f'{os.getuid()} {sorted(os.environ)}')")
    assert message.split(": ", 2)[-1].startswith(str(isolation.SANDBOX_UID)), message
    assert "HOME" not in message and "PYTHONPATH" not in message and "NPFORMER" not in message, message


def test_isolation_is_bubblewrap_where_it_runs_and_one_line_where_it_does_not(monkeypatch):
    if isolation.unavailable() is None and not isolation.mode() == "bubblewrap" and REQUIRED:
        pytest.fail(f"isolation here is {isolation.mode()}, expected bubblewrap in CI")
    isolation._bubblewrap_works.cache_clear()
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)   # not root: no unprivileged user to become
    try:
        why = isolation.unavailable()
        assert why is not None and "\n" not in why and "apt-get install bubblewrap" in why, why
        with pytest.raises(isolation.IsolationUnavailable, match="cannot be isolated here"):
            Worker(isolated=True)._start()
    finally:
        isolation._bubblewrap_works.cache_clear()


def test_course_grade_refuses_without_isolation_in_one_line_and_grades_with_the_flag(tmp_path):
    """Without bubblewrap on PATH and not as root, ``course grade`` stops before any work with one
    line and exit status 2; ``--no-isolation`` grades."""
    from npformer.course import student_edition
    from lesson_solutions import LESSONS

    student_edition(LESSONS, tmp_path / "class" / "ada", only=["02"])
    empty = tmp_path / "bin"
    empty.mkdir()
    environment = {**os.environ, "PATH": str(empty), "NPFORMER_ISOLATION": ""}
    # not root: run as the unprivileged user where this test runs as root
    command = [sys.executable, "-c", "import os, sys; os.geteuid = lambda: 1000; from npformer.cli.main import main; "
               "sys.exit(main(sys.argv[1:]))", "course", "grade", str(tmp_path / "class"), "--out",
               str(tmp_path / "grades.csv"), "--set", "1"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot be isolated here" in lines[0] and "--no-isolation" in lines[0], refused.stderr
    assert not (tmp_path / "grades.csv").exists()
    graded = subprocess.run(command + ["--no-isolation"], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    assert (tmp_path / "grades.csv").read_text().startswith("student,")


def test_as_an_unprivileged_user_grading_refuses_what_others_could_read(tmp_path, monkeypatch):
    """Without namespaces, uid 65534 reads what every user may: the grader refuses to start while
    npformer's folder or the submissions are open to others (found by a red-team pass)."""
    monkeypatch.setattr(isolation, "unavailable", lambda: None)
    monkeypatch.setattr(isolation, "mode", lambda: "user")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    monkeypatch.setattr(isolation, "_open_to_others", lambda path: path != closed)   # npformer's folder: open
    with pytest.raises(isolation.IsolationUnavailable, match="could read .*npformer.*chmod -R go-rwx"):
        isolation.require((closed,))
    monkeypatch.setattr(isolation, "_open_to_others", lambda path: False)
    assert isolation.require((closed,)) == "user"


def test_open_to_others_reads_the_permission_bits(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(folder, 0o755)
    assert isolation._open_to_others(folder) == all(
        os.stat(parent).st_mode & 0o001 for parent in folder.resolve().parents)
    os.chmod(folder, 0o700)
    assert not isolation._open_to_others(folder)
