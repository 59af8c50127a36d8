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
# $N = HW / p^2$ patches of $C p^2$ values each. It computes nothing: it only moves numbers. What
# does its backward pass do? You derive it below, in two steps.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check
from npformer.tasks.images import SHAPES, train_vit

image = np.arange(16.0).reshape(1, 1, 4, 4)
patches, cache = ops.patches_forward(image, 2)
print("image:\n", image[0, 0], "\npatches (one per row):\n", patches[0])
assert patches.shape == (1, 4, 4), "(1, 1, 4, 4) in 2 x 2 patches: 4 patches of 1 * 2^2 values"
assert np.array_equal(np.sort(patches.ravel()), image.ravel()), "every pixel must land in exactly one patch"

# %% [markdown]
# The image's pixels are numbered 0 to 15 row by row, so each printed row shows where a patch comes
# from: patch 0 is the top-left $2 \times 2$ square (pixels 0, 1, 4, 5), patch 1 the square to its
# right, and patches 2 and 3 the bottom row of squares.
#
# ### Your turn
#
# Write both halves of the op in plain NumPy, with npformer's layout (the one printed above).
#
# `patches_forward(images, patch_size)` takes `images` of shape $(B, C, H, W)$, with $H$ and $W$
# multiples of $p$ = `patch_size`, and returns the patches, $(B, N, C p^2)$ with
# $N = (H/p)(W/p)$:
#
# - the patches are numbered row by row over the $H/p \times W/p$ grid of patches: patch $n$ sits in
#   grid row $i = n \,//\, (W/p)$ and grid column $j = n \bmod (W/p)$;
# - patch $n$ of image $b$ is `images[b, :, i*p:(i+1)*p, j*p:(j+1)*p].reshape(-1)`: all of channel 0,
#   row by row, then all of channel 1, and so on. (Some implementations put the channel last inside
#   a patch, as `einops`' `(p1 p2 c)` does; a model trained with one layout cannot read the other.)
#
# No loop is needed: a reshape can cut an axis of length $H$ into two axes (which patch, and where
# inside it), a transpose can put the axes in any order, and a last reshape can merge neighbouring
# axes. Work out which axes the output needs, in which order, and check yourself on the small image
# above, whose pixels are numbered.
#
# Then the backward pass, `patches_backward(images, patch_size, dout)`, derived in a step below.

# %%
def patches_forward(images, patch_size):
    """(B, C, H, W) -> (B, N, C * p * p): the patches row by row, each one channel by channel."""
    ### BEGIN SOLUTION
    batch, channels, height, width = images.shape
    p = patch_size
    grid = images.reshape(batch, channels, height // p, p, width // p, p)
    patches = grid.transpose(0, 2, 4, 1, 3, 5)  # (B, grid row, grid column, C, p, p)
    return patches.reshape(batch, (height // p) * (width // p), channels * p * p)
    ### END SOLUTION


# %%
print(check("patches_forward", patches_forward))


# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("20"))


# %% [markdown]
# ### The backward pass, step 1: where each pixel goes
#
# Every entry of the patches is one pixel of the image, copied. Write `patches_destination(images,
# patch_size)`: for each pixel $(b, c, h, w)$ of `images`, the index, in `patches.reshape(-1)`, of the
# entry it becomes; an array shaped like `images`, of whole numbers (ints or floats). Which patch $n$ does
# the pixel land in, at which place $k$ inside it, and where do the entries of image $b$ start in the
# flattened patches? Try it by hand on the numbered image above first: where does pixel 4 go?
#
# The grader tries the image above, three channels on a grid of $2 \times 3$ patches, one patch
# covering the whole image, and patches of a single pixel ($p = 1$), then an unseen case.

# %%
def patches_destination(images, patch_size):
    """(B, C, H, W): for each pixel, its index in patches_forward(images, patch_size).reshape(-1)."""
    ### BEGIN SOLUTION
    batch, channels, height, width = images.shape
    p, rows, cols = patch_size, height // patch_size, width // patch_size
    b, c, h, w = np.indices(images.shape)
    patch = (h // p) * cols + w // p                   # n: row by row over the grid of patches
    place = c * p * p + (h % p) * p + w % p            # k: channel, then row, then column inside the patch
    return (b * rows * cols + patch) * channels * p * p + place
    ### END SOLUTION


# %%
print(check("patches_destination", patches_destination))

# %% [markdown]
# ### Step 2: the backward pass
#
# `patches_backward(images, patch_size, dout)` returns `dimages`, shaped like `images`, for an upstream
# gradient `dout` shaped like the patches. Write the loss's dependence on one pixel: which entries of
# the patches change when that pixel changes, and by how much? You may call your step; a loop-free
# answer with reshapes and a transpose exists too. The check
# grades the step again, compares with npformer and with finite differences of the forward, on the
# step's cases and an unseen one, and shows npformer's compact form once yours passes.

# %%
def patches_backward(images, patch_size, dout):
    """dout (B, N, C * p * p) -> dimages (B, C, H, W), the gradient of the patches' rearrangement."""
    ### BEGIN SOLUTION
    return dout.reshape(-1)[patches_destination(images, patch_size)]
    ### END SOLUTION


# %%
print(check("patches_backward", patches_backward, steps=(patches_destination,)))

# %% [markdown] tags=["instructor"]
# ### The compact form (instructor edition)
#
# Output entry $m$ of the forward is the pixel $\pi(m)$, with $\pi$ one-to-one, so
# $\partial L / \partial x_{\pi(m)} = dout_m$: every pixel receives exactly one entry of `dout`, the one
# it was moved to (`dout.reshape(-1)[destination]`). Without the index map: undo the forward's steps in
# reverse order, reshape `dout` to the transposed grid $(B, H/p, W/p, C, p, p)$, transpose it back by the
# inverse permutation $(0, 3, 1, 4, 2, 5)$ (the forward's $(0, 2, 4, 1, 3, 5)$ applied again does not
# undo it) and reshape to $(B, C, H, W)$. npformer's backward pass, on the lesson's image, gives the image
# back from its patches, and passes its finite-difference check:

# %% tags=["instructor"]
batch, channels, height, width = image.shape
undone = patches.reshape(batch, 2, 2, channels, 2, 2).transpose(0, 3, 1, 4, 2, 5).reshape(image.shape)
assert np.array_equal(undone, image) and np.array_equal(ops.patches_backward(patches, cache), image)
assert np.array_equal(patches.reshape(-1)[patches_destination(image, 2)], image)
report = gradcheck.check_op("patches")
print(report)
assert report.passed, "patches_backward must pass the finite-difference check"

# %% [markdown]
# ### The embedding, end to end
#
# The patches are the first piece of the model's embedding. A linear layer maps each patch to the
# model's width $D$, a learned class token $c$ of shape `(1, 1, D)`, the same for every image, goes in
# front, and learned positions `pos` of shape `(N + 1, D)` are added:
#
# $$t_{b,n} = \operatorname{patches}(x)_{b,n}\, W + b, \qquad
# \text{out}_b = [\,c;\ t_{b,1};\ \dots;\ t_{b,N}\,] + \text{pos}$$
#
# with `W` of shape $(C p^2, D)$ and `b` $(D,)$, so `out` is $(B, N + 1, D)$, row 0 of each image the
# class token's. Write `vit_embedding_backward(images, patch_size, W, b, cls_token, pos, dout)`, returning
# `(dimages, dW, db, dcls_token, dpos)`, each shaped like its input, for `dout` of the shape of `out`.
# Which rows of `dout` reach each parameter, and which parameters are shared by every image or every
# patch? Use your `patches_forward` and `patches_backward` (your variant's, if you have one). The check
# compares every gradient with npformer's and with finite differences of the forward, on a case where a
# single patch covers the image too.

# %%
def vit_embedding_backward(images, patch_size, W, b, cls_token, pos, dout):
    """(dimages, dW, db, dcls_token, dpos) of out = [cls_token, patches(images) @ W + b] + pos."""
    ### BEGIN SOLUTION
    patches = patches_forward(images, patch_size)                    # (B, N, C p^2): the forward, again
    d_tokens = dout[:, 1:]                                           # rows 1..N: the patches' tokens
    dpos = dout.sum(axis=0)                                          # every image adds its own share
    dcls_token = dout[:, :1].sum(axis=0, keepdims=True)              # row 0 of every image, (1, 1, D)
    rows = patches.reshape(-1, patches.shape[-1])                    # (B N, C p^2)
    dW = rows.T @ d_tokens.reshape(-1, d_tokens.shape[-1])           # summed over images and patches
    db = d_tokens.sum(axis=(0, 1))
    d_patches = d_tokens @ W.T                                       # (B, N, C p^2)
    dimages = patches_backward(images, patch_size, d_patches)
    return dimages, dW, db, dcls_token, dpos
    ### END SOLUTION


# %%
print(check("vit_embedding_backward", vit_embedding_backward))

# %% [markdown]
# ## Training on generated shapes
#
# $8 \times 8$ images of four shapes (a horizontal bar, a vertical bar, a diagonal, a hollow square)
# at random places, with noise. No download is needed, and a single $2 \times 2$ patch is not enough
# to tell a bar from a square's side: the model must combine patches.
#
# When both of your functions pass their checks, the model cuts its images with them: the op set
# below (`ops.using`, as in lesson 9) wraps them in the op's signatures, the forward keeping the
# images and the patch size in its cache for the backward. Otherwise it uses npformer's.

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
STEPS = 80 if QUICK else 400
forward_passed = check("patches_forward", patches_forward, strict=False).passed
backward_passed = check("patches_backward", patches_backward, strict=False).passed


def patch_ops(forward, backward):
    """Two functions of the exercises' signatures as the op pair: the forward keeps the images and
    the patch size in its cache, and the backward hands them to `backward` with the upstream gradient."""
    return {"patches_forward": lambda images, patch: (forward(images, patch), {"images": images, "patch": patch}),
            "patches_backward": lambda dout, cache: backward(cache["images"], cache["patch"], dout)}


your_patches = patch_ops(patches_forward, patches_backward) if forward_passed and backward_passed else {}
with ops.using(your_patches, name="yours"):
    print("the patch op:", "yours" if ops.active()["patches_forward"] == "yours" else "npformer's")
    result = train_vit(steps=STEPS)
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
#    Auto-graded: `vit_token_count(height, width, patch_size)`, the number of tokens the encoder reads
#    for images of `height` x `width` pixels cut into `patch_size` x `patch_size` patches. How the
#    accuracy changes stays for the rubric.

# %%
def vit_token_count(height, width, patch_size):
    """The number of tokens the encoder reads for one image: an int."""
    ### BEGIN SOLUTION
    patches = (height // patch_size) * (width // patch_size)
    return patches + 1                              # and the class token
    ### END SOLUTION


# %%
print(check("vit_token_count", vit_token_count))

# %% [markdown]
# 2. Replace the class token by mean pooling over the patches (lesson 17's `ops.masked_mean_pool_forward`
#    and `_backward`, with a mask that is True everywhere): subclass `models.VisionTransformer` and
#    override `forward` and `backward` (read them in `npformer/models/vit.py`). `train_vit` builds
#    its own model, so train yours with `npformer.training.fit` on `make_shapes` images, as
#    `train_vit` does in `npformer/tasks/images.py`. Which works better?
# 3. Turn up the noise. `make_shapes(count, rng, noise=...)` (in `npformer.tasks.images`) draws the
#    shapes with Gaussian noise of that standard deviation on every pixel, where a shape adds 1 to its
#    pixels; the lesson's images have 0.15. Train the same model with `npformer.training.fit`, as
#    `train_vit` does, on noise 0.15, 0.5 and 1.0, and test each on held-out images of its own noise.
#    How does the held-out accuracy fall, and which two shapes does the model confuse most at the
#    highest noise (a confusion matrix)? Why those two?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below.) With $4 \times 4$ patches an $8 \times 8$ image is $N = 64 / 4^2 = 4$ patches, so
#    the encoder reads $4 + 1 = 5$ tokens (the class token included) instead of $16 + 1 = 17$, each
#    patch a vector of $16$ values instead of $4$: attention compares $25$ pairs instead of $289$, and
#    each patch holds a larger piece of a shape. On these shapes the accuracy hardly changes (both are
#    near the top); a full answer gives both token counts and both accuracies after the same number
#    of steps, and does not read a difference of a point on 1,000 test images as significant.
# 2. (Reference code below.) The model without a class token: the patches plus their positions go
#    through the encoder, `ops.masked_mean_pool_forward(hidden, mask)` with an all-True mask averages
#    the $N$ outputs, and the head reads the average; `backward` runs the pooling's backward and
#    sends the gradient to every patch (and to `pos` from row 1 on; `cls_token` is no longer used). A
#    finite-difference check of the new model passes (asserted; entry by entry, or along two random
#    directions a tensor in the quick run, `NPFORMER_QUICK=1`). On these shapes both summaries work
#    (accuracies printed below, same data, same steps, same initial weights); a full answer compares
#    them at equal steps and notes that mean pooling gives every patch the same weight, while the
#    class token can learn where to look.
# 3. (Printed below: each noise's held-out accuracy, then, at the highest, the confusion matrix,
#    each shape's share recognised and the pair confused most.) The accuracy falls as the noise
#    approaches the signal: at 0.15 a shape's pixels stand far above the rest; at 1.0 one pixel of a
#    shape is hardly brighter than a noisy one, and only the sum over a shape's pixels still tells it
#    apart, so a shape with more pixels holds out longer: the hollow square (at least 8 pixels, most
#    often 12 or more) is recognised best, and the three shapes of a single line (the bars and the
#    diagonal, 4 to 8 pixels each) are confused with one another. A full answer
#    reads the matrix rather than the accuracy alone, trains every noise for the same steps from
#    the same initial weights, and explains the ranking by the pixels each shape has.

# %% tags=["instructor"]
from npformer import backend, models  # noqa: E402
from npformer.tasks.images import make_shapes  # noqa: E402
from npformer.training import fit  # noqa: E402

large_patches = train_vit(steps=STEPS, patch=4)
n_tokens = large_patches["model"].config.n_patches + 1
assert n_tokens == 5 and model.config.n_patches + 1 == 17
print(f"answer 1: 4 x 4 patches: {n_tokens} tokens, test accuracy {large_patches['test_accuracy']:.1%}; "
      f"2 x 2 patches: {model.config.n_patches + 1} tokens, {result['test_accuracy']:.1%}")
assert abs(large_patches["test_accuracy"] - result["test_accuracy"]) < 0.05, "the accuracy hardly changes"


# %% tags=["instructor"]
class MeanPooledViT(models.VisionTransformer):
    """The Vision Transformer with the mean of the patches' outputs in place of the class token."""

    def forward(self, images):
        c = self.config
        patches, self._patch_cache = ops.current().patches_forward(images.astype(self.dtype, copy=False), c.patch)
        x = self.patch_embed.forward(patches) + self.pos[1:]  # row 0 of pos belonged to the class token
        hidden = self.encoder.forward(self.embed_dropout.forward(x), None)
        everywhere = backend.xp.ones(hidden.shape[:2], dtype=bool)
        pooled, self._pool_cache = ops.current().masked_mean_pool_forward(hidden, everywhere)
        summary, self._gelu_cache = ops.current().gelu_forward(self.head_fc1.forward(pooled))
        return self.head_fc2.forward(summary)

    def backward(self, dlogits):
        d_summary = ops.current().gelu_backward(self.head_fc2.backward(dlogits), self._gelu_cache)
        d_hidden = ops.current().masked_mean_pool_backward(self.head_fc1.backward(d_summary), self._pool_cache)
        d_x = self.embed_dropout.backward(self.encoder.backward(d_hidden))
        self.grad["pos"][1:] += d_x.sum(axis=0)
        return ops.current().patches_backward(self.patch_embed.backward(d_x), self._patch_cache)


small_config = models.ViTConfig(image_size=4, patch=2, d_model=8, n_heads=2, d_ff=8, n_layers=1)
pooled_check = gradcheck.check_loss(MeanPooledViT(small_config, seed=1, dtype=np.float64),
                                    {"images": np.random.default_rng(1).normal(size=(3, 1, 4, 4))},
                                    np.array([0, 3, 1]), ignore_index=None, name="mean-pooled ViT",
                                    directions=2 if QUICK else None)
assert pooled_check.passed

# train_vit's lines, with the new model: the same images, batches and initial weights
shapes_rng = np.random.default_rng(0)
train_images, train_labels = make_shapes(4000, shapes_rng)
test_images, test_labels = make_shapes(1000, shapes_rng)
pooled_model = MeanPooledViT(models.ViTConfig(), seed=0)


def next_shapes(step):
    rows = shapes_rng.integers(0, len(train_images), size=64)
    return backend.asarray(train_images[rows]), backend.asarray(train_labels[rows])


fit(pooled_model, next_shapes, STEPS, ignore_index=None, betas=(0.9, 0.999))
assert np.array_equal(test_labels, result["test_labels"]), "the same test images as the lesson's model"
with pooled_model.evaluating():
    pooled_accuracy = float((backend.to_numpy(pooled_model.forward(backend.asarray(test_images)).argmax(-1))
                             == test_labels).mean())
print(f"answer 2: mean pooling {pooled_accuracy:.1%}, class token {result['test_accuracy']:.1%} "
      f"({STEPS} steps each)")
assert pooled_accuracy > 0.5, "mean pooling must also classify the shapes far better than chance"

# %% tags=["instructor"]
from npformer.tasks.images import make_shapes  # noqa: E402,F811

noise_steps = 60 if QUICK else STEPS
noise_accuracy = {}
for noise in (0.15, 0.5, 1.0):
    noisy_model = models.VisionTransformer(models.ViTConfig(), seed=0)
    noisy_rng = np.random.default_rng(1)

    def next_noisy(step, noise=noise):
        images, labels = make_shapes(64, noisy_rng, noise=noise)
        return backend.asarray(images), backend.asarray(labels)

    fit(noisy_model, next_noisy, noise_steps, ignore_index=None, betas=(0.9, 0.999))
    held_images, held_labels = make_shapes(1000, np.random.default_rng(2), noise=noise)
    with noisy_model.evaluating():
        guesses = backend.to_numpy(noisy_model.forward(backend.asarray(held_images)).argmax(-1))
    noise_accuracy[noise] = float((guesses == held_labels).mean())
    confusion = np.zeros((len(SHAPES), len(SHAPES)), dtype=int)
    np.add.at(confusion, (held_labels, guesses), 1)
    print(f"answer 3: noise {noise:4.2f}: held-out accuracy {noise_accuracy[noise]:.1%}")
both_ways = confusion + confusion.T
np.fill_diagonal(both_ways, 0)
first, second = np.unravel_index(both_ways.argmax(), both_ways.shape)
recognised = confusion.diagonal() / confusion.sum(axis=1)
print(f"answer 3: at noise 1.0, rows true, columns guessed ({', '.join(SHAPES)}):\n{confusion}")
print("answer 3: recognised at noise 1.0: " + ", ".join(f"{shape} {share:.0%}" for shape, share in zip(SHAPES, recognised))
      + f"; the pair confused most: {SHAPES[first]} / {SHAPES[second]}")
assert noise_accuracy[0.15] > noise_accuracy[1.0], "more noise must cost accuracy"
assert recognised.argmax() == SHAPES.index("hollow square"), "the shape with the most pixels holds out longest"
