# %% [markdown]
# # Lesson 8 — Multi-head attention: splitting and merging heads, parameter count
#
# One attention can focus on one kind of relation at a time. Multi-head attention runs `H`
# attentions side by side on different projections of the same input and concatenates them:
#
# `MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W_o`, with `head_h = Attention(Q W_q^h, K W_k^h, V W_v^h)`

# %%
import numpy as np

from npformer import gradcheck, nn

rng = np.random.default_rng(0)

# %% [markdown]
# ## Heads are a reshape
#
# The paper's `W_q^h` are `D x Dh` matrices. Stacked side by side they form one `D x D` matrix, so
# all heads are computed with **one** product, and then the last axis is reshaped into `(H, Dh)`:
#
# `(B, T, D) -> reshape (B, T, H, Dh) -> transpose (B, H, T, Dh)`
#
# Merging undoes it. No loop over heads anywhere.

# %%
attention = nn.MultiHeadAttention(d_model=8, n_heads=2, rng=rng, dtype=np.float64)
x = rng.standard_normal((3, 5, 8))
heads = attention.split_heads(x)
print("split:", x.shape, "->", heads.shape, " merged back equal:", np.array_equal(attention.merge_heads(heads), x))

# %% [markdown]
# ## Parameters
#
# Four `D x D` projections with biases: **`4 (D^2 + D)`**, whatever `H` is. Heads change how the
# `D` dimensions are used, not how many parameters there are.

# %%
for d_model, n_heads in ((512, 8), (512, 1), (32, 2)):
    count = nn.MultiHeadAttention(d_model, n_heads, rng=rng).num_params()
    print(f"D={d_model}, H={n_heads}: {count:,} parameters (4(D^2+D) = {4 * (d_model ** 2 + d_model):,})")

# %% [markdown]
# ## Backward pass
#
# Reverse the forward: `o` (a linear layer), merge -> split, attention backward (lesson 7),
# split -> merge, then the `q`, `k`, `v` layers. `forward(query, memory)` (cross-attention)
# returns `(d_query, d_memory)`. In self-attention the same input feeds queries, keys and values,
# so its gradient is the **sum** of the three paths. `forward_self(x)` computes q, k and v with
# **one** product by a `(D, 3D)` matrix, the three weight matrices side by side, and its backward
# pass returns that sum directly. It is faster (one big product instead of three small ones) and
# gives the same numbers; `tests/test_nn_gradients.py` compares the two paths.

# %%
report = gradcheck.check_module(attention, {"query": x, "memory": rng.standard_normal((3, 4, 8))})
print(report)
assert report.passed
fused = gradcheck.check_module(attention, {"x": x}, forward=attention.forward_self)
print(fused.table().splitlines()[-1])
assert np.allclose(attention.forward_self(x), attention.forward(x, x))

# %% [markdown]
# Each head has its own attention pattern over the same tokens:

# %%
from npformer import viz  # noqa: E402

tokens = ["the", "black", "cat", "sat", "down"]
sentence = rng.standard_normal((1, 5, 8))
attention.forward(sentence, sentence)
viz.attention_heatmaps([attention.attn_weights[0]], tokens, tokens,
                       title="Two heads of an untrained self-attention: different patterns",
                       path=viz.figures_dir() / "08_heads.png")

# %% [markdown]
# One row deserves a look: `k.b`, the key bias, has a gradient of exactly zero. Adding the same
# vector `b` to every key adds `q · b` to every score of a row, and softmax ignores a shift
# shared by a whole row. The check reports it as "within resolution": both gradients are zero
# to within what finite differences can see.
#
# ## Exercises
#
# 1. Prove that the key bias gets zero gradient. Does the value bias?
# 2. With `H = 1` and `Dh = D`, is multi-head attention the same as lesson 7's attention plus
#    four linear layers? Check it numerically.
# 3. Count the multiply-adds of one multi-head attention for `B, T, D, H`.
