"""The backend switch: NumPy by default, CuPy on request, clear errors when it cannot run."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from npformer import backend, ops

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def _cupy_with_gpu():
    if not HAS_CUPY:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


needs_gpu = pytest.mark.skipif(
    not _cupy_with_gpu(),
    reason="CuPy backend not testable here: "
    + ("CuPy is not installed" if not HAS_CUPY else "CuPy sees no CUDA GPU")
    + " (run benchmarks/gpu_check.sh on a GPU machine)",
)


def test_numpy_is_the_default_backend_with_float32():
    assert backend.get_backend() == "numpy"
    assert not backend.is_cupy()
    assert backend.xp.zeros(2).__class__ is np.ndarray
    assert backend.get_default_dtype() == np.float32


def test_xp_follows_the_active_module_at_call_time():
    from npformer.backend import xp

    assert xp.matmul is np.matmul
    assert "numpy" in repr(xp)


def test_unknown_backend_name_is_a_value_error():
    with pytest.raises(ValueError, match="'numpy', 'cupy'.*'torch'"):
        backend.set_backend("torch")


def test_cupy_missing_gives_a_clear_error_and_keeps_numpy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # ``import cupy`` fails here as it does without CuPy
    with pytest.raises(backend.BackendUnavailableError, match="CuPy, which is not installed"):
        backend.set_backend("cupy")
    assert backend.get_backend() == "numpy"


def test_environment_variable_selects_the_backend():
    code = "from npformer import backend; print(backend.get_backend())"
    env = dict(os.environ, NPFORMER_BACKEND="numpy")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "numpy"
    env["NPFORMER_BACKEND"] = "tpu"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "NPFORMER_BACKEND='tpu' names no backend" in result.stderr


def test_importing_with_an_unusable_backend_does_nothing_until_first_use():
    code = ("import npformer, sys; print('imported'); sys.stdout.flush()\n"
            "from npformer import backend\nbackend.xp.zeros(2)")
    env = dict(os.environ, NPFORMER_BACKEND="tpu")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "imported"
    assert "BackendUnavailableError" in result.stderr and "names no backend" in result.stderr


@pytest.mark.parametrize("command", [["train", "--max-steps", "1"], ["translate", "--pretrained", "fra", "hello"],
                                     ["gradcheck"], ["bench", "--presets", "tiny"], ["attention", "--pretrained", "fra"],
                                     ["evaluate", "--pretrained", "fra"]])
def test_an_unusable_cupy_backend_is_one_line_with_status_2_for_every_command(command, tmp_path):
    """NPFORMER_BACKEND=cupy where CuPy is missing or sees no GPU: one line naming what is missing, exit 2,
    before any work (this machine has no GPU; with one, the backend works and the test is skipped)."""
    if _cupy_usable():
        pytest.skip("CuPy sees a GPU here, so the cupy backend is usable")
    env = dict(os.environ, NPFORMER_BACKEND="cupy")
    result = subprocess.run([sys.executable, "-m", "npformer", *command], env=env, capture_output=True,
                            text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"npformer {command[0]}: backend 'cupy'"), result.stderr
    assert not list(tmp_path.iterdir())


def _cupy_usable() -> bool:
    try:
        backend._load_cupy()
    except backend.BackendUnavailableError:
        return False
    return True


def test_default_dtype_can_be_set_and_restored():
    with backend.default_dtype(np.float64) as dtype:
        assert dtype == np.float64 and backend.get_default_dtype() == np.float64
    assert backend.get_default_dtype() == np.float32
    with pytest.raises(TypeError, match="float32 or float64.*float16"):
        backend.set_default_dtype(np.float16)


def test_seeded_generators_are_reproducible():
    a = backend.default_rng(3).random(5)
    b = backend.default_rng(3).random(5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, backend.default_rng(4).random(5))


def test_to_numpy_and_asarray_round_trip():
    host = np.arange(6.0).reshape(2, 3)
    on_backend = backend.asarray(host, dtype=np.float32)
    assert on_backend.dtype == np.float32
    np.testing.assert_array_equal(backend.to_numpy(on_backend), host)
    assert isinstance(backend.to_numpy([1, 2]), np.ndarray)


@needs_gpu
def test_cupy_backend_runs_every_op_and_matches_numpy():
    from npformer import gradcheck

    results = {}
    for name in ("numpy", "cupy"):
        backend.set_backend(name)
        report = gradcheck.check_all_ops(seed=0)
        assert report.passed, f"{name}\n{report}"
        forward, _, inputs = gradcheck.OP_CASES["attention"](np.random.default_rng(0))
        inputs = {k: backend.asarray(v) for k, v in inputs.items()}
        results[name] = backend.to_numpy(forward(**inputs)[0])
    np.testing.assert_allclose(results["cupy"], results["numpy"], rtol=1e-10)
    assert isinstance(ops.causal_mask(3), backend.xp.ndarray)
