# %% [markdown]
# # Lesson 8 — Multi-head attention: splitting and merging heads, parameter count
#
# One attention can focus on one kind of relation at a time. Multi-head attention runs $H$
# attentions side by side on different projections of the same input and concatenates them:
#
# $$\operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_H)\, W_o,
# \qquad \text{head}_h = \operatorname{Attention}(Q W_q^h, K W_k^h, V W_v^h)$$

# %%
import time

import numpy as np

from npformer import gradcheck, nn, ops
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Heads are a reshape
#
# The paper's $W_q^h$ are $D \times D_h$ matrices, with $D_h = D / H$. Stacked side by side they
# form one $D \times D$ matrix $W_q = [W_q^1 \mid \dots \mid W_q^H]$, so all heads are computed with
# **one** product $X W_q$, whose last axis holds head 1's $D_h$ numbers, then head 2's, and so on.
# Splitting into heads is then a reshape of that last axis into $(H, D_h)$, followed by a transpose
# that brings the head axis next to the batch axis, where attention (lesson 7) expects it:
#
# `(B, T, D) -> reshape (B, T, H, Dh) -> transpose (B, H, T, Dh)`
#
# Merging undoes it: transpose back to `(B, T, H, Dh)`, then reshape to `(B, T, H * Dh)`, which
# is the concatenation of the heads. No loop over heads anywhere.
#
# ### Your turn
#
# Write `split_heads(x, n_heads)`: `x` has shape `(B, T, D)` with `D` divisible by `n_heads`;
# return the array of shape `(B, H, T, D / H)` whose `[b, h, t]` row is the `h`-th slice of `D / H`
# numbers of `x[b, t]`. (A reshape straight to `(B, H, T, Dh)` without the transpose has the right
# shape and the wrong numbers: it mixes positions.)

# %%
def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D / H): the last axis cut into H heads."""
    ### BEGIN SOLUTION
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)
    ### END SOLUTION


# %%
print(check("split_heads", split_heads))

# %% [markdown]
# Now `merge_heads(x)`, the inverse: `x` has shape `(B, H, T, Dh)`; return shape `(B, T, H * Dh)`,
# with head $h$ (counting from $0$) in columns $h D_h$ to $(h + 1) D_h - 1$. Merging a split must give
# back the input.

# %%
def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H * Dh): the heads concatenated along the last axis."""
    ### BEGIN SOLUTION
    batch, heads, length, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_dim)
    ### END SOLUTION


# %%
print(check("merge_heads", merge_heads))

# %% [markdown]
# npformer's attention layers have both as methods; a split followed by a merge gives back the
# input exactly:

# %%
attention = nn.SelfAttention(d_model=8, n_heads=2, rng=rng, dtype=np.float64)
x = rng.standard_normal((3, 5, 8))
heads = attention.split_heads(x)
print("split:", x.shape, "->", heads.shape, " merged back equal:", np.array_equal(attention.merge_heads(heads), x))
assert np.array_equal(attention.merge_heads(heads), x)

# %% [markdown]
# ## Parameters
#
# Four $D \times D$ projections with biases: $4(D^2 + D)$, whatever $H$ is. Heads change how the
# $D$ dimensions are used, not how many parameters there are.

# %%
for d_model, n_heads in ((512, 8), (512, 1), (32, 2)):
    count = nn.SelfAttention(d_model, n_heads, rng=rng).num_params()
    print(f"D={d_model}, H={n_heads}: {count:,} parameters (4(D^2+D) = {4 * (d_model ** 2 + d_model):,})")
    assert count == 4 * (d_model ** 2 + d_model)

# %% [markdown]
# ## The forward pass
#
# In the decoder (lesson 10) the queries come from one sequence and the keys and values from
# another, the encoder's output, called the `memory`. So we write the general form,
# **cross-attention**; self-attention is the case where `memory` is `query`. With the queries'
# input $X$ of shape `(B, Tq, D)` and the memory $M$ of shape `(B, Tm, D)`:
#
# 1. three projections: $Q = X W_q$, $K = M W_k$, $V = M W_v$ (each $W$ is $D \times D$);
# 2. split each into heads, `(B, T, D) -> (B, H, T, Dh)`;
# 3. scaled dot-product attention over all heads at once,
#    $C_h = \operatorname{softmax}\left(Q_h K_h^\top / \sqrt{D_h}\right) V_h$, masked (lesson 7);
# 4. merge the heads back, `(B, H, Tq, Dh) -> (B, Tq, D)`;
# 5. the output projection, $Y = \operatorname{merge}(C)\, W_o$.
#
# The paper's layer also adds a bias after each projection; leave them out here (npformer's layer,
# below, has them).
#
# ### Your turn
#
# Write `multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask)`: `query` of shape
# `(B, Tq, D)`, `memory` of shape `(B, Tm, D)`, the four weights of shape `(D, D)`, and `mask`
# either None or a boolean array that broadcasts to `(B, H, Tq, Tm)`, True where a query may
# attend to a key (a padding mask `(B, 1, 1, Tm)`, or a causal mask `(Tq, Tm)`). Return `out`, of
# shape `(B, Tq, D)`. For steps 2 and 4, call your `split_heads` and `merge_heads` from above, or
# write the reshapes inline. For step 3, call your own attention from lesson 7, pasted into the cell
# below (npformer's `ops` cannot be called from graded code: the grader runs your function where
# npformer is not importable). Its three functions take the heads, `q` of shape `(B, H, Tq, Dh)`
# and `k`, `v` of shape `(B, H, Tm, Dh)`, and the `mask`:
#
# * `my_attention(q, k, v, mask)` is your lesson 7 `attention`; it returns `out`, `(B, H, Tq, Dh)`;
# * `my_attention_backward(q, k, v, mask, dout)` is your lesson 7 `attention_backward`; it returns
#   `(dq, dk, dv)`, shaped like `q`, `k` and `v`;
# * `my_attention_parts(q, k, v, mask)` is a helper the other two can share: it returns the pair
#   `(out, weights)`, with `weights` the attention weights $P$, `(B, H, Tq, Tm)`, as your lesson 7
#   `attention_weights` computes them. The backward receives the heads and the mask, not the
#   weights, so it has to recompute them: one function that returns both spares writing that
#   forward twice. With a variant (below), the backward needs your variant's weights, while
#   `my_attention` stays the lesson's form. If your functions call other lesson 7 helpers instead,
#   paste those too, renamed with `my_` in front as these are, and leave this one a stub: nothing
#   else calls it.
#
# None of the three is graded on its own: `check` grades `multi_head_attention` and
# `multi_head_attention_backward` together with every function of this lesson they call, so a
# mistake in your pasted attention shows up there.

# %%
# Your attention from lesson 7, pasted here under these names: the multi-head functions below call them.
def my_attention(q, k, v, mask):
    """softmax(q k^T / sqrt(Dh), masked) @ v, with all-zero weights for a fully masked query."""
    ### BEGIN SOLUTION
    return my_attention_parts(q, k, v, mask)[0]
    ### END SOLUTION


def my_attention_backward(q, k, v, mask, dout):
    """Gradients (dq, dk, dv) of my_attention(q, k, v, mask)."""
    ### BEGIN SOLUTION
    out, weights = my_attention_parts(q, k, v, mask)
    scale = 1.0 / np.sqrt(q.shape[-1])
    dv = weights.swapaxes(-1, -2) @ dout
    dweights = dout @ v.swapaxes(-1, -2)
    dscores = weights * (dweights - (dweights * weights).sum(axis=-1, keepdims=True))
    return scale * dscores @ k, scale * dscores.swapaxes(-1, -2) @ q, dv
    ### END SOLUTION


def my_attention_parts(q, k, v, mask):
    """(out, weights) of masked scaled dot-product attention: (B, H, Tq, Dh) and P, (B, H, Tq, Tm)."""
    ### BEGIN SOLUTION
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0))
    row_sum = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(row_sum > 0, row_sum, 1.0)
    return weights @ v, weights
    ### END SOLUTION

# %%
def multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask):
    """Attention of the queries projected from ``query`` over keys and values projected from ``memory``."""
    ### BEGIN SOLUTION
    def split(t):
        batch, length, d_model = t.shape
        return t.reshape(batch, length, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)

    def merge(t):
        batch, heads, length, head_dim = t.shape
        return t.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_dim)

    q, k, v = split(query @ Wq), split(memory @ Wk), split(memory @ Wv)
    return merge(my_attention(q, k, v, mask)) @ Wo
    ### END SOLUTION


# %%
print(check("multi_head_attention", multi_head_attention))

# %% [markdown]
# ## The backward pass, one step at a time
#
# The upstream gradient $dY = \partial L / \partial Y$, of shape `(B, Tq, D)`, is given, and the other
# gradients are written the same way ($dC = \partial L / \partial C$, and so on). The forward pass is a
# chain,
#
# $$X, M \;\to\; X W_q,\; M W_k,\; M W_v \;\xrightarrow{\ \operatorname{split}\ }\; q, k, v
# \;\to\; C = \operatorname{Attention}(q, k, v) \;\xrightarrow{\ \operatorname{merge}\ }\; C'
# \;\to\; Y = C' W_o$$
#
# and the backward pass walks it from the end. Each step below takes the inputs of
# `multi_head_attention` and `dout` $= dY$, redoes the forward pass as far as it needs (nothing is
# cached for you: `my_attention_backward` takes the heads and the mask and recomputes the weights
# itself), returns one intermediate gradient, and is graded on its own; the last one puts them
# together. What you compose is yours: the linear layer of lesson 2, `split_heads` and `merge_heads`
# from above, and your pasted attention (with a variant, the forward you redo is your variant's).

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("08"))

# %% [markdown]
# ### Step 1: through the output projection and the merge, to the heads' context
#
# $Y_{bti} = \sum_j C'_{btj}\, (W_o)_{ji}$, with the same $W_o$ for every sentence $b$ and position
# $t$, and the merge only moves numbers: $C'_{bt,\,h D_h + d} = C_{bhtd}$. Which entries of $Y$
# does $C_{bhtd}$ reach, and with which weights? Write
# `multi_head_attention_d_context(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)`, returning
# $dC$ in the shape of the heads' context, `(B, H, Tq, Dh)`.

# %%
def multi_head_attention_d_context(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """dL/dC, the heads' context before the merge: (B, H, Tq, Dh)."""
    ### BEGIN SOLUTION
    return split_heads(dout @ Wo.T, n_heads)
    ### END SOLUTION


# %%
print(check("multi_head_attention_d_context", multi_head_attention_d_context))

# %% [markdown]
# ### Step 2: through each head's attention, to its queries, keys and values
#
# Head $h$ computes its context $C_h$ from $q_h$, $k_h$, $v_h$ and the mask by lesson 7's attention
# (your variant's, if you have one), and from nothing else. Write
# `multi_head_attention_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)`, returning
# `(dq, dk, dv)`, the gradients of the heads, shaped like `q`, `(B, H, Tq, Dh)`, and like `k` and
# `v`, `(B, H, Tm, Dh)`.

# %%
def multi_head_attention_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(dq, dk, dv), the gradients of the heads q (B, H, Tq, Dh), k and v (B, H, Tm, Dh)."""
    ### BEGIN SOLUTION
    q, k, v = split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), split_heads(memory @ Wv, n_heads)
    d_context = multi_head_attention_d_context(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)
    return my_attention_backward(q, k, v, mask, d_context)
    ### END SOLUTION


# %%
print(check("multi_head_attention_d_heads", multi_head_attention_d_heads))

# %% [markdown]
# ### Step 3: through the split and the projections, to the two inputs
#
# $X W_q$ reads the query; $M W_k$ and $M W_v$ both read the memory. Through which of $q$, $k$ and
# $v$ does each input reach the loss, and what does the chain rule make of an input that reaches it
# along more than one path? The split only moves numbers, as the merge did. Write
# `multi_head_attention_d_inputs(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)`, returning
# `(dquery, dmemory)`, shaped like `query`, `(B, Tq, D)`, and `memory`, `(B, Tm, D)`.

# %%
def multi_head_attention_d_inputs(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """(dquery, dmemory), shaped like query (B, Tq, D) and memory (B, Tm, D)."""
    ### BEGIN SOLUTION
    dq, dk, dv = (merge_heads(d) for d in multi_head_attention_d_heads(query, memory, Wq, Wk, Wv, Wo, n_heads,
                                                                       mask, dout))
    return dq @ Wq.T, dk @ Wk.T + dv @ Wv.T
    ### END SOLUTION


# %%
print(check("multi_head_attention_d_inputs", multi_head_attention_d_inputs))

# %% [markdown]
# ### Step 4: the four weights
#
# Each of $W_q$, $W_k$, $W_v$ and $W_o$ is one matrix used at every sentence and every position.
# Write `multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)`, returning
# `(dquery, dmemory, dWq, dWk, dWv, dWo)`, shaped like `query`, `memory` and the four weights. You
# may call your steps. The check grades them again and names the first wrong one; it compares with
# npformer and with finite differences of the forward, and once yours passes it shows npformer's
# form.

# %%
def multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """Gradients of ``multi_head_attention`` with respect to its two inputs and four weights."""
    ### BEGIN SOLUTION
    def rows(t):
        return t.reshape(-1, t.shape[-1])

    arguments = (query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)
    q, k, v = split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), split_heads(memory @ Wv, n_heads)
    merged = merge_heads(my_attention_parts(q, k, v, mask)[0])
    dq, dk, dv = (merge_heads(d) for d in multi_head_attention_d_heads(*arguments))
    dquery, dmemory = multi_head_attention_d_inputs(*arguments)
    return (dquery, dmemory, rows(query).T @ rows(dq), rows(memory).T @ rows(dk), rows(memory).T @ rows(dv),
            rows(merged).T @ rows(dout))
    ### END SOLUTION


# %%
print(check("multi_head_attention_backward", multi_head_attention_backward, steps=(multi_head_attention_d_context, multi_head_attention_d_heads, multi_head_attention_d_inputs)))

# %% [markdown]
# Once it passes, this function runs every attention block of your translator in lesson 27
# (`npformer train --ops`). npformer's blocks have biases, which yours does not take: each bias rides
# as one more row of its weight, read by an input column of ones ($XW + b = [X \mid 1]\,[W ; b]$),
# so your `dWq` comes back with $db_q$ as its last row. The output's bias is added after everything
# your function computes; what is its gradient?

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# * **The output projection** (lesson 2). The product $Y = C' W_o$ is done for every batch entry and
#   position with the same $W_o$, so its gradient is summed over both:
#
#   $$dW_o = \sum_{b,t} C'^{\top}_{bt}\, dY_{bt}, \qquad dC' = dY\, W_o^\top$$
#
#   where $C'_{bt}$ and $dY_{bt}$ are the rows ($1 \times D$) of position $t$ of sentence $b$, so
#   each term of the sum is a $D \times D$ outer product.
# * **Merge and split** only move numbers, so the gradient moves back the same way: the gradient of
#   a merge is a split, and the gradient of a split is a merge. $dC = \operatorname{split}(dC')$
#   (step 1).
# * **Attention** (lesson 7) turns $dC$ into $dq_h$, $dk_h$ and $dv_h$, of shape `(B, H, T, Dh)`:
#   `my_attention_backward(q, k, v, mask, dC)` (step 2). A variant changes only this step.
# * **Merge** them back to $dQ$, $dK$, $dV$, of shape `(B, T, D)`; the query feeds one path, the
#   memory two, $K = M W_k$ and $V = M W_v$, so its gradient is the **sum** of both (step 3):
#
#   $$dX = dQ\, W_q^\top, \qquad dM = dK\, W_k^\top + dV\, W_v^\top$$
#
# * **The three input projections**, as for $W_o$ (one product each once the batch and position
#   axes are flattened, `X.reshape(-1, D).T @ dQ.reshape(-1, D)`):
#
#   $$dW_q = \sum_{b,t} X^\top_{bt}\, dQ_{bt}, \qquad dW_k = \sum_{b,t} M^\top_{bt}\, dK_{bt}, \qquad
#   dW_v = \sum_{b,t} M^\top_{bt}\, dV_{bt}$$
#
# In self-attention the memory **is** the query, so $dX$ is the sum of the three paths,
# `dquery + dmemory`.


# %% [markdown] tags=["instructor"]
# **The classic mistake** is to follow only one path back into the memory, here the values',
# forgetting that the keys were computed from it too. Only `dmemory` is wrong, and only in the rows
# whose key could move a softmax: a masked key gets no gradient on either path, and where a query
# sees a single key its weight is $1$ whatever the score, so that key gets none either (the case
# with $T_m = 1$, and the second sentence of the first case, which has one real key):

# %% tags=["instructor"]
def multi_head_attention_backward_values_only(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    def split(t):
        return t.reshape(*t.shape[:2], n_heads, -1).transpose(0, 2, 1, 3)

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(t.shape[0], t.shape[2], -1)

    q, k, v = split(query @ Wq), split(memory @ Wk), split(memory @ Wv)
    merged = merge(my_attention(q, k, v, mask))
    dq, dk, dv = (merge(d) for d in my_attention_backward(q, k, v, mask, split(dout @ Wo.T)))
    rows = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    dmemory = dv @ Wv.T  # the keys' path, dk @ Wk.T, is missing
    return (dq @ Wq.T, dmemory, rows(query).T @ rows(dq), rows(memory).T @ rows(dk), rows(memory).T @ rows(dv),
            rows(merged).T @ rows(dout))

mistake = check("multi_head_attention_backward", multi_head_attention_backward_values_only, strict=False)
print(mistake)
assert not mistake.passed and {row.tensor for row in mistake.rows if not row.passed} == {"dmemory"}

# %% [markdown]
# ## npformer's layer
#
# `nn.SelfAttention(d_model, n_heads)` is the paper's self-attention layer, step by step: what you
# just wrote, with `memory` the same `x` as `query` and a bias after each projection. Its four
# children `q`, `k`, `v` and `o` are `Linear(D, D)` layers ($Q = X W_q + b_q$, and so on), and its
# `backward(dout)` returns one gradient, `dx`. A question for you: how is that `dx` made of the
# `dquery` and `dmemory` your function returns when `memory` is `query`?
#
# The module passes the finite-difference check, every parameter included (a padding mask on the
# last key of the second sentence, as in lesson 6):

# %%
mask = ops.padding_mask(np.array([[5, 6, 7, 8, 9], [5, 6, 7, 8, 0], [5, 6, 7, 8, 9]]))
report = gradcheck.check_module(attention, {"x": x}, forward=lambda x: attention.forward(x, mask))
print(report)
assert report.passed

# %% [markdown] tags=["instructor"]
# **The answer**: `dx = dquery + dmemory`, the sum of the three paths. Below, the layer written out
# with the ops alone, reading the module's weights, against the module itself: each bias gets its
# output's gradient summed over the batch and the positions (lesson 2).

# %% tags=["instructor"]
def textbook_forward(attention, x, mask=None):
    """Self-attention op by op; returns the output and what the backward pass needs."""
    split, merge = attention.split_heads, attention.merge_heads
    q, q_cache = ops.linear_forward(x, attention.q.W, attention.q.b)
    k, k_cache = ops.linear_forward(x, attention.k.W, attention.k.b)
    v, v_cache = ops.linear_forward(x, attention.v.W, attention.v.b)
    context, attention_cache = ops.attention_forward(split(q), split(k), split(v), mask)
    out, o_cache = ops.linear_forward(merge(context), attention.o.W, attention.o.b)
    return out, (q_cache, k_cache, v_cache, attention_cache, o_cache)


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


dout = np.random.default_rng(8).standard_normal(x.shape)
out, cache = textbook_forward(attention, x, mask)
dx, grads = textbook_backward(attention, dout, cache)
attention.zero_grad()
module_out = attention.forward(x, mask)
module_dx = attention.backward(dout)
same = {"output": np.allclose(module_out, out), "dx": np.allclose(module_dx, dx),
        "parameters": all(np.allclose(attention.grads()[key], grads[key]) for key in grads)}
print("module against the ops written out, same:", same)
assert all(same.values())

# %% [markdown]
# One row deserves a look: `k.b`, the key bias, has a gradient of exactly zero. Adding the same
# vector $b$ to every key adds $q \cdot b$ to every score of a row, and softmax ignores a shift
# shared by a whole row. The check reports it as "within resolution": both gradients are zero
# to within what finite differences can see.
#
# ## Cross-attention
#
# `nn.MultiHeadAttention` is the layer of your exercise, with the biases:
# `forward(query, memory, mask)` projects $Q$ from `query` and $K$, $V$ from `memory`, and
# `backward(dout)` returns `(d_query, d_memory)`.

# %%
cross = nn.MultiHeadAttention(d_model=8, n_heads=2, rng=rng, dtype=np.float64)
cross_report = gradcheck.check_module(cross, {"query": x, "memory": rng.standard_normal((3, 4, 8))})
print(cross_report.table().splitlines()[-1])
assert cross_report.passed

# %% [markdown]
# ## The fused form
#
# The three projections of self-attention all read the same $X$. Placing $W_q$, $W_k$ and $W_v$
# side by side gives one $D \times 3D$ matrix, and **one** product $X\,[W_q \mid W_k \mid W_v]$
# computes $Q$, $K$ and $V$ together. (Cross-attention fuses $K$ and $V$ the same way:
# $M\,[W_k \mid W_v]$.) npformer's attention blocks compute it this way, in the forward pass and in
# the backward pass: from its construction, a block's `q`, `k` and `v` are `Linear` layers whose `W`
# and `b` are column views of one matrix the block owns (`block.qkv`, an `nn.FusedLinear`), so the
# parameters keep their names, shapes and values, and an optimizer's update of `q.W` is an update
# of the fused matrix.
#
# The two forms are the same function. Below, the three products of the forward pass, written with
# the block's own `q`, `k` and `v` layers, against the block's fused forward: same weights, same
# input, in float64:

# %%
def three_products_forward(block, x, mask):
    """``block``'s self-attention with q, k and v as three products."""
    q, k, v = (block.split_heads(layer.forward(x)) for layer in (block.q, block.k, block.v))  # (B, H, T, Dh) each
    return block.attend_heads(q, k, v, mask)


twin = nn.SelfAttention(d_model=8, n_heads=2, rng=np.random.default_rng(1), dtype=np.float64)
twin.load_state_dict(attention.state_dict())
print("q.W is a view of the fused matrix:", attention.q.W.base is attention.qkv.weight, attention.qkv.weight.shape)
out_fused = attention.forward(x, mask)
out_three = three_products_forward(twin, x, mask)
print(f"output: largest difference {np.abs(out_fused - out_three).max():.1e}")
assert np.abs(out_fused - out_three).max() < 1e-12

# %% [markdown] tags=["instructor"]
# The backward passes agree too (the three paths' `dx` added, against the fused backward, which adds
# their contributions inside one product, in another order), and so do the parameters' gradients:

# %% tags=["instructor"]
def three_products_backward(block, dout):
    """The backward pass of ``three_products_forward``, last called on ``block``: ``dx``."""
    dq, dk, dv = block.attend_heads_backward(dout)
    return sum(layer.backward(block.merge_heads(grad)) for layer, grad in zip((block.q, block.k, block.v),
                                                                               (dq, dk, dv)))


attention.zero_grad()
twin.zero_grad()
attention.forward(x, mask)
dx_fused = attention.backward(dout)
three_products_forward(twin, x, mask)
dx_three = three_products_backward(twin, dout)
print(f"dx:   largest difference {np.abs(dx_fused - dx_three).max():.1e}")
for key, grad in attention.grads().items():
    print(f"{key:4s}: largest difference {np.abs(twin.grads()[key] - grad).max():.1e}")
assert np.abs(dx_fused - dx_three).max() < 1e-12
assert all(np.abs(twin.grads()[key] - grad).max() < 1e-12 for key, grad in attention.grads().items())

# %% [markdown]
# Any difference printed is rounding, far below $10^{-12}$ (the cell asserts it): each column of the
# fused product is one of the dot products of before.
#
# Why fuse at all? One product with three times the columns can keep the processor busier than
# three small ones; the fused form also pays for splitting $[Q \mid K \mid V]$ into heads. Whether it
# wins depends on the sizes and the machine. Here is this machine's answer for the forward pass, for
# a batch of 32 sentences of 64 tokens with $D = 256$ and $H = 8$, in float32 (the training step's
# fast path fuses inside its packed layout, where the heads are unpacked from the product anyway;
# lesson 16 times that path):

# %%
def milliseconds(step, repeats=3):
    step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats * 1000


big_x = rng.standard_normal((32, 64, 256)).astype(np.float32)
big_block = nn.SelfAttention(256, 8, rng=np.random.default_rng(0))
print(f"three products: {milliseconds(lambda: three_products_forward(big_block, big_x, None)):6.1f} ms per forward")
print(f"fused:          {milliseconds(lambda: big_block.forward(big_x)):6.1f} ms per forward")

# %% tags=["instructor"]
def three_products_step():
    three_products_forward(big_block, big_x, None)
    three_products_backward(big_block, big_x)


print(f"three products: {milliseconds(three_products_step):6.1f} ms per forward and backward")
print(f"fused:          {milliseconds(lambda: big_block.backward(big_block.forward(big_x))):6.1f} ms per forward and backward")


# %% [markdown]
# What heads do shows only in a trained model. npformer ships one, `npformer.pretrained("toy")`: the
# default `npformer train` run on the toy corpus of lesson 13 (its size and test BLEU printed below).
# Below, the encoder self-attention of every layer and head on one sentence. Each head has its own
# projections, so the heads of a layer weigh the same words differently; the printout after the
# figure says, for each head, which word each word looks at most.

# %%
import npformer  # noqa: E402
from npformer import viz  # noqa: E402
from npformer.tasks.translation import attention_of, pretrained_record  # noqa: E402

toy = npformer.pretrained("toy")
print(f"pretrained toy translator: {toy.config['model']['n_layers']} layers, {toy.config['model']['n_heads']} heads, "
      f"d_model {toy.config['model']['d_model']}; test BLEU {pretrained_record('toy')['bleu_greedy']:.1f} (greedy)")
read = attention_of(toy, "the black cat eats the white apple.", beam_size=1)
rows, columns = read.labels["encoder"]
figure = viz.attention_heatmaps(read.attention["encoder"], rows, columns,
                                title="Encoder self-attention of the pretrained toy translator, every layer and head",
                                path=viz.figures_dir() / "08_heads.png")
for layer, heads in enumerate(read.attention["encoder"]):
    for head, weights in enumerate(heads):
        looks_at = [columns[int(np.argmax(row))] for row in weights[: len(rows), : len(columns)]]
        print(f"layer {layer}, head {head}: " + ", ".join(f"{word}->{target}" for word, target in zip(rows, looks_at)))
heads_differ = any(not np.array_equal(np.argmax(heads[0], -1), np.argmax(heads[1], -1)) for heads in read.attention["encoder"])
assert heads_differ, "the two heads of some layer must pick different words"
head_gap = max(float(np.abs(heads[0] - heads[1]).max()) for heads in read.attention["encoder"])
print(f"largest difference between two heads' weights of one layer: {head_gap:.2f}")
assert head_gap > 0.05, "the two heads must attend differently"

# %% [markdown]
# ## Exercises
#
# 1. Prove that the key bias $b_k$ gets zero gradient. Does the value bias $b_v$? Auto-graded part:
#    `key_and_value_bias_grads` below returns the gradients $db_k$ and $db_v$ of the biases added to
#    `memory @ Wk` and `memory @ Wv` (at $b = 0$), for the lesson's attention
#    $\operatorname{softmax}(q k^\top / \sqrt{D_h})$, whatever your variant; the proof stays for the
#    rubric.
# 2. With $H = 1$ and $D_h = D$, is multi-head attention the same as lesson 7's attention plus
#    four linear layers? Check it numerically. Auto-graded part:
#    `same_as_one_attention(d_model, n_heads)` below says, for any number of heads, whether the layer
#    equals lesson 7's attention (one head of width $D$) between the same four linear layers for
#    every choice of weights; your numerical check and the reason stay for the rubric.
# 3. Count the multiply-adds of one multi-head attention (the forward pass) in terms of $B$, $T$,
#    $D$ and $H$. Which terms depend on $H$? Auto-graded part: `multi_head_attention_multiply_adds`
#    below returns the counts of self-attention ($T_q = T_m = T$) as three ints: the four
#    projections, the scores $q k^\top$ and the weighted sum of the values; which terms depend on
#    $H$, and why, stays for the rubric.
# 4. Add the four biases $b_q, b_k, b_v, b_o$ to your `multi_head_attention` and
#    `multi_head_attention_backward` (which then also return $db_q, \dots, db_o$), and compare
#    them with `nn.MultiHeadAttention(...)`: copy its `q.W`, `q.b`, ... into your
#    arguments, and compare with its `forward`, its `backward` and its `grads()`.

# %%
def key_and_value_bias_grads(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    """Question 1: (db_k, db_v), each (D,), the gradients of biases added to memory @ Wk and memory @ Wv."""
    ### BEGIN SOLUTION
    db_k = np.zeros(Wk.shape[1])  # b_k shifts every score of a row by one amount, which softmax ignores
    db_v = (dout @ Wo.T).sum(axis=(0, 1))  # a row's weights sum to 1, so b_v reaches the context as it is
    return db_k, db_v
    ### END SOLUTION


# %%
print(check("key_and_value_bias_grads", key_and_value_bias_grads))


# %%
def same_as_one_attention(d_model, n_heads):
    """Question 2: whether the layer with n_heads heads is lesson 7's attention between four linear layers."""
    ### BEGIN SOLUTION
    return n_heads == 1  # with more heads, each takes its own softmax over a D / H wide slice of the scores
    ### END SOLUTION


# %%
print(check("same_as_one_attention", same_as_one_attention))


# %%
def multi_head_attention_multiply_adds(batch, length, d_model, n_heads):
    """Question 3: (projections, scores, weighted_sum), the multiply-adds of self-attention's forward pass."""
    ### BEGIN SOLUTION
    head_dim = d_model // n_heads
    projections = 4 * batch * length * d_model * d_model  # four (B T, D) @ (D, D) products
    scores = n_heads * batch * length * length * head_dim  # per head, (T, Dh) @ (Dh, T)
    weighted_sum = n_heads * batch * length * length * head_dim  # per head, (T, T) @ (T, Dh)
    return projections, scores, weighted_sum
    ### END SOLUTION


# %%
print(check("multi_head_attention_multiply_adds", multi_head_attention_multiply_adds))


# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. In head $h$, adding $b_k$ to every key adds $q_i \cdot b_k^h / \sqrt{D_h}$ to every score of
#    row $i$: one shift shared by all the keys of that row, which softmax ignores. The output does
#    not depend on $b_k$, so its gradient is exactly zero; in the backward pass,
#    $\sum_j dk_j = \frac{1}{\sqrt{D_h}} \sum_i q_i \sum_j dS_{ij} = 0$ because every row of
#    softmax's $dS$ sums to zero. $b_v$ does get a gradient: a row's weights sum to 1, so
#    $\sum_j a_{ij}(v_j + b_v) = \sum_j a_{ij} v_j + b_v$ and
#    $db_v = \sum_{b,t} (dY\, W_o^\top)_{bt}$, which is not zero in general (a query whose keys are
#    all masked aside). Checked below.
# 2. Yes. With $H = 1$ the split is a reshape to `(B, 1, T, D)`, the scale is $1/\sqrt{D}$ and the
#    merge undoes the reshape, so the layer is $o(\operatorname{Attention}(q(X), k(M), v(M)))$ with
#    $q$, $k$, $v$ and $o$ its four linear layers. A full answer computes both and compares them
#    (below: equal to rounding).
# 3. For self-attention ($T_q = T_m = T$): the four projections cost $4BTD^2$ multiply-adds; the
#    scores $QK^\top$ cost $H \cdot B T^2 D_h = BT^2D$ and the weighted sum of the values the same,
#    so the total is $4BTD^2 + 2BT^2D$. No multiply-add term depends on $H$, because $H D_h = D$.
#    Full marks needs the two groups, the $T^2$ term and the cancellation of $H$; a good answer adds
#    that $H$ shows up only in the elementwise work on the $B H T^2$ scores (scaling, mask, softmax)
#    and in the memory the weights take. The cell below counts the products from the shapes of the
#    head arrays for $H = 1, 2, 4$, and compares the total, at 2 FLOPs per multiply-add, with
#    `models.summary_rows`.
# 4. Reference code below: a bias after each projection, and each bias gradient is its output's
#    gradient summed over the batch and the positions ($db_q = \sum_{b,t} dQ_{bt}$ with $dQ$ merged,
#    and so on; $db_o = \sum_{b,t} dY_{bt}$). Full marks: forward, `(d_query, d_memory)` and all
#    eight parameter gradients equal to the module's to about $10^{-12}$ in float64 (with $db_k$
#    zero, as question 1 says).

# %% tags=["instructor"]
answer_rng = np.random.default_rng(11)
answer_layer = nn.SelfAttention(d_model=8, n_heads=2, rng=answer_rng, dtype=np.float64)
answer_x = answer_rng.standard_normal((3, 5, 8))
answer_dout = answer_rng.standard_normal((3, 5, 8))
answer_layer.forward(answer_x, mask)
answer_layer.backward(answer_dout)
db_k, db_v = answer_layer.grads()["k.b"], answer_layer.grads()["v.b"]
print(f"answer 1: largest |db_k| = {np.abs(db_k).max():.1e}, largest |db_v| = {np.abs(db_v).max():.2f}")
assert np.abs(db_k).max() < 1e-12 and np.abs(db_v).max() > 0.1
assert np.allclose(db_v, (answer_dout @ answer_layer.o.W.T).sum(axis=(0, 1)))  # every query sees a key

# %% tags=["instructor"]
one_head = nn.MultiHeadAttention(d_model=8, n_heads=1, rng=answer_rng, dtype=np.float64)
answer_memory = answer_rng.standard_normal((3, 4, 8))
memory_mask = ops.padding_mask(np.array([[5, 6, 7, 8], [5, 6, 0, 0], [5, 6, 7, 0]]))
q_one = ops.linear_forward(answer_x, one_head.q.W, one_head.q.b)[0][:, None]  # (B, 1, Tq, D): one head
k_one = ops.linear_forward(answer_memory, one_head.k.W, one_head.k.b)[0][:, None]
v_one = ops.linear_forward(answer_memory, one_head.v.W, one_head.v.b)[0][:, None]
context_one = ops.attention_forward(q_one, k_one, v_one, memory_mask)[0][:, 0]
by_hand = ops.linear_forward(context_one, one_head.o.W, one_head.o.b)[0]
gap = np.abs(one_head.forward(answer_x, answer_memory, memory_mask) - by_hand).max()
print(f"answer 2: H = 1 against lesson 7's attention and four linear layers: largest difference {gap:.1e}")
assert gap < 1e-12

# %% tags=["instructor"]
from npformer import models  # noqa: E402


def multiply_adds(a_shape, b_shape):
    """Multiply-adds of a (batched) product a @ b: one per output entry and per summed index."""
    return int(np.prod(a_shape[:-1])) * a_shape[-1] * b_shape[-1]


B, T, D = 3, 7, 16
for n_heads in (1, 2, 4):
    head_shape = split_heads(np.zeros((B, T, D)), n_heads).shape  # (B, H, T, Dh)
    projections = 4 * multiply_adds((B, T, D), (D, D))
    scores = multiply_adds(head_shape, head_shape[:2] + head_shape[:1:-1])  # q @ k^T: (B, H, T, Dh) @ (B, H, Dh, T)
    weighted_sum = multiply_adds(head_shape[:3] + (T,), head_shape)  # weights @ v: (B, H, T, T) @ (B, H, T, Dh)
    print(f"answer 3: H = {n_heads}: projections {projections:,}, scores {scores:,}, weighted sum {weighted_sum:,}")
    assert projections == 4 * B * T * D**2 and scores == weighted_sum == B * T**2 * D
tiny = models.Transformer(models.TransformerConfig(8, 8, d_model=D, n_heads=2, d_ff=32, n_layers=1))
summary = {row.name: row.forward_flops for row in models.summary_rows(tiny, batch=B, src_len=T, tgt_len=5)}
print(f"answer 3: summary_rows counts {summary['encoder.layers.0.self_attn']:,} FLOPs for the encoder's "
      f"self-attention = 2 (4BTD^2 + 2BT^2D) = {2 * (4 * B * T * D**2 + 2 * B * T**2 * D):,}")
assert summary["encoder.layers.0.self_attn"] == 2 * (4 * B * T * D**2 + 2 * B * T**2 * D)


# %% tags=["instructor"]
def multi_head_attention_with_biases(query, memory, Wq, bq, Wk, bk, Wv, bv, Wo, bo, n_heads, mask):
    q, k, v = (split_heads(t, n_heads) for t in (query @ Wq + bq, memory @ Wk + bk, memory @ Wv + bv))
    context, _ = ops.attention_forward(q, k, v, mask)
    return merge_heads(context) @ Wo + bo


def multi_head_attention_with_biases_backward(query, memory, Wq, bq, Wk, bk, Wv, bv, Wo, bo, n_heads, mask,
                                              dout):
    def flat(t):
        return t.reshape(-1, t.shape[-1])

    q, k, v = (split_heads(t, n_heads) for t in (query @ Wq + bq, memory @ Wk + bk, memory @ Wv + bv))
    context, cache = ops.attention_forward(q, k, v, mask)
    merged = merge_heads(context)
    dWo, dbo = flat(merged).T @ flat(dout), flat(dout).sum(axis=0)
    dq, dk, dv = (merge_heads(d) for d in ops.attention_backward(split_heads(dout @ Wo.T, n_heads), cache))
    dWq, dbq = flat(query).T @ flat(dq), flat(dq).sum(axis=0)
    dWk, dbk = flat(memory).T @ flat(dk), flat(dk).sum(axis=0)
    dWv, dbv = flat(memory).T @ flat(dv), flat(dv).sum(axis=0)
    return dq @ Wq.T, dk @ Wk.T + dv @ Wv.T, {"q.W": dWq, "q.b": dbq, "k.W": dWk, "k.b": dbk,
                                               "v.W": dWv, "v.b": dbv, "o.W": dWo, "o.b": dbo}


biased = nn.MultiHeadAttention(d_model=8, n_heads=2, rng=answer_rng, dtype=np.float64)
weights = [getattr(getattr(biased, name), part) for name in "qkvo" for part in "Wb"]
answer_dout = answer_rng.standard_normal((3, 5, 8))
ours_out = multi_head_attention_with_biases(answer_x, answer_memory, *weights, 2, memory_mask)
ours_dquery, ours_dmemory, ours_grads = multi_head_attention_with_biases_backward(
    answer_x, answer_memory, *weights, 2, memory_mask, answer_dout)
biased.zero_grad()
module_out = biased.forward(answer_x, answer_memory, memory_mask)
module_dquery, module_dmemory = biased.backward(answer_dout)
gaps = {"out": np.abs(ours_out - module_out).max(), "d_query": np.abs(ours_dquery - module_dquery).max(),
        "d_memory": np.abs(ours_dmemory - module_dmemory).max(),
        **{key: np.abs(ours_grads[key] - grad).max() for key, grad in biased.grads().items()}}
print("answer 4: largest differences from nn.MultiHeadAttention:",
      ", ".join(f"{key} {value:.0e}" for key, value in gaps.items()))
assert max(gaps.values()) < 1e-12
