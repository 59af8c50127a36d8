"""Greedy and beam search, unknown-word pass-through, and safe checkpoints."""

import os

import numpy as np
import pytest

from npformer import backend, models, nn, optim, tokens
from npformer.training import checkpoint, train_step
from npformer.data import Vocab
from npformer.tasks.translation import Translator, beam_search, greedy_decode

host = backend.to_numpy  # a device array (CuPy, the strict stand-in) to NumPy, for comparisons

CONFIG = dict(src_vocab=12, tgt_vocab=14, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=16,
              dropout=0.0)


def model_and_source(seed=0):
    model = models.Transformer(models.TransformerConfig(**CONFIG), seed=seed).eval()
    rng = np.random.default_rng(seed)
    src = rng.integers(4, 12, size=(6, 5))
    src[0, 3:] = tokens.PAD_ID
    return model, backend.asarray(src)


def sequence_log_prob(model, src, hypotheses):
    """log P(hypothesis <eos> | source) under the model, by teacher forcing."""
    scores = []
    for row, ids in enumerate(hypotheses):
        tgt = np.array([[tokens.BOS_ID] + ids + [tokens.EOS_ID]])
        logits = backend.to_numpy(model.forward(src[row:row + 1], backend.asarray(tgt[:, :-1])))[0]
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
            - logits.max(-1, keepdims=True)
        scores.append(float(log_probs[np.arange(len(ids) + 1), tgt[0, 1:]].sum()))
    return np.array(scores)


def test_beam_of_one_is_greedy():
    model, src = model_and_source()
    assert beam_search(model, src, beam_size=1, max_len=8, length_penalty=0.0) == greedy_decode(model, src, 8)


def test_greedy_decoding_matches_the_full_forward_argmax():
    model, src = model_and_source(1)
    hypotheses = greedy_decode(model, src, max_len=6)
    for row, ids in enumerate(hypotheses):
        prefix = [tokens.BOS_ID]
        for token in ids:
            logits = model.forward(src[row:row + 1], backend.asarray(np.array([prefix])))
            assert int(logits[0, -1].argmax()) == token
            prefix.append(token)


def test_beam_search_finds_more_probable_translations_than_greedy_on_average():
    better = []
    for seed in range(4):
        model, src = model_and_source(seed)
        greedy = greedy_decode(model, src, max_len=10)
        beam = beam_search(model, src, beam_size=4, max_len=10, length_penalty=0.0)
        better.append(sequence_log_prob(model, src, beam) - sequence_log_prob(model, src, greedy))
    assert np.mean(np.concatenate(better)) >= 0


def test_beam_search_rejects_bad_sizes():
    model, src = model_and_source()
    with pytest.raises(ValueError, match="beam_size must be >= 1"):
        beam_search(model, src, beam_size=0, max_len=4)


def test_unknown_target_words_are_copied_from_the_source():
    model, _ = model_and_source()
    model.out_proj.b[tokens.UNK_ID] = 50.0  # the model now says <unk> at every position
    src_vocab = Vocab(list(tokens.SPECIAL_TOKENS) + [f"w{i}" for i in range(8)])
    tgt_vocab = Vocab(list(tokens.SPECIAL_TOKENS) + [f"m{i}" for i in range(10)])
    translator = Translator(model, src_vocab, tgt_vocab)
    for beam in (1, 3):
        [output] = translator.translate(["w1 Zorglub w3"], beam_size=beam, max_len=3)
        assert output.split() and set(output.split()) <= {"w1", "Zorglub", "w3"}
        # A translation as long as the model allows (max_len = 16 positions) is re-read too.
        [output] = translator.translate(["w1 Zorglub w3"], beam_size=beam)
        assert len(output.split()) == CONFIG["max_len"] and set(output.split()) <= {"w1", "Zorglub", "w3"}


# --- checkpoints ---------------------------------------------------------------------------

def trained_pair(tmp_path):
    model, src = model_and_source()
    optimizer = optim.Adam(model, lr=0.01)
    model.train()
    for _ in range(2):
        train_step(model, (src, src[:, :4]), src[:, 1:5], optimizer)
    return model, optimizer


def test_checkpoint_round_trip_restores_parameters_optimizer_and_meta(tmp_path):
    model, optimizer = trained_pair(tmp_path)
    path = str(tmp_path / "ckpt.npz")
    rng = np.random.default_rng(7)
    checkpoint.save_checkpoint(path, model, optimizer, {"step": 2, "rng": checkpoint.generator_state(rng)})
    assert os.path.isfile(tmp_path / "ckpt.json")
    fresh = models.Transformer(models.TransformerConfig(**CONFIG), seed=9)
    fresh_optimizer = optim.Adam(fresh, lr=0.5)
    meta = checkpoint.load_checkpoint(path, fresh, fresh_optimizer)
    assert meta["step"] == 2 and fresh_optimizer.step_count == 2 and fresh_optimizer.lr == 0.01
    for key, value in model.params().items():
        np.testing.assert_array_equal(host(fresh.params()[key]), host(value))
        np.testing.assert_array_equal(host(fresh_optimizer.state[key]["exp_avg"]), host(optimizer.state[key]["exp_avg"]))
    restored = np.random.default_rng(0)
    checkpoint.set_generator_state(restored, meta["rng"])
    assert restored.random() == rng.random()


def test_a_float16_checkpoint_as_the_shipped_models_are_written_loads_back_in_float32(tmp_path):
    """``build_pretrained.py`` stores the shipped models' parameters as float16 (``params_as``): they
    load into a float32 model as the float16 values widened."""
    model, _ = trained_pair(tmp_path)
    path = str(tmp_path / "half.npz")
    checkpoint.save_checkpoint(path, model, meta={"step": 2}, params_as=np.float16)
    with np.load(path) as stored:
        assert {stored[name].dtype for name in stored.files if name.startswith("param/")} == {np.dtype(np.float16)}
    fresh = models.Transformer(models.TransformerConfig(**CONFIG), seed=9)
    meta = checkpoint.load_checkpoint(path, fresh)
    assert meta["step"] == 2 and meta["params_stored_as"] == "float16"
    for key, value in model.params().items():
        assert fresh.params()[key].dtype == np.float32
        np.testing.assert_array_equal(host(fresh.params()[key]), host(value).astype(np.float16).astype(np.float32))


def test_a_crash_during_a_save_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    model, optimizer = trained_pair(tmp_path)
    path = str(tmp_path / "ckpt.npz")
    checkpoint.save_checkpoint(path, model, optimizer, {"step": 2})
    before = {k: v.copy() for k, v in model.params().items()}

    def crash_midway(file, **arrays):
        file.write(b"PK\x03\x04 half a zip file")
        raise OSError("disk full")

    for value in model.params().values():
        value += 1.0
    monkeypatch.setattr(checkpoint.numpy, "savez", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save_checkpoint(path, model, optimizer, {"step": 3})
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["ckpt.json", "ckpt.npz"]  # no temporary file left
    reloaded = models.Transformer(models.TransformerConfig(**CONFIG), seed=5)
    assert checkpoint.load_checkpoint(path, reloaded)["step"] == 2
    for key, value in before.items():
        np.testing.assert_array_equal(host(reloaded.params()[key]), host(value))


def test_loading_never_unpickles(tmp_path):
    path = str(tmp_path / "evil.npz")
    np.savez(path, meta=np.frombuffer(b"{}", dtype=np.uint8), **{"param/x": np.array([object()], dtype=object)})
    with pytest.raises(ValueError, match="object array.*never unpickles"):
        checkpoint.load_checkpoint(path, models.Transformer(models.TransformerConfig(**CONFIG)))
    with pytest.raises(FileNotFoundError):
        checkpoint.load_checkpoint(str(tmp_path / "missing.npz"), None)
