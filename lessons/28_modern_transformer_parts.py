# %% [markdown]
# # Lesson 28 — The parts of a 2023 decoder: RMSNorm, rotary positions, SwiGLU and grouped-query attention
#
# Lesson 18's language model is the 2017 block under a causal mask. The decoders trained since
# (LLaMA, Mistral, Qwen) keep the idea and replace four parts:
#
# | part | 2017 (lesson 18) | LLaMA-style (this lesson) |
# | --- | --- | --- |
# | normalisation | LayerNorm: subtract the mean, divide by the standard deviation, scale, shift | RMSNorm: divide by the root mean square, scale |
# | positions | a learned vector added to each token's embedding | queries and keys *rotated* by an angle proportional to the position (RoPE) |
# | feed-forward | `fc2(gelu(fc1(x)))` | `down(silu(gate(x)) * up(x))` (SwiGLU) |
# | attention heads | every query head has its own keys and values | groups of query heads share one key/value head (GQA) |
#
# and they drop the dropout and most biases, and train with AdamW, whose decay touches the weight
# matrices and the embedding but not the gains. npformer's version also ties the output projection
# to the embedding and has no bias at all (as GPT-2, Gemma and the small Qwen and LLaMA 3.2 models tie
# theirs). You derive the
# backward pass of each new part, check it against finite differences and the grader, then run the
# whole `models.ModernLanguageModel` on your own functions and race it against lesson 18's model.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, models, ops, optim, viz
from npformer.course import check, student_ops
from npformer.tasks.language_model import sample, train_french_lm

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
rng = np.random.default_rng(0)

# %% [markdown]
# ## RMSNorm
#
# Zhang and Sennrich (2019) dropped layer norm's re-centring and kept comparable quality at less cost.
# Over the last axis, of size $D$, with $\epsilon = 10^{-5}$ (LLaMA 2's) inside the root, as PyTorch's
# `rms_norm` puts it:
#
# $$m = \frac{1}{D}\sum_i x_i^2, \qquad r = \frac{1}{\sqrt{m + \epsilon}}, \qquad \hat x_i = x_i\, r, \qquad y_i = \gamma_i\, \hat x_i$$
#
# with a learned scale $\gamma$ (`gamma`, shape `(D,)`) and no shift: the chain $x \to m \to r \to \hat x \to y$.
# One fewer statistic means one fewer path: each $x_j$ reaches the loss directly, through
# $\hat x_j = x_j r$, and through the mean square $m$ and its $r$, which every $\hat x_i$ of its row uses.
#
# ### Step 1: the gradient of $r$
#
# Hold $x$ fixed and treat $r$ as the row's one extra input. What is $\partial L / \partial r$, given
# $dy = \partial L / \partial y$ (`dout`)? Write `rmsnorm_d_rstd(x, gamma, dout)`, returning one number
# per row, shape `(..., 1)`.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("28"))


# %%
def rmsnorm_d_rstd(x, gamma, dout):
    """dL/dr for r = 1/sqrt(mean(x^2) + eps): one number per row, shape (..., 1)."""
    ### BEGIN SOLUTION
    return (dout * gamma * x).sum(axis=-1, keepdims=True)
    ### END SOLUTION


# %%
print(check("rmsnorm_d_rstd", rmsnorm_d_rstd))

# %% [markdown]
# ### Step 2: the mean square
#
# One step further back: $m$ reaches the loss only through $r = (m + \epsilon)^{-1/2}$. Write
# `rmsnorm_d_mean_square(x, gamma, dout)`, returning $\partial L / \partial m$, one number per row,
# shape `(..., 1)`. You may call your step 1.

# %%
def rmsnorm_d_mean_square(x, gamma, dout):
    """dL/dm for m = mean(x^2), r = 1/sqrt(m + eps): one number per row, shape (..., 1)."""
    ### BEGIN SOLUTION
    mean_square = (x * x).mean(axis=-1, keepdims=True)
    return -0.5 * rmsnorm_d_rstd(x, gamma, dout) * (mean_square + 1e-5) ** -1.5
    ### END SOLUTION


# %%
print(check("rmsnorm_d_mean_square", rmsnorm_d_mean_square))

# %% [markdown]
# ### Step 3: both paths together
#
# Now $x_j$ itself: directly through $\hat x_j = x_j r$ ($r$ held fixed), and through $m$ (step 2's
# gradient times $\partial m / \partial x_j$). Write `rmsnorm_backward(x, gamma, dout)` for
# `x` of shape `(..., D)`, returning `(dx, dgamma)` with `dgamma` of shape `(D,)` (every row uses the same
# gamma). You may call your steps. The check grades the steps again, compares with npformer and with
# finite differences (on a batch, one token, and rows of two numbers), and shows npformer's compact
# form once yours passes.

# %%
def rmsnorm_backward(x, gamma, dout):
    """Gradients of y = gamma * x / sqrt(mean(x^2) + 1e-5) with respect to x and gamma."""
    ### BEGIN SOLUTION
    d_model = x.shape[-1]
    rstd = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)
    direct = dout * gamma * rstd
    through_mean_square = rmsnorm_d_mean_square(x, gamma, dout) * 2.0 * x / d_model
    dgamma = (dout * x * rstd).reshape(-1, d_model).sum(axis=0)
    return direct + through_mean_square, dgamma
    ### END SOLUTION


# %%
print(check("rmsnorm_backward", rmsnorm_backward, steps=(rmsnorm_d_rstd, rmsnorm_d_mean_square)))

# %% [markdown] tags=["instructor"]
# ### The compact form (instructor edition)
#
# With $g = dy \odot \gamma$ and $\partial r / \partial x_j = -r^3 x_j / D$, the two paths are
# $g_j r$ and $-\frac{r^3 x_j}{D}\sum_i g_i x_i = -r\,\hat x_j \operatorname{mean}(g \odot \hat x)$:
#
# $$dx = r\,\bigl(g - \hat x \operatorname{mean}(g \odot \hat x)\bigr), \qquad d\gamma = \sum_{\text{rows}} dy \odot \hat x.$$
#
# It is layer norm's compact form (lesson 4) without its $-\operatorname{mean}(g)$ term: no mean is
# subtracted, so no shift of the row is undone.

# %% [markdown]
# ## Rotary positions
#
# Lesson 5 *added* a position vector to each embedding. Su et al. (2021) *rotate* the queries and keys
# instead, inside every attention layer. Cut a head's $D_h$ numbers (even) into pairs
# $(x_{2i}, x_{2i+1})$; row $t$ of a sequence that starts at position $p_0$ sits at position
# $p = p_0 + t$, and pair $i$ turns by the angle $p\,\theta_i$, $\theta_i = 10000^{-2i/D_h}$ (lesson 5's
# frequencies):
#
# $$\begin{pmatrix} y_{2i} \\ y_{2i+1} \end{pmatrix} = \begin{pmatrix} \cos p\theta_i & -\sin p\theta_i \\ \sin p\theta_i & \cos p\theta_i \end{pmatrix} \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}$$
#
# A rotation keeps the dot product of two vectors turned by the same angle, so a query at position $m$
# and a key at position $n$ score $q^\top R_m^\top R_n k = q^\top R_{n-m} k$: **the score depends on
# the distance $n - m$, not on where the pair sits.** The cell below measures that, on the same $q$
# and $k$ placed at every pair of positions, against lesson 5's added sinusoids.

# %%
head_dim, positions = 16, 48
q_vector, k_vector = rng.standard_normal(head_dim), rng.standard_normal(head_dim)
at_every_position = np.arange(positions)
rotated_q = ops.rope_forward(np.tile(q_vector, (positions, 1)))[0]   # row p: q at position p
rotated_k = ops.rope_forward(np.tile(k_vector, (positions, 1)))[0]
rope_scores = rotated_q @ rotated_k.T                                  # (query position m, key position n)
table = ops.positional_encoding(positions, head_dim, dtype=np.float64)
added_scores = (q_vector + table) @ (k_vector + table).T


def spread_along_diagonals(scores):
    """The largest range of the scores among pairs at the same distance n - m."""
    return max(np.ptp(np.diagonal(scores, offset)) for offset in range(-positions + 2, positions - 1))


rope_spread, added_spread = spread_along_diagonals(rope_scores), spread_along_diagonals(added_scores)
print(f"scores at the same distance n - m differ by at most {rope_spread:.1e} with rotations, "
      f"{added_spread:.2f} with added sinusoids")
assert rope_spread < 1e-10 < 0.1 < added_spread

figure, axes = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
for axis, scores, title in ((axes[0], rope_scores, f"rotated (RoPE): spread {rope_spread:.0e}"),
                            (axes[1], added_scores, f"added sinusoids: spread {added_spread:.1f}")):
    image = axis.imshow(scores, cmap="RdBu_r")
    axis.set(title=title, xlabel="key position n", ylabel="query position m")
    figure.colorbar(image, ax=axis, shrink=0.8)
figure.suptitle("the same q and k at every pair of positions: the score q . k")
figure.savefig(viz.figures_dir() / "28_rope_relative.png", dpi=110)

# %% [markdown]
# The left map is constant along every diagonal (the same distance $n - m$); the right one is not.
#
# ### Step 1: one pair
#
# Take one pair $(x_0, x_1)$ and one angle $\alpha$: $y = R(\alpha)\, x$, with $R(\alpha)$ the matrix
# above. Write `rope_pair_backward(pair, angle, dout)` for `pair` of shape `(N, 2)` (one pair a row),
# `angle` of shape `(N,)` (each pair its own) and `dout` $= \partial L / \partial y$ shaped like `pair`,
# returning $\partial L / \partial x$, shaped like `pair`. Each pair is multiplied by a $2 \times 2$
# matrix: what does lesson 2's backward pass of a matrix product send back, and what is that for this
# matrix? Check your answer by hand on a quarter turn, $\alpha = \pi/2$, where $y = (-x_1, x_0)$.

# %%
def rope_pair_backward(pair, angle, dout):
    """dL/dpair (N, 2) for y = R(angle) pair, each row (x0, x1) turned by its own angle (N,)."""
    ### BEGIN SOLUTION
    cos, sin = np.cos(angle), np.sin(angle)
    return np.stack([cos * dout[:, 0] + sin * dout[:, 1], -sin * dout[:, 0] + cos * dout[:, 1]], axis=-1)
    ### END SOLUTION


# %%
print(check("rope_pair_backward", rope_pair_backward))

# %% [markdown]
# ### Step 2: every pair of every row, and the cache's offset
#
# The forward pass is `ops.rope_forward(x, offset)` for `x` of shape `(B, H, T, Dh)`: row $t$ turns by
# $(\text{offset} + t)\,\theta_i$. During generation a KV cache feeds one new position at a time, so a
# step's single row sits at position `offset` = the number of positions already cached, and must turn
# by exactly the angle the full forward pass gives that position.
#
# Write `rope_backward(x, offset, dout)`, returning `dx` shaped like `x`. You may call your step on
# every pair at once. The grader's cases include one new position after nine cached ones.

# %%
def rope_backward(x, offset, dout):
    """dL/dx of the rotation of each pair (x[2i], x[2i+1]) of row t by (offset + t) * 10000^(-2i/Dh)."""
    ### BEGIN SOLUTION
    length, head_dim = x.shape[-2], x.shape[-1]
    theta = 10000.0 ** (-np.arange(0, head_dim, 2) / head_dim)
    angles = (offset + np.arange(length))[:, None] * theta                # (T, Dh/2): row t, pair i
    pairs = dout.reshape(*dout.shape[:-1], head_dim // 2, 2)               # (..., T, Dh/2, 2)
    angles = np.broadcast_to(angles, pairs.shape[:-1])
    d_pairs = rope_pair_backward(pairs.reshape(-1, 2), angles.reshape(-1), pairs.reshape(-1, 2))
    return d_pairs.reshape(x.shape)
    ### END SOLUTION


# %%
print(check("rope_backward", rope_backward, steps=(rope_pair_backward,)))

# %% [markdown]
# ## SwiGLU
#
# Shazeer (2020) replaced the feed-forward network's activation by a *gate*: two projections of
# $x$, one through SiLU, multiplied entry by entry, then projected back:
#
# $$\operatorname{silu}(a) = a\,\sigma(a), \quad \sigma(a) = \frac{1}{1 + e^{-a}}, \qquad
# y = \operatorname{silu}(a) \odot b, \quad a = x W_\text{gate},\ b = x W_\text{up}, \qquad
# \text{out} = y\, W_\text{down}$$
#
# `ops.swiglu_forward(x, W_gate, W_up)` computes $y$ from `x (..., D)` and `W_gate`, `W_up (D, F)`; the
# third product is an ordinary linear layer (lesson 2).
#
# ### Step 1: SiLU alone
#
# Write `silu_backward(gate, dout)`, returning $\partial L / \partial a$ for $y = \operatorname{silu}(a)$,
# shaped like `gate`. $\operatorname{silu}$ is a product of two functions of $a$; you will need
# $\sigma'(a)$ in terms of $\sigma(a)$.

# %%
def silu_backward(gate, dout):
    """dL/dgate for y = gate * sigmoid(gate)."""
    ### BEGIN SOLUTION
    sigmoid = 1.0 / (1.0 + np.exp(-gate))
    return dout * sigmoid * (1.0 + gate * (1.0 - sigmoid))
    ### END SOLUTION


# %%
print(check("silu_backward", silu_backward))

# %% [markdown]
# ### Step 2: the gate's pre-activation
#
# $a = x W_\text{gate}$ reaches $y$ only through $\operatorname{silu}(a)$, multiplied by $b$. Write
# `swiglu_d_gate(x, W_gate, W_up, dout)`, returning $\partial L / \partial a$, shaped like $a$
# (`(..., F)`), for `dout` $= \partial L / \partial y$. You may call your step 1.

# %%
def swiglu_d_gate(x, W_gate, W_up, dout):
    """dL/da for y = silu(a) * b, a = x @ W_gate, b = x @ W_up: shaped like a (..., F)."""
    ### BEGIN SOLUTION
    return silu_backward(x @ W_gate, dout * (x @ W_up))
    ### END SOLUTION


# %%
print(check("swiglu_d_gate", swiglu_d_gate))

# %% [markdown]
# ### Step 3: the linear branch
#
# And $b = x W_\text{up}$: write `swiglu_d_up(x, W_gate, W_up, dout)`, returning $\partial L / \partial b$,
# shaped like $b$.

# %%
def swiglu_d_up(x, W_gate, W_up, dout):
    """dL/db for y = silu(a) * b, a = x @ W_gate, b = x @ W_up: shaped like b (..., F)."""
    ### BEGIN SOLUTION
    gate = x @ W_gate
    return dout * gate / (1.0 + np.exp(-gate))
    ### END SOLUTION


# %%
print(check("swiglu_d_up", swiglu_d_up))

# %% [markdown]
# ### Step 4: the input and the weights
#
# Write `swiglu_backward(x, W_gate, W_up, dout)` for $y = \operatorname{silu}(x W_\text{gate}) \odot (x W_\text{up})$,
# with `dout` of the shape of $y$, returning `(dx, dW_gate, dW_up)`. `x` may have any number of
# leading axes (a batch of sequences, or rows); every row uses the same two matrices. You may call
# your steps.

# %%
def swiglu_backward(x, W_gate, W_up, dout):
    """Gradients of y = silu(x @ W_gate) * (x @ W_up) with respect to x, W_gate and W_up."""
    ### BEGIN SOLUTION
    gate, up = x @ W_gate, x @ W_up
    d_gate = swiglu_d_gate(x, W_gate, W_up, dout)
    d_up = swiglu_d_up(x, W_gate, W_up, dout)
    rows = x.reshape(-1, x.shape[-1])
    dW_gate = rows.T @ d_gate.reshape(-1, gate.shape[-1])
    dW_up = rows.T @ d_up.reshape(-1, up.shape[-1])
    return d_gate @ W_gate.T + d_up @ W_up.T, dW_gate, dW_up
    ### END SOLUTION


# %%
print(check("swiglu_backward", swiglu_backward, steps=(silu_backward, swiglu_d_gate, swiglu_d_up)))

# %% [markdown]
# ### The whole sublayer
#
# In a block, the unit is one piece of the feed-forward sublayer: a down projection $W_\text{down}$
# of shape $(F, D)$ brings its output back to the model's width, and the residual path adds the input
# (the pre-norm block normalises the input of the unit, not the path; here the input is taken as
# already normalised):
#
# $$y = x + \bigl(\operatorname{silu}(x W_\text{gate}) \odot (x W_\text{up})\bigr)\, W_\text{down}$$
#
# with `x` of shape `(..., D)` (any number of leading axes, none included), so `y` is `(..., D)`. Write
# `swiglu_ffn_backward(x, W_gate, W_up, W_down, dout)`, returning `(dx, dW_gate, dW_up, dW_down)`, each
# shaped like its input. Which quantities of the forward pass does the backward pass need, and along
# how many paths does `dout` reach `x`? You may call your `swiglu_backward` (your variant's unit, if you
# have one). The check compares every gradient with npformer's and with finite differences.

# %%
def swiglu_ffn_backward(x, W_gate, W_up, W_down, dout):
    """(dx, dW_gate, dW_up, dW_down) of y = x + (silu(x @ W_gate) * (x @ W_up)) @ W_down."""
    ### BEGIN SOLUTION
    gate = x @ W_gate                                            # (..., F): the forward, again
    hidden = gate / (1.0 + np.exp(-gate)) * (x @ W_up)           # (..., F)
    rows = hidden.reshape(-1, hidden.shape[-1])                  # every leading position, one row each
    dW_down = rows.T @ dout.reshape(-1, dout.shape[-1])          # (F, D)
    d_hidden = dout @ W_down.T                                   # (..., F)
    dx_unit, dW_gate, dW_up = swiglu_backward(x, W_gate, W_up, d_hidden)
    dx = dout + dx_unit                                          # the residual path, and the unit's
    return dx, dW_gate, dW_up, dW_down
    ### END SOLUTION


# %%
print(check("swiglu_ffn_backward", swiglu_ffn_backward))

# %% [markdown]
# LLaMA's SwiGLU network is narrower than the 2017 one: $F \approx \frac{8}{3} D$ where the 2017 block
# took $4D$ (open question 4 asks why).
#
# ## Grouped-query attention
#
# Generation keeps every earlier position's keys and values (lesson 14's KV cache), per layer and per
# head. Ainslie et al. (2023) let $G$ query heads share one key/value head: $H$ query heads,
# $H_{kv} = H / G$ key/value heads, and query head $h$ reads key/value head $\lfloor h / G \rfloor$.
# The forward pass repeats each shared head $G$ times along the head axis and runs lesson 7's attention
# unchanged:
#
# ```python
# k_rep = np.repeat(k, n_rep, axis=1)      # (B, Hkv, T, Dh) -> (B, H, T, Dh), n_rep = G
# ```
#
# Attention's backward pass (lesson 7) hands back `dk_rep`, one gradient per *query* head. Write
# `repeat_kv_backward(k, n_rep, dout)`: given `dout` $= \partial L / \partial$`k_rep`, of shape
# `(B, H, T, Dh)`, return $\partial L / \partial k$, shaped like `k`. (The same function serves the
# values.) Which query heads read key/value head $j$, and what happens to the gradient of a tensor
# that is used several times?

# %%
def repeat_kv_backward(k, n_rep, dout):
    """dL/dk for k_rep = np.repeat(k, n_rep, axis=1), from dout = dL/dk_rep."""
    ### BEGIN SOLUTION
    batch, kv_heads = k.shape[:2]
    return dout.reshape(batch, kv_heads, n_rep, *dout.shape[2:]).sum(axis=2)
    ### END SOLUTION


# %%
print(check("repeat_kv_backward", repeat_kv_backward))

# %% [markdown]
# What sharing saves is memory. The cell below allocates the KV cache of one sequence of 2,048
# positions for a decoder of 8 layers, $D = 512$ and 8 query heads (float32), with 8, 4, 2 and 1
# key/value heads, and weighs the arrays.

# %%
cache_sizes = {}
for kv_heads in (8, 4, 2, 1):
    config = models.ModernLanguageModelConfig(vocab=8, d_model=512, n_heads=8, n_kv_heads=kv_heads, d_ff=8,
                                              n_layers=8, max_len=2048)
    keys, values = models.ModernLanguageModel(config, dtype=np.float32).kv_cache(2048)
    cache_sizes[kv_heads] = sum(array.nbytes for array in keys + values) / 2**20
    print(f"{kv_heads} key/value heads: KV cache {cache_sizes[kv_heads]:.0f} MiB")
assert cache_sizes[8] == 8 * cache_sizes[1]

figure, axis = plt.subplots(figsize=(6.5, 3.6), constrained_layout=True)
labels = [f"{kv} ({'full heads' if kv == 8 else 'multi-query' if kv == 1 else 'GQA'})" for kv in cache_sizes]
axis.bar(labels, list(cache_sizes.values()), color="tab:blue")
axis.set(xlabel="key/value heads (8 query heads)", ylabel="MiB per 2,048-token sequence",
         title="KV cache of 8 layers, d_model 512, float32")
figure.savefig(viz.figures_dir() / "28_kv_cache.png", dpi=110)

# %% [markdown]
# ## The whole decoder, on your functions
#
# `models.ModernLanguageModel` stacks `nn.ModernBlock`s, each
#
# $$x \leftarrow x + \operatorname{attn}(\operatorname{RMSNorm}_1(x)), \qquad x \leftarrow x + \operatorname{SwiGLU}(\operatorname{RMSNorm}_2(x)),$$
#
# with rotary grouped-query attention, a final RMSNorm and logits $= h\,E^\top$ (the embedding table
# $E$, tied). `course.student_ops` turns your graded functions into an op set (lesson 27); under
# `ops.using` the model's backward pass runs them: every RMSNorm, rotation, gate and shared-head sum.
# The whole model's gradient check, in float64, with a fully padded row (entry by entry; the quick run,
# `NPFORMER_QUICK=1`, checks each parameter tensor along two random directions, `directions=2`):

# %%
yours = student_ops({"rmsnorm_backward": rmsnorm_backward, "rope_backward": rope_backward,
                     "swiglu_backward": swiglu_backward, "repeat_kv_backward": repeat_kv_backward})
print(yours.report())
small = models.ModernLanguageModel(models.ModernLanguageModelConfig(vocab=13, d_model=8, n_heads=4, n_kv_heads=2,
                                                                    d_ff=12, n_layers=2, max_len=8), dtype=np.float64)
ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 9, 4, 5, 2], [0, 0, 0, 0, 0, 0]])
with ops.using(yours):
    whole = gradcheck.check_loss(small, {"ids": ids[:, :-1]}, ids[:, 1:], name="modern decoder",
                                 directions=2 if QUICK else None)
print(whole.table().splitlines()[-1])
assert whole.passed

# %% [markdown]
# Its summary: parameters and FLOPs by module, the KV cache against full heads, and AdamW's two
# parameter groups (decay on the matrices and the embedding, none on the gains):

# %%
print(models.summarize_modern(small, batch=2, length=5, optimizer=optim.AdamW(small)))

# %% [markdown]
# ## Does it beat the 2017 block?
#
# Both models train below on the French side of the embedded corpus, with your ops for the modern
# one, for the same time each on this machine (the learning rate follows the clock and reaches zero
# when the time is up: `fit(minutes=...)`), with the same batch, learning rate and seed, and no dropout.
# Lesson 18's width is 64; the modern one is given 64 too, and with its tied embedding it is the
# smaller (the parameters are printed). Only the numbers printed below answer the question for this run.
#
# `benchmarks/modern_vs_2017.py` asked it at equal parameters (1.11M and 1.15M, the modern one 112
# wide) on the French side of 60,000 Tatoeba pairs, 5 minutes each on a 2-core Xeon, with two seeds:
# the 2017 decoder ended lower by 0.07 and 0.06 (18.57 against 18.64, 20.11 against 20.17), a tie
# within 0.4% (`benchmarks/RESULTS.md`). At two layers and five minutes of a CPU the modern parts buy
# no perplexity; what they buy is in the cells above: a cache several times smaller, and scores that
# depend on distance, not on position.

# %%
minutes = 0.05 if QUICK else 0.25
common = dict(max_pairs=3000 if QUICK else 12000, steps=10**6, minutes=minutes, warmup=20, seed=0)
old = train_french_lm(None, architecture="2017", dropout=0.0, **common)
with ops.using(yours):
    modern = train_french_lm(None, architecture="modern", **common)
for name, run in (("2017", old), ("modern", modern)):
    print(f"{name:>6}: {run['parameters']:,} parameters, {run['steps']} steps in {run['seconds']:.1f} s "
          f"({run['tokens_per_second']:,.0f} tokens/s), validation perplexity {run['valid_perplexity']:.2f}")
better = "modern" if modern["valid_perplexity"] < old["valid_perplexity"] else "2017"
print(f"lower validation perplexity in {minutes} minutes each: the {better} decoder")
for run in (old, modern):
    assert run["valid_perplexity"] < len(run["vocab"]) / 2, "both must beat a uniform guess by far"

figure, axis = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
for name, run in (("2017", old), ("modern", modern)):
    seconds = np.linspace(0, run["seconds"], len(run["losses"]))
    axis.plot(seconds, np.exp(run["losses"]), alpha=0.7,
              label=f"{name}: {run['steps']} steps, validation perplexity {run['valid_perplexity']:.1f}")
axis.set(xlabel="seconds (steps spread evenly)", ylabel="training perplexity per batch", yscale="log",
         title=f"{minutes} minutes each, embedded corpus")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "28_modern_against_2017.png", dpi=110)

# %% [markdown]
# Sampling runs on the KV cache of $H_{kv}$ heads, each new position's query and key rotated by its own
# position (`offset`), and gives the logits of the full forward pass (asserted):

# %%
for text in sample(modern["model"], modern["vocab"], "le chat", count=3, temperature=0.8, top_k=10):
    print("   ", text)
tokens = [1] + modern["vocab"].encode(["le", "chat", "mange"])
lm = modern["model"]
with lm.evaluating():
    full = lm.forward(np.array([tokens]))[0]
    keys, values = lm.kv_cache(len(tokens))
    cached = np.stack([lm.step(token, position, keys, values) for position, token in enumerate(tokens)])
print(f"largest difference between cached and full logits: {np.abs(cached - full).max():.1e}")
assert np.allclose(cached, full, atol=1e-4)

# %% [markdown]
# ## Exercises
#
# 1. Show that each row of RMSNorm's `dx` is orthogonal to $\hat x$ up to $\epsilon$, as layer norm's
#    is (lesson 4), but does not sum to zero. Check both with your `rmsnorm_backward`. What change of
#    the row does RMSNorm ignore, and which one does it not?
# 2. RoPE's backward needs no copy of `x`, only the angles. Why? How many numbers does the forward
#    pass have to keep for the backward of one layer's queries, for a batch of $B$ sequences of $T$
#    positions and $H$ heads of $D_h$?
#    Auto-graded: `rope_saved_numbers(batch, length, heads, head_dim)`, that count (npformer keeps the
#    smallest such cache). Why no copy of `x` is needed stays for the rubric.

# %%
def rope_saved_numbers(batch, length, heads, head_dim):
    """The numbers RoPE's forward keeps for the backward of one layer's queries: an int."""
    ### BEGIN SOLUTION
    pairs = head_dim // 2
    return 2 * length * pairs                  # a cosine and a sine per position and pair, shared by all
    ### END SOLUTION


# %%
print(check("rope_saved_numbers", rope_saved_numbers))

# %% [markdown]
# 3. With grouped-query attention, which parameters shrink and by how much, for $D = 512$, $H = 8$ and
#    $H_{kv} = 2$? What can a model with one key/value head (multi-query) no longer represent that one
#    with eight can?
#    Auto-graded: `gqa_kv_weights(d_model, n_heads, n_kv_heads)`, the number of weights $W_k$ and $W_v$
#    hold together (no biases), from which the shrinkage follows. What multi-query attention can no
#    longer represent stays for the rubric.

# %%
def gqa_kv_weights(d_model, n_heads, n_kv_heads):
    """The weights of W_k and W_v together under grouped-query attention: an int."""
    ### BEGIN SOLUTION
    head_dim = d_model // n_heads
    return 2 * d_model * n_kv_heads * head_dim
    ### END SOLUTION


# %%
print(check("gqa_kv_weights", gqa_kv_weights))

# %% [markdown]
# 4. Why does LLaMA take $F = \frac{8}{3} D$ for SwiGLU? Count the parameters of both networks.
#    Auto-graded: `ffn_weights(d_model, d_ff, gated)`, the weight-matrix entries (no biases) of the
#    2017 network (`gated` False) or of SwiGLU's (`gated` True) of hidden width `d_ff`. Why $\frac{8}{3}$
#    stays for the rubric.

# %%
def ffn_weights(d_model, d_ff, gated):
    """The weight-matrix entries of the feed-forward network: an int."""
    ### BEGIN SOLUTION
    matrices = 3 if gated else 2                # W_gate, W_up, W_down, or W_1, W_2
    return matrices * d_model * d_ff
    ### END SOLUTION


# %%
print(check("ffn_weights", ffn_weights))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. From the compact form, $\sum_j dx_j \hat x_j = r\bigl(\sum_j g_j \hat x_j - \operatorname{mean}(g \odot \hat x)\sum_j \hat x_j^2\bigr)$
#    and $\sum_j \hat x_j^2 = D\, m\, r^2 = D\, m / (m + \epsilon)$, so the sum is
#    $r\,\frac{\epsilon}{m + \epsilon}\sum_j g_j \hat x_j$: zero up to $\epsilon$. RMSNorm ignores a
#    rescaling of the row ($y$ does not change when $x$ is multiplied by $c > 0$, up to $\epsilon$), so
#    no gradient flows along $\hat x$. It does not ignore a shift: adding $c$ to every entry changes
#    $y$, so $\sum_j dx_j \ne 0$ in general (printed below).
# 2. The rotation is linear in $x$ and does not depend on it: its Jacobian is the rotation itself, so
#    the backward needs only the angles: two $T \times D_h/2$ tables of cosines and sines, $T D_h$ numbers
#    whatever $B$ and $H$ are (or none at all, since `offset` and $T$ give them again), not the
#    $B H T D_h$ numbers of `x`. npformer's cache keeps exactly those two tables.
# 3. $W_k$ and $W_v$ are $D \times H_{kv} D_h$: with $D_h = 64$ they shrink from $512 \times 512$ to
#    $512 \times 128$, four times; $W_q$ and $W_o$ are unchanged (printed below), and so are the shapes
#    of the scores and of the output. With one key/value head every query head looks at the same keys and
#    reads the same values; the heads can still ask different questions (their queries differ), but
#    they cannot store different information per position in separate subspaces. That is why
#    quality drops a little with multi-query attention, and why LLaMA 2's 70B model keeps 8 key/value
#    heads for its 64 query heads ($G = 8$).
# 4. The 2017 network has $2 \cdot D \cdot 4D = 8D^2$ weights; SwiGLU has $3 D F$, equal when
#    $F = \frac{8}{3} D$.

# %% tags=["instructor"]
answer_x = rng.standard_normal((4, 6))
answer_gamma, answer_dout = 1 + 0.5 * rng.standard_normal(6), rng.standard_normal((4, 6))
answer_dx = rmsnorm_backward(answer_x, answer_gamma, answer_dout)[0]
answer_mean_square = (answer_x ** 2).mean(-1)
answer_x_hat = answer_x / np.sqrt(answer_mean_square + 1e-5)[:, None]
along_x_hat = (answer_dx * answer_x_hat).sum(-1)
predicted = (1e-5 / (answer_mean_square + 1e-5) / np.sqrt(answer_mean_square + 1e-5)
             * (answer_dout * answer_gamma * answer_x_hat).sum(-1))
print(f"answer 1: sum_j dx_j x_hat_j per row {along_x_hat}, predicted r eps / (m + eps) sum_j g_j x_hat_j {predicted}; "
      f"sums of dx per row {np.round(answer_dx.sum(-1), 3)}")
assert np.allclose(along_x_hat, predicted, rtol=1e-6, atol=0)
assert np.abs(answer_dx.sum(-1)).max() > 1e-3

# %% tags=["instructor"]
for kv_heads in (8, 2):
    layer = models.ModernLanguageModel(models.ModernLanguageModelConfig(vocab=8, d_model=512, n_heads=8,
                                                                        n_kv_heads=kv_heads, d_ff=8, n_layers=1))
    attention = layer.blocks[0].attn
    print(f"answer 3: {kv_heads} key/value heads: Wq {attention.q.W.shape}, Wk {attention.k.W.shape}, "
          f"Wv {attention.v.W.shape}, Wo {attention.o.W.shape}")
