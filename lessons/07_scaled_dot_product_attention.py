# %% [markdown]
# # Lesson 7 — Scaled dot-product attention: forward, backward, heatmap
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{D_h}}\right) V$$
#
# (Vaswani et al., eq. 1). Each query is compared with every key; the scores become weights that
# sum to 1; the output is the weighted average of the values.

# %%
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Why divide by $\sqrt{D_h}$?
#
# If the entries of $q$ and $k$ are independent with zero mean and unit variance, then
# $q \cdot k = \sum_{d=1}^{D_h} q_d k_d$ is a sum of $D_h$ products of variance 1, and has variance
# $D_h$. Without the scale, a large $D_h$ gives huge scores, a softmax that is almost one-hot, and
# vanishing gradients.

# %%
for head_dim in (4, 64, 512):
    q, k = rng.standard_normal((1000, head_dim)), rng.standard_normal((1000, head_dim))
    raw_std, scaled_std = np.std((q * k).sum(1)), np.std((q * k).sum(1) / np.sqrt(head_dim))
    print(f"Dh={head_dim:4d}: std of q·k = {raw_std:6.2f}, after / sqrt(Dh) = {scaled_std:.2f}")
    assert abs(raw_std / np.sqrt(head_dim) - 1) < 0.15, "q·k must have a standard deviation near sqrt(Dh)"
    assert abs(scaled_std - 1) < 0.15, "after the scale, the scores must have a standard deviation near 1"

# %% [markdown]
# ## Forward pass, with a mask
#
# For one sentence and one head, $Q$ is $T_q \times D_h$, $K$ is $T_k \times D_h$ and $V$ is
# $T_k \times D_h$. With $s = 1/\sqrt{D_h}$:
#
# $$S = s\, Q K^\top, \qquad P_{ij} = \frac{e^{S_{ij}}}{\sum_l e^{S_{il}}}, \qquad O = P V$$
#
# The mask (lesson 6) is True where query $i$ may attend to key $j$. A masked score is set to
# $-\infty$ before the softmax, so $P_{ij} = e^{-\infty} / \dots = 0$ exactly. As in lesson 3, the
# softmax subtracts each row's maximum first, which does not change $P$ and keeps $e^{S}$ from
# overflowing. One row needs care: a query whose keys are **all** masked has a maximum of
# $-\infty$, and $-\infty - (-\infty)$ is NaN. Such a query (a sentence of padding only) must get
# all-zero weights, hence an all-zero output.
#
# ### Your turn
#
# Write `attention(q, k, v, mask)` for `q` of shape `(B, H, Tq, Dh)`, `k` and `v` of shape
# `(B, H, Tk, Dh)`, and `mask` either None (no mask) or a boolean array that broadcasts to
# `(B, H, Tq, Tk)` (such as `(Tq, Tk)` or `(B, 1, 1, Tk)`). Return `out`, of shape `(B, H, Tq, Dh)`:
#
# 1. `scores = q @ k.swapaxes(-1, -2) / np.sqrt(Dh)`, shape `(B, H, Tq, Tk)` (`@` multiplies the
#    last two axes and batches over the others);
# 2. where the mask is False, replace the score by `-np.inf` (`np.where` broadcasts the mask);
# 3. subtract each row's maximum over the keys, but use $0$ where that maximum is $-\infty$;
# 4. exponentiate, and divide by each row's sum, except where the sum is $0$ (divide by 1 there,
#    so the row stays all zeros);
# 5. return `weights @ v`.
#
# The grader tries a causal mask, one query against a padded key, a query whose keys are all
# masked, and no mask at all.

# %%
def attention(q, k, v, mask):
    """softmax(q k^T / sqrt(Dh), masked) @ v, with all-zero weights for a fully masked query."""
    ### BEGIN SOLUTION
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # a fully masked row: -inf - (-inf) is NaN
    weights = np.exp(scores - row_max)
    row_sum = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(row_sum > 0, row_sum, 1.0)  # a fully masked row stays all zeros
    return weights @ v
    ### END SOLUTION


# %%
print(check("attention", attention))

# %% [markdown]
# **The classic mistake** is the textbook softmax with the mask but without the guard for a fully
# masked query. Every other case passes; the fully masked one turns into NaN:

# %%
def attention_without_guard(q, k, v, mask):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):  # -inf - (-inf) = NaN, without a warning
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


mistake = check("attention", attention_without_guard, strict=False)
print(mistake)
failed_cases = {row.case for row in mistake.rows if not row.passed}
assert not mistake.passed and all("fully masked" in case for case in failed_cases), \
    "only the fully masked query may fail"

# %% [markdown]
# ## Backward pass
#
# Again for one sentence and one head, with $dO = \partial L / \partial O$ given and the same
# notation for the other gradients ($dP = \partial L / \partial P$, and so on).
#
# **Through $O = P V$.** From $O_{id} = \sum_j P_{ij} V_{jd}$, as for the linear layer of lesson 2:
#
# $$dV_{jd} = \sum_i P_{ij}\, dO_{id} \;\Rightarrow\; dV = P^\top dO, \qquad
# dP_{ij} = \sum_d dO_{id}\, V_{jd} \;\Rightarrow\; dP = dO\, V^\top$$
#
# **Through the softmax**, one row at a time. From lesson 3,
# $\partial P_{ij} / \partial S_{il} = P_{ij} (\delta_{jl} - P_{il})$, so
#
# $$dS_{il} = \sum_j dP_{ij}\, P_{ij} (\delta_{jl} - P_{il})
# = P_{il}\left(dP_{il} - \sum_j dP_{ij} P_{ij}\right), \qquad
# dS = P \odot \left(dP - \operatorname{rowsum}(dP \odot P)\right)$$
#
# where $\operatorname{rowsum}$ keeps the key axis (size 1) so that it broadcasts.
#
# **Through $S = s\, Q K^\top$.** From $S_{ij} = s \sum_d Q_{id} K_{jd}$:
#
# $$dQ_{id} = s \sum_j dS_{ij} K_{jd} \;\Rightarrow\; dQ = s\, dS\, K, \qquad
# dK_{jd} = s \sum_i dS_{ij} Q_{id} \;\Rightarrow\; dK = s\, dS^\top Q$$
#
# **The mask.** A masked score is replaced by the constant $-\infty$, so it has no gradient; the
# formula gives that by itself, since $P_{ij} = 0$ makes $dS_{ij} = 0$. No gradient flows to a
# masked key through its scores, and $dV_j = \sum_i P_{ij}\, dO_i$ is zero for a key that every
# query masks. A fully masked query has a row of zeros in $P$, hence in $dS$: its $dQ$ row is zero,
# and it adds nothing to $dK$ and $dV$.
#
# ### Your turn
#
# Write `attention_backward(q, k, v, mask, dout)` with the inputs of `attention` and `dout` of
# shape `(B, H, Tq, Dh)`. Recompute the weights $P$ as in `attention` (repeat its steps 1-4),
# then return `(dq, dk, dv)`, shaped like `q`, `k` and `v`. Every product above is one batched
# `@` over the batch and head axes: $P^\top$ is `weights.swapaxes(-1, -2)`. Remember the scale
# $s$ in both `dq` and `dk`. The grader compares with npformer and with finite differences of the
# forward, on the four cases of `attention`.

# %%
def attention_backward(q, k, v, mask, dout):
    """Gradients (dq, dk, dv) of attention(q, k, v, mask)."""
    ### BEGIN SOLUTION
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0))
    row_sum = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(row_sum > 0, row_sum, 1.0)

    dv = weights.swapaxes(-1, -2) @ dout
    dweights = dout @ v.swapaxes(-1, -2)
    dscores = weights * (dweights - (dweights * weights).sum(axis=-1, keepdims=True))
    dq = scale * dscores @ k
    dk = scale * dscores.swapaxes(-1, -2) @ q
    return dq, dk, dv
    ### END SOLUTION


# %%
print(check("attention_backward", attention_backward))

# %% [markdown]
# npformer's `ops.attention_forward` and `ops.attention_backward` are these two functions (the
# forward keeps the weights in a cache, so the backward does not recompute them). They pass the
# finite-difference check, for self-attention and for cross-attention ($T_q \ne T_k$), and no
# gradient reaches a masked key:

# %%
for report in (gradcheck.check_op("attention", batch=2, heads=3, q_len=4, k_len=4, head_dim=5),
               gradcheck.check_op("cross_attention")):
    print(report)
    assert report.passed, "attention_backward must pass the finite-difference check"

q, k, v = rng.standard_normal((3, 1, 2, 4, 5))
key_mask = np.array([True, True, False, True])  # key 2 is masked for every query
out, cache = ops.attention_forward(q, k, v, key_mask)
dq, dk, dv = ops.attention_backward(rng.standard_normal(out.shape), cache)
print("largest |dk| and |dv| of the masked key:", np.abs(dk[..., 2, :]).max(), np.abs(dv[..., 2, :]).max())
assert np.all(dk[..., 2, :] == 0) and np.all(dv[..., 2, :] == 0), "no gradient may flow to a masked key"

# %% [markdown]
# ## A heatmap
#
# A hand-made example, not a trained model: queries and keys are one-hot "word identities" scaled
# by 4, and each query is set to look for one other word. The words are only labels for the rows
# and columns; lesson 15 draws what a trained translator's heads do.

# %%
words = ["the", "black", "cat", "sat", "."]
keys = np.eye(5)[[0, 1, 2, 3, 4]] * 4.0
queries = np.eye(5)[[2, 1, 0, 4, 3]] * 4.0  # each query looks for another word
values = rng.standard_normal((5, 8))
out, cache = ops.attention_forward(queries[None, None], keys[None, None], values[None, None])
viz.attention_heatmaps([cache["weights"][0]], ["q:cat", "q:black", "q:the", "q:.", "q:sat"], words,
                       title="Hand-made: each query finds its key", path=viz.figures_dir() / "07_attention.png")
print(cache["weights"][0, 0].round(2))
assert np.allclose(cache["weights"][0, 0].sum(-1), 1), "the weights of each query must sum to 1"
assert list(cache["weights"][0, 0].argmax(-1)) == [2, 1, 0, 4, 3], "each query must find the key it looks for"

# %% [markdown]
# ## Exercises
#
# 1. Show that scaling $Q$ by $s$ before the product, $S = (sQ) K^\top$, gives the same gradients
#    $dQ$ and $dK$. Which order is cheaper, and why?
# 2. A query whose scores are all equal (for example $q = 0$): what is its output? Is its gradient
#    $dQ$ zero? Derive it from the formulas above, then check with your `attention_backward`.
# 3. Memory: for $B = 64$, $H = 8$, $T = 512$, how big is $P$ in float32? Why does that matter?
