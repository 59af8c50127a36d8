"""The BERT-style masked language model: masking, bidirectional attention, gradients, learning."""

import numpy as np
import pytest

from npformer import gradcheck, models, nn
from npformer.tasks.masked_lm import MASK_ID, fill_mask, mask_tokens, train_french_mlm


def test_masking_follows_80_10_10_and_targets_only_the_selected():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 200, size=(400, 50))
    ids[:, 0], ids[:, -1] = 1, 2
    inputs, targets = mask_tokens(ids, rng, vocab_size=200)
    selected = targets != 0
    assert abs(selected[:, 1:-1].mean() - 0.15) < 0.01
    assert not selected[:, 0].any() and not selected[:, -1].any()  # never <bos> or <eos>
    np.testing.assert_array_equal(targets[selected], ids[selected])
    np.testing.assert_array_equal(inputs[~selected], ids[~selected])
    as_mask = (inputs[selected] == MASK_ID).mean()
    unchanged = (inputs[selected] == ids[selected]).mean()
    assert abs(as_mask - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.02  # + ~0.5% random = same word


def test_bidirectional_attention_reads_the_right_hand_context():
    config = dict(vocab=13, d_model=8, n_heads=2, d_ff=8, n_layers=2, max_len=8, dropout=0.0)
    bert = models.LanguageModel(models.LanguageModelConfig(causal=False, **config), dtype=np.float64).eval()
    gpt = models.LanguageModel(models.LanguageModelConfig(causal=True, **config), dtype=np.float64).eval()
    ids, changed = np.array([[1, 6, MASK_ID, 7, 2]]), np.array([[1, 6, MASK_ID, 9, 2]])
    assert not np.allclose(bert.forward(ids)[0, 2], bert.forward(changed)[0, 2])
    np.testing.assert_array_equal(gpt.forward(ids)[0, 2], gpt.forward(changed)[0, 2])
    with pytest.raises(ValueError, match="cannot generate"):
        bert.generate([1], 2, np.random.default_rng(0))


def test_whole_masked_model_gradients():
    model = models.LanguageModel(models.LanguageModelConfig(13, d_model=6, n_heads=2, d_ff=8, max_len=8, causal=False),
                             dtype=np.float64)
    inputs = np.array([[1, 5, MASK_ID, 7, 2], [1, MASK_ID, 9, 2, 0]])
    targets = np.array([[0, 0, 6, 0, 0], [0, 8, 0, 0, 0]])
    report = gradcheck.check_loss(model, {"ids": inputs}, targets, name="mlm")
    assert report.passed, report


@pytest.mark.slow
def test_masked_lm_learns_on_the_embedded_corpus():
    # 150 steps with feed-forward layers half as wide: 37% measured (lesson 19's quick run trains 250)
    result = train_french_mlm(None, steps=150, max_pairs=4000, d_ff=128)
    assert result["valid_masked_accuracy"] > 0.25  # chance is under 1% over ~120 words
    answers = fill_mask(result["model"], result["vocab"], "le chat [MASK] mange la pomme.")
    assert len(answers) == 1 and len(answers[0]) == 3
