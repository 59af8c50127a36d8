# %% [markdown]
# # Lesson 20 — A Vision Transformer: an image as a sentence of patches
#
# Cut an image into $p \times p$ patches, flatten each one, and treat the patches as the words of a
# sentence: a linear layer embeds them, a learned **class token** is put in front, learned
# positions are added, and the encoder of lesson 9 reads the whole sequence. The class token's
# final state goes through a small MLP head with GELU. That is the Vision Transformer
# (Dosovitskiy et al., 2021), built from the layers of this course plus one new op.
#
# **Patch extraction** is a pure rearrangement: $(B, C, H, W) \to (B, N, C p^2)$, with
# $N = HW / p^2$ patches of $C p^2$ values each. Every pixel lands in exactly one patch, so its
# backward pass is the inverse rearrangement, with no arithmetic.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.tasks.images import SHAPES, train_vit

image = np.arange(16.0).reshape(1, 1, 4, 4)
patches, cache = ops.patches_forward(image, 2)
print("image:\n", image[0, 0], "\npatches (one per row):\n", patches[0])
assert patches.shape == (1, 4, 4), "(1, 1, 4, 4) in 2 x 2 patches: 4 patches of 1 * 2^2 values"
assert np.array_equal(np.sort(patches.ravel()), image.ravel()), "every pixel must land in exactly one patch"
assert np.array_equal(ops.patches_backward(patches, cache), image), "the backward pass must be the inverse rearrangement"
report = gradcheck.check_op("patches")
print(report)
assert report.passed, "patches_backward must pass the finite-difference check"

# %% [markdown]
# ## Training on generated shapes
#
# $8 \times 8$ images of four shapes (a horizontal bar, a vertical bar, a diagonal, a hollow square)
# at random places, with noise. No download is needed, and a single $2 \times 2$ patch is not enough
# to tell a bar from a square's side: the model must combine patches.

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
result = train_vit(steps=120 if QUICK else 400)
print(f"test accuracy {result['test_accuracy']:.1%} on 1,000 images "
      f"({result['parameters']:,} parameters, {result['seconds']:.0f} s)")
assert len(result["test_labels"]) == 1000
assert result["test_accuracy"] > 0.5, "the ViT must classify the shapes far better than chance (25%)"

# %% [markdown]
# Guessing would be right on 25% of the images (four shapes); the cell checks that the trained model
# is far above that, in the quick run as in the full one.
#
# ## Where does the class token look?
#
# The last layer's attention from the class token to the $N = 64 / 2^2 = 16$ patches, averaged over
# heads:

# %%
model = result["model"]
attention = model.attention_to_patches()
figure, axes = plt.subplots(2, 4, figsize=(11, 5.6), constrained_layout=True)
for column, label in enumerate(range(4)):
    index = int(np.flatnonzero(result["test_labels"] == label)[0])
    axes[0, column].imshow(result["test_images"][index, 0], cmap="gray")
    axes[0, column].set_title(f"{SHAPES[label]}\npredicted: {SHAPES[result['predictions'][index]]}", fontsize=9)
    shown = axes[1, column].imshow(attention[index], cmap="viridis", vmin=0, vmax=float(attention.max()))
    axes[1, column].set_title("class token -> patches", fontsize=9)
    for axis in axes[:, column]:
        axis.set_xticks([])
        axis.set_yticks([])
figure.colorbar(shown, ax=axes[1, :], shrink=0.8, label="attention weight")
figure.savefig(viz.figures_dir() / "20_vit_attention.png", dpi=110)
assert attention.shape == (1000, 4, 4), "one weight per 2 x 2 patch of each 8 x 8 test image"
assert np.all(attention >= 0) and np.all(attention.sum((1, 2)) <= 1 + 1e-6), \
    "attention weights are a share of the class token's attention (the rest goes to itself)"

# %% [markdown]
# ## Exercises
#
# 1. Use $4 \times 4$ patches instead of $2 \times 2$ (`train_vit(patch=4)`). How many tokens does the
#    encoder read, and how does the accuracy change?
# 2. Replace the class token by mean pooling over the patches (lesson 17's `ops.masked_mean_pool_forward`
#    and `_backward`, with a mask that is True everywhere): subclass `models.VisionTransformer` and
#    override `forward` and `backward` (read them in `npformer/models/vit.py`). `train_vit` builds
#    its own model, so train yours with `npformer.training.fit` on `make_shapes` images, as
#    `train_vit` does in `npformer/tasks/images.py`. Which works better?
# 3. With scikit-learn installed, train on its $8 \times 8$ handwritten digits
#    (`sklearn.datasets.load_digits`; ten classes, pixel values 0 to 16): build
#    `models.VisionTransformer(models.ViTConfig(n_classes=10))` and train it with
#    `npformer.training.fit`, as `train_vit` does. What accuracy does it reach on held-out digits?
