"""Every GPU form (``npformer.ops.gpu``) equals its textbook twin on the GPU, in float64 and float32.

Both run on CuPy from the same inputs; outputs, caches' arrays and gradients are compared, over
shapes that include the edges: one row, one head, length 1, fully masked query rows, repeated and
ignored target ids, label smoothing. Skipped, with the reason, where CuPy sees no GPU (every CI
machine): ``benchmarks/gpu_check.sh`` runs it on a CUDA card, and ``NPFORMER_REQUIRE_GPU=1`` turns
the skip into a failure there.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from npformer import backend, ops

TOLERANCE = {np.float64: 1e-11, np.float32: 3e-5}


@pytest.fixture
def gpu():
    """The GPU forms, with CuPy the active backend (after conftest's fixture, which starts every test
    on the backend that NPFORMER_BACKEND names)."""
    try:
        backend._load_cupy()
    except backend.BackendUnavailableError as error:
        if os.environ.get("NPFORMER_REQUIRE_GPU") == "1":
            pytest.fail(str(error))
        pytest.skip(f"needs a CUDA GPU: {error}")
    previous = backend.get_backend()
    backend.set_backend("cupy")
    from npformer.ops import gpu as gpu_forms

    yield gpu_forms
    backend.set_backend(previous)


def device(array, dtype=None):
    array = np.asarray(array)
    return backend.asarray(array.astype(dtype) if dtype is not None and array.dtype.kind == "f" else array)


def assert_close(gpu_value, textbook_value, dtype, what):
    got, want = backend.to_numpy(gpu_value), backend.to_numpy(textbook_value)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * scale, err_msg=what)


DTYPES = [np.float64, np.float32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 5, 7), (4, 33, 512), (1, 1000)])
def test_layernorm(gpu, dtype, shape):
    rng = np.random.default_rng(0)
    x = device(rng.standard_normal(shape) * 3 + 1, dtype)
    gamma, beta = device(rng.standard_normal(shape[-1]), dtype), device(rng.standard_normal(shape[-1]), dtype)
    dy = device(rng.standard_normal(shape), dtype)
    y, cache = gpu.layernorm_forward(x, gamma, beta)
    y_ref, cache_ref = ops.layernorm_forward(x, gamma, beta)
    assert_close(y, y_ref, dtype, "y")
    for key in ("x_hat", "rstd"):
        assert_close(cache[key], cache_ref[key], dtype, key)
    for name, got, want in zip(("dx", "dgamma", "dbeta"), gpu.layernorm_backward(dy, cache),
                               ops.layernorm_backward(dy, cache_ref)):
        assert_close(got, want, dtype, name)


def _attention_case(rng, batch, heads, tq, tk, dh, mask_kind, dtype):
    q, k, v = (device(rng.standard_normal(shape), dtype) for shape in
               ((batch, heads, tq, dh), (batch, heads, tk, dh), (batch, heads, tk, dh)))
    if mask_kind is None:
        mask = None
    elif mask_kind == "padding":            # (B, 1, 1, Tk): the last keys of the first sentence are padding
        keys = np.ones((batch, 1, 1, tk), dtype=bool)
        keys[0, ..., max(1, tk - 2):] = False
        mask = device(keys)
    elif mask_kind == "causal":
        mask = device(np.tril(np.ones((tq, tk), dtype=bool)))
    else:                                    # "rows": some query rows see no key at all
        allowed = rng.random((batch, heads, tq, tk)) < 0.5
        allowed[0, 0, 0] = False
        mask = device(allowed)
    return q, k, v, mask, device(rng.standard_normal((batch, heads, tq, dh)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sizes, mask_kind", [
    ((1, 1, 1, 1, 4), None), ((2, 1, 3, 5, 8), "padding"), ((2, 4, 6, 6, 8), "causal"),
    ((3, 2, 5, 7, 4), "rows"), ((2, 8, 40, 300, 32), "padding")])
def test_attention(gpu, dtype, sizes, mask_kind):
    q, k, v, mask, dout = _attention_case(np.random.default_rng(1), *sizes, mask_kind, dtype)
    out, cache = gpu.attention_forward(q, k, v, mask)
    out_ref, cache_ref = ops.attention_forward(q, k, v, mask)
    assert_close(out, out_ref, dtype, "out")
    assert_close(cache["weights"], cache_ref["weights"], dtype, "weights")
    if mask_kind == "rows":
        assert float(abs(cache["weights"][0, 0, 0]).sum()) == 0.0   # a row that sees nothing: zeros, not NaN
    for name, got, want in zip(("dq", "dk", "dv"), gpu.attention_backward(dout, cache),
                               ops.attention_backward(dout, cache_ref)):
        assert_close(got, want, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, smoothing, ignore_index", [
    ((1, 1, 3), 0.0, None), ((2, 5, 11), 0.1, 0), ((4, 9, 8000), 0.1, 0), ((7, 300), 0.0, 0), ((3, 2), 1.0, None)])
def test_cross_entropy(gpu, dtype, shape, smoothing, ignore_index):
    rng = np.random.default_rng(2)
    logits = device(rng.standard_normal(shape) * 4, dtype)
    targets = rng.integers(0, shape[-1], size=shape[:-1])
    targets.reshape(-1)[:2] = 0                           # ignored (with ignore_index 0) and repeated ids
    targets = device(targets)
    loss, cache = gpu.cross_entropy_forward(logits, targets, ignore_index, smoothing)
    loss_ref, cache_ref = ops.cross_entropy_forward(logits, targets, ignore_index, smoothing)
    assert_close(loss, loss_ref, dtype, "loss")
    assert_close(cache["probs"], cache_ref["probs"], dtype, "probs")
    assert cache["n_kept"] == cache_ref["n_kept"]
    for dloss in (1.0, 2.5):
        assert_close(gpu.cross_entropy_backward(dloss, cache), ops.cross_entropy_backward(dloss, cache_ref),
                     dtype, f"dlogits (dloss {dloss})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ids", [[[1, 1, 4, 10], [4, 4, 4, 0]], [[7]], [[3, 3, 3, 3]]])
def test_embedding_backward_with_repeated_ids(gpu, dtype, ids):
    rng = np.random.default_rng(3)
    table = device(rng.standard_normal((11, 300)), dtype)
    ids = device(np.array(ids))
    dout = device(rng.standard_normal(tuple(ids.shape) + (300,)), dtype)
    _, cache = ops.embedding_forward(ids, table)
    assert_close(gpu.embedding_backward(dout, cache), ops.embedding_backward(dout, cache), dtype, "dW")


def test_embedding_backward_is_the_same_on_every_run(gpu):
    """Many repeats of a few ids, float32: atomic additions would differ in the last bits from run to run."""
    rng = np.random.default_rng(6)
    ids = device(rng.integers(0, 5, size=(64, 40)))
    dout = device(rng.standard_normal((64, 40, 256)), np.float32)
    _, cache = ops.embedding_forward(ids, device(np.zeros((5, 256)), np.float32))
    first = backend.to_numpy(gpu.embedding_backward(dout, cache))
    for _ in range(5):
        np.testing.assert_array_equal(backend.to_numpy(gpu.embedding_backward(dout, cache)), first)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_draws_the_textbook_mask_from_the_same_generator(gpu, dtype):
    """The fused kernel reserves the same positions of the counter generator as the textbook's
    ``rng.random``: the same mask bit for bit, and the two generators stay in step afterwards."""
    x = device(np.random.default_rng(4).standard_normal((3, 5, 17)), dtype)
    fused_rng, textbook_rng = backend.default_rng(8), backend.default_rng(8)
    for _ in range(2):
        out, cache = gpu.dropout_forward(x, 0.3, fused_rng, True)
        out_ref, cache_ref = ops.dropout_forward(x, 0.3, textbook_rng, True)
        np.testing.assert_array_equal(backend.to_numpy(cache["keep_scale"]), backend.to_numpy(cache_ref["keep_scale"]))
        np.testing.assert_array_equal(backend.to_numpy(out), backend.to_numpy(out_ref))
    kept = float((cache["keep_scale"] > 0).mean())
    assert 0.6 < kept < 0.8
    assert fused_rng.bit_generator.state == textbook_rng.bit_generator.state
    same, _ = gpu.dropout_forward(x, 0.3, fused_rng, False)
    assert same is x


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_updates_in_place_as_the_textbook_step(gpu, dtype):
    rng = np.random.default_rng(5)
    param, grad, m, v = (device(rng.standard_normal((37, 19)), dtype) for _ in range(4))
    v = abs(v)
    for step in (1, 7):
        want = ops.adam_step(param, grad, m, v, step, 1e-3, 0.9, 0.98, 1e-9)
        got_param, got_m, got_v = param.copy(), m.copy(), v.copy()
        result = gpu.adam_step(got_param, grad, got_m, got_v, step, 1e-3, 0.9, 0.98, 1e-9)
        assert result[0] is got_param and result[1] is got_m and result[2] is got_v
        for name, got, expected in zip(("param", "m", "v"), result, want):
            assert_close(got, expected, dtype, name)


def test_the_counter_generator_kernel_draws_the_numpy_numbers(gpu):
    from npformer.counter_random import CounterGenerator

    on_gpu, on_host = backend.default_rng(11), CounterGenerator(11, np)
    for dtype in (np.float32, np.float64):
        np.testing.assert_array_equal(backend.to_numpy(on_gpu.random((4, 1001), dtype=dtype)),
                                      on_host.random((4, 1001), dtype=dtype))


def test_the_fast_set_on_cupy_is_made_of_the_gpu_forms(gpu):
    with ops.using("fast"):
        assert ops.current().layernorm_forward is gpu.layernorm_forward
        assert ops.current().adam_step is gpu.adam_step and gpu.adam_step.many is gpu.adam.adam_steps


def test_adam_for_many_parameters_in_one_launch_equals_one_at_a_time(gpu):
    """``adam_steps`` reads a table of addresses: column blocks of a fused weight (rows longer than their
    columns), a bias, a 3-D array, a float64 parameter (its own launch), and a transposed view (a layout
    the table cannot describe, updated on its own) all come out as ``adam_step`` makes them."""
    rng = np.random.default_rng(7)
    fused = device(rng.standard_normal((8, 12)), np.float32)
    fused_grad = device(rng.standard_normal((8, 12)), np.float32)
    params = [fused[:, 0:4], fused[:, 4:8], fused[:, 8:12], device(rng.standard_normal(5), np.float32),
              device(rng.standard_normal((2, 3, 4)), np.float32), device(rng.standard_normal((3, 3)), np.float64),
              device(rng.standard_normal((6, 5)), np.float32).T]
    grads = [fused_grad[:, 0:4], fused_grad[:, 4:8], fused_grad[:, 8:12]] + [
        device(rng.standard_normal(p.shape), p.dtype) for p in params[3:]]
    ms = [device(rng.standard_normal(p.shape), p.dtype) for p in params]
    vs = [abs(device(rng.standard_normal(p.shape), p.dtype)) for p in params]
    expected = [tuple(a.copy() for a in quad) for quad in zip(params, ms, vs)]
    for (param, m, v), grad in zip(expected, grads):
        gpu.adam_step(param, grad, m, v, 3, 1e-3, 0.9, 0.98, 1e-9)
    gpu.adam.adam_steps(params, grads, ms, vs, 3, 1e-3, 0.9, 0.98, 1e-9)
    for index, (param, m, v) in enumerate(zip(params, ms, vs)):
        for name, got, want in zip(("param", "m", "v"), (param, m, v), expected[index]):
            assert_close(got, want, param.dtype.type, f"{name} of parameter {index}")
    untouched = backend.to_numpy(fused)
    np.testing.assert_array_equal(untouched, np.concatenate([backend.to_numpy(p) for p in params[:3]], axis=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_model_on_the_gpu_set_has_the_textbook_sets_loss_and_gradients(gpu, dtype):
    """A small Transformer, dropout on, label smoothing, padded sentences: one forward and backward pass
    with the fast set (the GPU kernels) and with the textbook set give the same loss and every
    parameter's gradient (the same dropout masks: the counter generator, seeded alike)."""
    from npformer import Transformer, TransformerConfig

    rng = np.random.default_rng(8)
    src = rng.integers(4, 30, size=(4, 7))
    src[1, 4:] = 0                                                   # padding
    tgt = rng.integers(4, 30, size=(4, 6))
    tgt[2, 3:] = 0
    src, tgt = device(src), device(tgt)
    results = []
    for op_set in ("textbook", "fast"):
        model = Transformer(TransformerConfig(30, 30, d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=16,
                                              dropout=0.1, label_smoothing=0.1), seed=0, dtype=dtype)
        with ops.using(op_set):
            loss, cache = ops.current().cross_entropy_forward(model.forward(src, tgt[:, :-1]), tgt[:, 1:],
                                                              ignore_index=0, label_smoothing=0.1)
            model.zero_grad()
            model.backward(ops.current().cross_entropy_backward(1.0, cache))
        results.append((float(loss), {key: backend.to_numpy(value) for key, value in model.grads().items()}))
    (loss_textbook, grads_textbook), (loss_fast, grads_fast) = results
    assert loss_fast == pytest.approx(loss_textbook, rel=TOLERANCE[dtype])
    scale = max(float(np.abs(g).max()) for g in grads_textbook.values())
    for key, value in grads_textbook.items():
        np.testing.assert_allclose(grads_fast[key], value, rtol=TOLERANCE[dtype] * 10,
                                   atol=TOLERANCE[dtype] * scale, err_msg=key)
