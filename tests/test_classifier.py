"""The encoder-only classifier: masked pooling, learned positions, gradients, learning."""

import io

import numpy as np
import pytest

from npformer import cli, gradcheck, models, nn
from npformer.tasks.language_id import predict, train_language_id



@pytest.mark.parametrize("pooling, norm", [("mean", "pre"), ("max", "post")])
def test_whole_classifier_gradients(pooling, norm):
    config = models.ClassifierConfig(12, 3, d_model=6, n_heads=2, d_ff=8, n_layers=2, max_len=8, dropout=0.1,
                                 pooling=pooling, norm=norm)
    model = models.EncoderClassifier(config, seed=1, dtype=np.float64)
    ids = np.array([[5, 6, 7, 0], [8, 9, 4, 5], [0, 0, 0, 0]])  # the last: all padding
    labels = np.array([0, 2, 1])
    report = gradcheck.check_loss(model, {"ids": ids}, labels, ignore_index=None, name="classifier")
    assert report.passed, report
    assert {"tok_embed.W", "pos_embed.W", "head.W"} <= {r.tensor for r in report.results}


def test_padding_does_not_change_the_prediction():
    model = models.EncoderClassifier(models.ClassifierConfig(12, 2, d_model=8, n_heads=2, d_ff=8, max_len=8,
                                                     dropout=0.0), dtype=np.float64).eval()
    ids = np.array([[5, 6, 7]])
    padded = np.array([[5, 6, 7, 0, 0]])
    np.testing.assert_allclose(model.forward(padded), model.forward(ids), atol=1e-12)


def test_language_id_learns_on_the_embedded_corpus():
    result = train_language_id(None, steps=120, max_pairs=3000)
    assert result["test_accuracy"] >= 0.99
    assert predict(result["model"], result["vocab"], ["the black cat eats.", "le chat noir mange."]) == [
        "English", "French"]


@pytest.mark.slow
def test_language_id_on_real_tatoeba_sentences(shared_fra_eng):
    # The file is sorted by length: its first pairs are one-word sentences ("Go.", "Tom!"), many
    # of them ambiguous between the two languages.
    result = train_language_id(str(shared_fra_eng), steps=300, max_pairs=20000)
    assert result["test_accuracy"] >= 0.97


def test_bad_configurations_and_inputs_are_rejected():
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        models.ClassifierConfig(10, 1)
    with pytest.raises(ValueError, match="pooling must be one of 'mean', 'max', got 'first'"):
        models.ClassifierConfig(10, 2, pooling="first")
    model = models.EncoderClassifier(models.ClassifierConfig(10, 2, d_model=8, n_heads=2, max_len=4))
    with pytest.raises(TypeError, match="ids must have an integer dtype"):
        model.forward(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"max_len = 4, got shape \(1, 6\)"):
        model.forward(np.ones((1, 6), dtype=int))


def test_language_id_command(capsys, monkeypatch):
    monkeypatch.setattr(sys_module(), "stderr", io.StringIO())
    assert cli.main(["language-id", "--steps", "60", "--max-pairs", "2000", "the cat sees the dog."]) == 0
    output = capsys.readouterr().out
    assert "held-out accuracy" in output and "the cat sees the dog." in output


def sys_module():
    import sys

    return sys
