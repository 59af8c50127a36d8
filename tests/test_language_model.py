"""The decoder-only language model: gradients, cached generation, sampling, learning."""

import numpy as np
import pytest

from npformer import cli, gradcheck, models, nn
from npformer.tasks.language_model import sample, train_french_lm


def tiny(dropout=0.1):
    config = models.LanguageModelConfig(13, d_model=6, n_heads=2, d_ff=8, n_layers=2, max_len=8, dropout=dropout)
    return models.LanguageModel(config, seed=2, dtype=np.float64)


def test_whole_language_model_gradients():
    model = tiny()
    ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 9, 4, 5, 2]])
    report = gradcheck.check_loss(model, {"ids": ids[:, :-1]}, ids[:, 1:], name="lm")
    assert report.passed, report
    assert {"tok_embed.W", "pos_embed.W", "blocks.norm.gamma", "head.W"} <= {r.tensor for r in report.results}


def test_the_model_is_causal():
    model = tiny(dropout=0.0).eval()
    ids = np.array([[1, 5, 6, 7, 8]])
    changed = ids.copy()
    changed[0, 3:] = [9, 10]
    np.testing.assert_array_equal(model.forward(ids)[:, :3], model.forward(changed)[:, :3])


def test_cached_greedy_generation_equals_the_full_forward_pass():
    model = tiny().eval()
    generated = model.generate([1, 5], 5, np.random.default_rng(0), top_k=1)
    sequence = [1, 5]
    for _ in range(5):
        sequence.append(int(model.forward(np.array([sequence]))[0, -1].argmax()))
    assert generated == sequence[2:]
    assert not model.training  # generate restores the mode it found


def test_sampling_is_seeded_and_respects_top_k():
    model = tiny()
    first = model.generate([1], 6, np.random.default_rng(7), temperature=1.5)
    assert first == model.generate([1], 6, np.random.default_rng(7), temperature=1.5)
    logits = model.eval().forward(np.array([[1]]))[0, -1]
    allowed = set(np.argsort(logits)[-3:].tolist())
    for seed in range(10):
        assert model.generate([1], 1, np.random.default_rng(seed), top_k=3)[0] in allowed


@pytest.mark.parametrize("kwargs, message", [
    (dict(prompt_ids=[]), "at least one token"),
    (dict(prompt_ids=[1], top_k=0), "top_k must be >= 1"),
    (dict(prompt_ids=[1], temperature=0.0), "temperature must be > 0"),
])
def test_bad_generation_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tiny().generate(max_new_tokens=3, rng=np.random.default_rng(0), **kwargs)


def test_french_lm_learns_on_the_embedded_corpus():
    result = train_french_lm(None, steps=150, max_pairs=3000)
    assert result["valid_perplexity"] < 12  # the vocabulary has over 100 words: uniform would be > 100
    texts = sample(result["model"], result["vocab"], "le chat", count=2, seed=1)
    assert len(texts) == 2 and all(text.startswith("le chat") for text in texts)


def test_lm_command_rejects_bad_top_k(capsys):
    assert cli.main(["lm", "--top-k", "0"]) == 2
    assert "argument --top-k: must be > 0, got 0" in capsys.readouterr().err
