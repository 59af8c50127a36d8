"""``npformer.threads``: the row blocks cover every row once, and every op that splits its
rows over threads gives the single-thread (textbook) result on shapes that hypothesis draws."""

import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npformer import backend, ops, optim, threads
from npformer.models import Transformer, TransformerConfig
from npformer.tokens import PAD_ID


@pytest.fixture
def split_everything(monkeypatch):
    """Two threads, and blocks of any size: even a 1-row array is split where it can be."""
    before = threads.get_threads()
    monkeypatch.setattr(threads, "MIN_BLOCK_SIZE", 1)
    yield
    threads.set_threads(before)


def _with_threads(count, function):
    threads.set_threads(count)
    try:
        return function()
    finally:
        threads.set_threads(2)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
@pytest.mark.parametrize("n_rows", [1, 2, 7, 64])
def test_blocks_cover_every_row_once_in_order(split_everything, count, n_rows):
    threads.set_threads(count)
    seen = np.zeros(n_rows, dtype=int)
    calls, names = [], set()

    def block(rows):
        seen[rows] += 1
        calls.append(rows)
        names.add(threading.current_thread().name)

    threads.parallel_rows(block, n_rows)
    assert seen.tolist() == [1] * n_rows
    assert len(calls) == min(count, n_rows)  # one block per thread, never more blocks than rows
    assert "MainThread" in names and len(names) <= len(calls)
    blocks = threads._blocks(n_rows, 1)
    assert blocks[0].start == 0 and blocks[-1].stop == n_rows
    assert all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))


def test_small_arrays_run_as_one_call():
    threads.set_threads(2)
    assert threads._blocks(10, 100) == [slice(0, 10)]  # 1,000 elements: not worth a thread
    assert len(threads._blocks(1000, threads.MIN_BLOCK_SIZE)) == 2


def test_nested_calls_run_serially_and_errors_surface_after_every_block(split_everything):
    threads.set_threads(2)
    calls = []

    def inner(rows):
        calls.append(rows)

    threads.parallel_rows(lambda rows: threads.parallel_rows(inner, 4), 2)
    assert len(calls) == 2 and all(rows == slice(0, 4) for rows in calls)  # no deadlock, no split
    finished = []

    def failing(rows):
        if rows.start == 0:
            raise KeyError("first block")
        finished.append(rows)

    with pytest.raises(KeyError, match="first block"):
        threads.parallel_rows(failing, 2)
    assert finished == [slice(1, 2)]


def test_blas_runs_on_one_thread_while_npformer_splits():
    from threadpoolctl import threadpool_info

    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    if not blas:
        pytest.skip("threadpoolctl sees no BLAS library")
    threads.set_threads(1)
    original = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    threads.set_threads(2)
    assert all(lib["num_threads"] == 1 for lib in threadpool_info() if lib["user_api"] == "blas")
    threads.set_threads(1)
    assert [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"] == original
    threads.set_threads(2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_threads_rejects_what_is_not_a_count(bad):
    with pytest.raises(ValueError, match="set_threads: count must be an integer >= 1"):
        threads.set_threads(bad)


def test_npformer_threads_environment_variable():
    code = "from npformer import threads; print(threads.get_threads())"
    ok = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env={"NPFORMER_THREADS": "3", "PATH": ""})
    assert ok.stdout.strip() == "3"
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"NPFORMER_THREADS": "two", "PATH": ""})
    assert bad.returncode != 0 and "NPFORMER_THREADS must be a whole number >= 1, got 'two'" in bad.stderr


# -- every split op equals its one-block form ---------------------------------------------------

def _same(first, second):
    for a, b in zip(first, second):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def _rng(seed):
    return np.random.default_rng(seed)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 9), d_in=st.integers(1, 6), d_out=st.integers(1, 7), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_linear_split_equals_one_block(split_everything, rows, d_in, d_out, bias, seed):
    rng = _rng(seed)
    x, W = rng.standard_normal((rows, 2, d_in)), rng.standard_normal((d_in, d_out))
    b = rng.standard_normal(d_out) if bias else None
    dy = rng.standard_normal((rows, 2, d_out))

    def run():
        y, cache = ops.linear_forward(x, W, b)
        return (y, *ops.linear_backward(dy, cache))

    _same(_with_threads(1, run), _with_threads(2, run))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.integers(1, 5), heads=st.integers(1, 3), q_len=st.integers(1, 5), k_len=st.integers(1, 5),
       mask_kind=st.sampled_from(["none", "padding", "causal", "full", "all-masked-row"]),
       seed=st.integers(0, 2**16))
def test_attention_split_equals_one_block(split_everything, batch, heads, q_len, k_len, mask_kind, seed):
    rng = _rng(seed)
    q = rng.standard_normal((batch, heads, q_len, 3))
    k, v = rng.standard_normal((batch, heads, k_len, 3)), rng.standard_normal((batch, heads, k_len, 2))
    dout = rng.standard_normal((batch, heads, q_len, 2))
    lengths = rng.integers(1, k_len + 1, size=batch)
    mask = {"none": None,
            "padding": (np.arange(k_len)[None, :] < lengths[:, None])[:, None, None, :],  # (B, 1, 1, Tk)
            "causal": np.tril(np.ones((q_len, k_len), dtype=bool)),  # (Tq, Tk): the same for every row
            "full": rng.random((batch, heads, q_len, k_len)) < 0.7,
            "all-masked-row": np.zeros((batch, 1, q_len, k_len), dtype=bool)}[mask_kind]

    def run():
        out, cache = ops.attention_forward(q, k, v, mask)
        return (out, cache["weights"], *ops.attention_backward(dout, cache))

    _same(_with_threads(1, run), _with_threads(2, run))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 9), d_model=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_layernorm_split_equals_one_block(split_everything, rows, d_model, seed):
    rng = _rng(seed)
    x, dy = rng.standard_normal((rows, 1, d_model)), rng.standard_normal((rows, 1, d_model))
    gamma, beta = rng.standard_normal(d_model), rng.standard_normal(d_model)

    def run():
        y, cache = ops.layernorm_forward(x, gamma, beta)
        return (y, cache["x_hat"], cache["rstd"], *ops.layernorm_backward(dy, cache))

    _same(_with_threads(1, run), _with_threads(2, run))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 9), vocab=st.integers(2, 7), smoothing=st.sampled_from([0.0, 0.1]),
       seed=st.integers(0, 2**16))
def test_cross_entropy_split_equals_one_block(split_everything, rows, vocab, smoothing, seed):
    rng = _rng(seed)
    logits = rng.standard_normal((rows, 2, vocab))
    targets = rng.integers(0, vocab, size=(rows, 2))  # id 0 = <pad>: ignored
    targets[0, 0] = PAD_ID

    def run():
        loss, cache = ops.cross_entropy_forward(logits, targets, label_smoothing=smoothing)
        return loss, ops.cross_entropy_backward(1.0, cache)

    _same(_with_threads(1, run), _with_threads(2, run))


def test_adam_over_threads_equals_adam_on_one(split_everything):
    def train():
        with backend.default_dtype(np.float64):
            model = Transformer(TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=16,
                                                  n_layers=1, dropout=0.0), seed=0)
        optimizer = optim.Adam(model, lr=1e-2)
        rng = _rng(3)
        for _ in range(3):
            for key, grad in model.grads().items():
                grad[...] = rng.standard_normal(grad.shape)
            optimizer.step()
        return [model.params()[key] for key in sorted(model.params())]

    _same(_with_threads(1, train), _with_threads(3, train))


def test_without_threadpoolctl_npformer_runs_one_block(monkeypatch):
    monkeypatch.setattr(threads, "_has_threadpoolctl", lambda: False)
    assert threads._default_threads() == 1
    with pytest.raises(ImportError, match="set_threads: more than one thread needs threadpoolctl"):
        threads.set_threads(2)
