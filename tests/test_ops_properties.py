"""What each op must satisfy beyond its gradient: invariances, masks, stability, formulas."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer import backend, ops

# Inputs are drawn on the host with NumPy and moved to the active backend (NumPy, CuPy or the strict
# stand-in) with ``dev``; results come back with ``host`` before NumPy checks them.
dev = backend.asarray


def host(array):
    """A host NumPy copy of an op's result (or of a device input), for NumPy's checks."""
    return np.array(backend.to_numpy(array), copy=True)


def f32(rng, *shape, scale=1.0):
    return dev((scale * rng.standard_normal(shape)).astype(np.float32))


# --- softmax -------------------------------------------------------------------------------

@given(seed=st.integers(0, 2**16), shift=st.floats(-1e3, 1e3), axis=st.sampled_from([0, 1, -1]))
def test_softmax_sums_to_one_and_ignores_a_constant_shift(seed, shift, axis):
    x = np.random.default_rng(seed).standard_normal((3, 4, 5)) * 3
    y, _ = ops.softmax_forward(dev(x), axis=axis)
    y_shifted, _ = ops.softmax_forward(dev(x + shift), axis=axis)
    y, y_shifted = host(y), host(y_shifted)
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, atol=1e-12)
    np.testing.assert_allclose(y_shifted, y, atol=1e-10)


def test_softmax_is_stable_for_huge_inputs():
    y, _ = ops.softmax_forward(dev(np.array([[1e4, 0.0, -1e4], [1e30, 1e30, 0.0]], dtype=np.float32)))
    y = host(y)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-7)


# --- attention -----------------------------------------------------------------------------

def test_masked_keys_get_exactly_zero_weight(rng):
    q, k, v = f32(rng, 2, 3, 4, 5), f32(rng, 2, 3, 6, 5), f32(rng, 2, 3, 6, 5)
    ids = np.array([[5, 6, 7, 0, 0, 0], [5, 6, 7, 8, 9, 0]])
    mask = ops.padding_mask(dev(ids))
    _, cache = ops.attention_forward(q, k, v, mask)
    weights = host(cache["weights"])
    assert weights.shape == (2, 3, 4, 6)
    assert np.all(weights[0, :, :, 3:] == 0.0) and np.all(weights[1, :, :, 5:] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


def test_fully_masked_rows_give_zeros_and_zero_gradients_not_nan(rng):
    q, k, v = f32(rng, 2, 2, 3, 4), f32(rng, 2, 2, 3, 4), f32(rng, 2, 2, 3, 4)
    mask = ops.padding_mask(dev(np.array([[4, 5, 0], [0, 0, 0]])))  # second sequence: all padding
    out, cache = ops.attention_forward(q, k, v, mask)
    dq, dk, dv = map(host, ops.attention_backward(f32(rng, 2, 2, 3, 4), cache))
    out, weights = host(out), host(cache["weights"])
    for array in (out, weights, dq, dk, dv):
        assert np.all(np.isfinite(array))
    assert np.all(out[1] == 0) and np.all(weights[1] == 0)
    assert np.all(dq[1] == 0) and np.all(dk[1] == 0) and np.all(dv[1] == 0)
    assert np.any(out[0] != 0)


@given(seed=st.integers(0, 2**16), length=st.integers(2, 7), t=st.integers(0, 5))
def test_causal_attention_output_at_t_ignores_later_inputs(seed, length, t):
    t = t % length
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((2, 3, length, 4)) for _ in range(3))
    mask = ops.causal_mask(length)
    out = host(ops.attention_forward(dev(q), dev(k), dev(v), mask)[0])
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for array in (q2, k2, v2):
        array[:, :, t + 1:] = rng.standard_normal(array[:, :, t + 1:].shape) * 10
    out2 = host(ops.attention_forward(dev(q2), dev(k2), dev(v2), mask)[0])
    np.testing.assert_array_equal(out2[:, :, : t + 1], out[:, :, : t + 1])
    if t + 1 < length:
        assert not np.allclose(out2[:, :, t + 1:], out[:, :, t + 1:])


def test_attention_matches_the_textbook_formula(rng):
    q, k, v = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    scores = q @ k.swapaxes(-1, -2) / 2.0  # sqrt(Dh) = 2
    expected = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True) @ v
    out, _ = ops.attention_forward(dev(q), dev(k), dev(v))
    np.testing.assert_allclose(host(out), expected, rtol=1e-12)


def test_masks_have_the_documented_shapes_and_values():
    ids = dev(np.array([[3, 4, 0], [5, 0, 0]]))
    np.testing.assert_array_equal(
        host(ops.padding_mask(ids)[:, 0, 0]), [[True, True, False], [True, False, False]]
    )
    assert ops.padding_mask(ids).shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(
        host(ops.causal_mask(3)), [[True, False, False], [True, True, False], [True, True, True]]
    )
    combined = ops.padding_mask(ids) & ops.causal_mask(3)
    assert combined.shape == (2, 1, 3, 3) and combined.dtype == bool


# --- layer norm ----------------------------------------------------------------------------

@given(seed=st.integers(0, 2**16), d_model=st.integers(3, 64), offset=st.floats(-100, 100))
def test_layernorm_gives_zero_mean_unit_variance_before_gamma_beta(seed, d_model, offset):
    x = np.random.default_rng(seed).standard_normal((4, d_model)) * 5 + offset
    y, cache = ops.layernorm_forward(dev(x), dev(np.ones(d_model)), dev(np.zeros(d_model)), eps=1e-12)
    y = host(y)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-7)
    np.testing.assert_array_equal(host(cache["x_hat"]), y)


def test_layernorm_applies_gamma_and_beta(rng):
    x, gamma, beta = rng.standard_normal((2, 5)), rng.standard_normal(5), rng.standard_normal(5)
    y, _ = ops.layernorm_forward(dev(x), dev(gamma), dev(beta))
    y = host(y)
    x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, gamma * x_hat + beta, rtol=1e-12)


# --- cross-entropy -------------------------------------------------------------------------

def test_cross_entropy_is_minus_log_p_target_without_smoothing(rng):
    logits = rng.standard_normal((2, 3, 7))
    targets = np.array([[1, 6, 2], [3, 4, 5]])
    loss, _ = ops.cross_entropy_forward(dev(logits), dev(targets), ignore_index=None)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_p, targets[..., None], -1).mean()
    assert float(loss) == pytest.approx(expected, rel=1e-12)


def test_cross_entropy_ignores_padded_targets(rng):
    logits = rng.standard_normal((2, 4, 6))
    targets = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    loss, cache = ops.cross_entropy_forward(dev(logits), dev(targets), ignore_index=0)
    kept, _ = ops.cross_entropy_forward(dev(logits[targets != 0][None]), dev(targets[targets != 0][None]),
                                        ignore_index=0)
    assert float(loss) == pytest.approx(float(kept), rel=1e-12)
    dlogits = host(ops.cross_entropy_backward(1.0, cache))
    assert np.all(dlogits[targets == 0] == 0)
    # Changing the logits at padded positions changes nothing.
    changed = logits.copy()
    changed[targets == 0] = 100.0
    changed_loss, _ = ops.cross_entropy_forward(dev(changed), dev(targets))
    assert float(changed_loss) == pytest.approx(float(loss), rel=1e-12)


def test_cross_entropy_with_every_target_ignored_is_zero_with_zero_gradient(rng):
    loss, cache = ops.cross_entropy_forward(dev(rng.standard_normal((2, 3, 5))), dev(np.zeros((2, 3), int)))
    assert float(loss) == 0.0
    assert np.all(host(ops.cross_entropy_backward(1.0, cache)) == 0)


def test_cross_entropy_label_smoothing_matches_pytorch_definition(rng):
    logits, targets, eps = rng.standard_normal((5, 4)), np.array([1, 2, 3, 1, 2]), 0.2
    loss, _ = ops.cross_entropy_forward(dev(logits), dev(targets), ignore_index=None, label_smoothing=eps)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    q = np.full_like(logits, eps / 4)
    q[np.arange(5), targets] += 1 - eps
    assert float(loss) == pytest.approx(-(q * log_p).sum(-1).mean(), rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_stays_finite_with_huge_logits(dtype):
    logits = np.array([[[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]]], dtype=dtype)
    targets = np.array([[1, 2]])
    loss, cache = ops.cross_entropy_forward(dev(logits), dev(targets), label_smoothing=0.1)
    loss, dlogits = float(loss), host(ops.cross_entropy_backward(1.0, cache))
    assert np.isfinite(loss) and np.all(np.isfinite(dlogits))
    # -log p: row 1 = (0, 2e4, 1e4), target 1; row 2 = (2e4, 2e4, 0), target 2.
    row1 = 0.9 * 2e4 + 0.1 * (0 + 2e4 + 1e4) / 3
    row2 = 0.9 * 0.0 + 0.1 * (2e4 + 2e4 + 0) / 3
    assert loss == pytest.approx((row1 + row2) / 2, rel=1e-6)


# --- positional encoding -------------------------------------------------------------------

@pytest.mark.parametrize("d_model", [1, 2, 7, 16])
def test_positional_encoding_matches_the_paper_including_cos_columns(d_model):
    table = host(ops.positional_encoding(50, d_model, dtype=np.float64))
    assert table.shape == (50, d_model)
    for p in (0, 1, 17, 49):
        for column in range(d_model):
            i2 = column - column % 2  # the "2i" shared by columns 2i and 2i + 1
            angle = p / 10000 ** (i2 / d_model)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert table[p, column] == pytest.approx(expected, abs=1e-12)


def test_positional_encoding_every_odd_column_is_a_cosine():
    table = host(ops.positional_encoding(10, 8, dtype=np.float64))
    np.testing.assert_allclose(table[0, 1::2], 1.0)  # cos(0) in every odd column
    np.testing.assert_allclose(table[0, 0::2], 0.0)  # sin(0) in every even column


def test_positional_encoding_uses_the_default_dtype():
    assert ops.positional_encoding(4, 6).dtype == np.float32
    with backend.default_dtype(np.float64):
        assert ops.positional_encoding(4, 6).dtype == np.float64


# --- dropout -------------------------------------------------------------------------------

def test_dropout_is_inverted_and_reproducible():
    x = dev(np.ones((200, 500), dtype=np.float32))
    out, _ = ops.dropout_forward(x, 0.25, backend.default_rng(0), training=True)
    again, _ = ops.dropout_forward(x, 0.25, backend.default_rng(0), training=True)
    out, again = host(out), host(again)
    np.testing.assert_array_equal(out, again)
    assert set(np.unique(out)) == {np.float32(0), np.float32(1 / 0.75)}
    assert abs((out == 0).mean() - 0.25) < 0.01
    assert abs(out.mean() - 1.0) < 0.01
    assert out.dtype == np.float32


def test_dropout_is_the_identity_in_eval_mode_and_at_p_zero(rng):
    x = f32(rng, 3, 4)
    for p, training in ((0.5, False), (0.0, True)):
        out, cache = ops.dropout_forward(x, p, backend.default_rng(0), training)
        np.testing.assert_array_equal(host(out), host(x))
        np.testing.assert_array_equal(host(ops.dropout_backward(x * 2, cache)), host(x * 2))


# --- embedding -----------------------------------------------------------------------------

@given(seed=st.integers(0, 2**16), vocab=st.integers(1, 50), n_tokens=st.integers(0, 300))
def test_embedding_backward_equals_the_add_at_scatter(seed, vocab, n_tokens):
    rng = np.random.default_rng(seed)
    ids = np.minimum(rng.zipf(1.5, size=(1, n_tokens)), vocab) - 1  # many repeats, like text
    W = rng.standard_normal((vocab, 6))
    out, cache = ops.embedding_forward(dev(ids), dev(W))
    np.testing.assert_array_equal(host(out), W[ids])
    dout = rng.standard_normal(out.shape)
    expected = np.zeros_like(W)
    np.add.at(expected, ids.reshape(-1), dout.reshape(-1, 6))
    np.testing.assert_allclose(host(ops.embedding_backward(dev(dout), cache)), expected, rtol=1e-12, atol=1e-12)


# --- special functions and GELU ------------------------------------------------------------

def test_erf_and_erfc_match_the_standard_library():
    x = np.concatenate([np.linspace(-26, 26, 20001), [0.0, 0.46875, -0.46875, 4.0, -4.0]])
    np.testing.assert_allclose(host(ops.erf(dev(x))), [math.erf(v) for v in x], rtol=0, atol=3e-16)
    np.testing.assert_allclose(host(ops.erfc(dev(x))), [math.erfc(v) for v in x], rtol=1e-13, atol=0)


def test_gelu_forms_agree_with_their_definitions(rng):
    x = np.linspace(-8, 8, 1001)
    exact = host(ops.gelu_forward(dev(x))[0])
    tanh_form = host(ops.gelu_forward(dev(x), approximate="tanh")[0])
    expected = x * 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x])
    np.testing.assert_allclose(exact, expected, rtol=1e-13, atol=1e-300)
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
    np.testing.assert_allclose(tanh_form, 0.5 * x * (1 + np.tanh(u)), rtol=1e-9, atol=1e-15)
    assert np.max(np.abs(exact - tanh_form)) < 1e-3  # the approximation is close


# --- dtypes --------------------------------------------------------------------------------

def test_float32_in_float32_out_for_every_op(rng):
    """No op silently upcasts a float32 forward or backward pass to float64."""
    from npformer import gradcheck

    for name, builder in gradcheck.OP_CASES.items():
        forward, backward, inputs = builder(np.random.default_rng(0))
        inputs32 = {k: dev(v.astype(np.float32) if v.dtype.kind == "f" else v)
                    for k, v in inputs.items()}
        out, cache = forward(*inputs32.values())
        assert out.dtype == np.float32, name
        grads = backward(np.ones_like(out), cache)
        for grad in grads if isinstance(grads, tuple) else (grads,):
            assert grad.dtype == np.float32, name


def test_cross_entropy_backward_is_pure_and_can_run_twice(rng):
    """Backward never mutates its cache: a second call gives the same gradient."""
    import copy

    _, cache = ops.cross_entropy_forward(dev(rng.standard_normal((2, 4))), dev(np.array([1, 2])),
                                         label_smoothing=0.1)
    before = copy.deepcopy(cache)
    first = ops.cross_entropy_backward(1.0, cache)
    second = ops.cross_entropy_backward(1.0, cache)
    np.testing.assert_array_equal(host(first), host(second))
    assert first is not second
    assert cache.keys() == before.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(host(cache[key]), host(value), err_msg=key)


def test_masked_pooling_ignores_padding_and_gives_zeros_for_empty_rows(rng):
    x = rng.standard_normal((2, 4, 3))
    mask = np.array([[True, True, False, False], [False, False, False, False]])
    mean, _ = ops.masked_mean_pool_forward(dev(x), dev(mask))
    maximum, cache = ops.masked_max_pool_forward(dev(x), dev(mask))
    mean, maximum = host(mean), host(maximum)
    np.testing.assert_allclose(mean[0], x[0, :2].mean(0))
    np.testing.assert_array_equal(maximum[0], x[0, :2].max(0))
    assert np.all(mean[1] == 0) and np.all(maximum[1] == 0)
    dx = host(ops.masked_max_pool_backward(dev(np.ones((2, 3))), cache))
    assert np.all(dx[1] == 0) and dx[0, 2:].sum() == 0 and dx[0].sum() == 3
    changed = x.copy()
    changed[0, 2:] = 100.0  # padding positions cannot change the result
    np.testing.assert_array_equal(host(ops.masked_max_pool_forward(dev(changed), dev(mask))[0]), maximum)
    with pytest.raises(ValueError, match=r"mask must have shape \(B, T\) = \(2, 4\)"):
        ops.masked_mean_pool_forward(dev(x), dev(mask[:, :3]))
