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

from npformer import backend

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
def numpy_backend_and_float32():
    """Every test starts on the backend chosen by NPFORMER_BACKEND (NumPy by default), float32."""
    name = os.environ.get("NPFORMER_BACKEND", "numpy") or "numpy"
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)
    yield
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)


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


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which names the groups
def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` first (in their order), then the rest: pytest-xdist hands the tests
    out in this order, so the long ones spread over the workers at the start instead of one of them
    ending the run alone. Then each ``xdist_group``'s tests are kept on one worker."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if getattr(config.option, "loadgroup", False):  # set on a worker under --dist loadgroup
        for item in items:
            _keep_with_its_group(item)


def _keep_with_its_group(item):
    """``--dist loadgroup`` sends the tests of one ``xdist_group`` (a module whose fixture trains a
    model or grades a class) to one worker: on the worker, pytest-xdist appends ``@group`` to each
    one's node id, and the controller hands out the ids of a group together. Under pytest 9.2 the
    appended name is lost (node ids became structured; pytest-dev/pytest-xdist#1386), so every
    worker would build the group's fixture. Where that happened, the name is appended here, in the
    structured id."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    grouped = f"{item.nodeid.split('@')[0]}@{'_'.join(groups)}"
    if not groups or item.nodeid == grouped:
        return
    if hasattr(item, "_id"):  # pytest 9.2
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(grouped)
    else:
        item._nodeid = grouped


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
