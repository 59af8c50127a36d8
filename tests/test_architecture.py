"""The architecture's promises (DESIGN.md, "Layers and folders"), each checked directly.

1. (Three products against the attention block's fused q|k|v: ``tests/test_fastpath.py``.)
2. Every op's backward is pure: calling it twice on one cache gives the same answer and leaves
   the cache as it was.
3. ``Module.evaluating()`` and everything that runs a model in eval mode (decoding, translation,
   evaluation, generation) put every module back in the mode it had.
4. Blocks pass gradients through return values, never through side channels: the decoder
   layer returns ``(dx, d_memory)``, cross-attention always returns a pair and self-attention
   always returns one array.
"""

import copy

import numpy as np
import pytest

from npformer import backend, gradcheck, models, nn, ops
from npformer.data import Batch, Vocab
from npformer.tasks.translation import Translator, beam_search, greedy_decode
from npformer.tokens import PAD_ID, SPECIAL_TOKENS, UNK_ID
from npformer.tasks.translation import evaluate_loss

TOLERANCE = 1e-12  # max |fused - textbook| / max |textbook|, per array


def host(array):
    return np.array(backend.to_numpy(array), copy=True)


def relative_difference(a, b):
    a, b = host(a), host(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    scale = np.abs(b).max(initial=0.0)
    difference = np.abs(a - b).max(initial=0.0)
    return difference if scale == 0 else difference / scale


def assert_close(a, b, what):
    error = relative_difference(a, b)
    assert error < TOLERANCE, f"{what}: relative difference {error:.3e}"


def assert_same_gradients(first, second):
    """Every tensor within TOLERANCE, relative to its own largest entry. A key bias is the
    exception: its true gradient is 0 (it adds the same ``q . b`` to every score of a row,
    which the softmax ignores), so both forms hold round-off only, and that round-off must
    stay below TOLERANCE times the largest gradient of the same attention block."""
    assert first.keys() == second.keys()
    for key in second:
        if key.endswith("k.b"):
            block = key[: -len("k.b")]
            scale = max(np.abs(second[k]).max() for k in second if k.startswith(block))
            worst = max(np.abs(first[key]).max(), np.abs(second[key]).max())
            assert worst < TOLERANCE * scale, f"{key}: {worst:.3e} against {scale:.3e}"
        else:
            assert_close(first[key], second[key], key)


def f64(rng, *shape):
    return backend.asarray(rng.standard_normal(shape))


def padded_ids(rng, rows, vocab):
    """Id rows of the given lengths, right-padded with <pad>; ids avoid the special tokens."""
    longest = max(rows)
    ids = np.full((len(rows), longest), PAD_ID, dtype=np.int64)
    for row, length in enumerate(rows):
        ids[row, :length] = rng.integers(len(SPECIAL_TOKENS), vocab, size=length)
    return ids


def attention_blocks(model):
    return [m for _, m in model.named_modules() if isinstance(m, nn.MultiHeadAttention)]


SMALL = dict(src_vocab=13, tgt_vocab=11, d_model=12, n_heads=3, d_ff=20, n_layers=2, max_len=16,
             dropout=0.0)


def _key_padding(lengths, length):
    ids = np.zeros((len(lengths), length), dtype=np.int64)
    for row, n in enumerate(lengths):
        ids[row, :n] = 5
    return ops.padding_mask(backend.asarray(ids))


# --- 2. every op's backward is pure -------------------------------------------------------

def _float64_backend(value):
    if isinstance(value, np.ndarray):
        return backend.asarray(value.astype(np.float64) if value.dtype.kind == "f" else value)
    return value


def assert_same(before, after, where):
    """``after`` holds exactly what ``before`` (a deep copy) held: same keys, arrays, values."""
    assert type(before) is type(after), where
    if isinstance(before, dict):
        assert before.keys() == after.keys(), where
        for key in before:
            assert_same(before[key], after[key], f"{where}[{key!r}]")
    elif isinstance(before, (tuple, list)):
        assert len(before) == len(after), where
        for index, (a, b) in enumerate(zip(before, after)):
            assert_same(a, b, f"{where}[{index}]")
    elif hasattr(before, "shape") and hasattr(before, "dtype"):
        assert before.dtype == after.dtype and before.shape == after.shape, where
        assert np.array_equal(host(before), host(after)), where
    else:
        assert before == after, where


@pytest.mark.parametrize("name", list(gradcheck.OP_CASES))
def test_every_op_backward_is_pure(name):
    forward, backward, inputs = gradcheck.OP_CASES[name](np.random.default_rng(0))
    inputs = {key: _float64_backend(value) for key, value in inputs.items()}
    inputs_before = copy.deepcopy(inputs)
    out, cache = forward(*inputs.values())
    cache_before = copy.deepcopy(cache)
    dout = backend.asarray(np.random.default_rng(1).standard_normal(tuple(out.shape)))
    dout_before = host(dout)

    first = backward(dout, cache)
    first_host = [host(g) for g in (first if isinstance(first, tuple) else (first,))]  # copied now
    second = backward(dout, cache)
    second_host = [host(g) for g in (second if isinstance(second, tuple) else (second,))]

    assert isinstance(first, tuple) == isinstance(second, tuple), name
    assert len(first_host) == len(second_host), name
    for index, (a, b) in enumerate(zip(first_host, second_host)):
        assert a.dtype == np.float64, f"{name}: gradient {index} is {a.dtype}"
        assert np.array_equal(a, b), f"{name}: gradient {index} differs on the second call"
    assert np.abs(first_host[0]).max() > 0, name  # the comparison is not between zeros
    assert_same(cache_before, cache, f"{name} cache")
    assert_same(inputs_before, inputs, f"{name} inputs")
    assert np.array_equal(dout_before, host(dout)), f"{name}: backward changed dout"


# --- 3. evaluating() restores every module's mode ----------------------------------------

def modes(model):
    return {name: module.training for name, module in model.named_modules()}


def tiny_transformer():
    config = models.TransformerConfig(src_vocab=12, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16,
                                      n_layers=1, max_len=12, dropout=0.3)
    return models.Transformer(config, seed=0)


def set_mode(model, start):
    """"train", "eval", or "mixed": train mode with one sub-module (and its children) in eval mode
    and one dropout of an eval sub-tree back in train mode."""
    if start == "eval":
        return model.eval()
    model.train()
    if start == "mixed":
        model.encoder.eval()
        model.encoder.layers[0].drop1.train()
    return model


STARTS = ["train", "eval", "mixed"]


@pytest.mark.parametrize("start", STARTS)
def test_evaluating_restores_each_modules_mode_also_after_an_error(start):
    model = set_mode(tiny_transformer(), start)
    before = modes(model)
    assert len(set(before.values())) == (2 if start == "mixed" else 1)
    with model.evaluating() as inside:
        assert inside is model
        assert not any(modes(model).values())
    assert modes(model) == before
    with pytest.raises(RuntimeError, match="boom"):
        with model.evaluating():
            assert not any(modes(model).values())
            raise RuntimeError("boom")
    assert modes(model) == before
    with model.encoder.evaluating():  # a sub-module's block touches only its own sub-tree
        assert not any(modes(model.encoder).values())
        assert {k: v for k, v in modes(model).items() if not k.startswith("encoder")} == \
               {k: v for k, v in before.items() if not k.startswith("encoder")}
    assert modes(model) == before


def record_modes_while_running(model, monkeypatch, method_names):
    """Wrap ``model.<method>`` so that each call records whether any module was in train mode."""
    seen = []
    for method_name in method_names:
        original = getattr(model, method_name)

        def wrapped(*args, _original=original, **kwargs):
            seen.append(any(modes(model).values()))
            return _original(*args, **kwargs)

        monkeypatch.setattr(model, method_name, wrapped)
    return seen


def vocab(size):
    return Vocab(list(SPECIAL_TOKENS) + [f"w{i}" for i in range(size - len(SPECIAL_TOKENS))])


def translate_with_unknown_words(model, beam_size):
    """The output projection favours <unk>, so the <unk>-replacement pass runs as well."""
    model.out_proj.b[UNK_ID] = 50.0
    return Translator(model, vocab(12), vocab(10)).translate(["w1 w2 w3", "w4 w9"], beam_size=beam_size)


DECODERS = {
    "greedy_decode": lambda m, src: greedy_decode(m, src, max_len=5),
    "beam_search": lambda m, src: beam_search(m, src, beam_size=3, max_len=5),
    "translate_greedy": lambda m, src: translate_with_unknown_words(m, 1),
    "translate_beam": lambda m, src: translate_with_unknown_words(m, 2),
    "evaluate_loss": lambda m, src: evaluate_loss(m, [Batch(
        src=backend.to_numpy(src), tgt_in=np.array([[1, 5, 6], [1, 7, 0]]),
        tgt_out=np.array([[5, 6, 2], [7, 2, 0]]))]),
}


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("use", list(DECODERS))
def test_decoding_and_evaluation_leave_the_mode_as_it_was(use, start, monkeypatch):
    model = set_mode(tiny_transformer(), start)
    before = modes(model)
    seen = record_modes_while_running(model, monkeypatch, ["forward", "decode_step"])
    src = backend.asarray(np.array([[4, 5, 6], [7, 8, 0]]))
    DECODERS[use](model, src)
    assert seen and not any(seen), f"{use} ran a module in train mode"
    assert modes(model) == before


@pytest.mark.parametrize("start", STARTS)
def test_language_model_generation_leaves_the_mode_as_it_was(start, monkeypatch):
    model = models.LanguageModel(models.LanguageModelConfig(vocab=10, d_model=8, n_heads=2, d_ff=16,
                                                            n_layers=2, max_len=12, dropout=0.3), seed=0)
    if start == "eval":
        model.eval()
    elif start == "mixed":
        model.blocks.layers[1].eval()
    before = modes(model)
    seen = record_modes_while_running(model, monkeypatch, ["_embed"])
    tokens = model.generate([1, 5], max_new_tokens=4, rng=np.random.default_rng(0))
    assert len(tokens) == 4
    assert seen and not any(seen), "generate ran a module in train mode"
    assert modes(model) == before


# --- 4. gradients flow through return values ----------------------------------------------

def test_attention_backward_always_returns_the_same_kind_of_thing():
    rng = np.random.default_rng(0)
    cross = nn.MultiHeadAttention(6, 2, rng=rng, dtype=np.float64)
    self_attention = nn.SelfAttention(6, 2, rng=rng, dtype=np.float64)
    for q_len, k_len in ((3, 5), (4, 4), (1, 1)):
        query, memory = f64(rng, 2, q_len, 6), f64(rng, 2, k_len, 6)
        cross.forward(query, memory, _key_padding([k_len, 1], k_len))
        result = cross.backward(f64(rng, 2, q_len, 6))
        assert isinstance(result, tuple) and len(result) == 2
        assert result[0].shape == query.shape and result[1].shape == memory.shape
        self_attention.forward(query, _key_padding([q_len, 1], q_len))
        dx = self_attention.backward(f64(rng, 2, q_len, 6))
        assert not isinstance(dx, tuple) and dx.shape == query.shape and dx.dtype == np.float64


def side_channels(model):
    return [f"{name}.{attribute}" for name, module in model.named_modules()
            for attribute in vars(module) if "d_memory" in attribute]


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post", "pre"])
def test_decoder_layer_returns_dx_and_d_memory_as_values(pre_norm):
    rng = np.random.default_rng(3)
    layer = nn.DecoderLayer(6, n_heads=2, d_ff=10, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                            activation="gelu", rng=rng, dtype=np.float64)
    x, memory, dout = f64(rng, 2, 3, 6), f64(rng, 2, 5, 6), f64(rng, 2, 3, 6)
    self_mask, memory_mask = ops.causal_mask(3), _key_padding([5, 2], 5)

    def loss(x, memory):
        return float((layer.forward(x, memory, self_mask, memory_mask) * dout).sum())

    layer.forward(x, memory, self_mask, memory_mask)
    layer.zero_grad()
    result = layer.backward(dout)
    assert isinstance(result, tuple) and len(result) == 2
    dx, d_memory = result
    assert dx.shape == x.shape and d_memory.shape == memory.shape
    assert not hasattr(layer, "_d_memory") and side_channels(layer) == []
    # The returned values are the gradients: one directional finite difference for each.
    for value, grad, name in ((x, dx, "x"), (memory, d_memory, "memory")):
        direction = f64(np.random.default_rng(9), *value.shape)
        h = 1e-5
        plus = loss(value + h * direction, memory) if name == "x" else loss(x, memory + h * direction)
        minus = loss(value - h * direction, memory) if name == "x" else loss(x, memory - h * direction)
        numeric = (plus - minus) / (2 * h)
        analytic = float((grad * direction).sum())
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (name, numeric, analytic)
    assert np.abs(host(d_memory)[1, 2:]).max() == 0  # padded memory positions get no gradient

    # The same through a whole model: no module keeps a gradient for another to pick up.
    model = models.Transformer(models.TransformerConfig(**SMALL), seed=0, dtype=np.float64)
    src = backend.asarray(padded_ids(rng, [4, 2], 13))
    tgt = backend.asarray(padded_ids(rng, [3, 3], 11))
    logits = model.forward(src, tgt)
    model.backward(f64(rng, *logits.shape))
    assert side_channels(model) == []


def _calls_from_ops_upward(run):
    """Every call made by a function of ``npformer/ops/`` into npformer above it while ``run()`` runs,
    in every thread (the fast ops hand work to npformer's threads), decorators included: as
    ``"caller -> callee"``. ``backend.py`` and ``threads.py`` sit below the ops and may be called."""
    import sys
    import threading
    from pathlib import Path

    package = Path(ops.__file__).resolve().parent.parent
    ops_folder, below = package / "ops", {package / "backend.py", package / "threads.py", package / "allocator.py"}
    upward = set()

    def where(frame):
        return Path(frame.f_code.co_filename).resolve()

    def watch(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        caller, callee = where(frame.f_back), where(frame)
        if ops_folder in caller.parents and package in callee.parents \
                and ops_folder not in callee.parents and callee not in below:
            upward.add(f"{caller.relative_to(package)}:{frame.f_back.f_code.co_name} -> "
                       f"{callee.relative_to(package)}:{frame.f_code.co_name}")

    threading.setprofile(watch)
    sys.setprofile(watch)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return sorted(upward)


@pytest.mark.parametrize("op_set", ["fast", "textbook"])
@pytest.mark.parametrize("counted_only", [True, False])
def test_no_op_calls_above_the_ops_during_a_training_step(op_set, counted_only):
    """The ops call nothing above them: a training step of the translator's model (padded, or packed
    with the counted targets only) and of the decoder-only language model, pre- and post-norm, makes
    no call from ``ops/`` into ``nn``, ``models``, ``training`` or anything else above."""
    from npformer import optim
    from npformer.training import train_step

    model, src, tgt_in, tgt_out = gradcheck.model_case(seed=1, dropout=0.1, norm="pre")
    language_model = models.LanguageModel(models.LanguageModelConfig(vocab=12, d_model=8, n_heads=2, d_ff=16))
    ids = np.array([[1, 5, 6, 7, 0], [1, 8, 9, 0, 0]])

    def steps():
        with ops.using(op_set):
            train_step(model, (src, tgt_in), tgt_out, optim.Adam(model), max_norm=1.0,
                       only_counted_targets=counted_only)
            train_step(language_model, (ids[:, :-1],), ids[:, 1:], optim.AdamW(language_model))

    assert _calls_from_ops_upward(steps) == []
