# %% [markdown]
# # Lesson 8 — Multi-head attention: splitting and merging heads, parameter count
#
# One attention can focus on one kind of relation at a time. Multi-head attention runs `H`
# attentions side by side on different projections of the same input and concatenates them:
#
# `MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W_o`, with `head_h = Attention(Q W_q^h, K W_k^h, V W_v^h)`

# %%
import time

import numpy as np

from npformer import gradcheck, nn, ops

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
attention = nn.SelfAttention(d_model=8, n_heads=2, rng=rng, dtype=np.float64, fused=False)
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
    count = nn.SelfAttention(d_model, n_heads, rng=rng).num_params()
    print(f"D={d_model}, H={n_heads}: {count:,} parameters (4(D^2+D) = {4 * (d_model ** 2 + d_model):,})")

# %% [markdown]
# ## The textbook form
#
# `nn.SelfAttention(d_model, n_heads, fused=False)` is the paper's layer, step by step. Its four
# children `q`, `k`, `v` and `o` are `Linear(D, D)` layers, and the forward pass is:
#
# 1. three projections of the input: `q = x W_q + b_q`, `k = x W_k + b_k`, `v = x W_v + b_v`;
# 2. split each into heads, `(B, T, D) -> (B, H, T, Dh)`;
# 3. scaled dot-product attention over all heads at once (`ops.attention_forward`, lesson 7);
# 4. merge the heads back, `(B, H, T, Dh) -> (B, T, D)`;
# 5. the output projection `o`.
#
# Here it is written out with the ops alone, reading the module's weights:

# %%
def textbook_forward(attention, x, mask=None):
    """Self-attention op by op; returns the output and what the backward pass needs."""
    split, merge = attention.split_heads, attention.merge_heads
    q, q_cache = ops.linear_forward(x, attention.q.W, attention.q.b)
    k, k_cache = ops.linear_forward(x, attention.k.W, attention.k.b)
    v, v_cache = ops.linear_forward(x, attention.v.W, attention.v.b)
    context, attention_cache = ops.attention_forward(split(q), split(k), split(v), mask)
    out, o_cache = ops.linear_forward(merge(context), attention.o.W, attention.o.b)
    return out, (q_cache, k_cache, v_cache, attention_cache, o_cache)


# %% [markdown]
# The backward pass is the forward pass in reverse: the output projection's backward (lesson 2),
# merge becomes split, attention's backward (lesson 7), split becomes merge, and the three input
# projections' backward. The input `x` feeds `q`, `k` **and** `v`, so its gradient is the **sum**
# of the three paths.

# %%
def textbook_backward(attention, dout, cache):
    """The reverse of ``textbook_forward``: ``dx`` and the gradient of every parameter."""
    split, merge = attention.split_heads, attention.merge_heads
    q_cache, k_cache, v_cache, attention_cache, o_cache = cache
    d_merged, dW_o, db_o = ops.linear_backward(dout, o_cache)
    dq, dk, dv = ops.attention_backward(split(d_merged), attention_cache)
    dx_q, dW_q, db_q = ops.linear_backward(merge(dq), q_cache)
    dx_k, dW_k, db_k = ops.linear_backward(merge(dk), k_cache)
    dx_v, dW_v, db_v = ops.linear_backward(merge(dv), v_cache)
    grads = {"q.W": dW_q, "q.b": db_q, "k.W": dW_k, "k.b": db_k, "v.W": dW_v, "v.b": db_v, "o.W": dW_o, "o.b": db_o}
    return dx_q + dx_k + dx_v, grads


# %% [markdown]
# `SelfAttention` with `fused=False` does exactly this, with each projection a `Linear` block
# that keeps its own cache. The two give the same numbers, and the module passes the
# finite-difference check, every parameter included (a padding mask on the last key of the
# second sentence, as in lesson 6):

# %%
mask = ops.padding_mask(np.array([[5, 6, 7, 8, 9], [5, 6, 7, 8, 0], [5, 6, 7, 8, 9]]))
dout = rng.standard_normal(x.shape)
out, cache = textbook_forward(attention, x, mask)
dx, grads = textbook_backward(attention, dout, cache)
attention.zero_grad()
module_out = attention.forward(x, mask)
module_dx = attention.backward(dout)
same = {"output": np.allclose(module_out, out), "dx": np.allclose(module_dx, dx),
        "parameters": all(np.allclose(attention.grads()[key], grads[key]) for key in grads)}
print("module against the ops written out, same:", same)
assert all(same.values())

report = gradcheck.check_module(attention, {"x": x}, forward=lambda x: attention.forward(x, mask))
print(report)
assert report.passed

# %% [markdown]
# One row deserves a look: `k.b`, the key bias, has a gradient of exactly zero. Adding the same
# vector `b` to every key adds `q · b` to every score of a row, and softmax ignores a shift
# shared by a whole row. The check reports it as "within resolution": both gradients are zero
# to within what finite differences can see.
#
# ## Cross-attention
#
# In the decoder (lesson 10) the queries come from one sequence and the keys and values from
# another, the encoder's output `memory`. `nn.MultiHeadAttention` is that layer:
# `forward(query, memory, mask)` projects `q` from `query` and `k`, `v` from `memory`, and
# `backward(dout)` returns `(d_query, d_memory)`; `d_memory` is the sum of the `k` and `v` paths.

# %%
cross = nn.MultiHeadAttention(d_model=8, n_heads=2, rng=rng, dtype=np.float64, fused=False)
cross_report = gradcheck.check_module(cross, {"query": x, "memory": rng.standard_normal((3, 4, 8))})
print(cross_report.table().splitlines()[-1])
assert cross_report.passed

# %% [markdown]
# ## The fused form
#
# The three projections of self-attention all read the same `x`. Placing `W_q`, `W_k` and `W_v`
# side by side gives one `(D, 3D)` matrix, and **one** product `x [W_q | W_k | W_v]` computes
# `q`, `k` and `v` together; its backward pass splits the `(D, 3D)` gradient back into the
# three `Linear` layers' own `W` and `b`. (Cross-attention fuses `k` and `v` the same way:
# `memory [W_k | W_v]`.) The parameters keep their names and shapes; only the number of matrix
# products changes. This is `fused=True`, the default, which the models train with;
# `nn.use_fused_attention(model, False)` switches a whole model to the textbook form.
#
# The two forms are the same function. Same weights, same input, in float64:

# %%
fused = nn.SelfAttention(d_model=8, n_heads=2, rng=np.random.default_rng(1), dtype=np.float64, fused=True)
fused.load_state_dict(attention.state_dict())
attention.zero_grad()
fused.zero_grad()
out_textbook, out_fused = attention.forward(x, mask), fused.forward(x, mask)
dx_textbook, dx_fused = attention.backward(dout), fused.backward(dout)
print(f"output: largest difference {np.abs(out_fused - out_textbook).max():.1e}")
print(f"dx:     largest difference {np.abs(dx_fused - dx_textbook).max():.1e}")
for key, grad in attention.grads().items():
    print(f"{key:4s}:  largest difference {np.abs(fused.grads()[key] - grad).max():.1e}")
assert np.abs(out_fused - out_textbook).max() < 1e-12 and np.abs(dx_fused - dx_textbook).max() < 1e-12
assert all(np.abs(fused.grads()[key] - grad).max() < 1e-12 for key, grad in attention.grads().items())
print(gradcheck.check_module(fused, {"x": x}, forward=lambda x: fused.forward(x, mask)).table().splitlines()[-1])

# %% [markdown]
# Any difference printed is rounding, far below `1e-12` (the cell asserts it): each column of the
# fused product is one of the dot products of before, and the fused backward adds the three
# paths' contributions to `dx` inside one product, in another order than `dx_q + dx_k + dx_v`.
# The fused module passes the finite-difference check too (the last line).
#
# Why fuse at all? One product with three times the columns keeps the processor busier than three
# small ones. The gain depends on the sizes and the machine; here is this machine's, for a batch
# of 32 sentences of 64 tokens with `D = 256` and `H = 8`, in float32:

# %%
def milliseconds(module, x, repeats=3):
    module.forward(x)
    start = time.perf_counter()
    for _ in range(repeats):
        module.backward(module.forward(x))
    return (time.perf_counter() - start) / repeats * 1000


big_x = rng.standard_normal((32, 64, 256)).astype(np.float32)
for flag in (False, True):
    block = nn.SelfAttention(256, 8, rng=np.random.default_rng(0), fused=flag)
    print(f"fused={flag!s:5s}: {milliseconds(block, big_x):6.1f} ms per forward and backward")

# %% [markdown]
# Each head has its own attention pattern over the same tokens:

# %%
from npformer import viz  # noqa: E402

tokens = ["the", "black", "cat", "sat", "down"]
sentence = rng.standard_normal((1, 5, 8))
attention.forward(sentence)
figure = viz.attention_heatmaps([attention.attn_weights[0]], tokens, tokens,
                                title="Two heads of an untrained self-attention: different patterns",
                                path=viz.figures_dir() / "08_heads.png")

# %% [markdown]
# ## Exercises
#
# 1. Prove that the key bias gets zero gradient. Does the value bias?
# 2. With `H = 1` and `Dh = D`, is multi-head attention the same as lesson 7's attention plus
#    four linear layers? Check it numerically.
# 3. Count the multiply-adds of one multi-head attention for `B, T, D, H`.
# 4. Write `textbook_forward` and `textbook_backward` for cross-attention, and compare them with
#    `nn.MultiHeadAttention(..., fused=False)`.
