"""Shared test settings.

Matplotlib draws with the file-only Agg backend (``npformer.viz`` leaves the
choice to its caller).

Hypothesis runs a bounded, derandomised profile by default so that the suite
is reproducible. Set ``NPFORMER_HYPOTHESIS=thorough`` for many more, freshly
random examples.
"""

import os
import sys

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One pytest-xdist worker per core: each worker (and what it starts: lessons, notebooks' kernels)
    # keeps to one thread, BLAS's and npformer's own, so that the workers do not fight for the cores.
    # Set before NumPy is imported, which reads them once. The tests of threading set their own.
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPFORMER_THREADS"):
        os.environ.setdefault(_variable, "1")

import matplotlib

matplotlib.use("Agg")  # figures go to files only; npformer.viz never chooses a backend itself

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from npformer import backend, threads

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(  # benchmarks/gpu_check.sh: the gradient tests on a GPU, in about 20 s on an H100
    "gpu",
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("NPFORMER_HYPOTHESIS", "ci"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def numpy_backend_float32_and_default_threads():
    """Every test starts on the backend chosen by NPFORMER_BACKEND (NumPy by default), float32, and
    npformer's default thread count (one in a pytest-xdist worker, above), whatever the test before it
    in the same worker set: which tests share a worker, and in what order, changes from run to run."""
    name = os.environ.get("NPFORMER_BACKEND", "numpy") or "numpy"
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)
    threads.set_threads()
    yield
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)
    threads.set_threads()


@pytest.fixture(autouse=True)
def a_fresh_grading_session():
    """Every test starts a student's session afresh: no failed checks counted yet, so no hint names
    its fix unless the test asks (``check``'s ``reveal``), whatever tests ran before in the worker."""
    from npformer.course import grader

    grader.failed_checks.clear()
    yield


# -- the suite never changes the repository ----------------------------------------------------------

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git_status():
    """``git status --porcelain`` of the repository (untracked files included), or None without git."""
    import subprocess

    try:
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=_ROOT,
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


# Every temporary file of the run, the workers' and their subprocesses' (lessons, notebooks'
# kernels, nbgrader), goes to one folder that belongs to this run: ``TMPDIR`` points there from the
# start (the workers and every process they start inherit it), and the folder goes at the end. It
# lies in the repository's ignored ``.pytest_run`` (not in ``.pytest_tmp``, which pytest empties when
# it first hands out a ``tmp_path``), so the run writes nothing outside its own folders, and what
# other processes on the machine put in the system's temporary folder cannot change its verdict.


def _is_controller(config):
    """True in the process that runs the session (not in a pytest-xdist worker)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config):
    if _is_controller(config):
        import tempfile

        parent = os.path.join(_ROOT, ".pytest_run")
        os.makedirs(parent, exist_ok=True)
        config.npformer_tmp = tempfile.mkdtemp(prefix="run-tmp-", dir=parent)
        config.npformer_tmp_before = os.environ.get("TMPDIR"), tempfile.tempdir
        os.environ["TMPDIR"] = tempfile.tempdir = config.npformer_tmp


def pytest_sessionstart(session):
    if _is_controller(session.config):
        session.config.npformer_git_status = _git_status()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test left a tracked file changed or an untracked file behind."""
    if not _is_controller(session.config):
        return
    before, after = getattr(session.config, "npformer_git_status", None), _git_status()
    if before is not None and after is not None and after != before:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        print(f"\nthe tests changed the repository (git status --porcelain): {changed}", file=sys.stderr)
        session.exitstatus = 1


def pytest_unconfigure(config):
    """The run's temporary folder goes, and TMPDIR is put back (pytest may run inside a process
    that goes on: an IDE, a notebook)."""
    if _is_controller(config) and getattr(config, "npformer_tmp", None):
        import shutil
        import tempfile

        shutil.rmtree(config.npformer_tmp, ignore_errors=True)
        environment, tempfile.tempdir = config.npformer_tmp_before
        if environment is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = environment


def pytest_collection_modifyitems(items):
    """The tests marked ``slow`` first (in their order), then the rest: pytest-xdist hands the tests
    out in this order, so the long ones spread over the workers at the start instead of one of them
    ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# The modules whose tests share an expensive module fixture: a trained run (test_train.py's
# ``tiny_run``, test_first_hour.py's ``runs``), a graded class (test_grading_trust.py) or a built wheel
# (test_editions.py). Each runs whole on one worker, so that its fixture is made once per run.
ONE_WORKER_MODULES = ("tests/test_train.py", "tests/test_first_hour.py", "tests/test_grading_trust.py",
                      "tests/test_editions.py", "tests/test_attacks.py", "tests/test_grading_inputs.py",
                      "tests/test_variant_class.py")


def work_unit(nodeid):
    """What pytest-xdist hands to a worker at once: a whole module of ``ONE_WORKER_MODULES``, any
    other test alone."""
    module = nodeid.split("::", 1)[0]
    return module if module in ONE_WORKER_MODULES else nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: without it (-p no:xdist), never called
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduler, with ``work_unit`` as its unit. (Its own ``--dist loadgroup`` keeps
    an ``xdist_group`` together by appending the group's name to each node id on the worker; under
    pytest 9.2 the name of a parametrised test reaches the controller after its closing bracket, so
    such tests were spread over the workers: pytest-dev/pytest-xdist#1386.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModulesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return work_unit(nodeid)

    return ModulesOnOneWorker(config, log)


# -- the shared data folder and the optional cross-checks ----------------------------------------------


def shared_folder():
    """The shared data folder: ``$NPFORMER_SHARED`` when set, else ``shared`` beside the repository
    root, else ``shared`` beside the current directory's parent (a worktree one level down)."""
    import pathlib

    if os.environ.get("NPFORMER_SHARED"):
        return pathlib.Path(os.environ["NPFORMER_SHARED"]).expanduser().resolve()
    candidates = [pathlib.Path(_ROOT).parent / "shared", pathlib.Path.cwd().resolve().parent.parent / "shared"]
    return next((folder for folder in candidates if folder.is_dir()), candidates[0])


def shared_file(*parts):
    """A file of the shared data folder. Absent, the test skips, or fails when
    ``NPFORMER_REQUIRE_SHARED=1`` (CI sets it where the folder exists, so a wrong path cannot
    silently skip the tests on real data)."""
    path = shared_folder().joinpath(*parts)
    if not path.is_file():
        message = f"{path} is absent (the shared data folder; set NPFORMER_SHARED)"
        if os.environ.get("NPFORMER_REQUIRE_SHARED") == "1":
            pytest.fail(message + " and NPFORMER_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
def shared_fra_eng():
    """The path of the Tatoeba French-English file ``data/fra-eng/fra.txt`` in the shared folder."""
    return shared_file("data", "fra-eng", "fra.txt")


def import_crosscheck(module, reason):
    """``pytest.importorskip``, except that with ``NPFORMER_REQUIRE_CROSSCHECKS=1`` (CI) a missing
    module fails the test instead of skipping it."""
    if os.environ.get("NPFORMER_REQUIRE_CROSSCHECKS") == "1":
        try:
            return __import__(module)
        except ImportError as error:
            pytest.fail(f"{reason} and NPFORMER_REQUIRE_CROSSCHECKS=1 ({error})", pytrace=False)
    return pytest.importorskip(module, reason=reason)


def loss_gradients(model, src, tgt_in, tgt_out):
    """Every parameter's gradient of the mean cross-entropy of ``model`` on one batch, as host
    arrays keyed like ``model.params()`` (the gradients are zeroed first)."""
    from npformer import ops

    model.zero_grad()
    _, cache = ops.cross_entropy_forward(model.forward(src, tgt_in), tgt_out)
    model.backward(ops.cross_entropy_backward(1.0, cache))
    return {name: np.array(backend.to_numpy(grad), copy=True) for name, grad in model.grads().items()}
