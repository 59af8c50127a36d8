"""Every op's hand-written backward pass against central finite differences in float64.

Both op sets are checked, the textbook forms of ``npformer/ops/`` and the fast forms of
``npformer/ops/fast/``. Shapes are drawn by hypothesis: batch 1-3, lengths 1-6, heads 1-4, odd
widths, and masks with fully padded rows. The pass threshold is the project's:
worst relative error below 1e-6 for every input tensor. The ``@example``
cases are ones that once failed through finite-difference noise rather than
a wrong formula; they keep the checker's accuracy honest.
"""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from npformer import backend, gradcheck, ops

batch_sizes = st.integers(1, 3)
lengths = st.integers(1, 6)
widths = st.integers(1, 7)
heads = st.integers(1, 4)
head_dims = st.integers(1, 5)
seeds = st.integers(0, 2**16)


def assert_gradients_match(name, seed, **sizes):
    """The op's case, checked on the textbook form and on the fast form (where it has one)."""
    for op_set in ("textbook", "fast"):
        with ops.using(op_set):
            builder = gradcheck.OP_CASES[name]
            forward, backward, inputs = builder(np.random.default_rng(seed), **sizes)
            inputs = {k: backend.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
            report = gradcheck.check_gradients(forward, backward, inputs, name=name, seed=seed)
        assert report.passed, f"{op_set} ops, sizes {sizes}, seed {seed}\n{report}"
    return report


@given(seed=seeds, batch=batch_sizes, length=lengths, d_in=widths, d_out=widths)
def test_linear(seed, batch, length, d_in, d_out):
    assert_gradients_match("linear", seed, batch=batch, length=length, d_in=d_in, d_out=d_out)


def test_linear_without_bias(rng):
    from npformer import ops

    x, W = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    report = gradcheck.check_gradients(
        lambda x, W: ops.linear_forward(x, W, None),
        lambda dy, cache: ops.linear_backward(dy, cache)[:2],
        {"x": x, "W": W},
        name="linear (no bias)",
    )
    assert report.passed, report


@given(seed=seeds, batch=batch_sizes, length=lengths, width=widths)
def test_relu(seed, batch, length, width):
    assert_gradients_match("relu", seed, batch=batch, length=length, width=width)


@given(seed=seeds, batch=batch_sizes, length=lengths, width=widths,
       approximate=st.sampled_from(["none", "tanh"]))
def test_gelu(seed, batch, length, width, approximate):
    assert_gradients_match("gelu", seed, batch=batch, length=length, width=width,
                           approximate=approximate)


@given(seed=seeds, batch=batch_sizes, length=lengths, width=widths, axis=st.sampled_from([0, 1, -1]))
def test_softmax(seed, batch, length, width, axis):
    assert_gradients_match("softmax", seed, batch=batch, length=length, width=width, axis=axis)


@given(seed=seeds, batch=batch_sizes, length=lengths, d_model=st.integers(3, 9))
@example(seed=8374, batch=2, length=3, d_model=3)  # a strongly curved row: needed h = 3e-4
@example(seed=49, batch=1, length=3, d_model=3)  # a 1e-6 gradient entry: needed 4th order
def test_layernorm(seed, batch, length, d_model):
    assert_gradients_match("layernorm", seed, batch=batch, length=length, d_model=d_model)


@given(seed=seeds, batch=batch_sizes, length=lengths)
def test_layernorm_two_features(seed, batch, length):
    """D = 2: a row normalises to (+1, -1) whatever its values, so dx flows only through
    eps and is O(eps); with eps = 1e-5 it sits at the finite-difference noise floor.
    A large eps makes that gradient measurable and still checks every term."""
    assert_gradients_match("layernorm", seed, batch=batch, length=length, d_model=2, eps=0.5)


def test_layernorm_single_feature():
    """D = 1: every row normalises to 0, so dx and dgamma are exactly 0 and dbeta = dout."""
    assert_gradients_match("layernorm", 3, batch=2, length=2, d_model=1)


@given(seed=seeds, batch=batch_sizes, length=lengths, vocab=st.integers(1, 9), d_model=widths)
def test_embedding(seed, batch, length, vocab, d_model):
    assert_gradients_match("embedding", seed, batch=batch, length=length, vocab=vocab,
                           d_model=d_model)


@given(seed=seeds, batch=batch_sizes, heads=heads, q_len=lengths, k_len=lengths,
       head_dim=head_dims, causal=st.booleans(), fully_padded_row=st.booleans())
@example(seed=915, batch=3, heads=3, q_len=4, k_len=3, head_dim=4, causal=False,
         fully_padded_row=False)  # near-one-hot rows give dq entries of 1e-6
def test_attention(seed, batch, heads, q_len, k_len, head_dim, causal, fully_padded_row):
    assert_gradients_match("attention", seed, batch=batch, heads=heads, q_len=q_len,
                           k_len=k_len, head_dim=head_dim, causal=causal,
                           fully_padded_row=fully_padded_row)


def test_attention_without_mask(rng):
    from npformer import ops

    q, k, v = (rng.standard_normal((2, 3, 4, 5)) for _ in range(3))
    report = gradcheck.check_gradients(
        lambda q, k, v: ops.attention_forward(q, k, v, None), ops.attention_backward,
        {"q": q, "k": k, "v": v}, name="attention (no mask)",
    )
    assert report.passed, report


@given(seed=seeds, batch=batch_sizes, length=lengths, width=widths,
       p=st.sampled_from([0.0, 0.1, 0.5, 0.9]), training=st.booleans())
def test_dropout(seed, batch, length, width, p, training):
    assert_gradients_match("dropout", seed, batch=batch, length=length, width=width, p=p,
                           training=training, mask_seed=seed)


@given(seed=seeds, batch=batch_sizes, length=lengths, vocab=st.integers(1, 7),
       label_smoothing=st.sampled_from([0.0, 0.1, 0.3]), fully_padded_row=st.booleans())
@example(seed=3, batch=3, length=3, vocab=4, label_smoothing=0.0, fully_padded_row=False)
def test_cross_entropy(seed, batch, length, vocab, label_smoothing, fully_padded_row):
    assert_gradients_match("cross_entropy", seed, batch=batch, length=length, vocab=max(vocab, 2),
                           label_smoothing=label_smoothing, fully_padded_row=fully_padded_row)


def test_every_op_is_in_the_registry():
    """The command and these tests cover each differentiable op of npformer.ops."""
    from npformer import ops

    forwards = {name[: -len("_forward")] for name in ops.__all__ if name.endswith("_forward")}
    covered = {name.split("_tanh")[0].replace("cross_attention", "attention")
               for name in gradcheck.OP_CASES}
    assert forwards <= covered, forwards - covered


@given(seed=seeds, batch=batch_sizes, length=lengths, width=widths, kind=st.sampled_from(["mean", "max"]),
       fully_padded_row=st.booleans())
def test_masked_pooling(seed, batch, length, width, kind, fully_padded_row):
    name = "masked_mean_pool" if kind == "mean" else "masked_max_pool"
    assert_gradients_match(name, seed, batch=batch, length=length, width=width,
                           fully_padded_row=fully_padded_row)
