# %% [markdown]
# # Lesson 6 — Masks: padding and look-ahead
#
# Sentences in a batch have different lengths, so the short ones are padded with `<pad>`
# (id 0). Attention must not look at padding, and when predicting word `t` the decoder must
# not look at words `t+1, t+2, ...`: at translation time they do not exist yet. Both rules
# are boolean masks, **True where attention is allowed**.

# %%
import numpy as np

from npformer import ops, viz

ids = np.array([[1, 7, 9, 4, 0, 0],
                [1, 5, 6, 8, 3, 2]])
padding = ops.padding_mask(ids)  # (B, 1, 1, T): one row per sentence, broadcast over heads and queries
causal = ops.causal_mask(6)  # (T, T): query i sees keys j <= i
combined = padding & causal  # (B, 1, T, T)
print("padding", padding.shape, "causal", causal.shape, "combined", combined.shape)
print(combined[0, 0].astype(int))
assert padding.shape == (2, 1, 1, 6) and causal.shape == (6, 6) and combined.shape == (2, 1, 6, 6)
assert np.array_equal(padding[:, 0, 0], ids != 0), "padding mask: True on real tokens, False on <pad>"
assert np.array_equal(causal, np.tril(np.ones((6, 6), bool))), "causal mask: query i sees keys j <= i"

# %% [markdown]
# The shapes are chosen to broadcast against the attention scores `(B, H, Tq, Tk)`:
# padding depends on the sentence and the key, and causality on the query and the key.
#
# Inside attention, a masked score is set to `-inf` before the softmax, so `exp(-inf) = 0`:
# masked keys get **exactly** zero weight. A query whose keys are *all* masked (a sentence made
# only of padding) would compute `0/0`; npformer gives such a row zero weights, zero output and
# zero gradient instead of NaN.

# %%
viz.masks_figure(["<bos>", "le", "chat", "noir", "<pad>", "<pad>"],
                 path=viz.figures_dir() / "06_masks.png")
q = k = v = np.random.default_rng(0).standard_normal((2, 1, 6, 4))
out, cache = ops.attention_forward(q, k, v, combined)
print("weights of sentence 0, query 'noir':", cache["weights"][0, 0, 3].round(3))
weights = cache["weights"]
assert np.all(weights[~np.broadcast_to(combined, weights.shape)] == 0), "masked keys must get exactly zero weight"
assert np.allclose(weights.sum(-1), 1), "each query's weights over the allowed keys must sum to 1"
all_padding = ops.padding_mask(np.zeros((2, 6), int))
out_padding, cache_padding = ops.attention_forward(q, k, v, all_padding)
gradients = ops.attention_backward(np.ones_like(out_padding), cache_padding)
print("all-padding sentence gives zeros:", np.all(out_padding == 0))
assert np.all(cache_padding["weights"] == 0) and np.all(out_padding == 0), \
    "an all-padding row must give zero weights and zero output, not NaN"
assert all(np.all(gradient == 0) for gradient in gradients), "an all-padding row must give zero gradient"

# %% [markdown]
# Which masks does each attention in the Transformer use?
#
# | attention | queries | keys | mask |
# | --- | --- | --- | --- |
# | encoder self-attention | source | source | source padding |
# | decoder self-attention | target | target | target padding & causal |
# | decoder cross-attention | target | source | source padding |
#
# ## Exercises
#
# 1. Why is no mask needed over *queries* that are padding? (Hint: what happens to their outputs?)
# 2. Build the mask for a prefix language model: the first `P` positions see each other freely,
#    the rest are causal.
# 3. Test that appending padding leaves every real output of `attention_forward` unchanged.
