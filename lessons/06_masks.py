# %% [markdown]
# # Lesson 6 — Masks: padding and look-ahead
#
# Sentences in a batch have different lengths, so the short ones are padded with `<pad>`
# (id 0). Attention must not look at padding, and when predicting word $t$ the decoder must
# not look at words $t+1, t+2, \dots$: at translation time they do not exist yet. Both rules
# are boolean masks, **True where attention is allowed**.

# %%
import numpy as np

from npformer import ops, viz
from npformer.course import check

# %% [markdown]
# ## The padding mask, and why its shape is `(B, 1, 1, T)`
#
# Attention compares every query with every key, in every head: its scores have the shape
# `(B, H, Tq, Tk)`. Whether key $j$ of sentence $b$ is padding depends on $b$ and $j$ only; it is
# the same for every head $h$ and every query $i$:
#
# $$\text{mask}_{b,h,i,j} = [\text{ids}_{b,j} \ne 0] \quad \text{for all } h, i$$
#
# So the mask stores one row of $T$ booleans per sentence and gives the head and query axes size
# 1: `(B, 1, 1, T)`. NumPy's broadcasting (which aligns shapes from the right and stretches axes
# of size 1) then repeats it over the $H$ heads and the $T_q$ queries, without copying anything.
# The plain `(B, T)` would not do: aligned from the right, its $B$ axis meets the query axis
# $T_q$. That fails when the sizes differ, and when they happen to be equal it silently gives
# query $i$ the padding of sentence $i$. Below, two source sentences of 6 tokens and, as in
# cross-attention, 2 target queries per sentence:

# %%
ids = np.array([[1, 7, 9, 4, 0, 0],
                [1, 5, 6, 8, 3, 2]])
batch, heads, queries, length = 2, 8, 2, 6
scores_shape = (batch, heads, queries, length)
print("(B, 1, 1, T) against the scores:", np.broadcast_shapes((batch, 1, 1, length), scores_shape))
wrong = np.broadcast_to(ids != 0, scores_shape)  # (B, T) read as (Tq, Tk)
print("(B, T) as a mask, sentence 0, query 1 sees keys:", wrong[0, 0, 1].astype(int),
      "but sentence 0 is", (ids[0] != 0).astype(int))
assert np.array_equal(wrong[0, 0, 1], ids[1] != 0), "a (B, T) mask gives query i the padding of sentence i"
try:
    np.broadcast_shapes((batch, length), (batch, heads, length, length))  # self-attention: Tq = 6
except ValueError as error:
    print("(B, T) against self-attention scores (2, 8, 6, 6):", error)

# %% [markdown]
# ### Your turn
#
# Write `padding_mask(ids)` for integer `ids` of shape `(B, T)`: return a boolean array of shape
# `(B, 1, 1, T)`, True where `ids != 0` (a real token) and False on `<pad>`. The two axes of size 1
# are where the scores' heads and queries go: which of the scores' four axes must the mask keep,
# and which may it leave to broadcasting? The grader checks the values exactly, on a padded batch,
# a single token and a batch without padding.

# %%
def padding_mask(ids):
    """ids (B, T) -> boolean (B, 1, 1, T), True where the key is a real token (ids != 0)."""
    ### BEGIN SOLUTION
    return (ids != 0)[:, None, None, :]
    ### END SOLUTION


# %%
print(check("padding_mask", padding_mask))

# %% [markdown]
# ## The causal (look-ahead) mask
#
# In the decoder, query $i$ (the position that predicts word $i+1$) may see keys
# $j = 0, \dots, i$ and nothing after:
#
# $$\text{causal}_{i,j} = [\,j \le i\,]$$
#
# This depends on the query and the key only, not on the sentence or the head, so it is a
# `(T, T)` matrix: the lower triangle, diagonal included (a position sees itself). Aligned from
# the right, `(T, T)` broadcasts against `(B, H, Tq, Tk)` as `(1, 1, T, T)`.
#
# ### Your turn
#
# Write `causal_mask(length)`: return the boolean `(length, length)` array that is True where the
# key index $j$ is at most the query index $i$ (row $i$, column $j$). Compare a column of query
# indices with a row of key indices, or take `np.tril` of a matrix of ones. The grader tries
# $T = 1, 2, 5$.

# %%
def causal_mask(length):
    """Boolean (T, T): True where key j <= query i (row i, column j)."""
    ### BEGIN SOLUTION
    positions = np.arange(length)
    return positions[None, :] <= positions[:, None]
    ### END SOLUTION


# %%
print(check("causal_mask", causal_mask))

# %% [markdown]
# Mind the convention when you read other code. PyTorch's `nn.MultiheadAttention` (and so
# `nn.Transformer`) reads a boolean mask as True where attention is *not* allowed, so a causal
# mask written for it is the strict upper triangle, $[\,j > i\,]$: the complement of npformer's.

# %% [markdown] tags=["instructor"]
# **A classic mistake** is that opposite convention. Given to npformer, PyTorch's causal mask lets
# every position see only the future; the grader recognises the inversion:

# %% tags=["instructor"]
def causal_mask_pytorch_convention(length):
    return np.triu(np.ones((length, length), dtype=bool), k=1)  # True = may NOT attend


mistake = check("causal_mask", causal_mask_pytorch_convention, strict=False)
print(mistake)
assert not mistake.passed and any("inverted" in row.hint for row in mistake.rows), \
    "True must mean 'may attend': the inverted mask must fail with the hint that says so"

# %% [markdown]
# ## The two together
#
# npformer's `ops.padding_mask` and `ops.causal_mask` are the same functions. The decoder's
# self-attention combines them with `&`, and broadcasting gives `(B, 1, T, T)`: one
# matrix per sentence, shared by the heads.

# %%
padding = ops.padding_mask(ids)  # (B, 1, 1, T): one row per sentence, broadcast over heads and queries
causal = ops.causal_mask(6)  # (T, T): query i sees keys j <= i
combined = padding & causal  # (B, 1, T, T)
print("padding", padding.shape, "causal", causal.shape, "combined", combined.shape)
print(combined[0, 0].astype(int))
assert padding.shape == (2, 1, 1, 6) and causal.shape == (6, 6) and combined.shape == (2, 1, 6, 6)
assert np.array_equal(padding[:, 0, 0], ids != 0), "padding mask: True on real tokens, False on <pad>"
assert np.array_equal(causal, np.tril(np.ones((6, 6), bool))), "causal mask: query i sees keys j <= i"

# %% [markdown]
# Inside attention, a masked score is set to $-\infty$ before the softmax, so its weight is
# $e^{-\infty} = 0$: masked keys get **exactly** zero weight. A query whose keys are *all* masked
# (a sentence made only of padding) would compute $0/0$; npformer gives such a row zero weights,
# zero output and zero gradient instead of NaN (you will write this in lesson 7).

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
# 2. Build the mask for a prefix language model: the first $P$ positions see each other freely,
#    the rest are causal. Auto-graded: write it for a padded batch whose sentences each have their
#    own prefix, `prefix_lm_mask(ids, prefix_lengths)` with `ids` of shape `(B, T)` (`<pad>` is 0)
#    and `prefix_lengths` of shape `(B,)`, returning the boolean mask of shape `(B, 1, T, T)` that
#    attention takes, True where query $i$ of sentence $b$ may attend to key $j$. A prefix of 0 is
#    a plain causal sentence.

# %%
def prefix_lm_mask(ids, prefix_lengths):
    """Boolean (B, 1, T, T): in sentence b, the first prefix_lengths[b] positions see each other, the
    rest is causal, and no query sees a <pad> key. ids: (B, T) integers; prefix_lengths: (B,)."""
    ### BEGIN SOLUTION
    length = ids.shape[1]
    positions = np.arange(length)
    causal = positions[None, :] <= positions[:, None]                       # (T, T): key j <= query i
    in_prefix = positions[None, :] < np.asarray(prefix_lengths)[:, None]   # (B, T): position in b's prefix
    both_in_prefix = in_prefix[:, :, None] & in_prefix[:, None, :]          # (B, Tq, Tk)
    sees = causal[None, :, :] | both_in_prefix                              # (B, Tq, Tk)
    real_keys = ids != 0                                                     # (B, Tk)
    return (sees & real_keys[:, None, :])[:, None, :, :]                    # (B, 1, Tq, Tk)
    ### END SOLUTION


# %%
print(check("prefix_lm_mask", prefix_lm_mask))

# %% [markdown]
# 3. Test that appending padding leaves every real output of `attention_forward` unchanged.

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. Each query's output row depends on that query and on the keys and values only: rows do not
#    mix, so whatever a padding query computes cannot reach a real position in this layer. Its
#    output is never used by a real position later either: in the next layer (and in
#    cross-attention) the same position is a masked key, so nothing reads it, and the loss ignores
#    `<pad>` targets, so its gradient is zero. The padding query attends to the real keys and
#    gives a finite, harmless row (a fully masked row gives zeros, lesson 7). Full marks: rows are
#    independent, and the padded output is masked as a key downstream and ignored by the loss.
# 2. Query $i$ may see key $j$ when $j \le i$ or both are in the prefix ($i < P$ and $j < P$). For
#    $i \ge P$ every prefix key already has $j < P \le i$, so for one sentence the mask is simply
#    `causal_mask(T) | (np.arange(T) < P)[None, :]` (shape `(T, T)`); for the batch, each sentence's
#    prefix on the keys' axis, then `&` with the keys' padding, as in `prefix_lm_mask` above (graded
#    by `check`). Full marks: the rule, and a mask that passes; the check against the definition is below.
# 3. Reference test below: the same sentences with $3$ padding positions appended (random vectors
#    there, with the padding mask extended), then every real query's output must be unchanged. The
#    appended keys get weight exactly $0$, so the outputs agree to rounding at worst (a matrix
#    product may sum in another order); the difference is printed below. Full marks: a batch with
#    padding, the comparison on the real queries only, a tolerance near $10^{-15}$, and padded
#    vectors that are not zero (so that the test would catch a leak).

# %% tags=["instructor"]
prefix_ids = np.array([[5, 6, 7, 8, 9, 4], [5, 6, 7, 8, 0, 0]])
prefix_mask = prefix_lm_mask(prefix_ids, np.array([3, 2]))
for row, prefix in enumerate((3, 2)):
    by_definition = np.array([[(j <= i or (i < prefix and j < prefix)) and prefix_ids[row, j] != 0
                               for j in range(6)] for i in range(6)])
    assert np.array_equal(prefix_mask[row, 0], by_definition)
print("answer 2: T = 6, P = 3:")
print(prefix_mask[0, 0].astype(int))

# %% tags=["instructor"]
answer_rng = np.random.default_rng(6)
real_ids = np.array([[4, 7, 9, 5], [6, 8, 0, 0]])  # the second sentence is already padded
padded_ids = np.concatenate([real_ids, np.zeros((2, 3), int)], axis=1)  # three more <pad> positions
q_short, k_short, v_short = answer_rng.standard_normal((3, 2, 2, 4, 5))  # (B, H, T, Dh) each
extra = answer_rng.standard_normal((3, 2, 2, 3, 5))  # random vectors at the new positions: a leak would show
q_long, k_long, v_long = (np.concatenate([short, more], axis=2)
                          for short, more in zip((q_short, k_short, v_short), extra))
out_short = ops.attention_forward(q_short, k_short, v_short, ops.padding_mask(real_ids))[0]
out_long = ops.attention_forward(q_long, k_long, v_long, ops.padding_mask(padded_ids))[0]
real = real_ids != 0  # the real queries: (B, T)
gap = np.abs(out_long[:, :, :4][np.broadcast_to(real[:, None], (2, 2, 4))]
             - out_short[np.broadcast_to(real[:, None], (2, 2, 4))]).max()
print(f"answer 3: largest change of a real output after appending padding: {gap:.1e}")
assert gap < 1e-14
