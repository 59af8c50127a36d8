"""``npformer.interop``: an npformer Transformer's weights in PyTorch and back.

Without PyTorch, the NumPy half is tested (the key and layout mapping, its round trip, its
errors, the ImportError). With PyTorch (CI installs it: ``import_crosscheck`` fails there instead
of skipping), the twin must give npformer's logits to 1e-10 in float64 on a padded batch, and the
gradients of the loss to 1e-8 relative, for post-norm and pre-norm, ReLU and GELU, tied and
untied embeddings; and npformer -> PyTorch -> npformer must give back the very same weights.
"""

import itertools
import subprocess
import sys

import numpy as np
import pytest

from conftest import import_crosscheck
from npformer import backend, interop, models, ops
from npformer.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS

SMALL = dict(src_vocab=13, tgt_vocab=11, d_model=12, n_heads=3, d_ff=20, n_layers=2, max_len=16,
             dropout=0.1, label_smoothing=0.1)
VARIANTS = list(itertools.product(["post", "pre"], ["relu", "gelu"], [False, True]))
VARIANT_IDS = [f"{norm}-{activation}-{'tied' if tied else 'untied'}" for norm, activation, tied in VARIANTS]


def needs_torch():
    return import_crosscheck("torch", "PyTorch is not installed (the optional interop cross-check)")


def host(array):
    return np.array(backend.to_numpy(array), copy=True)


def small_model(norm="post", activation="relu", tied=False, dtype=np.float64, seed=3):
    """A small Transformer whose every parameter is perturbed: biases and LayerNorm scales that are
    not 0 and 1, so that a bias or a gamma mapped to the wrong place changes the output."""
    config = models.TransformerConfig(**SMALL, norm=norm, activation=activation, tie_embeddings=tied)
    model = models.Transformer(config, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 100)
    for value in model.params().values():
        value += backend.asarray((0.2 * rng.standard_normal(value.shape)).astype(value.dtype))
    return model


def padded_batch(config, rows=((6, 5), (3, 2), (1, 4), (5, 1))):
    """``src, tgt_in, tgt_out`` for rows of (source length, target length), right-padded."""
    rng = np.random.default_rng(8)
    first = len(SPECIAL_TOKENS)
    src = np.full((len(rows), max(s for s, _ in rows)), PAD_ID, dtype=np.int64)
    tgt = np.full((len(rows), max(t for _, t in rows) + 2), PAD_ID, dtype=np.int64)
    for row, (src_len, tgt_len) in enumerate(rows):
        src[row, :src_len] = rng.integers(first, config.src_vocab, src_len)
        tgt[row, 0], tgt[row, 1:tgt_len + 1], tgt[row, tgt_len + 1] = \
            BOS_ID, rng.integers(first, config.tgt_vocab, tgt_len), EOS_ID
    assert (src == PAD_ID).any() and (tgt[:, 1:] == PAD_ID).any()  # padded on both sides
    return src, tgt[:, :-1], tgt[:, 1:]


def npformer_loss_and_grads(model, src, tgt_in, tgt_out, fast_path=False):
    """The loss through the active op set; with ``fast_path``, in the packed layout
    (``forward(..., only_at=counted)``: the logits returned are then those of the counted targets, ``(N, V)``)."""
    src, tgt_in, tgt_out = backend.asarray(src), backend.asarray(tgt_in), backend.asarray(tgt_out)
    if fast_path:
        counted = tgt_out != PAD_ID
        logits, tgt_out = model.forward(src, tgt_in, only_at=counted), tgt_out[counted]
    else:
        logits = model.forward(src, tgt_in)
    loss, cache = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID,
                                                      label_smoothing=model.config.label_smoothing)
    model.zero_grad()
    model.backward(ops.current().cross_entropy_backward(1.0, cache))
    return host(logits), float(loss), {key: host(value) for key, value in model.grads().items()}


def torch_loss_and_grads(torch, twin, model, src, tgt_in, tgt_out):
    logits = twin(torch.from_numpy(src), torch.from_numpy(tgt_in))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             torch.from_numpy(tgt_out).reshape(-1), ignore_index=PAD_ID,
                                             label_smoothing=model.config.label_smoothing)
    twin.zero_grad()
    loss.backward()
    return logits.detach().numpy(), loss.item(), interop.grads_from_torch(twin, model)


def gradient_errors(ours, theirs):
    """Per tensor, ``max |ours - theirs| / max |theirs|``. A key bias is the exception: its true
    gradient is 0 (it adds the same ``q . b`` to every score of a row, which the softmax ignores),
    so both hold round-off only, measured against the largest gradient of its attention block."""
    assert ours.keys() == theirs.keys()
    errors = {}
    for key in theirs:
        difference = np.abs(ours[key] - theirs[key]).max()
        if key.endswith(".k.b"):
            block = key[: -len("k.b")]
            scale = max(np.abs(theirs[k]).max() for k in theirs if k.startswith(block))
        else:
            scale = np.abs(theirs[key]).max()
        errors[key] = difference / scale if scale > 0 else difference
    return errors


# --- the mapping, NumPy only ------------------------------------------------------------------


@pytest.mark.parametrize("tied", [False, True])
def test_parameter_map_names_every_parameter_once_and_transposes_exactly_the_linear_weights(tied):
    model = small_model(tied=tied)
    pairs = interop.parameter_map(model)
    assert [pair.npformer_key for pair in pairs] == list(model.params())
    assert len({pair.torch_key for pair in pairs}) == len(pairs)
    rows = {pair.npformer_key: pair for pair in pairs}
    assert rows["encoder.layers.0.self_attn.q.W"] == ("encoder.layers.0.self_attn.q.W",
                                                      "encoder.layers.0.self_attn.q.weight", True)
    assert rows["decoder.layers.1.norm3.gamma"].torch_key == "decoder.layers.1.norm3.weight"
    assert rows["decoder.layers.1.norm3.beta"].torch_key == "decoder.layers.1.norm3.bias"
    assert rows["src_embed.W"] == ("src_embed.W", "src_embed.weight", False)
    assert ("out_proj.W" in rows) is not tied
    transposed = {pair.npformer_key for pair in pairs if pair.transposed}
    assert transposed == {key for key in model.params() if key.endswith(".W") and "embed" not in key}


@pytest.mark.parametrize("tied", [False, True])
def test_the_layout_round_trip_gives_the_same_arrays_and_torch_shapes(tied):
    model = small_model(tied=tied)
    torch_arrays = interop.to_torch_layout(model)
    params = {key: host(value) for key, value in model.params().items()}
    assert torch_arrays["encoder.layers.0.ffn.fc1.weight"].shape == (SMALL["d_ff"], SMALL["d_model"])
    np.testing.assert_array_equal(torch_arrays["encoder.layers.0.ffn.fc1.weight"],
                                  params["encoder.layers.0.ffn.fc1.W"].T)
    if tied:  # PyTorch's state_dict lists the tied tensor under both names
        np.testing.assert_array_equal(torch_arrays["out_proj.weight"], params["tgt_embed.W"])
    back = interop.from_torch_layout(model, torch_arrays)
    assert back.keys() == params.keys()
    for key, value in params.items():
        assert back[key].dtype == value.dtype and np.array_equal(back[key], value), key
    # gradients convert the same way
    grads = interop.to_torch_layout(model, model.grads())
    assert {key: value.shape for key, value in grads.items()} == {k: v.shape for k, v in torch_arrays.items()}


def test_from_torch_layout_names_missing_and_unexpected_keys_and_a_broken_tie():
    model = small_model()
    arrays = interop.to_torch_layout(model)
    arrays["decoder.layers.0.norm9.weight"] = arrays.pop("decoder.layers.0.norm3.weight")
    with pytest.raises(KeyError, match=r"missing keys \['decoder.layers.0.norm3.weight'\].*"
                                       r"unexpected keys \['decoder.layers.0.norm9.weight'\]"):
        interop.from_torch_layout(model, arrays)
    tied = small_model(tied=True)
    arrays = interop.to_torch_layout(tied)
    arrays["out_proj.weight"] = arrays["out_proj.weight"] + 1.0
    with pytest.raises(ValueError, match="ties its embeddings"):
        interop.from_torch_layout(tied, arrays)
    with pytest.raises(TypeError, match="npformer Module"):
        interop.parameter_map(object())


def test_importing_interop_does_not_import_torch():
    code = "import sys, npformer.interop; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_torch_the_error_says_pip_install_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" now raises ImportError
    model = small_model()
    for call in (lambda: interop.to_torch(model), lambda: interop.from_torch({}, model.config),
                 lambda: interop.load_torch_state(model, {})):
        with pytest.raises(ImportError, match="pip install torch"):
            call()


# --- with PyTorch -------------------------------------------------------------------------------


@pytest.mark.parametrize("norm, activation, tied", VARIANTS, ids=VARIANT_IDS)
def test_npformer_to_torch_and_back_gives_identical_weights(norm, activation, tied):
    torch = needs_torch()
    model = small_model(norm, activation, tied)
    twin = interop.to_torch(model)
    assert isinstance(twin, torch.nn.Module) and twin.config == model.config
    state = twin.state_dict()
    assert all(value.dtype == torch.float64 for value in state.values())
    q_weight = state["decoder.layers.1.cross_attn.q.weight"].numpy()
    np.testing.assert_array_equal(q_weight, host(model.params()["decoder.layers.1.cross_attn.q.W"]).T)
    if tied:
        assert twin.out_proj.weight is twin.tgt_embed.weight
    assert sum(p.numel() for p in twin.parameters()) == model.num_params()
    back = interop.from_torch(twin)
    assert back.dtype == model.dtype and back.config == model.config
    for key, value in model.params().items():
        assert np.array_equal(host(back.params()[key]), host(value)), key
    other = small_model(norm, activation, tied, seed=9)  # the same config, other weights
    interop.load_torch_state(other, twin.state_dict())
    assert all(np.array_equal(host(other.params()[key]), host(value)) for key, value in model.params().items())


@pytest.mark.parametrize("op_set, fast_path", [("fast", False), ("textbook", False), ("fast", True)],
                         ids=["fast ops", "textbook ops", "fast path"])
@pytest.mark.parametrize("norm, activation, tied", VARIANTS, ids=VARIANT_IDS)
def test_torch_logits_and_gradients_equal_npformers_on_a_padded_batch(norm, activation, tied, op_set, fast_path):
    torch = needs_torch()
    model = small_model(norm, activation, tied).eval()  # no dropout: each framework draws its own
    twin = interop.to_torch(model)
    assert not twin.training
    batch = padded_batch(model.config)
    with ops.using(op_set):  # both op sets and the fast path against the same independent reference
        logits, loss, grads = npformer_loss_and_grads(model, *batch, fast_path=fast_path)
    torch_logits, torch_loss, torch_grads = torch_loss_and_grads(torch, twin, model, *batch)
    if fast_path:  # the counted targets' logits only
        torch_logits = torch_logits[batch[2] != PAD_ID]
    np.testing.assert_allclose(torch_logits, logits, rtol=0, atol=1e-10)
    assert abs(torch_loss - loss) < 1e-12
    errors = gradient_errors(grads, torch_grads)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-8, f"{worst}: relative difference {errors[worst]:.2e}"
    assert min(np.abs(g).max() for key, g in grads.items() if not key.endswith(".k.b")) > 1e-6  # none vacuous


def test_a_fully_padded_source_row_gives_zeros_not_nan_in_both():
    torch = needs_torch()
    model = small_model("pre", "gelu", True).eval()
    src, tgt_in, tgt_out = padded_batch(model.config)
    src[2] = PAD_ID  # every key of this row is masked, in the encoder and in cross-attention
    twin = interop.to_torch(model)
    logits, loss, grads = npformer_loss_and_grads(model, src, tgt_in, tgt_out)
    torch_logits, torch_loss, torch_grads = torch_loss_and_grads(torch, twin, model, src, tgt_in, tgt_out)
    assert np.isfinite(torch_logits).all() and np.isfinite(torch_loss)
    np.testing.assert_allclose(torch_logits, logits, rtol=0, atol=1e-10)
    assert max(gradient_errors(grads, torch_grads).values()) < 1e-8


def test_float32_twin_and_training_mode_follow_the_model():
    torch = needs_torch()
    model = small_model(dtype=np.float32)
    twin = interop.to_torch(model)
    assert twin.training and all(p.dtype == torch.float32 for p in twin.parameters())
    wide = interop.to_torch(model, dtype=np.float64)
    assert all(p.dtype == torch.float64 for p in wide.parameters())
    model.eval()
    twin.eval()
    src, tgt_in, _ = padded_batch(model.config)
    with torch.no_grad():
        torch_logits = twin(torch.from_numpy(src), torch.from_numpy(tgt_in)).numpy()
    logits = host(model.forward(backend.asarray(src), backend.asarray(tgt_in)))
    assert np.abs(torch_logits - logits).max() < 1e-4 * np.abs(logits).max()
    assert interop.from_torch(wide).dtype == np.float64
    assert interop.from_torch(twin, dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match="TransformerConfig"):
        interop.from_torch(twin.state_dict())


def test_weights_trained_in_torch_come_back_to_npformer():
    """A step of torch.optim.Adam on the twin; the model read back computes the twin's logits."""
    torch = needs_torch()
    model = small_model("pre", "relu", True).eval()
    twin = interop.to_torch(model)
    src, tgt_in, tgt_out = padded_batch(model.config)
    optimizer = torch.optim.Adam(twin.parameters(), lr=1e-2)
    torch_loss_and_grads(torch, twin, model, src, tgt_in, tgt_out)
    optimizer.step()
    assert twin.out_proj.weight is twin.tgt_embed.weight  # the tie survives the update
    back = interop.from_torch(twin)
    assert not back.training
    changed = host(back.params()["tgt_embed.W"]) - host(model.params()["tgt_embed.W"])
    assert np.abs(changed).max() > 1e-3
    with torch.no_grad():
        torch_logits = twin(torch.from_numpy(src), torch.from_numpy(tgt_in)).numpy()
    np.testing.assert_allclose(host(back.forward(backend.asarray(src), backend.asarray(tgt_in))),
                               torch_logits, rtol=0, atol=1e-10)


@pytest.mark.parametrize("d_model, d_ff, n_heads", [(4, 8, 2), (6, 5, 3)])
def test_the_courses_encoder_layer_map_loads_into_pytorchs_own_layer(d_model, d_ff, n_heads):
    """Lesson 25's reference (to_torch_encoder_layer): npformer's post-norm encoder layer, loaded into
    torch.nn.TransformerEncoderLayer with it, computes the same outputs."""
    from npformer.course import EXERCISES
    from npformer.nn import EncoderLayer

    torch = needs_torch()
    layer = EncoderLayer(d_model, n_heads=n_heads, d_ff=d_ff, activation="relu", rng=np.random.default_rng(1),
                         dtype=np.float64, dropout=0.0, dropout_rng=np.random.default_rng(1), pre_norm=False)
    arrays = EXERCISES["to_torch_encoder_layer"].reference({k: np.asarray(v) for k, v in layer.params().items()})
    theirs = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True,
                                              dtype=torch.float64)
    assert list(theirs.state_dict()) == list(arrays)
    theirs.load_state_dict({name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in arrays.items()})
    theirs.eval()
    x = np.random.default_rng(2).standard_normal((2, 5, d_model))
    with torch.no_grad():
        np.testing.assert_allclose(theirs(torch.from_numpy(x)).numpy(), layer.forward(x, None), atol=1e-12)
