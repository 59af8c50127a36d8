"""Finite-difference checks of every module and of the whole Transformer, in float64."""

import numpy as np
import pytest
from conftest import loss_gradients
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from npformer import backend, gradcheck, nn, ops

seeds = st.integers(0, 2**16)


def f64(rng, *shape):
    """Float64 normals drawn on the host, moved to the active backend (NumPy, CuPy or the strict stand-in)."""
    return backend.asarray(rng.standard_normal(shape))


def host(array):
    """A host NumPy copy of an output, gradient or parameter, for NumPy's checks."""
    return np.array(backend.to_numpy(array), copy=True)


def assert_passes(report, context=""):
    assert report.passed, f"{context}\n{report}"


# --- single modules over hypothesis shapes (inputs and parameters) ---------------------------

@given(seed=seeds, batch=st.integers(1, 3), length=st.integers(1, 6), d_in=st.integers(1, 5),
       d_out=st.integers(1, 5))
def test_linear_module(seed, batch, length, d_in, d_out):
    rng = np.random.default_rng(seed)
    layer = nn.Linear(d_in, d_out, rng=rng, dtype=np.float64)
    layer.b[...] = backend.asarray(rng.standard_normal(d_out))
    assert_passes(gradcheck.check_module(layer, {"x": f64(rng, batch, length, d_in)}, seed=seed))


@given(seed=seeds, batch=st.integers(1, 3), length=st.integers(1, 6), d_model=st.integers(3, 6),
       activation=st.sampled_from(["relu", "gelu"]))
def test_feedforward_and_layernorm_modules(seed, batch, length, d_model, activation):
    rng = np.random.default_rng(seed)
    ffn = nn.FeedForward(d_model, 2 * d_model + 1, activation, rng=rng, dtype=np.float64)
    x = f64(rng, batch, length, d_model)
    if activation == "relu":  # a finite difference across ReLU's kink measures nothing
        assume(np.min(np.abs(host(ffn.fc1.forward(x)))) > 0.01)
    assert_passes(gradcheck.check_module(ffn, {"x": x}, seed=seed))
    norm = nn.LayerNorm(d_model, dtype=np.float64)
    norm.gamma[...] = backend.asarray(1 + 0.3 * rng.standard_normal(d_model))
    assert_passes(gradcheck.check_module(norm, {"x": 2 * f64(rng, batch, length, d_model)}, seed=seed))


def _key_padding(rng, batch, length, fully_padded_row):
    ids = np.ones((batch, length), dtype=np.int64)
    lengths = rng.integers(1, length + 1, size=batch)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    if fully_padded_row:
        ids[-1] = 0
    return ops.padding_mask(backend.asarray(ids))


@given(seed=seeds, batch=st.integers(1, 3), n_heads=st.integers(1, 4), head_dim=st.integers(1, 3),
       q_len=st.integers(1, 6), k_len=st.integers(1, 6), fully_padded_row=st.booleans())
@settings(max_examples=20)
def test_multi_head_cross_attention(seed, batch, n_heads, head_dim, q_len, k_len, fully_padded_row):
    rng = np.random.default_rng(seed)
    d_model = n_heads * head_dim
    attention = nn.MultiHeadAttention(d_model, n_heads, rng=rng, dtype=np.float64)
    mask = _key_padding(rng, batch, k_len, fully_padded_row)
    report = gradcheck.check_module(
        attention, {"query": f64(rng, batch, q_len, d_model), "memory": f64(rng, batch, k_len, d_model)},
        forward=lambda query, memory: attention.forward(query, memory, mask), seed=seed)
    assert_passes(report)


@given(seed=seeds, batch=st.integers(1, 3), length=st.integers(1, 5), n_heads=st.integers(1, 2),
       pre_norm=st.booleans(), fully_padded_row=st.booleans())
@settings(max_examples=10)
def test_encoder_layer(seed, batch, length, n_heads, pre_norm, fully_padded_row):
    rng = np.random.default_rng(seed)
    d_model = 3 * n_heads  # layer norm over 2 features is degenerate (see test_gradients)
    layer = nn.EncoderLayer(d_model, n_heads=n_heads, d_ff=5, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                            activation="gelu", rng=rng, dtype=np.float64)
    mask = _key_padding(rng, batch, length, fully_padded_row)
    report = gradcheck.check_module(layer, {"x": f64(rng, batch, length, d_model)},
                                    forward=lambda x: layer.forward(x, mask), seed=seed)
    assert_passes(report)


@pytest.mark.slow
@given(seed=seeds, batch=st.integers(1, 3), tgt_len=st.integers(1, 4), src_len=st.integers(1, 4),
       pre_norm=st.booleans())
@settings(max_examples=10)
def test_decoder_layer_input_and_memory_gradients(seed, batch, tgt_len, src_len, pre_norm):
    rng = np.random.default_rng(seed)
    layer = nn.DecoderLayer(4, n_heads=2, d_ff=6, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                            activation="gelu", rng=rng, dtype=np.float64)
    self_mask = ops.causal_mask(tgt_len)
    memory_mask = _key_padding(rng, batch, src_len, fully_padded_row=False)
    report = gradcheck.check_module(
        layer, {"x": f64(rng, batch, tgt_len, 4), "memory": f64(rng, batch, src_len, 4)},
        forward=lambda x, memory: layer.forward(x, memory, self_mask, memory_mask), seed=seed)
    assert_passes(report)


# --- the whole Transformer -----------------------------------------------------------------

@pytest.mark.slow
def test_whole_transformer_every_entry_of_every_parameter():
    """The default tiny model's structure (post-norm, ReLU, untied, dropout 0.1 replayed, label
    smoothing; two layers each side, two heads, a padded row) at its smallest widths, d_model 4:
    892 entries, every one checked (the default's 3,045 took 31 s; the variants below and
    ``npformer gradcheck --model`` check the default widths)."""
    smallest = dict(d_model=4, d_ff=6, src_vocab=7, tgt_vocab=8)
    report = gradcheck.check_model(seed=0, **smallest)
    assert_passes(report)
    assert len(report.results) == len(gradcheck.model_case(**smallest)[0].params())
    assert sum(int(np.prod(row.shape)) for row in report.results) == 892


@pytest.mark.slow
@pytest.mark.parametrize("config", [
    dict(norm="pre", tie_embeddings=False, activation="relu", dropout=0.1),
    dict(norm="post", tie_embeddings=True, activation="gelu", dropout=0.0),
    dict(norm="pre", tie_embeddings=True, activation="gelu", dropout=0.1),
    dict(norm="post", tie_embeddings=False, activation="gelu", dropout=0.1, label_smoothing=0.0),
], ids=["pre-untied-relu", "post-tied-gelu", "pre-tied-gelu", "post-untied-gelu-nosmooth"])
def test_whole_transformer_variants(config):
    """Every parameter tensor of each variant, along two random directions each (the fast check,
    which caught every block and model mutant of ``npformer gradcheck --mutants``): 1.7 s a variant
    against 9 s for 12 random entries a tensor; every entry is checked once, above."""
    report = gradcheck.check_model(seed=1, directions=2, **config)
    assert_passes(report, str(config))
    keys = {r.tensor for r in report.results}
    assert ("out_proj.W" in keys) != config["tie_embeddings"]
    assert ("encoder.norm.gamma" in keys) == (config["norm"] == "pre")


def test_tied_gradient_is_the_sum_of_both_uses():
    """The tied table's gradient equals the output projection's share plus the embedding lookup's
    share, each taken from an untied twin holding the same numbers (out_proj.W = tgt_embed.W.T)."""
    tied, src, tgt_in, tgt_out = gradcheck.model_case(seed=3, tie_embeddings=True, dropout=0.0)
    untied = gradcheck.model_case(seed=3, tie_embeddings=False, dropout=0.0)[0]
    tied_params, untied_params = tied.params(), untied.params()
    assert "out_proj.W" not in tied_params and set(untied_params) == set(tied_params) | {"out_proj.W"}
    for name, value in tied_params.items():
        untied_params[name][...] = value
    untied_params["out_proj.W"][...] = tied_params["tgt_embed.W"].T

    total, separate = loss_gradients(tied, src, tgt_in, tgt_out), loss_gradients(untied, src, tgt_in, tgt_out)
    lookup_share, projection_share = separate["tgt_embed.W"], separate["out_proj.W"].T
    assert np.abs(lookup_share).sum() > 0 and np.abs(projection_share).sum() > 0
    np.testing.assert_allclose(total["tgt_embed.W"], lookup_share + projection_share, rtol=1e-10, atol=1e-12)
    for name in tied_params:  # every other gradient is the untied twin's
        if name != "tgt_embed.W":
            np.testing.assert_allclose(total[name], separate[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_zero_gradient_rows_pass_only_when_both_sides_are_zero(rng):
    """The key bias has a true gradient of 0; a backward claiming 1e-7 there must fail."""
    attention = nn.MultiHeadAttention(4, 2, rng=rng, dtype=np.float64)
    inputs = {"query": f64(rng, 2, 3, 4), "memory": f64(rng, 2, 3, 4)}
    good = gradcheck.check_module(attention, inputs)
    k_bias = next(r for r in good.results if r.tensor == "k.b")
    assert k_bias.passed and "within resolution" in k_bias.note

    def wrong_backward(dout):
        grads = attention.backward(dout)
        attention.k.grad["b"] += 1e-7
        return grads

    bad = gradcheck.check_module(attention, inputs, backward=wrong_backward)
    assert [r.tensor for r in bad.failures] == ["k.b"]


def test_check_module_requires_float64(rng):
    with pytest.raises(TypeError, match="float64"):
        gradcheck.check_module(nn.Linear(2, 2, rng=rng, dtype=np.float32),
                               {"x": backend.asarray(np.zeros((1, 2)))})


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_self_attention_equals_cross_attention_of_x_over_itself(n_heads, rng):
    """SelfAttention.forward(x) against MultiHeadAttention.forward(x, x) with the same weights:
    same output; dx is d_query + d_memory; same parameter gradients."""
    attention = nn.SelfAttention(8, n_heads, rng=rng, dtype=np.float64)
    for linear in (attention.q, attention.k, attention.v, attention.o):
        linear.b[...] = backend.asarray(rng.standard_normal(8))
    general = nn.MultiHeadAttention(8, n_heads, rng=np.random.default_rng(0), dtype=np.float64)
    general.load_state_dict(attention.state_dict())
    x, dout = f64(rng, 2, 5, 8), f64(rng, 2, 5, 8)
    mask = _key_padding(rng, 2, 5, fully_padded_row=True)
    self_out = attention.forward(x, mask)
    attention.zero_grad()
    self_dx = attention.backward(dout)
    general_out = general.forward(x, x, mask)
    general.zero_grad()
    d_query, d_memory = general.backward(dout)
    np.testing.assert_allclose(host(self_out), host(general_out), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(host(self_dx), host(d_query + d_memory), rtol=1e-12, atol=1e-13)
    self_grads = attention.grads()
    assert self_grads.keys() == general.grads().keys()
    for key, value in general.grads().items():
        np.testing.assert_allclose(host(self_grads[key]), host(value), rtol=1e-12, atol=1e-13, err_msg=key)
    report = gradcheck.check_module(attention, {"x": x}, forward=lambda x: attention.forward(x, mask))
    assert_passes(report)
