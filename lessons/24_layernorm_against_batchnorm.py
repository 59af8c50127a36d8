# %% [markdown]
# # Lesson 24 — Layer norm against batch norm
#
# Lesson 4 built layer norm, and every block since has used it. Convolutional networks normalise
# with **batch norm** (Ioffe and Szegedy, 2015) instead, and a Transformer written by someone who
# knows those first often gets batch norm too. Both compute a mean $\mu$ and a variance
# $\sigma^2$, then return $\gamma \odot (x - \mu) / \sqrt{\sigma^2 + \epsilon} + \beta$. They differ
# only in **which numbers share a mean**, and for sentences of different lengths that difference
# decides whether a sentence's output depends on the other sentences of its batch.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, nn, ops, viz
from npformer.course import EXERCISES, check
from npformer.data import Vocab, encode_pairs, make_batches, pad_rows, tokenize, toy_corpus
from npformer.tokens import PAD_ID

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
rng = np.random.default_rng(0)

# %% [markdown]
# ## What each one averages over
#
# Activations in a Transformer have the shape `(B, T, D)`: $B$ sentences, $T$ positions (the
# longest sentence's length; the shorter ones are padded), $D$ features. Flatten the first two axes
# and they are $B \cdot T$ rows of $D$ numbers:
#
# ```
#                      D features
#                  +----------------+
#   sentence 1, t=0|  . . . . . . . | <- layer norm: one mean and variance per row, over its D numbers
#   sentence 1, t=1|  . . . . . . . |
#   sentence 1, t=2|  <pad>         |    (a padded row is a row like any other)
#   sentence 2, t=0|  . . . . . . . |
#        ...       |       ...      |
#                  +----------------+
#                     ^ batch norm: one mean and variance per column, over all B*T rows
# ```
#
# $$\text{layer norm: } \mu_{b,t} = \frac{1}{D}\sum_{d} x_{b,t,d} \qquad\qquad
# \text{batch norm: } \mu_{d} = \frac{1}{B T}\sum_{b,t} x_{b,t,d}$$
#
# and the same for $\sigma^2$. Layer norm has $B \cdot T$ means, each made of one position's
# numbers. Batch norm has $D$ means, each made of numbers from every position of every sentence
# in the batch, padding included. (`torch.nn.BatchNorm1d` on a `(B, D, T)` tensor averages over
# exactly these $B \cdot T$ rows.)
#
# The activations below are what the first layer of an encoder sees: real English sentences from
# the embedded corpus, embedded with a random table as npformer initialises it (standard deviation
# $D^{-1/2}$, times $\sqrt{D}$), plus the sinusoidal positions of lesson 5. A `<pad>` position
# holds the `<pad>` embedding plus its position's code: numbers like any others.

# %%
D = 32
splits = toy_corpus(n_train=3000, n_valid=10, n_test=10)
vocab = Vocab.build(tokenize(english, "en") for english, _ in splits.train)
sentences = [vocab.encode(tokenize(english, "en")) for english, _ in splits.train]
table = rng.standard_normal((len(vocab), D)) * D**-0.5
positions = backend.to_numpy(ops.positional_encoding(64, D, dtype=np.float64))


def embed(ids):
    """ids (B, T) -> activations (B, T, D): embedding * sqrt(D) + positional code, pads included."""
    return table[ids] * np.sqrt(D) + positions[: ids.shape[1]]


ids = pad_rows([sentences[0], sentences[1], sentences[5]])
x = embed(ids)
print("ids (B, T):", ids.shape, f"with {(ids == PAD_ID).sum()} <pad> positions of {ids.size}")
print("layer norm statistics:", x.mean(axis=-1, keepdims=True).shape, "  one per position")
print("batch norm statistics:", x.mean(axis=(0, 1), keepdims=True).shape, "  one per feature")

# %% [markdown]
# ## Batch norm in NumPy
#
# The forward pass in training mode, over the $B \cdot T$ rows, with $\gamma = 1$ and $\beta = 0$
# (they do not change the argument). `keep`, a `(B, T)` boolean array, restricts the statistics to
# the real positions: a masked batch norm, which is what one would have to write to keep the padding
# out. Layer norm is npformer's `ops.layernorm_forward`.

# %%
def batch_norm(x, keep=None, eps=1e-5):
    """x (B, T, D) -> x normalised per feature with the statistics of the rows in `keep` (all by default)."""
    rows = x.reshape(-1, x.shape[-1]) if keep is None else x[keep]  # (rows, D)
    mean, var = rows.mean(axis=0), rows.var(axis=0)                 # (D,) each
    return (x - mean) / np.sqrt(var + eps)


def layer_norm(x):
    out, _ = ops.layernorm_forward(backend.asarray(x), backend.asarray(np.ones(D)), backend.asarray(np.zeros(D)))
    return backend.to_numpy(out)


NORMS = {"batch norm, padding counted": lambda x, keep: batch_norm(x),
         "batch norm, padding left out": lambda x, keep: batch_norm(x, keep),
         "layer norm": lambda x, keep: layer_norm(x)}

# %% [markdown]
# ## One sentence, three batches
#
# Take one sentence, `s`, of 7 tokens, and put it in three batches of 32: with 31 batch-mates of its
# own length (no padding at all), with the same mates but one of them swapped for a sentence of the
# longest length (every shorter sentence, `s` included, is now padded to it), and with 31 mates
# shorter than `s`. Then normalise and compare `s`'s output with the first batch's.

# %%
lengths = np.array([len(ids) for ids in sentences])
s = sentences[int(np.flatnonzero(lengths == 7)[0])]
same = [sentences[i] for i in np.flatnonzero(lengths == 7)[1:32]]
longest = sentences[int(np.flatnonzero(lengths == lengths.max())[0])]
short = [sentences[i] for i in np.flatnonzero(lengths == lengths.min())[:31]]
print("s =", " ".join(vocab.tokens[i] for i in s))
batches = {"31 mates of its length": same, "one mate swapped for a long one": same[:-1] + [longest],
           "31 shorter mates": short}
outputs, changes = {}, {}
for label, mates in batches.items():
    ids = pad_rows([s] + mates)
    keep = ids != PAD_ID
    x = embed(ids)
    outputs[label] = {norm: f(x, keep)[0, : len(s)] for norm, f in NORMS.items()}  # s is row 0
    print(f"{label:32s} T = {ids.shape[1]:2d}, padding {np.mean(~keep):4.0%} of the positions")
reference = outputs["31 mates of its length"]
print("\nmean |change| of s's normalised values against the batch of its own length:")
print(f"{'':32s}" + "".join(f"{norm:>30s}" for norm in NORMS))
for label in list(batches)[1:]:
    changes[label] = {norm: np.abs(outputs[label][norm] - reference[norm]).mean() for norm in NORMS}
    print(f"{label:32s}" + "".join(f"{changes[label][norm]:30.4f}" for norm in NORMS))
print("\ns's first token, first four features, batch norm with padding counted:")
for label in batches:
    print(f"  {label:32s}", np.round(outputs[label]["batch norm, padding counted"][0, :4], 3))

# %%
swapped = changes["one mate swapped for a long one"]
for label in changes:
    assert changes[label]["layer norm"] < 1e-12, "layer norm of a position never depends on the batch"
    assert changes[label]["batch norm, padding counted"] > 0.05, "batch norm of s depends on its batch-mates"
assert swapped["batch norm, padding counted"] > 5 * swapped["batch norm, padding left out"], \
    "swapping one mate moves s mostly through the padding it brings"
assert changes["31 shorter mates"]["batch norm, padding left out"] > 0.05, "other mates' content moves s too"

# %% [markdown]
# Swapping **one** batch-mate for a longer sentence pads the other 31 sentences, and `s`'s normalised
# values move by the amount in the table; leaving the padding out of the statistics makes the same
# swap almost harmless (the second column), because then only one sentence's content changed. Short
# batch-mates move `s` through both routes: their padding, and their content. Layer norm never
# moves: each position is normalised with its own numbers only.
#
# ## The padding alone
#
# To separate the two routes, keep the 32 sentences fixed and only pad them further, as if a longer
# sentence had joined the batch. Nothing about any sentence has changed, yet:

# %%
ids0 = pad_rows([s] + same)
extra_padding = range(0, 33, 2 if QUICK else 1)
shares, sweep = [], {norm: [] for norm in NORMS}
for extra in extra_padding:
    ids = pad_rows([s] + same, min_length=ids0.shape[1] + extra)
    keep = ids != PAD_ID
    shares.append(np.mean(~keep))
    for norm, f in NORMS.items():
        sweep[norm].append(np.abs(f(embed(ids), keep)[0, : len(s)] - f(embed(ids0), ids0 != PAD_ID)[0]).mean())
for at in (len(extra_padding) // 4, len(extra_padding) - 1):
    print(f"padding {shares[at]:4.0%} of the batch: s moves by "
          + ", ".join(f"{sweep[norm][at]:.3f} ({norm})" for norm in NORMS))
assert max(sweep["layer norm"]) < 1e-12 and max(sweep["batch norm, padding left out"]) < 1e-12
assert np.all(np.diff(sweep["batch norm, padding counted"]) > 0), "more padding, bigger change"

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True,
                                     gridspec_kw={"width_ratios": [1, 1.15]})
ids = pad_rows([sentences[0], sentences[1], sentences[5]])
rows = embed(ids).reshape(-1, D)
limit = np.abs(rows).max()
image = left.imshow(rows, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
figure.colorbar(image, ax=left, label="activation value", shrink=0.8)
T = ids.shape[1]
for b in range(ids.shape[0]):
    n = int((ids[b] != PAD_ID).sum())
    if n == T:  # the longest sentence has no padding
        continue
    left.add_patch(plt.Rectangle((-0.5, b * T + n - 0.5), D, T - n, facecolor="0.75", edgecolor="0.3",
                                 hatch="///", alpha=0.85))
    left.text(D / 2, b * T + (n + T) / 2 - 0.5, "<pad>", ha="center", va="center", fontsize=9)
for b in range(1, ids.shape[0]):
    left.axhline(b * T - 0.5, color="black", linewidth=1.5)
left.set_yticks([b * T + (T - 1) / 2 for b in range(ids.shape[0])],
                [f"sentence {b + 1}" for b in range(ids.shape[0])])
left.set_xlabel(f"feature d (D = {D})")
left.set_ylabel(f"rows: (sentence, position), B x T = {ids.shape[0]} x {T}")
arrow = dict(arrowstyle="<->", color="black", linewidth=2)
left.annotate("", xy=(D - 0.5, 2), xytext=(-0.5, 2), arrowprops=arrow)
left.text(D / 2, 1.3, "layer norm: one row", ha="center", va="bottom", fontsize=9, fontweight="bold",
          bbox=dict(facecolor="white", alpha=0.85, edgecolor="none"))
left.annotate("", xy=(24, len(rows) - 0.5), xytext=(24, -0.5), arrowprops=arrow)
left.text(24.6, len(rows) * 0.62, "batch norm:\none column,\nevery row,\npadding too", ha="left", va="center",
          fontsize=9, fontweight="bold", bbox=dict(facecolor="white", alpha=0.85, edgecolor="none"))
left.set_title("What each normalisation averages over")
styles = {"batch norm, padding counted": dict(color="tab:red", linewidth=2),
          "batch norm, padding left out": dict(color="tab:orange", linestyle="--", linewidth=2),
          "layer norm": dict(color="tab:blue", marker="o", markersize=3, linestyle="none")}
for norm, values in sweep.items():
    right.plot(100 * np.array(shares), values, label=norm, **styles[norm])
right.set(xlabel="padding positions in the batch (% of B x T)",
          ylabel="mean |change| of sentence s's normalised values",
          title="The same 32 sentences, padded further")
right.grid(True, alpha=0.3)
right.legend()
figure.savefig(viz.figures_dir() / "24_layernorm_against_batchnorm.png", dpi=110)

# %% [markdown]
# Left: the `(B, T, D)` box of three sentences, flattened to its rows, and the two directions of
# averaging. Right: the sweep above; batch norm with the padding counted drifts further the more
# padding the batch holds, and the other two stay at zero.
#
# ## Training against evaluation
#
# In training mode batch norm uses the batch's statistics; in evaluation mode it uses **running**
# statistics, averaged over the training batches with a momentum $m = 0.1$, as in PyTorch:
#
# $$\mu_{\text{run}} \leftarrow (1 - m)\,\mu_{\text{run}} + m\,\mu_{\text{batch}}$$
#
# and the same for $\sigma^2$ (PyTorch keeps the unbiased variance there; with hundreds of rows per
# batch the difference does not matter). Running statistics exist because at translation time a
# batch may be one sentence. With the padding counted, they are the statistics of a mixture: real
# tokens, and however much padding the training batches happened to have. A sentence at evaluation
# time, alone and unpadded, is then normalised with statistics that are not its kind's.

# %%
class BatchNorm:
    """Batch norm with running statistics (gamma = 1, beta = 0): batch statistics in training, running ones in eval."""

    def __init__(self, d, momentum=0.1, eps=1e-5):
        self.mean, self.var, self.momentum, self.eps = np.zeros(d), np.ones(d), momentum, eps

    def __call__(self, x, keep=None, training=True):
        if training:
            rows = x.reshape(-1, x.shape[-1]) if keep is None else x[keep]
            mean, var = rows.mean(axis=0), rows.var(axis=0)
            self.mean += self.momentum * (mean - self.mean)
            self.var += self.momentum * (var - self.var)
        else:
            mean, var = self.mean, self.var
        return (x - mean) / np.sqrt(var + self.eps)


train_rows, held_out = np.arange(2500), np.arange(2500, 3000)
STEPS = 60 if QUICK else 300
counted, left_out = BatchNorm(D), BatchNorm(D)
padding_share = []
for step in range(STEPS):  # batches of 32 random training sentences, each padded to its longest
    ids = pad_rows([sentences[i] for i in rng.choice(train_rows, 32, replace=False)])
    counted(embed(ids))
    left_out(embed(ids), keep=ids != PAD_ID)
    padding_share.append(np.mean(ids == PAD_ID))
real_tokens = np.concatenate([embed(np.array([sentences[i]]))[0] for i in train_rows])
gap = {name: np.abs(norm.mean - real_tokens.mean(axis=0)).max() for name, norm in
       [("padding counted", counted), ("padding left out", left_out)]}
print(f"{STEPS} training batches of 32 random sentences: padding {np.mean(padding_share):.0%} of the positions")
for name, norm in [("padding counted", counted), ("padding left out", left_out)]:
    evaluated = np.concatenate([norm(embed(np.array([sentences[i]])), training=False)[0] for i in held_out])
    print(f"{name:17s} running mean off the real tokens' mean by up to {gap[name]:.3f}; held-out sentences "
          f"at eval: feature means up to {np.abs(evaluated.mean(axis=0)).max():.3f} (should be 0), "
          f"standard deviations {evaluated.std(axis=0).min():.2f} to {evaluated.std(axis=0).max():.2f} (should be 1)")
assert gap["padding counted"] > 5 * gap["padding left out"], "the padding biases the running statistics"

# %% [markdown]
# npformer's batching (`data.make_batches`, lesson 13) groups sentences of similar length, which
# cuts the padding down; it does not remove it, and the share depends on the token budget:

# %%
french = Vocab.build(tokenize(sentence, "fr") for _, sentence in splits.train)
pairs = encode_pairs(splits.train, vocab, french, 64)
for budget in (256, 2048):
    epoch = make_batches(pairs, token_budget=budget, rng=np.random.default_rng(0))
    share = sum(int((b.src == PAD_ID).sum()) for b in epoch) / sum(b.src.size for b in epoch)
    print(f"make_batches, token budget {budget:5d}: {len(epoch):4d} batches, padding {share:.1%} of source positions")

# %% [markdown]
# So with batch norm a model's outputs would depend on how the data was batched, at training time
# through the batch statistics and at evaluation through the running ones. Layer norm has neither
# problem: it has no running statistics, and it computes the same thing in training and in
# evaluation, for a batch of one or of a thousand, and for `Transformer.decode_step`, which feeds
# the decoder one position at a time.
#
# ## A notebook bug: one batch norm for every residual
#
# A bug found in Transformer notebooks that use batch norm: one `BatchNorm1d` is created once, in
# `__init__`, and called after every residual connection,
#
# ```python
# self.norm = nn.BatchNorm1d(d_model)          # one module...
# x = self.norm(x + self.attention(x))         # ...after attention
# x = self.norm(x + self.feed_forward(x))      # ...and after the feed-forward, in every layer
# ```
#
# In training mode nothing looks wrong: each call normalises with its own batch's statistics, and
# only $\gamma$ and $\beta$ are shared. But every call also updates the *one* pair of running
# statistics, which end up a blend of the statistics of every residual sum in the network; in
# evaluation mode each residual is then normalised with that blend. Here is a two-layer post-norm
# encoder (npformer's `nn.SelfAttention` and `nn.FeedForward`, at their initial weights), with four
# batch norms (one per residual, padding left out) against one shared by all four:

# %%
layer_rng = np.random.default_rng(1)
layers = [(nn.SelfAttention(D, 4, rng=layer_rng, dtype=np.float64), nn.FeedForward(D, 4 * D, rng=layer_rng,
                                                                                    dtype=np.float64))
          for _ in range(2)]


def encoder(ids, norms, training):
    """The four normalised residual sums of a 2-layer post-norm encoder, each (B, T, D)."""
    x, keep, mask = embed(ids), ids != PAD_ID, ops.padding_mask(backend.asarray(ids))
    normalised = []
    for (attention, feed_forward), (norm1, norm2) in zip(layers, [norms[:2], norms[2:]]):
        x = norm1(x + backend.to_numpy(attention.forward(backend.asarray(x), mask)), keep, training)
        normalised.append(x)
        x = norm2(x + backend.to_numpy(feed_forward.forward(backend.asarray(x))), keep, training)
        normalised.append(x)
    return normalised


shared = BatchNorm(D)
setups = {"one per residual": [BatchNorm(D) for _ in range(4)], "one shared by all four": [shared] * 4}
for step in range(STEPS):
    ids = pad_rows([sentences[i] for i in rng.choice(train_rows, 32, replace=False)])
    trained = {name: encoder(ids, norms, training=True) for name, norms in setups.items()}
    same_in_training = all(np.allclose(a, b) for a, b in zip(*trained.values()))
residuals = ["layer 1 attention", "layer 1 feed-forward", "layer 2 attention", "layer 2 feed-forward"]
print("training mode, last batch: the two setups give the same outputs:", same_in_training)
print("evaluation mode, held-out sentences one at a time:\n"
      "mean |feature mean| of each normalised residual (should be 0)")
print(f"{'':24s}" + "".join(f"{name:>22s}" for name in residuals))
offsets = {}
for name, norms in setups.items():
    evaluated = [encoder(np.array([sentences[i]]), norms, training=False) for i in held_out[:200]]
    offsets[name] = [np.abs(np.concatenate([e[k][0] for e in evaluated]).mean(axis=0)).mean() for k in range(4)]
    print(f"{name:24s}" + "".join(f"{value:22.3f}" for value in offsets[name]))
assert same_in_training, "the shared norm is invisible in training mode"
assert min(offsets["one shared by all four"]) > 5 * max(offsets["one per residual"])

# %% [markdown]
# With one batch norm per residual the normalised sums come out centred at evaluation, up to the
# small offsets of the first row. With one shared by all four, every residual is shifted by the
# second row's amount, in every layer, and only at evaluation time: a training loss, computed in
# training mode, cannot show it. The fix is one norm module
# per residual (npformer's `EncoderLayer` has `norm1` and `norm2`, lesson 9), and for a Transformer,
# layer norm.
#
# ## The backward pass: batch-mates share gradients too
#
# So far batch norm had no learned parameters. With its scale $\gamma$ and shift $\beta$, and the
# padding left out: let `keep` be the `(B, T)` mask of the real positions and $N$ their number;
# for each feature $d$,
#
# $$\mu_d = \frac{1}{N}\sum_{\text{kept } i} x_{i,d}, \qquad
# \sigma_d^2 = \frac{1}{N}\sum_{\text{kept } i} (x_{i,d} - \mu_d)^2, \qquad
# \hat x_{i,d} = \frac{x_{i,d} - \mu_d}{\sqrt{\sigma_d^2 + \epsilon}}, \qquad y_{i,d} = \gamma_d\, \hat x_{i,d} + \beta_d$$
#
# at a kept position $i$, and $y_i = 0$ at a padded one. (The lesson's `batch_norm` normalises the
# padded rows too, with the kept rows' statistics; nothing downstream reads them, and setting them
# to 0 makes the output independent of whatever the padding holds.)
#
# ### Your turn: the forward pass
#
# Write `batchnorm_forward(x, gamma, beta, keep)` for `x` of shape `(B, T, D)`, `keep` a boolean
# `(B, T)` array, `gamma` and `beta` of shape `(D,)`, with the biased variance and
# $\epsilon = 10^{-5}$. It returns `y`, `(B, T, D)`, zero at the padded positions. `x[keep]` gives the
# kept positions as an `(N, D)` array.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("24"))


# %%
def batchnorm_forward(x, gamma, beta, keep, eps=1e-5):
    """Batch norm of x (B, T, D) with the statistics of the kept positions; padded positions give 0."""
    ### BEGIN SOLUTION
    rows = x[keep]                                   # (N, D)
    x_hat = (x - rows.mean(axis=0)) / np.sqrt(rows.var(axis=0) + eps)
    return np.where(keep[..., None], gamma * x_hat + beta, 0.0)
    ### END SOLUTION


# %%
print(check("batchnorm_forward", batchnorm_forward))

# %% [markdown]
# ### Derivation, one path at a time
#
# The chain is lesson 4's, $x \to \mu \to \sigma^2 \to \hat x \to y$, with the roles of the axes
# swapped: there, a mean over the $D$ features of one position; here, a mean over the $N$ kept
# positions of one feature. A kept $x_{i,d}$ reaches the loss along three paths: directly, through
# $x_{i,d} - \mu_d$ in $\hat x_{i,d}$; through the mean $\mu_d$, which every kept $\hat x_{j,d}$ of
# the feature uses; and through the variance $\sigma_d^2$, which they all use too. (And a padded
# $x_{i,d}$: along which paths does it reach the loss?) Each step below is graded on its own and
# takes the final exercise's arguments, `(x, gamma, beta, keep, dout)`, recomputing what it needs from
# `x`. Use $r_d = 1/\sqrt{\sigma_d^2 + \epsilon}$ as a shorthand.
#
# #### Step 1: back through the scale and shift
#
# $y = \gamma \odot \hat x + \beta$ at a kept position and $y = 0$ at a padded one. What is
# $\partial L / \partial \hat x$ at every position, given $dy = \partial L / \partial y$ (`dout`)?
# Write `batchnorm_dx_hat(x, gamma, beta, keep, dout)`, returning it in the shape of `x`.

# %%
def batchnorm_dx_hat(x, gamma, beta, keep, dout, eps=1e-5):
    """dL/dx_hat, shaped like x: (B, T, D)."""
    ### BEGIN SOLUTION
    return dout * gamma * keep[..., None]
    ### END SOLUTION


# %%
print(check("batchnorm_dx_hat", batchnorm_dx_hat))

# %% [markdown]
# #### Step 2: the variance
#
# $\sigma_d^2$ enters $\hat x_{i,d}$ through the factor $r_d$. Differentiate $\hat x_{i,d}$ with
# respect to $\sigma_d^2$, holding $x$ and $\mu$ fixed, and add up the contributions of the positions
# whose outputs depend on it (which are they?). Write `batchnorm_dvar(x, gamma, beta, keep, dout)`,
# returning $\partial L / \partial \sigma^2$ with shape `(D,)`: one number per feature.

# %%
def batchnorm_dvar(x, gamma, beta, keep, dout, eps=1e-5):
    """dL/dvar, one number per feature: shape (D,)."""
    ### BEGIN SOLUTION
    rows = x[keep]                                   # (N, D)
    centered = x - rows.mean(axis=0)
    rstd = 1.0 / np.sqrt(rows.var(axis=0) + eps)
    dx_hat = batchnorm_dx_hat(x, gamma, beta, keep, dout, eps)
    return -0.5 * (dx_hat * centered).reshape(-1, x.shape[-1]).sum(axis=0) * rstd ** 3
    ### END SOLUTION


# %%
print(check("batchnorm_dvar", batchnorm_dvar))

# %% [markdown]
# #### Step 3: the mean
#
# $\mu_d$ reaches the loss along two paths: through $x_{i,d} - \mu_d$ in every kept $\hat x_{i,d}$, and
# through the variance, $\sigma_d^2 = \frac{1}{N}\sum_{\text{kept } i} (x_{i,d} - \mu_d)^2$, whose
# gradient you have from step 2. Add both. (One of the two is exactly zero: which, and why?) Write
# `batchnorm_dmean(x, gamma, beta, keep, dout)`, returning $\partial L / \partial \mu$ with shape `(D,)`.

# %%
def batchnorm_dmean(x, gamma, beta, keep, dout, eps=1e-5):
    """dL/dmean, one number per feature: shape (D,)."""
    ### BEGIN SOLUTION
    rows = x[keep]                                   # (N, D)
    rstd = 1.0 / np.sqrt(rows.var(axis=0) + eps)
    dx_hat = batchnorm_dx_hat(x, gamma, beta, keep, dout, eps)
    direct = -(dx_hat * rstd).reshape(-1, x.shape[-1]).sum(axis=0)
    d_var = batchnorm_dvar(x, gamma, beta, keep, dout, eps)
    through_variance = d_var * (-2.0 * (rows - rows.mean(axis=0))).mean(axis=0)
    return direct + through_variance
    ### END SOLUTION


# %%
print(check("batchnorm_dmean", batchnorm_dmean))

# %% [markdown]
# #### Step 4: the three paths together
#
# Now $x_{i,d}$ itself, at a kept position: directly through $\hat x_{i,d}$ (step 1's gradient times
# $\partial \hat x_{i,d} / \partial x_{i,d}$ with $\mu$ and $\sigma^2$ held fixed), through $\sigma_d^2$
# (step 2's gradient times $\partial \sigma_d^2 / \partial x_{i,d}$) and through $\mu_d$ (step 3's
# gradient times $\partial \mu_d / \partial x_{i,d}$). Add the three. What does a padded position
# receive? And $\gamma_d$ and $\beta_d$, which every kept position of the batch uses?
#
# Write `batchnorm_backward(x, gamma, beta, keep, dout)`: it recomputes the statistics from `x` and
# returns `(dx, dgamma, dbeta)`, shaped like `x`, `gamma` and `beta`. You may call your three steps.
# The check below grades the steps again and names the first wrong one; it compares with npformer's
# reference and with finite differences of the forward, on a padded tail, a sentence of padding only,
# a batch without padding with a single feature, and padded positions that hold values near 50 (which
# must change nothing). Once it passes, it shows npformer's compact form of the same gradient: compare
# it with yours.

# %%
def batchnorm_backward(x, gamma, beta, keep, dout, eps=1e-5):
    """Gradients of batchnorm_forward with respect to x, gamma and beta."""
    ### BEGIN SOLUTION
    kept = keep[..., None]                           # (B, T, 1)
    rows = x[keep]                                   # (N, D)
    count, d_model = len(rows), x.shape[-1]
    centered = x - rows.mean(axis=0)
    rstd = 1.0 / np.sqrt(rows.var(axis=0) + eps)     # (D,)
    direct = batchnorm_dx_hat(x, gamma, beta, keep, dout, eps) * rstd
    through_variance = batchnorm_dvar(x, gamma, beta, keep, dout, eps) * 2.0 * centered / count
    through_mean = batchnorm_dmean(x, gamma, beta, keep, dout, eps) / count
    dx = kept * (direct + through_variance + through_mean)
    dgamma = (dout * centered * rstd * kept).reshape(-1, d_model).sum(axis=0)
    dbeta = (dout * kept).reshape(-1, d_model).sum(axis=0)
    return dx, dgamma, dbeta
    ### END SOLUTION


# %%
print(check("batchnorm_backward", batchnorm_backward, steps=(batchnorm_dx_hat, batchnorm_dvar, batchnorm_dmean)))

# %% [markdown] tags=["instructor"]
# ### The compact form (instructor edition)
#
# With $g = dy \odot \gamma$ at the kept positions (step 1), lesson 4's Jacobian with $N$ in place of
# $D$, $\partial \hat x_{i,d} / \partial x_{j,d} = r_d\,(\delta_{ij} - \frac1N - \frac1N \hat x_{i,d} \hat x_{j,d})$
# for kept $i, j$ (one feature at a time), sums to the same compact form, at every kept position:
#
# $$dx = r\left(g - \overline{g} - \hat x\, \overline{g \odot \hat x}\right), \qquad
# \overline{g} = \frac{1}{N}\sum_{\text{kept } i} g_i, \quad
# \overline{g \odot \hat x} = \frac{1}{N}\sum_{\text{kept } i} g_i \odot \hat x_i$$
#
# and $dx = 0$ at a padded position, whose output is 0 whatever it holds (and which is in no
# statistic). The variance's path through the mean is zero, since $\sum_{\text{kept } i} (x_{i,d} - \mu_d) = 0$.
# The parameters collect their gradient from the kept positions only:
# $d\gamma = \sum_{\text{kept}} dy \odot \hat x$ and $d\beta = \sum_{\text{kept}} dy$.

# %% [markdown]
# Your forward pass, with $\gamma = 1$ and $\beta = 0$, is the lesson's `batch_norm(x, keep)` at
# every real position. Your backward pass answers the question that the forward pass raised for
# training: does the *gradient* of a sentence depend on its batch-mates? Take the three sentences of
# the first section, change the upstream gradient of sentence 2 only, and measure how far the input
# gradient of sentence 1 moves, under batch norm and under layer norm (npformer's
# `ops.layernorm_backward`). The cell uses your functions once they pass, npformer's reference until
# then.

# %%
forward_passed = check("batchnorm_forward", batchnorm_forward, strict=False).passed  # yours, when it passes
backward_passed = check("batchnorm_backward", batchnorm_backward, strict=False).passed
bn_forward = batchnorm_forward if forward_passed else EXERCISES["batchnorm_forward"].reference
bn_backward = batchnorm_backward if backward_passed else EXERCISES["batchnorm_backward"].reference
three = pad_rows([sentences[0], sentences[1], sentences[5]])
three_keep = three != PAD_ID
three_x = embed(three)
ones, zeros = np.ones(D), np.zeros(D)
yours_or_reference = bn_forward(three_x, ones, zeros, three_keep)
assert np.allclose(yours_or_reference[three_keep], batch_norm(three_x, three_keep)[three_keep])
upstream = np.random.default_rng(3).standard_normal(three_x.shape) * three_keep[..., None]
changed = upstream.copy()
changed[1] += 1.0 * three_keep[1][:, None]  # sentence 2's upstream gradient only, at its real positions
ln_cache = ops.layernorm_forward(backend.asarray(three_x), backend.asarray(ones), backend.asarray(zeros))[1]


def layer_norm_dx(dout):
    return backend.to_numpy(ops.layernorm_backward(backend.asarray(dout), ln_cache)[0])


moved = {"batch norm": np.abs(bn_backward(three_x, ones, zeros, three_keep, changed)[0][0]
                              - bn_backward(three_x, ones, zeros, three_keep, upstream)[0][0]).max(),
         "layer norm": np.abs(layer_norm_dx(changed)[0] - layer_norm_dx(upstream)[0]).max()}
source = "your functions" if forward_passed and backward_passed else "npformer's reference"
print(f"batch norm from {source}; "
      "sentence 2's upstream gradient changed, sentence 1's input gradient moves by "
      + ", ".join(f"{value:.2e} under {name}" for name, value in moved.items()))
assert moved["batch norm"] > 1e-3 and moved["layer norm"] == 0

# %% [markdown]
# Under batch norm, sentence 1's gradient moves although nothing about sentence 1 changed: the
# gradients of a feature's mean and variance (your steps 3 and 2) are sums over every kept position
# of the batch, and they reach every kept position's $dx$, so each sentence's gradient carries a
# share of every other sentence's. Under layer norm the statistics are one position's own, and the
# other sentences cannot reach it. In training, then, batch norm couples the sentences of a batch
# twice: in the forward pass through the statistics, and in the backward pass through their
# gradients.
#
# ## Exercises
#
# 1. The masked batch norm keeps the padding out. Does it make `s`'s output independent of its
#    batch? Measure the change of `s` under `batch_norm(x, keep)` when its batch-mates are replaced
#    by other sentences of its length, for batches of 4, 32 and 256. How does the change scale?
# 2. Your `batchnorm_forward` sets the padded outputs to 0. The lesson's `batch_norm(x, keep)`
#    normalises them too, with the kept rows' statistics ($\gamma = 1$, $\beta = 0$). Derive the
#    backward pass of that version and check it with `gradcheck.check_gradients`, with and without
#    `keep`: what do the padded positions receive now, and over which positions do the two sums of
#    the compact form run? Auto-graded part: `batchnorm_padding_normalised_backward(x, keep, dout)`
#    below returns $dx$, `(B, T, D)`, for `batch_norm(x, keep)` as the lesson wrote it
#    ($\epsilon = 10^{-5}$); the two answers in words stay for the rubric.
# 3. Run `BatchNorm` in training mode on a batch of one sentence, then on a single position, as
#    `Transformer.decode_step` would give it. What does it return, and why?
# 4. Measure the padding share of `make_batches` for token budgets from 64 to 16384, and of
#    batches of random sentences of the same sizes. What does the length bucketing buy, and for
#    which budgets does it buy most? Auto-graded part: `padding_share(lengths, batch_of)` below,
#    the share of `<pad>` among all the positions of a set of batches (`lengths[i]` the length of
#    sentence `i`, `batch_of[i]` its batch; each batch is padded to its longest sentence); the
#    table and its reading stay for the rubric.

# %%
def batchnorm_padding_normalised_backward(x, keep, dout, eps=1e-5):
    """Question 2: dx (B, T, D) of batch_norm(x, keep), every position normalised with the kept rows' statistics."""
    ### BEGIN SOLUTION
    rows, count, width = x[keep], keep.sum(), x.shape[-1]
    rstd = 1.0 / np.sqrt(rows.var(axis=0) + eps)
    x_hat = (x - rows.mean(axis=0)) * rstd
    g_mean = dout.reshape(-1, width).sum(axis=0) / count  # over every position: each output reads the statistics
    gx_mean = (dout * x_hat).reshape(-1, width).sum(axis=0) / count
    return rstd * (dout - keep[..., None] * (g_mean + x_hat * gx_mean))  # a padded position: its direct term
    ### END SOLUTION


# %%
print(check("batchnorm_padding_normalised_backward", batchnorm_padding_normalised_backward))


# %%
def padding_share(lengths, batch_of):
    """Question 4: the share of <pad> among the positions of the batches, each padded to its longest."""
    ### BEGIN SOLUTION
    padded = positions = 0
    for batch in np.unique(batch_of):
        batch_lengths = lengths[batch_of == batch]
        positions += batch_lengths.max() * len(batch_lengths)
        padded += (batch_lengths.max() - batch_lengths).sum()
    return padded / positions
    ### END SOLUTION


# %%
print(check("padding_share", padding_share))


# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. No. With the padding left out, `s` still shares its statistics with its batch-mates'
#    content, so other mates of the same length move it. The statistics are means over the $7B$
#    real rows, so their sampling noise, and with it the change of `s`, shrinks roughly like
#    $1/\sqrt{B}$ (by $\sqrt 8 \approx 2.8$ per factor 8, on average over the range). The cell below
#    measures the mean change over ten pairs of random mate sets and fits the slope of
#    $\log(\text{change})$ against $\log B$ (printed; asserted near $-\tfrac12$). Full marks: not
#    independent, only less dependent, at the rate $B^{-1/2}$.
# 2. A padded output $\hat x_p = (x_p - \mu) r$ depends on its own $x_p$ directly and on the kept
#    positions through $\mu$ and $\sigma^2$, as a kept output does; only the statistics leave it
#    out. So a padded position receives its direct term alone, $dx_p = r\, g_p$ (no statistic
#    depends on it), and a kept one $dx_i = r\,(g_i - S_1 - \hat x_i S_2)$ with
#    $S_1 = \frac1N \sum_j g_j$ and $S_2 = \frac1N \sum_j g_j \hat x_j$, where the sums now run over
#    **every** position, padded ones included (every output depends on the statistics), and are
#    still divided by $N$, the number of kept positions. Without `keep`, $N = B \cdot T$ and this is
#    the compact form of the exercise with the means over all the rows. Full marks: both cases, and
#    the remark that the padded positions' upstream gradients now reach the real ones through
#    $S_1$ and $S_2$. The cell below checks this backward with `gradcheck.check_gradients`, with and
#    without `keep`.
# 3. On one sentence it normalises each feature over that sentence's $T$ positions, so the output
#    has zero mean over its own positions and is a different function of each token than at
#    evaluation time; the running statistics take one step towards one sentence's. On one
#    position ($B \cdot T = 1$) the mean is $x$ itself and the variance 0, so it returns
#    $(x - x)/\sqrt{0 + \epsilon} = 0$ in every feature, whatever the token: all information is
#    gone (the running mean then moves towards that token and the running variance towards 0). The
#    cell below prints both. Step-by-step decoding gives exactly that single position, which is why
#    a batch-norm Transformer must decode in evaluation mode, with running statistics, and layer
#    norm needs neither.
# 4. The table printed below. Random batches are padded to their longest member: their padding
#    rises with the budget and soon saturates, once the longest of a batch is nearly the corpus's
#    longest. `make_batches` sorts by length, so up to budgets of a few thousand tokens each batch holds
#    sentences of nearly one length and the padding stays a few per cent: that is where bucketing
#    buys most. At the largest budgets an epoch is only a few batches, each must span many
#    lengths, and the bucketed share climbs back towards the random one. Full marks: both columns
#    measured, and the reading that the gain is largest at small and middle budgets and shrinks
#    when a batch must hold many lengths.

# %% tags=["instructor"]
pool = np.flatnonzero(lengths == 7)
s_row, mates_pool = pool[0], pool[1:]
mates_rng = np.random.default_rng(7)
batch_sizes, mean_change = (4, 32, 256), []
for size in batch_sizes:
    outs = []
    for draw in range(20):  # ten pairs of random mate sets of s's length
        ids_draw = pad_rows([sentences[s_row]] + [sentences[i] for i in mates_rng.choice(mates_pool, size - 1, replace=False)])
        outs.append(batch_norm(embed(ids_draw), ids_draw != PAD_ID)[0])
    mean_change.append(np.mean([np.abs(outs[2 * k] - outs[2 * k + 1]).mean() for k in range(10)]))
slope = np.polyfit(np.log(batch_sizes), np.log(mean_change), 1)[0]
print("answer 1: mean |change| of s, masked batch norm, mates of its length replaced: "
      + ", ".join(f"B = {size}: {change:.4f}" for size, change in zip(batch_sizes, mean_change))
      + f"; slope of log(change) against log(B): {slope:.2f}")
assert -0.7 < slope < -0.3

# %% tags=["instructor"]
from npformer import gradcheck  # noqa: E402


def batch_norm_forward(x, keep=None, eps=1e-5):
    """batch_norm, with the cache its backward pass needs."""
    rows = x.reshape(-1, x.shape[-1]) if keep is None else x[keep]
    mean, var = rows.mean(axis=0), rows.var(axis=0)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mean) * rstd, {"x_hat": (x - mean) * rstd, "rstd": rstd, "keep": keep}


def batch_norm_backward(dout, cache):
    """dx = rstd (g - S1 - x_hat S2) where kept, rstd g where padded; S1, S2: sums over all rows, / N kept."""
    x_hat, rstd, keep = cache["x_hat"], cache["rstd"], cache["keep"]
    in_stats = np.ones(x_hat.shape[:-1], dtype=bool) if keep is None else keep
    n = in_stats.sum()
    g_mean = dout.reshape(-1, dout.shape[-1]).sum(axis=0) / n
    gx_mean = (dout * x_hat).reshape(-1, dout.shape[-1]).sum(axis=0) / n
    return rstd * (dout - in_stats[..., None] * (g_mean + x_hat * gx_mean))


bn_ids = pad_rows([sentences[0], sentences[1], sentences[5]])
bn_x = np.random.default_rng(2).standard_normal(bn_ids.shape + (6,))
assert np.allclose(batch_norm_forward(bn_x)[0], batch_norm(bn_x))
for keep_rows in (None, bn_ids != PAD_ID):
    report_bn = gradcheck.check_gradients(lambda x, keep: batch_norm_forward(x, keep), batch_norm_backward,
                                          {"x": bn_x, "keep": keep_rows}, name="batch_norm")
    print(f"answer 2: batch norm backward, {'all rows' if keep_rows is None else 'padding left out'}: "
          f"{report_bn.table().splitlines()[-1]}")
    assert report_bn.passed

# %% tags=["instructor"]
one_sentence = embed(np.array([s]))                      # (1, 7, D)
out_sentence = BatchNorm(D)(one_sentence)
out_position = BatchNorm(D)(one_sentence[:, :1])         # (1, 1, D): one position, as decode_step gives it
print(f"answer 3: one sentence: feature means over its positions up to {np.abs(out_sentence.mean(axis=(0, 1))).max():.1e}; "
      f"one position: largest |output| {np.abs(out_position).max():.1e} (input up to {np.abs(one_sentence[:, :1]).max():.1f})")
assert np.abs(out_sentence.mean(axis=(0, 1))).max() < 1e-9 and np.abs(out_position).max() == 0

# %% tags=["instructor"]
print("answer 4: padding share of source positions")
print(f"{'budget':>7s} {'batches':>8s} {'make_batches':>13s} {'random batches':>15s}")
bucketing_gain = {}
for budget in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
    epoch = make_batches(pairs, token_budget=budget, rng=np.random.default_rng(0))
    bucketed = sum(int((b.src == PAD_ID).sum()) for b in epoch) / sum(b.src.size for b in epoch)
    order, start, padded, total = np.random.default_rng(0).permutation(len(pairs)), 0, 0, 0
    for b in epoch:  # random sentences, in batches of the same sizes
        src_random = pad_rows([pairs[i][0] for i in order[start:start + len(b.src)]])
        start += len(b.src)
        padded, total = padded + int((src_random == PAD_ID).sum()), total + src_random.size
    bucketing_gain[budget] = padded / total - bucketed
    print(f"{budget:7d} {len(epoch):8d} {bucketed:13.1%} {padded / total:15.1%}")
assert all(bucketing_gain[budget] > 0.15 for budget in (64, 256, 1024, 2048)) and bucketing_gain[16384] < bucketing_gain[256]
