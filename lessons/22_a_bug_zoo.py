# %% [markdown]
# # Lesson 22 — A bug zoo: eleven tutorial mistakes
#
# Lesson 21 hunted bugs in backward passes, where a gradient check points at the wrong tensor. The
# bugs of this lesson are of another kind: the backward passes are right (autograd wrote them, in
# the tutorials they come from), the code runs, the shapes fit, and often the loss falls. What is
# wrong is the model, the data or the measurement. All eleven are of the kinds that Keras and
# PyTorch Transformer tutorials make. Four (bugs 2, 4, 7 and 9) are printed with the public tutorial
# or code where they were found and reported; the other seven are common slips that this lesson does
# not attribute to one source.
#
# `npformer.course.zoo` holds each bug as one small entry: its name, what the tutorial wrote, a
# `buggy` and a `fixed` function with the same signature, and a `symptom`: a function that takes
# either implementation and returns one number, above the entry's `threshold` when the bug is
# there. This lesson and the course's tests use the same entries, so every number printed here is
# the one the tests hold the code to.

# %%
import math
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import ops, viz
from npformer.course import check, zoo
from npformer.nn import DecoderLayer, FeedForward, LayerNorm
from npformer.tasks.translation import greedy_decode
from npformer.tokens import PAD_ID

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
rng = np.random.default_rng(0)


def show(number):
    """Measure entry ``number`` on its buggy and its fixed function, print both, check the claim."""
    bug = zoo.bug(number)
    buggy, fixed = bug.measure(bug.buggy), bug.measure(bug.fixed)
    print(f"bug {bug.number}: {bug.name}\n  the tutorial: {bug.tutorial}\n"
          + (f"  source: {bug.source}\n" if bug.source else "")
          + f"  symptom: {bug.measures}\n  buggy {buggy:.3g}, fixed {fixed:.3g} (the bug shows above {bug.threshold:g})")
    assert buggy > bug.threshold >= fixed, "the symptom must show for the buggy version only"
    return buggy, fixed

# %% [markdown]
# ## Positions
#
# ### Bug 1: cosine in one column
#
# The sinusoidal table pairs a sine and a cosine of the same frequency in columns $2i$ and $2i+1$:
#
# $$PE_{p,2i} = \sin(p\,\omega_i), \qquad PE_{p,2i+1} = \cos(p\,\omega_i), \qquad \omega_i = 10000^{-2i/d}$$
#
# A tutorial computes the angles for every column, takes their sine, and then writes the cosine
# into column 1 only. The table has the right shape and its values lie in $[-1, 1]$; nothing
# fails. But from pair 1 on, column $2i+1$ holds $\sin(p\,\omega_i)$, a copy of its neighbour.
# A (sin, cos) pair is a point on the unit circle that turns by the angle $k\,\omega_i$ when the
# position moves by $k$, so $PE_{p+k}$ is $PE_p$ times one rotation matrix, whatever $p$: that is
# how a model can read relative positions with a linear map. The symptom checks the circle; the
# next cell fits the best single matrix $M$ with $PE_{p+3} \approx PE_p M$ and checks the claim.

# %%
show(1)
for version in (zoo.positional_table_buggy, zoo.positional_table_fixed):
    table = version(50, 16)
    M = np.linalg.lstsq(table[:-3], table[3:], rcond=None)[0]
    copies = sum(np.array_equal(table[:, 2 * i], table[:, 2 * i + 1]) for i in range(8))
    shift_error = np.abs(table[:-3] @ M - table[3:]).max()
    print(f"{version.__name__}: columns that copy their neighbour: {copies} pairs of 8; "
          f"PE[p+3] from PE[p] by one matrix, worst error {shift_error:.1e}")
    if version is zoo.positional_table_fixed:
        assert copies == 0 and shift_error < 1e-9
    else:
        assert copies == 7 and shift_error > 1e-2
assert np.allclose(zoo.positional_table_fixed(50, 16), ops.positional_encoding(50, 16, dtype=np.float64))

# %% [markdown]
# Seven pairs of columns of eight are duplicates, and no single matrix moves the buggy table by
# three positions. The fixed table is npformer's `ops.positional_encoding`. The figure shows the two
# tables, and pair 1 (columns 2 and 3) drawn against each other: a circle when right, a line
# segment when the cosine is missing.

# %%
buggy_table, fixed_table = zoo.positional_table_buggy(50, 16), zoo.positional_table_fixed(50, 16)
figure, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True,
                            gridspec_kw={"width_ratios": [1, 1, 0.8]})
for axis, table, title in ((axes[0], buggy_table, "buggy: cosine in column 1 only"),
                           (axes[1], fixed_table, "fixed: cosine in every odd column")):
    image = axis.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    axis.set(title=title, xlabel="column (dimension)", ylabel="position")
figure.colorbar(image, ax=axes[:2], label="PE value", shrink=0.9)
axes[2].plot(fixed_table[:, 2], fixed_table[:, 3], "o-", markersize=3, label="fixed: (sin, cos)")
axes[2].plot(buggy_table[:, 2], buggy_table[:, 3], "s-", markersize=3, alpha=0.7, label="buggy: (sin, sin)")
axes[2].set(title="pair 1, positions 0 to 49:\ncolumn 3 against column 2", xlabel="PE[p, 2]",
            ylabel="PE[p, 3]", aspect="equal", xlim=(-1.2, 1.2), ylim=(-1.2, 1.2))
axes[2].legend(loc="lower right", fontsize=8)
axes[2].grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "22_positional_tables.png", dpi=110)

# %% [markdown]
# ### Bug 2: the table indexed by batch
#
# PyTorch's own tutorial "Language Modeling with nn.Transformer and torchtext"
# (pytorch.org/tutorials/beginner/transformer_tutorial.html) stores the table as
# `(max_len, 1, d_model)` for inputs laid out as `(seq, batch, d_model)`, and adds
# `self.pe[:x.size(0)]`: right for that layout. The bug is in the many models that copy its
# `PositionalEncoding` into a batch-first network. Used with batch-first inputs,
# `x.size(0)` is the batch size: sentence $b$ gets $PE_b$, the same vector at every one of its
# positions. The broadcast makes the shapes fit, so nothing fails.

# %%
show(2)
x = np.zeros((3, 5, 8))  # three copies of a sentence of five identical tokens
table = ops.positional_encoding(16, 8, dtype=np.float64)
out = zoo.add_positions_buggy(x, table)
spread = np.abs(out - out[:, :1]).max()
print(f"buggy: largest difference between two positions of one sentence: {spread:.1f}; "
      f"row 2 holds PE[2] everywhere: {np.allclose(out[2], table[2])}")
assert spread == 0 and np.allclose(out[2], table[2])

# %% [markdown]
# Inside a sentence every position now looks the same: the model is as blind to word order as it
# would be with no table at all, and it learns instead from where a sentence happens to sit in its
# batch. The fix indexes the table by position, `table[:x.shape[1]]`.
#
# ## Attention
#
# ### Bug 3: $KQ^\top$ instead of $QK^\top$
#
# Row $i$ of the scores must hold query $i$ against every key: $S = QK^\top / \sqrt{d_k}$, of shape
# $T_q \times T_k$, softmax along the keys. Written as $KQ^\top$ the matrix is $T_k \times T_q$. In
# cross-attention, where the target and the source have different lengths, the next product
# fails:

# %%
q = rng.standard_normal((2, 3, 4))   # three target positions
k = rng.standard_normal((2, 5, 4))   # five source positions
v = rng.standard_normal((2, 5, 4))
try:
    zoo.attention_buggy(q, k, v)
    crashed = False
except ValueError as error:
    crashed = True
    print("Tq = 3, Tk = 5:", error)
assert crashed
print("fixed:", zoo.attention_fixed(q, k, v).shape)

# %% [markdown]
# A tutorial that tests it on self-attention, or on equal lengths, sees no error. The softmax then
# runs along the queries, and output $i$ mixes every query: move query 0 alone and the other
# outputs move too.

# %%
show(3)
fixed_out = zoo.attention_fixed(q[:, None], k[:, None], v[:, None])
library_out, _ = ops.attention_forward(q[:, None], k[:, None], v[:, None])
assert np.allclose(fixed_out, library_out)

# %% [markdown]
# ### Bug 4: scaled by $\sqrt{d_\text{model}}$
#
# If the entries of $q$ and $k$ have variance 1, the dot product of two head vectors of length $d_h$
# has variance $d_h$, and dividing by $\sqrt{d_h}$ brings it back to 1. With $H$ heads,
# $d_\text{model} = H d_h$, so dividing by $\sqrt{d_\text{model}}$ shrinks the scores by
# $\sqrt{H}$ more: their standard deviation falls to $1/\sqrt{H}$ and the softmax flattens toward
# the uniform average.

# %%
show(4)
q, k = np.random.default_rng(0).standard_normal((2, 4, 8, 16, 8))   # 8 heads of 8
for version in (zoo.scaled_scores_buggy, zoo.scaled_scores_fixed):
    scores = version(q, k)
    weights, _ = ops.softmax_forward(scores)
    print(f"{version.__name__}: std of the scores {scores.std():.2f}, mean largest weight "
          f"{weights.max(axis=-1).mean():.2f} (a uniform row of 16: {1 / 16:.3f})")
assert abs(zoo.scaled_scores_buggy(q, k).std() - 1 / math.sqrt(8)) < 0.05
flat = ops.softmax_forward(zoo.scaled_scores_buggy(q, k))[0].max(axis=-1).mean()
sharp = ops.softmax_forward(zoo.scaled_scores_fixed(q, k))[0].max(axis=-1).mean()
assert flat < sharp
one_head = zoo.scaled_scores_buggy(q[:, :1], k[:, :1]) - zoo.scaled_scores_fixed(q[:, :1], k[:, :1])
print(f"with one head the two agree: largest difference {np.abs(one_head).max():.1e}")
assert np.abs(one_head).max() == 0

# %% [markdown]
# The buggy scores have standard deviation near $1/\sqrt 8 \approx 0.35$ and the largest weight of
# a row is smaller. The bug also hides from any test that uses a single head, where the two scales
# are the same number.
#
# ### Your turn: fix bug 4
#
# The tutorial's line is `scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)`. Write the
# fixed version as a function of the two tensors alone: `scaled_scores(q, k)` takes the queries
# `q` of shape $(B, H, T_q, d_h)$ and the keys `k` of shape $(B, H, T_k, d_h)$ and returns the scores
# $QK^\top / \sqrt{d_h}$, of shape $(B, H, T_q, T_k)$: row $i$ holds query $i$ against every key
# (bug 3's $KQ^\top$ is wrong too). There is no `d_model` to read: take $d_h$ from the shapes. The
# grader tries four heads with $T_q \ne T_k$ (cross-attention), one head, where the tutorial's
# version is right by accident, and two heads of self-attention, then an unseen case; the cell
# after it measures your function with the zoo's symptom.

# %%
def scaled_scores(q, k):
    """q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> scores (B, H, Tq, Tk) of unit variance for unit-variance q, k."""
    ### BEGIN SOLUTION
    return q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])  # the width of one head
    ### END SOLUTION


# %%
print(check("scaled_scores", scaled_scores))

# %%
passed = check("scaled_scores", scaled_scores, strict=False).passed
fixed_scores = scaled_scores if passed else zoo.scaled_scores_fixed
whose = "your" if passed else "the zoo's"
print(f"bug 4's symptom for {whose} fixed scores: "
      f"{zoo.bug(4).measure(fixed_scores):.3f} (the bug shows above {zoo.bug(4).threshold:g}); "
      f"std of the scores, 8 heads of 8: {fixed_scores(q, k).std():.2f}")
assert not zoo.bug(4).shows(fixed_scores)

# %% [markdown]
# ### Bug 10: cross-attention masked with the decoder's padding
#
# Cross-attention's keys are source positions, so its mask must hide the **source** padding,
# $(B, 1, 1, T_s)$. A tutorial passes the target's padding mask instead. When the source and the
# target lengths differ, the mask does not fit the $(B, H, T_t, T_s)$ scores and attention fails;
# when both are padded to one common length, as many tutorials do, it fits and leaks:

# %%
src_ids = np.array([[5, 6, 7, 8, 9, 10], [5, 6, 0, 0, 0, 0]])
tgt_ids = np.array([[1, 5, 0, 0], [1, 5, 6, 7]])
q = rng.standard_normal((2, 1, 4, 4))                     # (B, H, Tt, Dh)
k, v = rng.standard_normal((2, 2, 1, 6, 4))               # (B, H, Ts, Dh)
try:
    ops.attention_forward(q, k, v, zoo.cross_attention_mask_buggy(src_ids, tgt_ids))
    crashed = False
except ValueError as error:
    crashed = True
    print("Ts = 6, Tt = 4:", error)
assert crashed
show(10)

# %% [markdown]
# A target word of the second sentence puts the printed share of its attention on source `<pad>`
# positions. Padding is not empty: a `<pad>` embedding plus its position is a vector like any
# other. The fix is `padding_mask(src_ids)`; the decoder's padding belongs to its self-attention
# mask.
#
# ## Blocks
#
# ### Bug 5: cross-attention queries from the raw decoder input
#
# In the decoder layer, cross-attention asks "which source words matter for this target position,
# given the target words so far?" The question is the output of the self-attention sub-layer,
# which has read the earlier target words. A Keras tutorial passes the layer's input `x` as the
# query instead, and keeps the self-attention output only on the residual path:

# %%
show(5)
layer = DecoderLayer(16, n_heads=2, d_ff=32, dropout=0.0, dropout_rng=rng, pre_norm=False,
                     activation="relu", rng=rng, dtype=np.float64)
x, memory = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 6, 16))
difference = np.abs(zoo.decoder_layer_fixed(layer, x, memory, ops.causal_mask(5), None)
                    - layer.forward(x, memory, ops.causal_mask(5), None)).max()
print(f"fixed against npformer's DecoderLayer.forward: largest difference {difference:.1e}")
assert difference < 1e-12

# %% [markdown]
# With the bug, in the first layer the query of position $t$ is the embedding of word $t$ and its
# position, nothing else: change an earlier target word and not one cross-attention weight of the
# later positions moves. Nothing fails, and in deeper layers `x` has been through the layers below
# and carries some context, so the model still learns something: which is why the bug survives.
#
# ### Bug 6: a feed-forward block without its activation
#
# Two linear layers in a row are one linear layer:
#
# $$(xW_1 + b_1)W_2 + b_2 = x\,(W_1W_2) + (b_1W_2 + b_2)$$
#
# so the block, with its $2\,d\,d_\text{ff}$ weights, can compute nothing that one $d \times d$
# matrix cannot, and the rank of that matrix is at most $d$:

# %%
show(6)
ffn = FeedForward(8, 32, rng=rng, dtype=np.float64)
x = rng.standard_normal((100, 8))
W1, b1, W2, b2 = ffn.fc1.W, ffn.fc1.b, ffn.fc2.W, ffn.fc2.b
one_matrix = np.abs(zoo.feed_forward_buggy(ffn, x) - (x @ (W1 @ W2) + (b1 @ W2 + b2))).max()
print(f"buggy block against x @ (W1 W2) + (b1 W2 + b2): largest difference {one_matrix:.1e}")
print(f"weights in the block: {W1.size + W2.size}; in the one matrix: {(W1 @ W2).size}, "
      f"of rank {np.linalg.matrix_rank(W1 @ W2)}")
assert one_matrix < 1e-12
assert np.allclose(zoo.feed_forward_fixed(ffn, x), ffn.forward(x))

# %% [markdown]
# The $R^2$ above says the same from the outside: one affine map fitted by least squares explains all
# of the buggy block's output and only part of the fixed one's. A Transformer without its
# activation still trains, but its feed-forward blocks, with $2\,d\,d_\text{ff}$ weights each, add
# nothing that one $d \times d$ matrix could not.
#
# ### Bug 7: layer norm with the unbiased standard deviation and $\beta = 1$
#
# One tutorial's layer norm divides by `x.std(-1)`, which in PyTorch is the unbiased standard
# deviation (it divides by $D - 1$); another initialises $\beta$ to ones. At initialisation the
# output should have mean 0 and variance 1 in every row:

# %%
show(7)
x = rng.standard_normal((1000, 8)) * 3 + 2
for version in (zoo.layer_norm_buggy, zoo.layer_norm_fixed):
    y = version(x)
    print(f"{version.__name__}: row means {y.mean(-1).mean():.3f}, row variances {y.var(-1).mean():.4f}")
variance = zoo.layer_norm_buggy(x).var(-1).mean()
print(f"(D - 1) / D for D = 8: {7 / 8:.4f}; for D = 512: {511 / 512:.4f}")
assert abs(variance - 7 / 8) < 1e-4 and abs(zoo.layer_norm_buggy(x).mean(-1).mean() - 1) < 1e-9
assert np.allclose(zoo.layer_norm_fixed(x), LayerNorm(8, dtype=np.float64).forward(x))

# %% [markdown]
# Two separate errors: $\beta = 1$ shifts every feature by one, and the unbiased standard
# deviation makes the variance $(D-1)/D$. With $D = 512$ that is $0.998$, small enough to pass
# unnoticed, but weights trained with it do not reproduce under `torch.nn.LayerNorm` or npformer's
# `LayerNorm`, which use the biased variance (and put $\epsilon$ inside the square root).
#
# ## Training and measuring
#
# ### Bug 8: the decoder input not shifted
#
# The decoder must predict token $t$ from tokens $0 \dots t-1$: its input is the target shifted one
# place right (starting with `<bos>`), its labels the target shifted left. A tutorial passes the
# same sequence as input and as labels. The causal mask lets position $t$ see token $t$, the
# answer, so the model learns to copy its input. Both models below are trained for
# `zoo.TRAINING_STEPS` steps to reverse four tokens:

# %%
show(8)
models = {}
for label, pairs in (("shifted (fixed)", zoo.decoder_pairs_fixed),
                     ("not shifted (buggy)", zoo.decoder_pairs_buggy)):
    model, losses = zoo.train_reversal(pairs)
    teacher_forced, generated = zoo.teacher_forced_and_generated(model, pairs)
    models[label] = (losses, generated)
    print(f"{label:20s} final training loss {losses[-1]:.4f}; reversed exactly: "
          f"teacher-forced {teacher_forced:.0%}, generated {generated:.0%}")
    assert losses[-1] < 0.05
assert models["not shifted (buggy)"][1] == 0 and models["shifted (fixed)"][1] > 0.9
fixed_losses, buggy_losses = models["shifted (fixed)"][0], models["not shifted (buggy)"][0]
print(f"training loss at step 50: shifted {fixed_losses[49]:.3f}, not shifted {buggy_losses[49]:.3f}")
assert buggy_losses[49] < fixed_losses[49] / 10

src, tgt = zoo.reversal_batch(np.random.default_rng(1), 1, zoo.REVERSAL_VOCAB)
generated = greedy_decode(zoo.train_reversal(zoo.decoder_pairs_buggy)[0], src, 6)[0]
print("source", src[0].tolist(), "-> the unshifted model generates", generated)
assert len(set(generated)) == 1, "one token, copied again and again"

# %% [markdown]
# The unshifted model learns far faster than the right one, ends at the same low training loss,
# and generates nothing useful: at generation time the token it learned to copy is the one it has
# to produce. Its generated sentence is printed above: it is given `<bos>` (id 1), which a search
# never writes (no target holds it), so it writes its next choice, then copies that, and copies
# its copy: one token again and again.
#
# ### Bug 9: a softmax layer, then a loss "from logits"
#
# The model ends with a softmax layer, and the loss is told its inputs are logits, so it applies a
# softmax of its own. A certain, right prediction has probabilities $(1, 0, \dots, 0)$; softmaxed
# again, the right word gets $e / (e + V - 1)$, and the loss can never fall below
#
# $$\ln(e + V - 1) - 1$$

# %%
show(9)
V = 12
floor = math.log(math.e + V - 1) - 1
print(f"floor for V = {V}: {floor:.4f}")
assert abs(zoo.loss_floor(zoo.loss_buggy) - floor) < 1e-6
model = zoo.tiny_transformer(zoo.SANITY_VOCAB)
src, tgt = zoo.reversal_batch(np.random.default_rng(2), 16, zoo.SANITY_VOCAB)
logits = model.forward(src, tgt[:, :-1])
norms = {fn.__name__: np.linalg.norm(fn(logits, tgt[:, 1:])[1]) for fn in (zoo.loss_fixed, zoo.loss_buggy)}
print(f"gradient norm at initialisation (V = {zoo.SANITY_VOCAB}): fixed {norms['loss_fixed']:.2e}, "
      f"buggy {norms['loss_buggy']:.2e}, {norms['loss_fixed'] / norms['loss_buggy']:.0f} times smaller")
assert norms["loss_buggy"] < norms["loss_fixed"] / (zoo.SANITY_VOCAB / 4)

# %% [markdown]
# The gradient shrinks too, here by a factor close to $V$: it passes through a second softmax
# Jacobian, $\operatorname{diag}(p) - pp^\top$, whose entries are about $1/V$ when the
# probabilities $p$ are near uniform. The model learns slowly, and never below the floor.
#
# ### Bug 11: accuracy that counts padding
#
# Accuracy as the mean of `argmax == target` over every position counts the `<pad>` positions,
# where a model that has learned to emit `<pad>` after `<eos>` is always right:

# %%
show(11)
targets = zoo.padded_targets()
rows, columns = np.nonzero(targets != PAD_ID)
predicted = np.full(targets.shape, PAD_ID)
predicted[rows[::2], columns[::2]] = targets[rows[::2], columns[::2]]  # every other real token right
half_right, nothing = np.eye(12)[predicted], np.eye(12)[np.full(targets.shape, PAD_ID)]  # as logits
print(f"share of <pad> in the batch: {(targets == PAD_ID).mean():.0%}")
for version in (zoo.accuracy_buggy, zoo.accuracy_fixed):
    print(f"{version.__name__}: predicting <pad> everywhere {version(nothing, targets):.0%}, "
          f"right on half of the real tokens {version(half_right, targets):.0%}")
assert zoo.accuracy_fixed(half_right, targets) == 0.5 and zoo.accuracy_buggy(half_right, targets) == 0.75

# %% [markdown]
# On a batch that is half padding, the model that knows nothing scores 50%, exactly the share of
# padding, and a model right on half of the real tokens scores 75%. The more padding, the better
# the number looks.
#
# ### Your turn: fix bug 11
#
# Write `token_accuracy(logits, targets)`: `logits` of shape $(B, T, V)$, `targets` of shape
# $(B, T)$ holding token ids, `<pad>` being `PAD_ID` (0). The prediction at a position is the argmax
# of its logits; return, as a float, the share of the real positions (target not `<pad>`) where the
# prediction is the target. Every real token counts once, whatever its sentence's length: it is
# not a mean of the sentences' accuracies. What the model predicts at a `<pad>` position does not
# count, and neither does whether it predicts `<pad>` elsewhere: a `<pad>` predicted at a real
# position is simply wrong. Every batch the grader tries holds at least one real token: the
# lesson's half-padded batch with the model right on every other real token, the same batch with
# `<pad>` predicted everywhere, a single token, and a batch with a row of padding only and a row
# of one token, then an unseen one.

# %%
def token_accuracy(logits, targets):
    """The share of the real (non-<pad>) targets that the argmax of the logits predicts."""
    ### BEGIN SOLUTION
    real = targets != PAD_ID
    right = (logits.argmax(axis=-1) == targets) & real
    return float(right.sum() / real.sum())
    ### END SOLUTION


# %%
print(check("token_accuracy", token_accuracy))

# %%
passed = check("token_accuracy", token_accuracy, strict=False).passed
accuracy = token_accuracy if passed else zoo.accuracy_fixed
whose = "your" if passed else "the zoo's"
print(f"{whose} accuracy: predicting <pad> everywhere "
      f"{accuracy(nothing, targets):.0%}, right on half of the real tokens {accuracy(half_right, targets):.0%}; "
      f"bug 11's symptom {zoo.bug(11).measure(accuracy):.3g}")
assert accuracy(nothing, targets) == 0 and abs(accuracy(half_right, targets) - 0.5) < 1e-12
assert not zoo.bug(11).shows(accuracy)

# %% [markdown]
# ## Two sanity checks that catch bugs early
#
# ### The loss at initialisation: near $\ln V$
#
# An untrained model's logits are small and nearly alike, so its predicted distribution is close
# to uniform and its cross-entropy close to $\ln V$. A start well above means the logits start too
# large, for example an output layer initialised with standard deviation 1 (`torch.randn`) instead
# of Xavier's $\sqrt{2/(d + V)}$:

# %%
V = zoo.SANITY_VOCAB
src, tgt = zoo.reversal_batch(np.random.default_rng(3), 64, V)
model = zoo.tiny_transformer(V)
right = zoo.loss_at_initialisation(model, src, tgt)
model.out_proj.W[...] = np.random.default_rng(4).standard_normal(model.out_proj.W.shape)
too_large = zoo.loss_at_initialisation(model, src, tgt)
untrained = zoo.tiny_transformer(V)
with untrained.evaluating():
    double_softmax = zoo.loss_buggy(untrained.forward(src, tgt[:, :-1]), tgt[:, 1:])[0]
print(f"ln V = {math.log(V):.3f}; at initialisation: Xavier output layer {right:.3f}, "
      f"standard-normal output layer {too_large:.3f}, Xavier with the double softmax {double_softmax:.3f}")
assert abs(right - math.log(V)) < 0.5 and too_large - math.log(V) > 3
assert abs(double_softmax - math.log(V)) < min(0.1, abs(right - math.log(V)))

# %% [markdown]
# The right model starts a little above $\ln V$ (its logits are not exactly equal), the badly
# initialised one several nats above. The double softmax of bug 9 passes this check with the
# closest number of all: softmaxing probabilities near $1/V$ gives probabilities nearer still.
#
# ### Overfitting one batch
#
# A model that can learn must be able to memorise one small batch: the loss on it should fall to
# near zero within a few hundred steps. If it does not, something between the data and the
# gradient is broken. The tiny Transformer ($d = 16$, one layer) on one batch of 16 reversals:

# %%
steps = 100 if QUICK else 300
overfit = {fn: zoo.overfit_one_batch(fn, steps) for fn in (zoo.loss_fixed, zoo.loss_buggy)}
floor = math.log(math.e + V - 1) - 1
print(f"after {steps} steps: right loss {overfit[zoo.loss_fixed][-1]:.4f}; double softmax "
      f"{overfit[zoo.loss_buggy][-1]:.3f}, above its floor {floor:.3f}")
assert overfit[zoo.loss_fixed][-1] < min(0.05, overfit[zoo.loss_fixed][0] / 100)
assert overfit[zoo.loss_buggy][-1] > floor

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
for label, (losses, generated) in models.items():
    left.plot(np.arange(1, len(losses) + 1), losses,
              label=f"{label}: generates {generated:.0%} of new sentences right")
left.set(title="Bug 8: both losses fall (reversal task)", xlabel="step",
         ylabel="training loss (nats per token)", yscale="log")
left.legend(loc="upper right", fontsize=9)
for fn, label in ((zoo.loss_fixed, "right loss"), (zoo.loss_buggy, "softmax, then a loss from logits")):
    right.plot(np.arange(1, steps + 1), overfit[fn], label=label)
right.axhline(floor, color="tab:red", linestyle="--", label=f"floor ln(e + V - 1) - 1 = {floor:.2f}")
right.axhline(math.log(V), color="gray", linestyle=":", label=f"ln V = {math.log(V):.2f}")
right.set(title=f"Overfitting one batch (V = {V}): bug 9 cannot", xlabel="step",
          ylabel="loss on the batch (nats per token)", yscale="log")
right.legend()
for axis in (left, right):
    axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "22_training_checks.png", dpi=110)

# %% [markdown]
# Left: the unshifted decoder's loss falls faster than the shifted one's, to the same level; only
# generation tells them apart. Right: the right loss falls by orders of magnitude, the double
# softmax stays above its floor.
#
# ## The zoo at a glance

# %%
print(f"{'':3s}{'bug':52s}{'buggy':>9s}{'fixed':>10s}{'threshold':>11s}")
for bug in zoo.BUGS:
    buggy, fixed = bug.measure(bug.buggy), bug.measure(bug.fixed)
    print(f"{bug.number:2d} {bug.name:52s}{buggy:9.3g}{fixed:10.2g}{bug.threshold:11g}")
    assert bug.shows(bug.buggy) and not bug.shows(bug.fixed)

# %% [markdown]
# Only two of the eleven raise an error, and only on shapes the tutorials did not try. The others
# are caught by measuring what the code is for: a table that rotates, outputs that read their own
# query, scores of unit variance, a block that is not one matrix, an accuracy that a know-nothing
# model cannot earn, a model that generates and not only fits.
#
# ## Exercises
#
# 1. Bug 4 hides with one head. With how many heads does `zoo.score_scale_error` of the buggy
#    version first exceed the entry's threshold of $0.25$? Derive it from the standard deviation
#    $1/\sqrt{H}$, then check it by building `q` and `k` with different head counts.
#
#    *Auto-graded:* `first_caught_heads(threshold)` returns the smallest head count $H$ (an `int`) at
#    which the buggy scores' symptom $|\ln \operatorname{std}|$, for queries and keys of unit
#    variance, is above `threshold`. The grader tries the zoo's $0.25$ and other thresholds from 0 to 2,
#    none at which rounding decides. *For the rubric:* the derivation, and the measurement with `q` and
#    `k` built for several head counts.

# %%
def first_caught_heads(threshold):
    """The smallest head count H at which bug 4's symptom |ln std| is above threshold."""
    ### BEGIN SOLUTION
    heads = 1
    while 0.5 * math.log(heads) <= threshold:  # std 1/sqrt(H): |ln std| = ln(H) / 2
        heads += 1
    return heads
    ### END SOLUTION


# %%
print(check("first_caught_heads", first_caught_heads))

# %% [markdown]
# 2. For bug 7, drop the $\beta = 1$ part (write a version of `zoo.layer_norm_buggy` with
#    $\beta = 0$). From which $D$ on is its `zoo.not_normalised` below the threshold $10^{-3}$?
#    Would the test still catch the unbiased standard deviation at $D = 512$?
#
#    *Auto-graded:* `first_width_below(threshold)` returns the smallest width $D \ge 2$ (an `int`) at
#    which that version, with $\epsilon = 0$, measures at most `threshold` on rows of $D$ numbers (with
#    $\epsilon = 0$ the measure is the same for any rows). The grader tries thresholds from about
#    0.002 to 0.6, none at which rounding decides. *For the rubric:* what $\epsilon = 10^{-6}$ changes in
#    the zoo's own measure, and the answer at $D = 512$.

# %%
def first_width_below(threshold):
    """The smallest width D >= 2 at which bug 7 with beta = 0 and eps = 0 measures at most threshold."""
    ### BEGIN SOLUTION
    width = 2
    while 1 / width > threshold:  # row mean 0, row variance (D - 1) / D: the measure is 1 / D
        width += 1
    return width
    ### END SOLUTION


# %%
print(check("first_width_below", first_width_below))

# %% [markdown]
# 3. Bug 8 passes both sanity checks: its initial loss is near $\ln V$ and it overfits one batch
#    faster than the right model. Write a check that catches it without training: change the
#    target token at position $t$ and see which logits move (`zoo.tiny_transformer` and
#    `zoo.decoder_pairs_buggy`).
# 4. Add a twelfth entry: a causal mask built with `np.triu` instead of `np.tril`, so that the
#    decoder sees the future and not the past. Write `buggy`, `fixed`, a symptom and a threshold,
#    and check that `zoo.Bug(...).shows` tells the two apart.
#
#    *Auto-graded:* the measurement a symptom can be built on, `future_leak(mask, q, k, v)`. For
#    queries, keys and values of shape `(B, T, D)` and a boolean `mask` of shape `(T, T)` (`mask[i, j]`
#    True when position $i$ may read position $j$; every row allows at least one), compute attention,
#    $\operatorname{softmax}(q k^\top / \sqrt{D})\, v$ with the scores of the pairs the mask hides at
#    $-\infty$, twice: as it is, and with the key and the value of the last position both increased
#    by one. Return the largest absolute change of each position's output, of shape `(B, T)`. The grader
#    tries `np.tril`, `np.triu`, a mask that hides the last key from every position but itself, a band,
#    and random masks. *For the rubric:* `buggy`, `fixed`, a symptom built on `future_leak`, its
#    threshold, and `zoo.Bug(...).shows` telling the two apart.

# %%
def future_leak(mask, q, k, v):
    """(B, T): the largest change of each position's attention output when the last key and value move by 1."""
    ### BEGIN SOLUTION
    def attend(keys, values):
        scores = np.where(mask, q @ keys.swapaxes(-1, -2) / np.sqrt(q.shape[-1]), -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return weights @ values

    moved_k, moved_v = k.copy(), v.copy()
    moved_k[:, -1] += 1.0
    moved_v[:, -1] += 1.0
    return np.abs(attend(moved_k, moved_v) - attend(k, v)).max(axis=-1)
    ### END SOLUTION


# %%
print(check("future_leak", future_leak))

# %% [markdown]
# 5. Bug 11's inflated number depends on the share of padding. Sort 1,000 sentences of random
#    lengths into batches by length, then at random: how does `zoo.accuracy_buggy` of a model that
#    predicts `<pad>` everywhere change between the two?
#
#    *Auto-graded:* `pad_only_accuracy(lengths, batch_size)`. `lengths` of shape `(N,)` holds the
#    sentences' lengths in tokens, in the order in which they are batched, `batch_size` at a time (the
#    last batch may be smaller), each batch padded to its own longest sentence. Return the mean, over
#    the batches, of `zoo.accuracy_buggy` for a model that predicts `<pad>` at every position (a
#    float). The grader tries random lengths, the same lengths sorted, and a small batch by hand.
#    *For the rubric:* the two numbers for 1,000 sentences, and what they say about the metric.

# %%
def pad_only_accuracy(lengths, batch_size):
    """The mean over the batches of zoo.accuracy_buggy for a model that predicts <pad> everywhere."""
    ### BEGIN SOLUTION
    scores = []
    for start in range(0, len(lengths), batch_size):
        batch = lengths[start:start + batch_size]
        positions = len(batch) * batch.max()  # the batch padded to its longest sentence
        scores.append(1 - batch.sum() / positions)  # every <pad> position predicted right
    return float(np.mean(scores))
    ### END SOLUTION


# %%
print(check("pad_only_accuracy", pad_only_accuracy))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. With unit-variance entries the buggy scores have standard deviation $1/\sqrt{H}$, so the
#    symptom is $|\ln H^{-1/2}| = \tfrac12 \ln H$. It exceeds $0.25$ when $\ln H > 0.5$, i.e.
#    $H > \sqrt e \approx 1.65$: already at $H = 2$ ($\tfrac12 \ln 2 \approx 0.35$). The cell below
#    measures it for 1 to 8 heads of 8 and asserts that 2 is the first count above the threshold.
# 2. With $\beta = 0$ the row means are 0 and the row variances are $(D-1)/D$ (times
#    $\sigma^2/(\sigma+\epsilon)^2$, a few $10^{-6}$ off 1), so the symptom is about $1/D$: below
#    $10^{-3}$ only from $D \approx 1000$ on (the exact $D$ for the symptom's rows, widened to $D$
#    columns, is printed below). At $D = 512$ it is $1/512 \approx 2 \times 10^{-3}$, twice the
#    threshold, so the test still catches the unbiased standard deviation there, but only by a
#    factor of 2; the entry's test uses $D = 8$, where the symptom is $1/8$.
# 3. The logits that predict a token must not depend on that token. Change target token $t$ in a
#    batch, find the position whose target it is, and compare the untrained model's logits there
#    before and after. With the shifted pairs token $t$ is the input of position $t$ only and the
#    target of position $t - 1$, which the causal mask keeps from seeing it: the change is exactly
#    0. Unshifted, it is input and target of the same position, and its logits move. The cell below
#    runs this check on both pair functions (no training).
# 4. Reference code below: `buggy` and `fixed` build the mask with `np.triu` and `np.tril`; the
#    symptom moves the key and value of the last position only and measures the largest change in
#    the outputs of the earlier positions (0 with a causal mask, since none of them may read it);
#    threshold $10^{-9}$. A full-marks answer measures what the mask is for (no position reads a
#    later one), not the mask's entries, and shows `shows(buggy)` true and `shows(fixed)` false.
# 5. For a model that predicts `<pad>` everywhere, `accuracy_buggy` is exactly the batch's share of
#    `<pad>`. Batches of similar lengths hold little padding, random batches are padded to their
#    longest member, so the inflated accuracy is far higher with random batching (both printed
#    below, for 1,000 lengths drawn uniformly from 1 to 40 and batches of 32). The right accuracy
#    is 0 in both cases: a metric that depends on how the data was batched is measuring the batching.

# %% tags=["instructor"]
scale_errors = {}
for heads in range(1, 9):
    q_heads, k_heads = np.random.default_rng(0).standard_normal((2, 4, heads, 16, 8))
    scale_errors[heads] = abs(math.log(zoo.scaled_scores_buggy(q_heads, k_heads).std()))
first_caught = min(heads for heads, error in scale_errors.items() if error > zoo.bug(4).threshold)
print("answer 1: |ln std| of the buggy scores by head count:",
      ", ".join(f"H={heads} {error:.3f}" for heads, error in scale_errors.items()), f"-> first above 0.25: H = {first_caught}")
assert first_caught == 2 and all(abs(error - 0.5 * math.log(heads)) < 0.05 for heads, error in scale_errors.items())

# %% tags=["instructor"]
def layer_norm_unbiased_only(x, eps=1e-6):
    """zoo.layer_norm_buggy with beta = 0: only the unbiased standard deviation is left."""
    std = x.std(axis=-1, ddof=1, keepdims=True)
    return (x - x.mean(axis=-1, keepdims=True)) / (std + eps)


def not_normalised_at(width):
    """zoo.not_normalised on rows of `width` numbers instead of 8 (the same construction)."""
    rows_rng = np.random.default_rng(0)
    x_rows = rows_rng.uniform(-5, 5, (100, 1)) + rows_rng.uniform(1, 5, (100, 1)) * rows_rng.standard_normal((100, width))
    y_rows = layer_norm_unbiased_only(x_rows)
    return np.abs(y_rows.mean(axis=-1)).max() + np.abs(y_rows.var(axis=-1) - 1).max()


assert not_normalised_at(8) == zoo.not_normalised(layer_norm_unbiased_only)
first_passing = next(width for width in range(2, 2000) if not_normalised_at(width) <= zoo.bug(7).threshold)
print(f"answer 2: beta = 0, unbiased std: symptom {not_normalised_at(8):.4f} at D = 8, {not_normalised_at(512):.2e} "
      f"at D = 512; first below 1e-3 at D = {first_passing}")
assert 990 < first_passing < 1020 and not_normalised_at(512) > zoo.bug(7).threshold

# %% tags=["instructor"]
def answer_leak(decoder_pairs, t=2):
    """Change target token t: the largest change of the untrained model's logits at the position
    whose target it is. 0 when that position cannot see the token it must predict."""
    leak_model = zoo.tiny_transformer(zoo.REVERSAL_VOCAB)
    leak_src, leak_tgt = zoo.reversal_batch(np.random.default_rng(6), 8, zoo.REVERSAL_VOCAB)
    changed = leak_tgt.copy()
    changed[:, t] = (changed[:, t] - 3) % 8 + 4  # another ordinary token
    (tgt_in, tgt_out), (changed_in, changed_out) = decoder_pairs(leak_tgt), decoder_pairs(changed)
    position = np.flatnonzero((tgt_out != changed_out).any(axis=0))
    with leak_model.evaluating():
        before = leak_model.forward(leak_src, tgt_in)[:, position]
        after = leak_model.forward(leak_src, changed_in)[:, position]
    return float(np.abs(after - before).max())


leaks = {pairs.__name__: answer_leak(pairs) for pairs in (zoo.decoder_pairs_fixed, zoo.decoder_pairs_buggy)}
print("answer 3: largest change of the logits that predict the changed token:",
      ", ".join(f"{name} {leak:.1e}" for name, leak in leaks.items()))
assert leaks["decoder_pairs_fixed"] == 0 and leaks["decoder_pairs_buggy"] > 1e-3

# %% tags=["instructor"]
def causal_mask_buggy(T):
    return np.triu(np.ones((T, T), dtype=bool))  # the upper triangle: each position sees the future


def causal_mask_fixed(T):
    return np.tril(np.ones((T, T), dtype=bool))  # the lower triangle: each position sees the past


def leak_symptom(causal_mask):
    """Move the key and value of the last position only: the largest change in the outputs of the
    earlier positions (future_leak, above). No position may read a later one: 0 when right."""
    q_leak, k_leak, v_leak = np.random.default_rng(0).standard_normal((3, 2, 5, 4))
    return future_leak(causal_mask(5), q_leak, k_leak, v_leak)[:, :-1].max()


twelfth = zoo.Bug(12, "causal mask built with np.triu", "mask = np.triu(np.ones((T, T)))", causal_mask_buggy,
                  causal_mask_fixed, leak_symptom, 1e-9, "largest change of earlier outputs when the last position moves")
print(f"answer 4: bug 12 symptom: buggy {twelfth.measure(twelfth.buggy):.3g}, fixed {twelfth.measure(twelfth.fixed):.3g}")
assert twelfth.shows(twelfth.buggy) and not twelfth.shows(twelfth.fixed)
assert np.array_equal(causal_mask_fixed(5), ops.causal_mask(5))

# %% tags=["instructor"]
length_rng = np.random.default_rng(0)
sentence_lengths = length_rng.integers(1, 41, 1000)


def know_nothing_accuracy(order, size=32):
    """Mean accuracy_buggy, over batches of `size` sentences taken in `order`, of a model that predicts <pad> everywhere."""
    scores = []
    for start in range(0, len(order), size):
        batch_lengths = sentence_lengths[order[start:start + size]]
        batch_targets = np.full((len(batch_lengths), batch_lengths.max()), PAD_ID)
        for row_index, length in enumerate(batch_lengths):
            batch_targets[row_index, :length] = 5  # any real token
        scores.append(zoo.accuracy_buggy(np.eye(12)[np.full(batch_targets.shape, PAD_ID)], batch_targets))
    return float(np.mean(scores))


by_length, at_random = know_nothing_accuracy(np.argsort(sentence_lengths)), know_nothing_accuracy(length_rng.permutation(1000))
print(f"answer 5: accuracy_buggy of a model that predicts <pad> everywhere: batches sorted by length {by_length:.1%}, "
      f"random batches {at_random:.1%}")
assert by_length < 0.1 and at_random > 0.3
assert abs(by_length - pad_only_accuracy(np.sort(sentence_lengths), 32)) < 1e-12
