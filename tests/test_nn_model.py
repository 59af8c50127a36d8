"""Behaviour of the Transformer: masks, caching, parameter counts, saving, modes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer import backend, models, ops, tokens

xp = backend.xp  # the active array module: NumPy, CuPy or the strict stand-in


def host(array):
    """A host NumPy copy of a model output or parameter, for NumPy's checks."""
    return np.array(backend.to_numpy(array), copy=True)


SMALL = dict(src_vocab=17, tgt_vocab=19, d_model=16, n_heads=4, d_ff=24, n_layers=2, max_len=32,
             dropout=0.0)


def build(dtype=np.float64, seed=0, **overrides):
    return models.Transformer(models.TransformerConfig(**{**SMALL, **overrides}), seed=seed, dtype=dtype)


def random_ids(rng, batch, length, vocab, bos=False):
    ids = rng.integers(4, vocab, size=(batch, length))
    if bos:
        ids[:, 0] = tokens.BOS_ID
    return backend.asarray(ids)


# --- masks: causality and padding ----------------------------------------------------------

@given(seed=st.integers(0, 1000), t=st.integers(0, 5), norm=st.sampled_from(["post", "pre"]))
@settings(max_examples=20)
def test_changing_later_target_tokens_leaves_earlier_logits_unchanged(seed, t, norm):
    rng = np.random.default_rng(seed)
    model = build(norm=norm, seed=seed).eval()
    src, tgt = random_ids(rng, 2, 5, 17), random_ids(rng, 2, 6, 19, bos=True)
    logits = host(model.forward(src, tgt))
    changed = tgt.copy()
    changed[:, t + 1:] = random_ids(rng, 2, 6, 19)[:, t + 1:]
    new_logits = host(model.forward(src, changed))
    np.testing.assert_array_equal(new_logits[:, : t + 1], logits[:, : t + 1])
    if t + 1 < 6 and not np.array_equal(host(changed), host(tgt)):
        assert not np.allclose(new_logits[:, t + 1:], logits[:, t + 1:])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_appending_padding_leaves_the_real_logits_unchanged(norm, rng):
    model = build(norm=norm).eval()
    src, tgt = random_ids(rng, 3, 5, 17), random_ids(rng, 3, 4, 19, bos=True)
    logits = host(model.forward(src, tgt))
    padded_src = xp.concatenate([src, xp.zeros((3, 4), dtype=src.dtype)], axis=1)
    padded_tgt = xp.concatenate([tgt, xp.zeros((3, 3), dtype=tgt.dtype)], axis=1)
    np.testing.assert_allclose(host(model.forward(padded_src, tgt)), logits, rtol=0, atol=1e-12)
    np.testing.assert_allclose(host(model.forward(src, padded_tgt)[:, :4]), logits, rtol=0, atol=1e-12)
    np.testing.assert_allclose(host(model.forward(padded_src, padded_tgt)[:, :4]), logits, rtol=0, atol=1e-12)


def test_a_source_of_only_padding_gives_finite_logits(rng):
    model = build().eval()
    src = backend.asarray(np.array([[5, 6, 0], [0, 0, 0]]))
    logits = model.forward(src, random_ids(rng, 2, 3, 19, bos=True))
    assert np.all(np.isfinite(logits))


# --- incremental decoding ------------------------------------------------------------------

@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-10), (np.float32, 1e-5)])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_cached_decoding_gives_the_logits_of_the_full_pass(dtype, tolerance, norm, rng):
    model = build(dtype=dtype, norm=norm, tie_embeddings=norm == "pre").eval()
    src = backend.asarray(np.array([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]]))
    tgt = random_ids(rng, 2, 7, 19, bos=True)
    full = host(model.forward(src, tgt))
    cache = model.start_decoding(src, max_len=10)
    steps = [host(model.decode_step(cache, tgt[:, t])) for t in range(tgt.shape[1])]
    stepped = np.stack(steps, axis=1)
    assert stepped.dtype == dtype and cache.length == 7
    np.testing.assert_allclose(stepped, full, rtol=0, atol=tolerance * np.abs(full).max())


def test_cross_attention_keys_are_computed_once_per_source(rng, monkeypatch):
    model = build().eval()
    src = random_ids(rng, 2, 5, 17)
    cache = model.start_decoding(src, max_len=8)
    calls = []
    for layer in model.decoder.layers:
        original = layer.cross_attn.project_keys_values
        monkeypatch.setattr(layer.cross_attn, "project_keys_values",
                            lambda memory, original=original: calls.append(1) or original(memory))
    for t in range(4):
        model.decode_step(cache, backend.asarray(np.full(2, 5 + t)))
    assert calls == []  # steps reuse the cached keys and values of the source
    model.start_decoding(src, max_len=8)  # the patch sees calls: once per layer per source
    assert len(calls) == len(model.decoder.layers)


def test_cache_select_reorders_rows_and_a_full_cache_is_an_error(rng):
    model = build().eval()
    src = random_ids(rng, 3, 4, 17)
    cache = model.start_decoding(src, max_len=2)
    model.decode_step(cache, backend.asarray(np.array([1, 1, 1])))
    chosen = cache.select(backend.asarray(np.array([2, 2, 0])))
    np.testing.assert_array_equal(host(chosen.self_keys[0][0]), host(cache.self_keys[0][2]))
    np.testing.assert_array_equal(host(chosen.memory_mask[2]), host(cache.memory_mask[0]))
    model.decode_step(cache, backend.asarray(np.array([5, 5, 5])))
    with pytest.raises(ValueError, match="cache is full"):
        model.decode_step(cache, backend.asarray(np.array([5, 5, 5])))


# --- parameter counts ----------------------------------------------------------------------

def hand_count(src_vocab, tgt_vocab, d_model, d_ff, n_layers, norm="post", tie=False):
    attention = 4 * (d_model * d_model + d_model)
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    layer_norm = 2 * d_model
    encoder = n_layers * (attention + ffn + 2 * layer_norm)
    decoder = n_layers * (2 * attention + ffn + 3 * layer_norm)
    final_norms = 2 * layer_norm if norm == "pre" else 0
    embeddings = (src_vocab + tgt_vocab) * d_model
    out_proj = tgt_vocab + (0 if tie else d_model * tgt_vocab)
    return encoder + decoder + final_norms + embeddings + out_proj


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("tie", [False, True])
def test_parameter_counts_equal_the_hand_calculation(norm, tie):
    model = build(norm=norm, tie_embeddings=tie, dtype=np.float32)
    assert model.num_params() == hand_count(17, 19, 16, 24, 2, norm, tie)
    assert model.num_params() == sum(v.size for v in model.params().values())


def test_base_model_summary_matches_the_hand_calculation():
    """The paper's base sizes; a 1,000-word vocabulary keeps the test light."""
    model = models.Transformer(models.TransformerConfig(1000, 1000, dropout=0.1))
    expected = hand_count(1000, 1000, 512, 2048, 6)
    assert expected == 44_138_496 + 2 * 512_000 + 513_000
    assert model.num_params() == expected
    text = model.summary(batch=2, src_len=10, tgt_len=12)
    assert f"total parameters: {expected:,}" in text
    assert "encoder.layers.5.ffn" in text and "decoder.layers.5.cross_attn" in text
    # Forward FLOPs for B=2, Ts=10, Tt=12 from the closed forms.
    B, Ts, Tt, D, F, V, N = 2, 10, 12, 512, 2048, 1000, 6

    def attention(tq, tk):
        return 2 * 2 * B * tq * D * D + 2 * 2 * B * tk * D * D + 4 * B * tq * tk * D

    forward = N * (attention(Ts, Ts) + 4 * B * Ts * D * F)
    forward += N * (attention(Tt, Tt) + attention(Tt, Ts) + 4 * B * Tt * D * F)
    forward += 2 * B * Tt * D * V
    assert f"forward  {forward / 1e9:,.3f} GFLOP" in text
    assert f"backward {2 * forward / 1e9:,.3f} GFLOP" in text


# --- saving, modes, configuration ----------------------------------------------------------

def test_state_dict_round_trip_is_exact(rng):
    model, other = build(seed=0), build(seed=1)
    src, tgt = random_ids(rng, 2, 4, 17), random_ids(rng, 2, 3, 19, bos=True)
    assert not np.array_equal(host(model.forward(src, tgt)), host(other.forward(src, tgt)))
    other.load_state_dict(model.state_dict())  # host (NumPy) arrays, by design
    np.testing.assert_array_equal(host(other.forward(src, tgt)), host(model.forward(src, tgt)))
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(host(other.params()[key]), value)


def test_load_state_dict_names_what_is_wrong():
    model = build()
    state = model.state_dict()
    with pytest.raises(KeyError, match="missing keys.*out_proj.b"):
        model.load_state_dict({k: v for k, v in state.items() if k != "out_proj.b"})
    with pytest.raises(KeyError, match="unexpected keys.*extra.W"):
        model.load_state_dict({**state, "extra.W": np.zeros(2)})
    with pytest.raises(ValueError, match="src_embed.W must have shape \\(17, 16\\), got \\(3, 16\\)"):
        model.load_state_dict({**state, "src_embed.W": np.zeros((3, 16))})
    with pytest.raises(TypeError, match="out_proj.b must have dtype float64, got float32"):
        model.load_state_dict({**state, "out_proj.b": state["out_proj.b"].astype(np.float32)})
    before = model.state_dict()
    with pytest.raises(TypeError):  # nothing was changed by the failed load
        model.load_state_dict({**{k: v + 1 for k, v in state.items()}, "out_proj.b": np.zeros(19, np.float32)})
    for key, value in before.items():
        np.testing.assert_array_equal(host(model.params()[key]), value)


def test_params_and_grads_share_keys_and_zero_grad_clears(rng):
    model = build(dropout=0.1)
    assert list(model.params()) == list(model.grads())
    assert "src_embed.W" in model.params() and "decoder.layers.1.norm3.beta" in model.params()
    logits = model.forward(random_ids(rng, 2, 4, 17), random_ids(rng, 2, 3, 19, bos=True))
    model.backward(np.ones_like(logits))
    assert any(np.any(g != 0) for g in model.grads().values())
    model.zero_grad()
    assert all(np.all(g == 0) for g in model.grads().values())


def test_the_module_tree_follows_sub_modules_added_replaced_or_removed_after_a_walk():
    """``named_modules`` keeps the tree it walked; any change below the model is seen at the next call."""
    from npformer import nn

    model = build()
    count = len(model.params())
    extra = nn.Linear(3, 4, rng=backend.default_rng(0))
    model.encoder.extra = extra
    assert model.params()["encoder.extra.W"] is extra.W and len(model.params()) == count + 2
    model.encoder.extra = nn.Linear(3, 5, rng=backend.default_rng(1))
    assert model.params()["encoder.extra.W"].shape == (3, 5)
    del model.encoder.extra
    assert len(model.params()) == count and "encoder.extra.W" not in model.params()
    assert [name for name, _ in model.named_modules("top")][:2] == ["top", "top.src_embed"]


def test_a_copied_or_unpickled_model_walks_its_own_tree_and_del_frees_a_walked_model():
    import copy
    import pickle
    import weakref

    from npformer import nn

    model = build()
    count = len(model.params())
    shallow = copy.copy(model)
    shallow.eval()
    assert model.training and not shallow.training, "eval() of a copy reached the original"
    restored = pickle.loads(pickle.dumps(model))
    restored.encoder.extra = nn.Linear(3, 4, rng=backend.default_rng(0))
    assert restored.params()["encoder.extra.W"] is restored.encoder.extra.W
    assert len(model.params()) == count and all(a is not b for a, b in zip(restored.params().values(),
                                                                          model.params().values()))
    walked = weakref.ref(model)
    del model, shallow
    assert walked() is None, "a model that walked its tree must be freed by del, without a garbage collection"


def test_dropout_is_active_in_train_mode_only(rng):
    model = build(dropout=0.5)
    src, tgt = random_ids(rng, 2, 4, 17), random_ids(rng, 2, 3, 19, bos=True)
    assert not np.array_equal(host(model.forward(src, tgt)), host(model.forward(src, tgt)))
    model.eval()
    assert all(not m.training for _, m in model.named_modules())
    # In eval mode the output is the same model's without dropout (an independent model, same seed).
    np.testing.assert_allclose(host(model.forward(src, tgt)), host(build(dropout=0.0).forward(src, tgt)),
                               rtol=1e-12, atol=1e-12)


def test_same_seed_same_model_and_float32_by_default():
    a, b = models.Transformer(models.TransformerConfig(**SMALL), seed=5), models.Transformer(models.TransformerConfig(**SMALL), seed=5)
    for key, value in a.params().items():
        assert value.dtype == np.float32, key
        np.testing.assert_array_equal(host(value), host(b.params()[key]))


def _floating_arrays(value, path):
    """Every floating array reachable from a cache (dicts, tuples, lists), with its path: arrays of
    the active backend and any host (NumPy) array."""
    if isinstance(value, (np.ndarray, xp.ndarray)):
        if value.dtype.kind == "f":
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _floating_arrays(item, f"{path}.{key}")
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _floating_arrays(item, f"{path}[{index}]")


@pytest.mark.parametrize("options", [dict(), dict(norm="pre", activation="gelu", tie_embeddings=True)])
def test_a_float32_training_step_keeps_every_array_float32(rng, options):
    """Catches silent float64 upcasts anywhere: outputs, loss, every cache of every module,
    gradients, parameters after an Adam step, and the optimizer's moments."""
    from npformer import optim

    model = build(dtype=np.float32, dropout=0.1, label_smoothing=0.1, **options)
    optimizer = optim.AdamW(model, lr=1e-3)
    logits = model.forward(random_ids(rng, 2, 4, 17), random_ids(rng, 2, 3, 19, bos=True))
    loss, loss_cache = ops.cross_entropy_forward(logits, random_ids(rng, 2, 3, 19), label_smoothing=0.1)
    caches = [(f"{name}.{attribute}", value) for name, module in model.named_modules()
              for attribute, value in vars(module).items() if "cache" in attribute]
    model.backward(ops.cross_entropy_backward(1.0, loss_cache))
    optim.clip_grad_norm(model, 1.0)
    optimizer.step()
    assert logits.dtype == np.float32 and host(loss).dtype == np.float32
    arrays = [item for path, cache in caches for item in _floating_arrays(cache, path)]
    assert len(arrays) > 50
    arrays += [(f"grad {k}", v) for k, v in model.grads().items()]
    arrays += [(f"param {k}", v) for k, v in model.params().items()]
    arrays += [(f"adam {k}.{slot}", v) for k, state in optimizer.state.items() for slot, v in state.items()]
    upcast = [path for path, array in arrays if array.dtype != np.float32]
    assert not upcast, upcast


@pytest.mark.parametrize("overrides, fragment", [
    (dict(d_model=10, n_heads=4), "d_model must be divisible by n_heads"),
    (dict(norm="middle"), "norm must be one of 'post', 'pre', got 'middle'"),
    (dict(activation="tanh"), "activation must be one of 'relu', 'gelu', got 'tanh'"),
    (dict(dropout=1.0), "dropout must be in [0, 1)"),
    (dict(src_vocab=3), "src_vocab must be >= 4"),
    (dict(n_layers=0), "n_layers must be a positive int"),
])
def test_bad_configurations_are_rejected(overrides, fragment):
    with pytest.raises(ValueError) as info:
        models.TransformerConfig(**{**SMALL, **overrides})
    assert fragment in str(info.value)


def test_bad_token_batches_are_rejected(rng):
    model = build()
    src = random_ids(rng, 2, 4, 17)
    with pytest.raises(TypeError, match="src_ids must have an integer dtype"):
        model.forward(src.astype(float), src)
    with pytest.raises(ValueError, match="tgt_in_ids must have batch size 2"):
        model.forward(src, random_ids(rng, 3, 4, 19))
    with pytest.raises(ValueError, match=r"max_len = 32, got shape \(2, 40\)"):
        model.forward(random_ids(rng, 2, 40, 17), src)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 17\)"):
        model.forward(backend.asarray(np.array([[5, 17]])), backend.asarray(np.array([[1, 5]])))
