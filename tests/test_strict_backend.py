"""The GPU path, trusted without a GPU.

1. The strict stand-in backend (``npformer.strict_backend``, ``NPFORMER_BACKEND=strict``) behaves
   like CuPy at the device boundary: no implicit conversion to NumPy, no host arrays in device
   math. Shown on its own, and shown to catch a host conversion slipped into an op.
2. The tests that can tell the stand-in from NumPy run under it (a subprocess of pytest with
   ``NPFORMER_BACKEND=strict``, ``STRICT_TESTS``): every op's gradients over hypothesis-drawn
   shapes in both op sets, one training step of the model, the optimizer, cached decoding and
   beam search against the full forward pass, one checkpoint round trip, and the fast path
   (packed, fused) against the textbook step. The other test files pass under the stand-in as well
   (``NPFORMER_BACKEND=strict python -m pytest tests/test_nn_gradients.py ...``, minutes each:
   every array call pays the stand-in's bookkeeping) and stay out of this run to keep the
   suite's time: they repeat the same device paths at other sizes, or are host-only logic.
3. Every ``xp`` name that npformer looks up while training, checking and decoding exists in CuPy's
   namespace, and ``cupyx`` has what the embedding backward and the erf use. CuPy's wheel
   imports without a GPU (creating an array then fails, which this check does not need);
   ``.ci/run`` installs it and sets ``NPFORMER_REQUIRE_CUPY=1``, which turns a missing CuPy from a
   skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

import npformer
from npformer import backend, ops, strict_backend
from npformer.strict_backend import HostArrayError, StrictArray

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def strict():
    previous = backend.get_backend()
    backend.set_backend("strict")
    yield backend.xp
    backend.set_backend(previous)


def test_a_device_array_never_becomes_a_numpy_array_implicitly(strict):
    x = backend.asarray(numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
    assert isinstance(x, StrictArray) and isinstance(x, strict.ndarray)
    for convert in (numpy.asarray, numpy.array, lambda a: numpy.concatenate([a, numpy.ones((1, 3))])):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed|host array"):
            convert(x)
    host = backend.to_numpy(x)
    assert type(host) is numpy.ndarray and host.tolist() == [[0, 1, 2], [3, 4, 5]]
    host[0, 0] = 99  # a copy: the device array is untouched
    assert float(x[0, 0]) == 0.0


def test_host_arrays_are_refused_in_device_math_as_cupy_refuses_them(strict):
    x = backend.asarray(numpy.ones((2, 3), dtype=numpy.float32))
    with pytest.raises(HostArrayError, match="host array"):
        x + numpy.ones((2, 3), dtype=numpy.float32)
    with pytest.raises(HostArrayError, match="xp.concatenate"):
        strict.concatenate([x, numpy.ones((1, 3))])
    with pytest.raises(HostArrayError):
        x @ numpy.ones((3, 2), dtype=numpy.float32)
    with pytest.raises(HostArrayError, match=r"shape \(3,\)"):  # a bias, a 1-D host array: CuPy refuses it too
        x + numpy.ones(3, dtype=numpy.float32)
    with pytest.raises(HostArrayError):
        strict.maximum(x, numpy.zeros(3, dtype=numpy.float32))
    # What CuPy allows: Python and NumPy scalars, host data through asarray, a host array assigned
    # into a slice, explicit scalars.
    y = (x * 2.0 + numpy.float32(1.0)) / 3
    y[0] = numpy.zeros(3, dtype=numpy.float32)
    total = strict.sum(y)
    assert isinstance(total, StrictArray) and total.ndim == 0, "a reduction stays on the device"
    assert float(total) == pytest.approx(3.0) and bool(strict.any(y > 0))
    assert isinstance(numpy.exp(x), StrictArray), "NumPy's ufuncs on device arrays stay on the device"
    ids = backend.asarray(numpy.array([0, 1, 1]))
    grad = strict.zeros((2, 3), dtype=strict.float32)
    strict.add.at(grad, ids[:2], backend.asarray(numpy.ones((2, 3), dtype=numpy.float32)))
    assert backend.to_numpy(grad).sum() == 6.0


def test_a_host_conversion_slipped_into_an_op_fails_under_the_strict_backend(strict, monkeypatch):
    """The bug a GPU run would find: an op that converts its input to NumPy. Under NumPy the op is
    right (the values agree); under the strict backend it raises, as it would under CuPy."""
    import npformer.ops.relu as relu_module

    def relu_forward_via_host(x):
        out = numpy.maximum(numpy.asarray(x), 0)  # the slipped-in host conversion
        return backend.asarray(out), {"mask": x > 0}

    monkeypatch.setattr(relu_module, "relu_forward", relu_forward_via_host)
    x = backend.asarray(numpy.array([[-1.0, 2.0]], dtype=numpy.float32))
    with pytest.raises(TypeError, match="Implicit conversion"):
        relu_module.relu_forward(x)
    backend.set_backend("numpy")
    out, _ = relu_module.relu_forward(numpy.array([[-1.0, 2.0]], dtype=numpy.float32))
    assert out.tolist() == [[0.0, 2.0]], "on NumPy the same code passes: only the stand-in catches it"


def test_the_library_runs_a_training_step_and_decoding_under_the_strict_backend(strict):
    from npformer import Transformer, TransformerConfig, optim
    from npformer.tasks.translation import beam_search, greedy_decode

    model = Transformer(TransformerConfig(20, 22, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=16,
                                          activation="gelu", tie_embeddings=False, label_smoothing=0.1))
    src = backend.asarray(numpy.array([[5, 6, 7, 0], [8, 9, 0, 0]]))
    tgt_in = backend.asarray(numpy.array([[1, 5, 6], [1, 7, 0]]))
    tgt_out = backend.asarray(numpy.array([[5, 6, 2], [7, 2, 0]]))
    optimizer = optim.Adam(model, lr=1e-3)
    logits = model.forward(src, tgt_in)
    loss, cache = ops.cross_entropy_forward(logits, tgt_out, ignore_index=0, label_smoothing=0.1)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    optim.clip_grad_norm(model, 1.0)
    optimizer.step()
    assert isinstance(logits, StrictArray) and numpy.isfinite(float(loss))
    with model.evaluating():
        assert len(greedy_decode(model, src, max_len=5)) == 2
        assert len(beam_search(model, src, beam_size=2, max_len=5)) == 2


def test_the_stand_in_generator_has_cupys_interface_and_no_state_to_save(strict):
    """CuPy's Generator (CuPy 14, cupy/random/_generator_api.pyx): its bit generator's ``state`` is a
    method returning a device pointer; it has no ``normal``, ``choice`` or ``permutation``; ``random``
    draws float32 or float64 only. Saving it is refused in one line, as on CuPy."""
    from npformer.training import generator_state

    generator = strict.random.default_rng(0)
    assert callable(generator.bit_generator.state) and isinstance(generator.bit_generator.state(), int)
    assert isinstance(generator.random((2, 3), dtype=numpy.float32), StrictArray)
    assert isinstance(generator.integers(0, 5, size=4), StrictArray)
    for missing in ("normal", "choice", "permutation"):
        assert not hasattr(generator, missing), missing
    with pytest.raises(TypeError, match="Unsupported dtype"):
        generator.random(3, dtype=numpy.float16)
    with pytest.raises(TypeError, match="keeps no state that can be saved"):
        generator_state(generator)


def test_the_device_generator_draws_the_same_numbers_everywhere_and_its_state_is_json(strict):
    """``backend.default_rng`` on a device backend: the counter generator, whose numbers are a function of
    (key, position) alone: equal on NumPy and on the stand-in, split or whole, restored from JSON."""
    import json

    from npformer.counter_random import CounterGenerator
    from npformer.training import generator_state, set_generator_state

    device = backend.default_rng(5)
    assert isinstance(device, CounterGenerator)
    on_host = CounterGenerator(5, numpy)
    whole = on_host.random((4, 6), dtype=numpy.float32)
    first, rest = device.random((2, 6), dtype=numpy.float32), device.random((2, 6), dtype=numpy.float32)
    assert isinstance(first, StrictArray) and first.dtype == numpy.float32
    numpy.testing.assert_array_equal(numpy.concatenate([first.get(), rest.get()]), whole)
    state = json.loads(json.dumps(generator_state(device)))
    after = device.random(7).get()
    fresh = backend.default_rng(99)
    assert set_generator_state(fresh, state) and numpy.array_equal(fresh.random(7).get(), after)
    assert not set_generator_state(numpy.random.default_rng(0), state)   # another generator's stream


def test_the_device_generator_is_uniform_and_normal():
    """A million draws: the mean, the variance and each tenth of [0, 1) as a uniform's; float32 never
    reaches 1; Box-Muller's normals have mean 0 and variance 1 (each within five standard errors)."""
    from npformer.counter_random import CounterGenerator

    generator = CounterGenerator(0, numpy)
    n = 1_000_000
    for dtype in (numpy.float32, numpy.float64):
        u = generator.random(n, dtype=dtype)
        assert u.dtype == dtype and u.min() >= 0.0 and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 5 * (1 / 12 / n) ** 0.5
        assert abs(u.var() - 1 / 12) < 5 * (1 / 180 / n) ** 0.5
        counts = numpy.bincount((u * 10).astype(int), minlength=10)
        assert numpy.all(numpy.abs(counts - n / 10) < 5 * (n * 0.1 * 0.9) ** 0.5), counts
    z = generator.standard_normal(n)
    assert abs(z.mean()) < 5 / n ** 0.5 and abs(z.var() - 1) < 5 * (2 / n) ** 0.5
    assert abs(numpy.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / n ** 0.5    # neighbours uncorrelated


# The tests that can tell the stand-in from NumPy: every op (both op sets) over hypothesis-drawn
# shapes, one model training step, the optimizer, decoding against the full forward pass, and one
# checkpoint round trip. The rest of the suite is NumPy-only logic (data, metrics, the command
# line, plots) or repeats these paths at other sizes.
STRICT_TESTS = [
    "test_gradients.py",
    "test_nn_model.py::test_a_float32_training_step_keeps_every_array_float32",
    "test_nn_model.py::test_cached_decoding_gives_the_logits_of_the_full_pass",
    "test_optim.py::test_adam_and_adamw_follow_the_closed_form_over_several_steps",
    "test_decode_checkpoint.py::test_greedy_decoding_matches_the_full_forward_argmax",
    "test_decode_checkpoint.py::test_beam_of_one_is_greedy",
    "test_decode_checkpoint.py::test_checkpoint_round_trip_restores_parameters_optimizer_and_meta",
    "test_decoding_truth.py::test_beam_search_finds_the_best_translation_that_greedy_misses",
    "test_fastpath.py::test_packed_step_equals_the_padded_step_with_heavy_padding_and_none",
    "test_fastpath.py::test_fused_projections_equal_one_linear_call_each",
    "test_training_on_device.py",   # the whole train --data workflow: checkpoints, Ctrl-C, --resume, ...
]


@pytest.mark.slow
def test_op_model_decoding_and_checkpoint_tests_pass_under_the_strict_backend(tmp_path):
    """The library's own tests, run again with every array on the stand-in device (in this worker:
    ``-n 0``; its own temporary folder, since pytest clears the one it is given), with hypothesis's
    profile for a GPU (12 drawn shapes an op, as benchmarks/gpu_check.sh runs them; the 100 of the
    NumPy run took 39 of this test's 65 s) unless NPFORMER_HYPOTHESIS asks for another."""
    env = dict(os.environ, NPFORMER_BACKEND="strict")
    env.setdefault("NPFORMER_HYPOTHESIS", "gpu")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0",
                             f"--basetemp={tmp_path / 'strict'}", *[str(ROOT / "tests" / name) for name in STRICT_TESTS]],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = "\n".join(result.stdout.splitlines()[-25:])
    assert result.returncode == 0, f"under NPFORMER_BACKEND=strict:\n{tail}\n{result.stderr[-2000:]}"
    print(tail.splitlines()[-1])


def _cupy():
    try:
        import cupy
        import cupyx
        import cupyx.scipy.special
    except ImportError as error:
        reason = f"CuPy is not installed ({error}): pip install cupy-cuda12x (imports without a GPU)"
        if os.environ.get("NPFORMER_REQUIRE_CUPY") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return cupy, cupyx


def test_every_name_npformer_uses_exists_in_cupy(strict):
    """Train a step, check gradients, decode, embed, GELU: record every ``xp`` name looked up,
    then find each one in CuPy's namespace."""
    cupy, cupyx = _cupy()
    from npformer import gradcheck

    for op_set in ("fast", "textbook"):  # both op sets: the textbook's names must exist in CuPy too
        with ops.using(op_set):
            test_the_library_runs_a_training_step_and_decoding_under_the_strict_backend(strict)
            report = gradcheck.check_all_ops(seed=0)  # every op, forward and backward, float64
        assert report.passed, str(report)
    used = strict_backend.used_names()
    assert {"matmul", "zeros", "random.default_rng"} & used, used
    missing = []
    for name in sorted(used):
        target = cupy
        for part in name.split("."):
            target = getattr(target, part, None)
        if target is None:
            missing.append(name)
    assert not missing, f"npformer calls xp names that CuPy lacks: {missing}"
    assert callable(cupyx.scatter_add), "ops/fast/embedding.py's backward uses cupyx.scatter_add"
    import cupyx.scipy.special

    assert callable(cupyx.scipy.special.erf) and callable(cupyx.scipy.special.erfc), "ops/special.py uses them"
    print(f"{len(used)} xp names used, all in CuPy {cupy.__version__}")


def test_the_strict_backend_is_selected_by_name_and_by_environment():
    env = dict(os.environ, NPFORMER_BACKEND="strict")
    code = "from npformer import backend; print(backend.get_backend(), backend.is_cupy())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["strict", "False"]
    assert npformer.backend.get_backend() == "numpy"
