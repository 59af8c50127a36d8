"""The fast forms (``npformer/ops/fast/``) equal their textbook twins (``npformer/ops/``) in float64,
outputs and gradients, on shapes that hypothesis draws with the edge cases (length 1, one head,
fully padded rows, repeated ids). How ``ops.using`` chooses between them: ``tests/test_op_sets.py``."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npformer import ops, optim, threads
from npformer.models import Transformer, TransformerConfig
from npformer.ops import adam, attention, cross_entropy, embedding, fast, layernorm, linear
from npformer.tokens import PAD_ID

TWINS = {
    "linear_forward": linear, "linear_backward": linear,
    "layernorm_forward": layernorm, "layernorm_backward": layernorm,
    "attention_forward": attention, "attention_backward": attention,
    "cross_entropy_forward": cross_entropy, "cross_entropy_backward": cross_entropy,
    "embedding_backward": embedding, "adam_step": adam,
}
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def split_everything(monkeypatch):
    """Two threads and blocks of any size, so that the fast forms really split their rows."""
    before = threads.get_threads()
    monkeypatch.setattr(threads, "MIN_BLOCK_SIZE", 1)
    threads.set_threads(2)
    yield
    threads.set_threads(before)


def test_every_fast_form_has_a_twin_and_names_it():
    import sys

    assert sorted(fast.__all__) == sorted(TWINS)
    for name in fast.__all__:
        assert getattr(fast, name) is not getattr(TWINS[name], name)
        module_doc = sys.modules[getattr(fast, name).__module__].__doc__
        assert module_doc.startswith(f"Fast form of ``{TWINS[name].__name__}``"), name


def _same(fast_values, textbook_values):
    """Equal below 1e-12 relative (and 1e-14 absolute, for entries that are zero in one of them)."""
    for fast_value, textbook_value in zip(fast_values, textbook_values, strict=True):
        if textbook_value is None:
            assert fast_value is None
        else:
            np.testing.assert_allclose(fast_value, textbook_value, rtol=1e-12, atol=1e-14)


def _both(name, *args, **kwargs):
    return getattr(fast, name)(*args, **kwargs), getattr(TWINS[name], name)(*args, **kwargs)


@SETTINGS
@given(rows=st.integers(1, 9), length=st.integers(1, 3), d_in=st.integers(1, 6), d_out=st.integers(1, 7),
       bias=st.booleans(), seed=st.integers(0, 2**16))
def test_linear(split_everything, rows, length, d_in, d_out, bias, seed):
    rng = np.random.default_rng(seed)
    x, W = rng.standard_normal((rows, length, d_in)), rng.standard_normal((d_in, d_out))
    b = rng.standard_normal(d_out) if bias else None
    dy = rng.standard_normal((rows, length, d_out))
    (y_fast, cache_fast), (y_book, cache_book) = _both("linear_forward", x, W, b)
    _same([y_fast], [y_book])
    _same(fast.linear_backward(dy, cache_fast), linear.linear_backward(dy, cache_book))
    _same(fast.linear_backward(dy, cache_book), linear.linear_backward(dy, cache_fast))  # caches agree


@SETTINGS
@given(rows=st.integers(1, 9), length=st.integers(1, 3), d_model=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_layernorm(split_everything, rows, length, d_model, seed):
    rng = np.random.default_rng(seed)
    x, dy = rng.standard_normal((rows, length, d_model)), rng.standard_normal((rows, length, d_model))
    gamma, beta = rng.standard_normal(d_model), rng.standard_normal(d_model)
    (y_fast, cache_fast), (y_book, cache_book) = _both("layernorm_forward", x, gamma, beta)
    _same([y_fast, cache_fast["x_hat"], cache_fast["rstd"]], [y_book, cache_book["x_hat"], cache_book["rstd"]])
    _same(fast.layernorm_backward(dy, cache_fast), layernorm.layernorm_backward(dy, cache_book))
    _same(fast.layernorm_backward(dy, cache_book), layernorm.layernorm_backward(dy, cache_fast))


MASK_KINDS = ["none", "padding", "causal", "full", "all-masked-row"]


@SETTINGS
@given(batch=st.integers(1, 5), heads=st.integers(1, 3), q_len=st.integers(1, 5), k_len=st.integers(1, 5),
       mask_kind=st.sampled_from(MASK_KINDS), seed=st.integers(0, 2**16))
def test_attention(split_everything, batch, heads, q_len, k_len, mask_kind, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, q_len, 3))
    k, v = rng.standard_normal((batch, heads, k_len, 3)), rng.standard_normal((batch, heads, k_len, 2))
    dout = rng.standard_normal((batch, heads, q_len, 2))
    lengths = rng.integers(1, k_len + 1, size=batch)
    mask = {"none": None,
            "padding": (np.arange(k_len)[None, :] < lengths[:, None])[:, None, None, :],  # (B, 1, 1, Tk)
            "causal": np.tril(np.ones((q_len, k_len), dtype=bool)),  # (Tq, Tk)
            "full": rng.random((batch, heads, q_len, k_len)) < 0.7,
            "all-masked-row": np.zeros((batch, 1, q_len, k_len), dtype=bool)}[mask_kind]
    (out_fast, cache_fast), (out_book, cache_book) = _both("attention_forward", q, k, v, mask)
    _same([out_fast, cache_fast["weights"]], [out_book, cache_book["weights"]])
    assert np.isfinite(out_fast).all()
    _same(fast.attention_backward(dout, cache_fast), attention.attention_backward(dout, cache_book))
    _same(fast.attention_backward(dout, cache_book), attention.attention_backward(dout, cache_fast))


@SETTINGS
@given(rows=st.integers(1, 9), length=st.integers(1, 3), vocab=st.integers(2, 7),
       smoothing=st.sampled_from([0.0, 0.1, 1.0]), padding=st.sampled_from(["some", "none", "all"]),
       dloss=st.sampled_from([1.0, 0.5]), seed=st.integers(0, 2**16))
def test_cross_entropy(split_everything, rows, length, vocab, smoothing, padding, dloss, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((rows, length, vocab)) * 3
    targets = rng.integers(1, vocab, size=(rows, length))
    if padding == "some":
        targets[0, 0] = PAD_ID
    elif padding == "all":
        targets[...] = PAD_ID
    (loss_fast, cache_fast), (loss_book, cache_book) = _both(
        "cross_entropy_forward", logits, targets, label_smoothing=smoothing)
    _same([loss_fast, cache_fast["probs"]], [loss_book, cache_book["probs"]])
    _same([fast.cross_entropy_backward(dloss, cache_fast)], [cross_entropy.cross_entropy_backward(dloss, cache_book)])
    _same([fast.cross_entropy_backward(dloss, cache_book)], [cross_entropy.cross_entropy_backward(dloss, cache_fast)])


def test_fast_cross_entropy_backward_leaves_its_cache_alone():
    rng = np.random.default_rng(0)
    loss, cache = fast.cross_entropy_forward(rng.standard_normal((3, 4, 6)), rng.integers(0, 6, (3, 4)))
    first = fast.cross_entropy_backward(1.0, cache)
    np.testing.assert_array_equal(fast.cross_entropy_backward(1.0, cache), first)


@SETTINGS
@given(batch=st.integers(1, 4), length=st.integers(1, 6), vocab=st.integers(1, 5), d_model=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_embedding_backward(batch, length, vocab, d_model, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(batch, length))  # a small vocabulary: ids repeat
    W, dout = rng.standard_normal((vocab, d_model)), rng.standard_normal((batch, length, d_model))
    _, cache = embedding.embedding_forward(ids, W)
    _same([fast.embedding_backward(dout, cache)], [embedding.embedding_backward(dout, cache)])


@SETTINGS
@given(shape=st.sampled_from([(1,), (3, 4), (2, 1, 5)]), step=st.sampled_from([1, 2, 7, 1000]),
       seed=st.integers(0, 2**16))
def test_adam_step(shape, step, seed):
    rng = np.random.default_rng(seed)
    param, grad, m = rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(shape)
    v = rng.random(shape)
    expected = adam.adam_step(param, grad, m, v, step, 1e-2, 0.9, 0.98, 1e-9)
    inputs = [array.copy() for array in (param, grad, m, v)]
    got = fast.adam_step(*inputs, step, 1e-2, 0.9, 0.98, 1e-9)
    _same(got, expected)
    assert got[0] is inputs[0] and got[1] is inputs[2] and got[2] is inputs[3]  # in place, as documented


@pytest.mark.parametrize("layout", ["three chunks, the last one short", "a transposed view of each array",
                                    "a column block of a fused weight", "a strided view"])
def test_adam_step_in_chunks_and_on_views(layout):
    """The fast step updates ``fast.adam.CHUNK`` elements at a time; a partial last chunk, arrays
    whose rows alone are contiguous (a fused weight's column block: chunks of whole rows) and views
    with no flat form (updated whole) all give the textbook step."""
    from npformer.ops.fast import adam as fast_adam

    rng = np.random.default_rng(1)
    shape = {"three chunks, the last one short": (3, fast_adam.CHUNK - 5),
             "a column block of a fused weight": (fast_adam.CHUNK // 40 + 3, 96)}.get(layout, (7, 9))
    param, grad, m = (rng.standard_normal(shape) for _ in range(3))
    v = rng.random(shape)
    expected = adam.adam_step(param, grad, m, v, 3, 1e-2, 0.9, 0.98, 1e-9)
    if layout.startswith("three"):
        inputs = [array.copy() for array in (param, grad, m, v)]
    elif layout.startswith("a transposed view"):
        inputs = [np.asfortranarray(array).T.T for array in (param, grad, m, v)]  # F-ordered, not C-contiguous
        assert not inputs[0].flags.c_contiguous
    elif layout.startswith("a column"):  # the middle third of a (rows, 3 * 96) weight, grad and moments C
        inputs = [np.concatenate([np.zeros_like(param), param, np.zeros_like(param)], axis=1)[:, 96:192],
                  np.concatenate([grad, grad, grad], axis=1)[:, 96:192], m.copy(), v.copy()]
        assert not inputs[0].flags.c_contiguous and inputs[0].shape[0] * 96 > fast_adam.CHUNK  # several chunks
    else:
        inputs = [np.repeat(array, 2, axis=1)[:, ::2] for array in (param, grad, m, v)]  # neither C nor F
        assert not (inputs[0].flags.c_contiguous or inputs[0].flags.f_contiguous)
    got = fast.adam_step(*inputs, 3, 1e-2, 0.9, 0.98, 1e-9)
    _same(got, expected)
    assert got[0] is inputs[0] and got[1] is inputs[2] and got[2] is inputs[3]


def test_the_textbook_ops_read_like_the_equation():
    """No public function in ``npformer/ops/*.py`` has more than 15 lines of code (docstring,
    comments and blank lines not counted), and none uses threads or ``out=`` buffers."""
    import ast
    import pathlib

    folder = pathlib.Path(ops.__file__).parent
    for path in sorted(set(folder.glob("*.py")) - {folder / "switch.py"}):
        source = path.read_text()
        assert "threads" not in source.split('"""', 2)[-1] and "out=" not in source, path.name
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith(("_", "check_")):
                continue  # the input checks are one call at the top of each op
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            code = {number for statement in body for number in range(statement.lineno, statement.end_lineno + 1)
                    if lines[number - 1].strip() and not lines[number - 1].strip().startswith("#")}
            assert len(code) <= 15, f"{path.name}: {node.name} has {len(code)} lines of code"
