"""The modern parts (RMSNorm, rotary positions, SwiGLU, grouped-query attention, AdamW's groups) and the
LLaMA-style decoder built from them: finite differences over drawn shapes, equality with PyTorch in
float64, the properties each part is there for, and the KV-cached generation."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import import_crosscheck
from npformer import backend, gradcheck, models, ops, optim
from npformer.tokens import PAD_ID

dev = backend.asarray
seeds = st.integers(0, 2**16)


def host(array):
    return np.array(backend.to_numpy(array), copy=True)


def assert_op_gradients(name, seed, **sizes):
    forward, backward, inputs = gradcheck.OP_CASES[name](np.random.default_rng(seed), **sizes)
    inputs = {k: dev(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    report = gradcheck.check_gradients(forward, backward, inputs, name=name, seed=seed)
    assert report.passed, f"sizes {sizes}, seed {seed}\n{report}"


# --- finite differences over drawn shapes ------------------------------------------------------

@given(seed=seeds, batch=st.integers(1, 3), length=st.integers(1, 5), d_model=st.integers(1, 8))
def test_rmsnorm_gradients(seed, batch, length, d_model):
    assert_op_gradients("rmsnorm", seed, batch=batch, length=length, d_model=d_model)


@given(seed=seeds, batch=st.integers(1, 2), heads=st.integers(1, 3), length=st.integers(1, 5),
       pairs=st.integers(1, 4), offset=st.integers(0, 40))
def test_rope_gradients(seed, batch, heads, length, pairs, offset):
    assert_op_gradients("rope", seed, batch=batch, heads=heads, length=length, head_dim=2 * pairs, offset=offset)


@given(seed=seeds, batch=st.integers(1, 3), length=st.integers(1, 5), d_model=st.integers(1, 5), width=st.integers(1, 6))
def test_swiglu_gradients(seed, batch, length, d_model, width):
    assert_op_gradients("swiglu", seed, batch=batch, length=length, d_model=d_model, width=width)


@given(seed=seeds, batch=st.integers(1, 3), kv_heads=st.integers(1, 3), group=st.integers(1, 3),
       length=st.integers(1, 5), head_dim=st.integers(1, 4), fully_padded_row=st.booleans())
def test_grouped_query_attention_gradients(seed, batch, kv_heads, group, length, head_dim, fully_padded_row):
    """One key/value head (multi-query), one query head, length 1 and all-padding rows included."""
    assert_op_gradients("grouped_query_attention", seed, batch=batch, heads=kv_heads * group, kv_heads=kv_heads,
                        length=length, head_dim=head_dim, fully_padded_row=fully_padded_row)


def small_modern(**overrides):
    config = dict(vocab=13, d_model=8, n_heads=4, n_kv_heads=2, d_ff=10, n_layers=2, max_len=8)
    return models.ModernLanguageModel(models.ModernLanguageModelConfig(**{**config, **overrides}), dtype=np.float64)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_the_whole_modern_model_passes_the_gradient_check(n_kv_heads):
    ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 9, 4, 5, 2], [0, 0, 0, 0, 0, 0]])  # a fully padded row
    report = gradcheck.check_loss(small_modern(n_kv_heads=n_kv_heads), {"ids": dev(ids[:, :-1])}, dev(ids[:, 1:]),
                                  name="modern")
    assert report.passed, report.table()


# --- what each part is for ---------------------------------------------------------------------

def test_rope_scores_depend_only_on_the_distance_between_positions(rng):
    q, k = rng.standard_normal((1, 1, 1, 8)), rng.standard_normal((1, 1, 1, 8))

    def score(query_position, key_position):
        rotated_q = ops.rope_forward(dev(q), offset=query_position)[0]
        rotated_k = ops.rope_forward(dev(k), offset=key_position)[0]
        return float(host(rotated_q * rotated_k).sum())

    for distance in (0, 1, 5):
        scores = [score(m, m + distance) for m in (0, 3, 17, 40)]
        np.testing.assert_allclose(scores, scores[0], rtol=1e-12, atol=1e-12)
    assert abs(score(0, 1) - score(0, 5)) > 1e-3  # ... and they do depend on it
    np.testing.assert_allclose(score(0, 0), float((q * k).sum()), rtol=1e-12)  # position 0: no rotation


def test_rope_with_an_offset_is_the_tail_of_the_whole_rotation_and_keeps_norms(rng):
    x = rng.standard_normal((2, 3, 7, 6))
    whole = host(ops.rope_forward(dev(x))[0])
    np.testing.assert_allclose(host(ops.rope_forward(dev(x[:, :, 4:]), offset=4)[0]), whole[:, :, 4:], atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(whole, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


def test_grouped_query_attention_with_every_head_its_own_is_attention_and_repeats_shared_heads(rng):
    q, k, v = (rng.standard_normal((2, 4, 5, 3)) for _ in range(3))
    mask = ops.causal_mask(5)
    full = host(ops.attention_forward(dev(q), dev(k), dev(v), mask)[0])
    np.testing.assert_allclose(host(ops.grouped_query_attention_forward(dev(q), dev(k), dev(v), mask)[0]), full,
                               atol=1e-14)
    shared_k, shared_v = k[:, :1], v[:, :1]  # multi-query: one key/value head for all four
    repeated = host(ops.attention_forward(dev(q), dev(np.repeat(shared_k, 4, 1)), dev(np.repeat(shared_v, 4, 1)),
                                          mask)[0])
    got = host(ops.grouped_query_attention_forward(dev(q), dev(shared_k), dev(shared_v), mask)[0])
    np.testing.assert_allclose(got, repeated, atol=1e-14)


@pytest.mark.parametrize("call, message", [
    (lambda: ops.rope_forward(dev(np.zeros((1, 2, 3, 5)))), "must be even"),
    (lambda: ops.rope_forward(dev(np.zeros((1, 2, 3, 4))), offset=-1), "offset must be an int >= 0"),
    (lambda: ops.grouped_query_attention_forward(dev(np.zeros((1, 4, 2, 2))), dev(np.zeros((1, 3, 2, 2))),
                                                 dev(np.zeros((1, 3, 2, 2)))), "must divide the query heads"),
    (lambda: ops.rmsnorm_forward(dev(np.zeros((2, 4))), dev(np.ones(3))), r"gamma must have shape \(D,\) = \(4,\)"),
    (lambda: ops.swiglu_forward(dev(np.zeros((2, 4))), dev(np.zeros((3, 5))), dev(np.zeros((4, 5)))),
     r"W_gate and W_up must both have shape \(D, F\) with D = 4"),
    (lambda: ops.grouped_query_attention_forward(dev(np.zeros((2, 4, 2, 2))), dev(np.zeros((1, 2, 2, 2))),
                                                 dev(np.zeros((1, 2, 2, 2)))), r"k must have shape \(B, Hkv, Tk, Dh\) = \(2,"),
    (lambda: models.ModernLanguageModelConfig(10, n_heads=4, n_kv_heads=3), "n_kv_heads must divide n_heads"),
    (lambda: models.ModernLanguageModelConfig(10, d_model=12, n_heads=4), "must be even for rotary positions"),
])
def test_bad_inputs_are_named_before_any_work(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_cached_generation_gives_the_logits_of_the_whole_forward_pass(rng):
    model = small_modern(n_kv_heads=1)
    tokens = [1, 5, 6, 7, 3, 9]
    with model.evaluating():
        whole = host(model.forward(dev(np.array([tokens]))))[0]
        keys, values = model.kv_cache(len(tokens))
        stepped = np.stack([host(model.step(token, position, keys, values)) for position, token in enumerate(tokens)])
    np.testing.assert_allclose(stepped, whole, rtol=1e-10, atol=1e-12)
    assert keys[0].shape == (1, 1, len(tokens), 2)  # one key/value head: a quarter of full heads' cache
    first = model.generate([1, 5], 5, np.random.default_rng(3), temperature=0.7, top_k=4)
    assert first == model.generate([1, 5], 5, np.random.default_rng(3), temperature=0.7, top_k=4)
    assert len(first) == 5 and all(0 <= token < 13 for token in first)


def test_adamw_groups_decay_the_matrices_and_the_embedding_never_the_gains():
    model = small_modern()
    groups = {group["name"]: group for group in optim.AdamW(model, weight_decay=0.1).param_groups()}
    assert "tok_embed.W" in groups["decay"]["keys"] and "blocks.1.ffn.down.W" in groups["decay"]["keys"]
    assert groups["no_decay"]["keys"] == ["blocks.0.norm1.gamma", "blocks.0.norm2.gamma", "blocks.1.norm1.gamma",
                                          "blocks.1.norm2.gamma", "norm.gamma"]
    assert groups["no_decay"]["weight_decay"] == 0.0 and groups["decay"]["weight_decay"] == 0.1
    summary = models.summarize_modern(model, 2, 8, optim.AdamW(model))
    assert "AdamW group no_decay weight_decay=0: 5 tensors, 40 numbers (gamma)" in summary
    assert f"total parameters: {model.num_params():,}" in summary and "(2x)" in summary


# --- equality with PyTorch in float64 ----------------------------------------------------------

def relative_error(ours, theirs):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-300))


def torch_rope(torch, x, offset, base=10000.0):
    """RoFormer's eq. 34, as complex numbers: pair ``(x[2i], x[2i+1])`` is ``x[2i] + i x[2i+1]``, and the
    rotation by ``m theta_i`` is multiplication by ``exp(i m theta_i)``."""
    head_dim, length = x.shape[-1], x.shape[-2]
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(offset, offset + length, dtype=torch.float64)[:, None] * theta
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], head_dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).reshape(x.shape)


def test_each_op_equals_pytorch_in_float64(rng):
    torch = import_crosscheck("torch", "PyTorch is not installed (optional cross-check)")
    F = torch.nn.functional

    def compare(ours_forward, ours_backward, theirs, arrays, extra=()):
        tensors = [torch.tensor(array, requires_grad=True) for array in arrays]
        expected = theirs(*tensors)
        dout = rng.standard_normal(tuple(expected.shape))
        expected.backward(torch.tensor(dout))
        out, cache = ours_forward(*[dev(array) for array in arrays], *extra)
        grads = ours_backward(dev(dout), cache)
        grads = grads if isinstance(grads, tuple) else (grads,)
        errors = [relative_error(host(out), expected.detach().numpy())]
        errors += [relative_error(host(grad), tensor.grad.numpy()) for grad, tensor in zip(grads, tensors)]
        assert max(errors) < 1e-9, errors

    x, gamma = rng.standard_normal((3, 5, 16)), 1 + 0.3 * rng.standard_normal(16)
    compare(ops.rmsnorm_forward, ops.rmsnorm_backward, lambda x, g: F.rms_norm(x, (16,), g, eps=1e-5), [x, gamma])
    for offset in (0, 7):
        compare(lambda x: ops.rope_forward(x, offset=offset), ops.rope_backward,
                lambda x: torch_rope(torch, x, offset), [rng.standard_normal((2, 3, 6, 8))])
    compare(ops.swiglu_forward, ops.swiglu_backward, lambda x, w_gate, w_up: F.silu(x @ w_gate) * (x @ w_up),
            [rng.standard_normal((2, 4, 6)), 1.5 * rng.standard_normal((6, 9)), rng.standard_normal((6, 9))])
    ids = np.array([[4, 5, 6, 0, 0], [4, 5, 6, 7, 8]])
    mask = host(ops.padding_mask(dev(ids)) & ops.causal_mask(5))
    q, k, v = rng.standard_normal((2, 6, 5, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 4))
    compare(ops.grouped_query_attention_forward, ops.grouped_query_attention_backward,
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(mask), enable_gqa=True),
            [q, k, v], extra=(dev(mask),))


def torch_modern_logits(torch, params, ids, config):
    """The LLaMA-style decoder written with PyTorch's own functions, from npformer's parameters."""
    F = torch.nn.functional
    heads, kv_heads, head_dim = config.n_heads, config.n_kv_heads, config.d_model // config.n_heads
    batch, length = ids.shape
    allowed = torch.tensor((ids != PAD_ID)[:, None, None, :] & np.tri(length, dtype=bool))
    x = params["tok_embed.W"][torch.tensor(ids)]
    for index in range(config.n_layers):
        p = {key.split(f"blocks.{index}.", 1)[1]: value for key, value in params.items()
             if key.startswith(f"blocks.{index}.")}
        h = F.rms_norm(x, (config.d_model,), p["norm1.gamma"], eps=config.eps)
        q = (h @ p["attn.q.W"]).reshape(batch, length, heads, head_dim).transpose(1, 2)
        k = (h @ p["attn.k.W"]).reshape(batch, length, kv_heads, head_dim).transpose(1, 2)
        v = (h @ p["attn.v.W"]).reshape(batch, length, kv_heads, head_dim).transpose(1, 2)
        q, k = torch_rope(torch, q, 0), torch_rope(torch, k, 0)
        scores = q @ k.repeat_interleave(heads // kv_heads, 1).transpose(-1, -2) / head_dim ** 0.5
        weights = torch.softmax(scores.masked_fill(~allowed, -torch.inf), -1).nan_to_num(0.0)
        context = (weights @ v.repeat_interleave(heads // kv_heads, 1)).transpose(1, 2).reshape(batch, length, -1)
        x = x + context @ p["attn.o.W"]
        h = F.rms_norm(x, (config.d_model,), p["norm2.gamma"], eps=config.eps)
        x = x + (F.silu(h @ p["ffn.W_gate"]) * (h @ p["ffn.W_up"])) @ p["ffn.down.W"]
    return F.rms_norm(x, (config.d_model,), params["norm.gamma"], eps=config.eps) @ params["tok_embed.W"].T


def test_the_modern_model_and_adamw_with_its_groups_equal_pytorch_in_float64():
    torch = import_crosscheck("torch", "PyTorch is not installed (optional cross-check)")
    model = small_modern(vocab=17, d_model=16, n_heads=4, n_kv_heads=2, d_ff=24, n_layers=2, max_len=9)
    rng = np.random.default_rng(5)
    for value in model.params().values():  # gains away from 1, so a gamma's gradient is not a special case
        value[...] = value + dev(0.2 * rng.standard_normal(value.shape))
    params = {key: torch.tensor(host(value), requires_grad=True) for key, value in model.params().items()}
    optimizer = optim.AdamW(model, lr=0.01, weight_decay=0.1)
    reference = torch.optim.AdamW([{"params": [params[key] for key in group["keys"]],
                                    "weight_decay": group["weight_decay"]} for group in optimizer.param_groups()],
                                  lr=0.01)
    for step in range(3):
        ids = rng.integers(1, 17, size=(3, 8))
        ids[0, 5:] = PAD_ID
        inputs, targets = ids[:, :-1], ids[:, 1:]
        logits = model.forward(dev(inputs))
        loss, cache = ops.cross_entropy_forward(logits, dev(targets), ignore_index=PAD_ID)
        model.zero_grad()
        model.backward(ops.cross_entropy_backward(1.0, cache))
        expected_logits = torch_modern_logits(torch, params, inputs, model.config)
        expected = torch.nn.functional.cross_entropy(expected_logits.reshape(-1, 17), torch.tensor(targets.reshape(-1)),
                                                     ignore_index=PAD_ID)
        reference.zero_grad()
        expected.backward()
        assert relative_error(host(logits), expected_logits.detach().numpy()) < 1e-9
        for key, grad in model.grads().items():
            assert relative_error(host(grad), params[key].grad.numpy()) < 1e-9, (step, key)
        optimizer.step()
        reference.step()
        for key, value in model.params().items():
            assert relative_error(host(value), params[key].detach().numpy()) < 1e-9, (step, key)


def test_npformer_lm_trains_the_modern_decoder_and_prints_its_summary_and_perplexity(tmp_path):
    result = subprocess.run([sys.executable, "-m", "npformer", "lm", "--architecture", "modern", "--steps", "30",
                             "--max-pairs", "800", "--samples", "1", "je"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "validation perplexity:" in result.stdout and "modern decoder" in result.stdout
    assert "AdamW group decay" in result.stderr and "KV cache:" in result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("je")
