"""``npformer.threads``: the row blocks cover every row once, BLAS is held to one thread only while
npformer's threads run, and Adam over threads equals Adam on one. (That every fast op split over
threads equals its textbook twin is ``tests/test_fast_ops.py``.)"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from npformer import backend, optim, threads
from npformer.models import Transformer, TransformerConfig


@pytest.fixture
def split_everything(monkeypatch):
    """Two threads, and blocks of any size: even a 1-row array is split where it can be. (A test
    worker starts on one thread, and tests/conftest.py gives every test the default count back.)"""
    threads.set_threads(2)
    monkeypatch.setattr(threads, "MIN_BLOCK_SIZE", 1)


def _with_threads(count, function):
    threads.set_threads(count)
    return function()


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


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_blas_is_held_to_one_thread_only_while_npformer_splits(split_everything):
    from threadpoolctl import threadpool_limits

    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library")
    threads.set_threads(2)
    with threadpool_limits(limits=2, user_api="blas"):  # a test worker may run with BLAS on one thread
        before, inside = _blas_threads(), []
        threads.parallel_rows(lambda rows: inside.append(_blas_threads()), 2)
        after = _blas_threads()
    assert before == [2] * len(before), "BLAS must start on 2 threads, or this test cannot fail"
    assert inside and all(counts == [1] * len(before) for counts in inside)
    assert after == before  # given back as soon as the call returns


def test_every_fast_form_that_calls_blas_holds_it_while_it_runs(split_everything):
    """The hold is where every loop gets it: in the fast forms themselves, small products included
    (a user's own loop calls them outside ``train_step``); holds nest, and BLAS gets its threads back."""
    from threadpoolctl import threadpool_limits

    from npformer.ops import fast

    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library")
    for name in ("linear_forward", "linear_backward", "attention_forward", "attention_backward",
                 "layernorm_backward"):  # every fast form that calls BLAS
        assert getattr(fast, name).__wrapped__, f"fast.{name} does not hold BLAS"
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        inside = threads.with_blas_on_one_thread(_blas_threads)()
        with threads.blas_on_one_thread():
            nested = threads.with_blas_on_one_thread(_blas_threads)()
            still_held = _blas_threads()
        after = _blas_threads()
    assert before == [2] * len(before), "BLAS must start on 2 threads, or this test cannot fail"
    assert inside == nested == still_held == [1] * len(before)
    assert after == before


def test_import_and_a_fast_training_step_leave_blas_threads_as_they_were():
    """In a fresh process: BLAS's thread count before ``import npformer``, after it, and after a
    training step and a user's own loop on the fast op set (whose ops split over threads) is the same."""
    code = """
from threadpoolctl import threadpool_info
def blas(): return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
import numpy
before = blas()
import npformer
from npformer import ops, optim, threads, training
from npformer.models import Transformer, TransformerConfig
after_import = blas()
assert not __import__("npformer.allocator").allocator._done, "importing must not change the allocator"
threads.set_threads(2)
model = Transformer(TransformerConfig(src_vocab=40, tgt_vocab=40, d_model=64, n_heads=4, d_ff=128,
                                      n_layers=1, dropout=0.0), seed=0)
rng = numpy.random.default_rng(0)
src, tgt = rng.integers(4, 40, (64, 20)), rng.integers(4, 40, (64, 21))
with ops.using("fast"):
    training.train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.Adam(model))
    optimizer = optim.Adam(model)          # and a user's own textbook loop, outside train_step
    logits = model.forward(src, tgt[:, :-1])
    loss, cache = ops.current().cross_entropy_forward(logits, tgt[:, 1:])
    model.zero_grad()
    model.backward(ops.current().cross_entropy_backward(1.0, cache))
    optimizer.step()
from npformer import allocator
assert allocator._done, "the first training step tells glibc to keep freed memory (npformer.allocator)"
print(before, after_import, blas(), "matplotlib" in __import__("sys").modules)
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    before, after_import, after_step, matplotlib_loaded = result.stdout.split("] ")
    assert before.strip("[") not in ("", "1"), "BLAS must start on 2 threads, or this test cannot fail"
    assert before + "]" == after_import + "]" == after_step + "]", result.stdout
    assert matplotlib_loaded.strip() == "False", "a training step must not load matplotlib"


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


# -- split work equals one block -----------------------------------------------------------------
# Each op that splits its rows is a fast form, and tests/test_fast_ops.py shows it (split over two
# threads, blocks of any size) equal to its textbook twin, on shapes that hypothesis draws.

def _same(first, second):
    for a, b in zip(first, second):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def _rng(seed):
    return np.random.default_rng(seed)


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


@pytest.mark.parametrize("count", [1, 2, 3, 5])
@pytest.mark.parametrize("n_first, n_second", [(1, 1), (7, 3), (64, 64)])
def test_row_pairs_cover_both_loops_once(split_everything, count, n_first, n_second):
    """``parallel_row_pairs`` (a linear layer's dX and dW side by side): every row of both loops once,
    and on two threads each loop whole on its own thread."""
    threads.set_threads(count)
    first, second = np.zeros(n_first, dtype=int), np.zeros(n_second, dtype=int)
    where = {"first": set(), "second": set()}

    def make(seen, name):
        def block(rows):
            seen[rows] += 1
            where[name].add(threading.current_thread().name)
        return block

    threads.parallel_row_pairs(make(first, "first"), n_first, 1, make(second, "second"), n_second, 1)
    assert first.tolist() == [1] * n_first and second.tolist() == [1] * n_second
    if count == 2:
        assert len(where["first"]) == len(where["second"]) == 1 and where["first"] != where["second"]


def test_on_cupy_every_split_runs_on_the_calling_thread(split_everything, monkeypatch):
    """CuPy launches one kernel over every row, so neither the row blocks nor the side-by-side pairs
    (a linear layer's dX and dW) nor Adam's groups go to npformer's threads there."""
    threads.set_threads(2)
    monkeypatch.setattr(threads, "is_cupy", lambda: True)
    names = set()

    def block(rows):
        names.add(threading.current_thread().name)

    threads.parallel_rows(block, 64)
    threads.parallel_row_pairs(block, 64, 1, block, 64, 1)
    threads.parallel_items(block, [slice(0, 1), slice(1, 2)])
    assert names == {"MainThread"}
