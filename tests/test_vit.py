"""The Vision Transformer: patch extraction, gradients, learning, bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer import gradcheck, models, nn, ops
from npformer.tasks.images import make_shapes, train_vit


@given(seed=st.integers(0, 1000), batch=st.integers(1, 3), channels=st.integers(1, 3),
       patch=st.sampled_from([1, 2, 3]), tiles=st.integers(1, 3))
def test_patches_gradient_and_round_trip(seed, batch, channels, patch, tiles):
    report = gradcheck.check_op("patches", seed=seed, batch=batch, channels=channels, size=patch * tiles,
                                patch=patch)
    assert report.passed, report
    images = np.random.default_rng(seed).standard_normal((batch, channels, patch * tiles, patch * tiles))
    patches, cache = ops.patches_forward(images, patch)
    assert patches.shape == (batch, tiles * tiles, channels * patch * patch)
    np.testing.assert_array_equal(ops.patches_backward(patches, cache), images)  # a pure rearrangement


def test_whole_vit_gradients():
    """cls_token and pos start at N(0, 0.02^2); the class-token row then has a tiny variance and its
    layer norm is so curved that a finite-difference step of 3e-4 misjudges it (the error vanishes
    as the step shrinks). Unit-scale values make the check well conditioned; the math is the same."""
    model = models.VisionTransformer(models.ViTConfig(image_size=4, patch=2, n_classes=3, d_model=6, n_heads=2,
                                              d_ff=8, dropout=0.1), dtype=np.float64)
    rng = np.random.default_rng(1)
    model.cls_token[...] = rng.standard_normal(model.cls_token.shape)
    model.pos[...] = rng.standard_normal(model.pos.shape)
    images, labels = rng.standard_normal((3, 1, 4, 4)), np.array([0, 2, 1])
    report = gradcheck.check_loss(model, {"images": images}, labels, ignore_index=None, name="vit")
    assert report.passed, report


def test_vit_learns_the_shapes():
    result = train_vit(steps=250)
    assert result["test_accuracy"] >= 0.9
    attention = result["model"].attention_to_patches()
    assert attention.shape == (1000, 4, 4)
    # Every attention row is a distribution: the class token's weights on the patches and on
    # itself sum to 1, and so does every row of the last layer's weights.
    weights = result["model"].encoder.layers[-1].self_attn.attn_weights  # (B, heads, N + 1, N + 1)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-5)
    to_itself = weights[:, :, 0, 0].mean(axis=1)
    np.testing.assert_allclose(attention.sum(axis=(1, 2)) + to_itself, 1.0, rtol=0, atol=1e-5)


def test_generated_shapes_are_balanced_and_bad_images_are_rejected():
    images, labels = make_shapes(400, np.random.default_rng(0))
    assert images.shape == (400, 1, 8, 8) and images.dtype == np.float32
    assert np.bincount(labels).min() > 70
    model = models.VisionTransformer(models.ViTConfig())
    with pytest.raises(ValueError, match=r"images must have shape \(B, C, H, W\) = \(B, 1, 8, 8\)"):
        model.forward(np.zeros((2, 8, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="divisible by patch = 3"):
        ops.patches_forward(np.zeros((1, 1, 8, 8)), 3)
