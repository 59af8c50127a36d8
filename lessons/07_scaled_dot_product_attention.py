# %% [markdown]
# # Lesson 7 — Scaled dot-product attention: forward, backward, heatmap
#
# `Attention(Q, K, V) = softmax(Q K^T / sqrt(Dh)) V` (Vaswani et al., eq. 1). Each query is
# compared with every key; the scores become weights that sum to 1; the output is the weighted
# average of the values.

# %%
import numpy as np

from npformer import gradcheck, ops, viz

rng = np.random.default_rng(0)

# %% [markdown]
# ## Why divide by `sqrt(Dh)`?
#
# If the entries of `q` and `k` have unit variance, then `q · k` is a sum of `Dh` such products
# and has variance `Dh`. Without the scale, large `Dh` gives huge scores, a softmax that is
# almost one-hot, and vanishing gradients.

# %%
for head_dim in (4, 64, 512):
    q, k = rng.standard_normal((1000, head_dim)), rng.standard_normal((1000, head_dim))
    raw_std, scaled_std = np.std((q * k).sum(1)), np.std((q * k).sum(1) / np.sqrt(head_dim))
    print(f"Dh={head_dim:4d}: std of q·k = {raw_std:6.2f}, after / sqrt(Dh) = {scaled_std:.2f}")
    assert abs(raw_std / np.sqrt(head_dim) - 1) < 0.15, "q·k must have a standard deviation near sqrt(Dh)"
    assert abs(scaled_std - 1) < 0.15, "after the scale, the scores must have a standard deviation near 1"

# %% [markdown]
# ## Backward pass
#
# Write `S = s Q K^T` (with `s = 1/sqrt(Dh)`), `P = softmax(S)` and `O = P V`. Going back:
#
# 1. `dV = P^T dO` and `dP = dO V^T` (a product, as in lesson 2);
# 2. `dS = P * (dP - rowsum(dP * P))` (the softmax backward of lesson 3);
# 3. `dQ = s dS K` and `dK = s dS^T Q`.
#
# Masked entries have `P = 0`, so `dS = 0` there: no gradient flows to masked keys. Each step
# is one batched `matmul` over all sentences and heads at once.

# %%
for report in (gradcheck.check_op("attention", batch=2, heads=3, q_len=4, k_len=4, head_dim=5),
               gradcheck.check_op("cross_attention")):
    print(report)
    assert report.passed, "attention_backward must pass the finite-difference check"

q, k, v = rng.standard_normal((3, 1, 2, 4, 5))
key_mask = np.array([True, True, False, True])  # key 2 is masked for every query
out, cache = ops.attention_forward(q, k, v, key_mask)
dq, dk, dv = ops.attention_backward(rng.standard_normal(out.shape), cache)
assert np.all(dk[..., 2, :] == 0) and np.all(dv[..., 2, :] == 0), "no gradient may flow to a masked key"

# %% [markdown]
# ## A heatmap
#
# A hand-made example: queries and keys as one-hot "word identities", so that each query
# attends to the keys that share its identity.

# %%
words = ["the", "black", "cat", "sat", "."]
keys = np.eye(5)[[0, 1, 2, 3, 4]] * 4.0
queries = np.eye(5)[[2, 1, 0, 4, 3]] * 4.0  # each query looks for another word
values = rng.standard_normal((5, 8))
out, cache = ops.attention_forward(queries[None, None], keys[None, None], values[None, None])
viz.attention_heatmaps([cache["weights"][0]], ["q:cat", "q:black", "q:the", "q:.", "q:sat"], words,
                       title="Each query finds its key", path=viz.figures_dir() / "07_attention.png")
print(cache["weights"][0, 0].round(2))
assert np.allclose(cache["weights"][0, 0].sum(-1), 1), "the weights of each query must sum to 1"
assert list(cache["weights"][0, 0].argmax(-1)) == [2, 1, 0, 4, 3], "each query must find the key it looks for"

# %% [markdown]
# ## Exercises
#
# 1. Show that scaling `Q` by `s` before the product gives the same gradients. Which is cheaper?
# 2. What is the output for a query whose scores are all equal? For one whose keys are all masked?
# 3. Memory: for `B = 64`, `H = 8`, `T = 512`, how big is `P` in float32? Why does that matter?
