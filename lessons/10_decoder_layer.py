# %% [markdown]
# # Lesson 10 — The decoder layer: causal self-attention and cross-attention
#
# A decoder layer has three sub-layers, each with its residual connection and norm (lesson 9):
#
# 1. **masked self-attention** over the target so far (causal and padding mask);
# 2. **cross-attention**: queries from the decoder, keys and values from the encoder's output
#    (`memory`), with the source padding mask (lesson 8);
# 3. the feed-forward network.

# %%
import inspect

import numpy as np

from npformer import gradcheck, nn, ops, viz
from npformer.course import check
from npformer.tokens import PAD_ID

rng = np.random.default_rng(0)

# %% [markdown]
# ## The decoder's self-attention mask
#
# The decoder's self-attention needs both masks of lesson 6 at once. Query $i$ of sentence $b$ may
# attend to key $j$ only if key $j$ is a real token **and** comes no later than the query:
#
# $$\text{mask}_{b,i,j} = (\text{ids}_{b,j} \ne \texttt{<pad>}) \wedge (j \le i)$$
#
# The padding mask has shape `(B, 1, 1, T)` and the causal mask `(T, T)`; combined with `&`, they
# broadcast to `(B, 1, T, T)`, one `(T, T)` matrix per sentence, shared by all heads (the axis of
# size 1).
#
# ### Your turn
#
# Write `decoder_mask(tgt_ids)`: `tgt_ids` is an integer array of shape `(B, T)` in which `PAD_ID`
# (`0`) marks padding. Return the boolean array of shape `(B, 1, T, T)` that is True where query $i$
# may attend to key $j$: the padding mask `(B, 1, 1, T)` combined with the lower-triangular causal
# mask `(T, T)` (diagonal included). Write both out in NumPy (`np.tril` gives the triangle), as in
# lesson 6.

# %%
def decoder_mask(tgt_ids):
    """(B, T) target ids -> boolean (B, 1, T, T): True where a query may attend to a key."""
    ### BEGIN SOLUTION
    length = tgt_ids.shape[1]
    padding = (tgt_ids != PAD_ID)[:, None, None, :]
    causal = np.tril(np.ones((length, length), dtype=bool))
    return padding & causal
    ### END SOLUTION


# %%
print(check("decoder_mask", decoder_mask))

# %% [markdown]
# The library builds the same mask from its two ops, `ops.padding_mask(tgt_ids) & ops.causal_mask(T)`.
# For a sentence of three tokens and two `<pad>` (1 = may attend):

# %%
tgt_ids = np.array([[5, 6, 7, 8, 9], [5, 6, 7, PAD_ID, PAD_ID]])
library_mask = ops.padding_mask(tgt_ids) & ops.causal_mask(tgt_ids.shape[1])
print(library_mask.shape)
print(library_mask[1, 0].astype(int))
assert library_mask.shape == (2, 1, 5, 5) and not library_mask[1, 0, :, 3:].any()

# %% [markdown]
# The columns of the `<pad>` keys are all zeros: no query attends to padding. The rows of the
# `<pad>` *queries* are not: those positions still attend to the real tokens before them. Their
# outputs are computed and then ignored, because the loss skips `<pad>` targets (lesson 3).
#
# ## The layer
#
# npformer's `DecoderLayer`, forward and backward:

# %%
print(inspect.getsource(nn.DecoderLayer.forward))
print(inspect.getsource(nn.DecoderLayer.backward))

# %% [markdown]
# The layer's second block, cross-attention, reads two inputs: $x$, `(B, T, D)`, and the encoder's
# output, the memory $M$, `(B, S, D)` (a source of $S$ positions). With $F$ the cross-attention
# sub-layer, a post-norm block computes
#
# $$y = \operatorname{LN}\big(x + \operatorname{Drop}(F(x, M))\big)$$
#
# and a pre-norm block $y = x + \operatorname{Drop}(F(\operatorname{LN}(x), M))$. Its backward
# returns the gradients of both inputs, `(dx, d_memory)`, and so does the sub-layer's:
# `sublayer_backward(g)` takes the gradient at $F$'s output, `(B, T, D)`, and returns
# `(d_input, d_memory)`, the gradients at its two inputs.
#
# ### Your turn (1)
#
# Write `residual_backward_with_memory(dout, sublayer_backward, norm_backward, dropout_backward,
# pre_norm)`, lesson 9's `residual_backward` for this block, returning `(dx, d_memory)`. Along which
# of the block's paths does $M$ reach $y$, and which gradient reaches $F$'s output on that path?

# %%
def residual_backward_with_memory(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    """(dx, d_memory) of a residual block around a sub-layer that also reads the memory."""
    ### BEGIN SOLUTION
    if pre_norm:
        d_input, d_memory = sublayer_backward(dropout_backward(dout))
        return dout + norm_backward(d_input), d_memory
    d_sum = norm_backward(dout)
    d_input, d_memory = sublayer_backward(dropout_backward(d_sum))
    return d_sum + d_input, d_memory
    ### END SOLUTION


# %%
print(check("residual_backward_with_memory", residual_backward_with_memory))

# %% [markdown]
# A decoder is a stack of $N$ such layers, and every one of them reads the same memory:
#
# $$x_l = \operatorname{layer}_l(x_{l-1}, M), \quad l = 1, \dots, N, \qquad \text{output } x_N$$
#
# with every $x_l$ of shape `(B, T, D)` and $M$ of shape `(B, S, D)`.
#
# ### Your turn (2)
#
# Write `stack_backward_with_memory(dout, layer_backwards)`, which returns
# `(dx, d_memory)`: the gradient at the first layer's input $x_0$ and at the memory $M$, given
# `dout`, the gradient at $x_N$. `layer_backwards` holds each layer's backward pass in the order of
# the forward pass, each a function from the gradient at the layer's output $x_l$ to the gradients at
# its inputs, `(d x_{l-1}, d_memory)`, the second the share of $M$'s gradient that comes through this
# layer. Which gradient must each layer's backward receive, so in which order can they be called? And
# how does $M$, read by $N$ layers, collect its gradient?

# %%
def stack_backward_with_memory(dout, layer_backwards):
    """(dx, d_memory) of a stack of layers that all read the memory."""
    ### BEGIN SOLUTION
    d, d_memory = dout, 0
    for layer_backward in reversed(layer_backwards):
        d, d_layer_memory = layer_backward(d)
        d_memory = d_memory + d_layer_memory
    return d, d_memory
    ### END SOLUTION


# %%
print(check("stack_backward_with_memory", stack_backward_with_memory))

# %% [markdown] tags=["instructor"]
# ### The answers (instructor edition)
#
# The memory reaches a block's output through the sub-layer only: the identity path and the norm
# concern $x$, so the block's `d_memory` is the sub-layer's, given the gradient that reaches $F$'s
# output (post-norm: through the norm and dropout, $D_p(J_{\mathrm{LN}}^\top dy)$; pre-norm: $D_p(dy)$),
# and `dx` is lesson 9's.
#
# In the stack, layer $l$'s backward needs the gradient at $x_l$, which only layer $l + 1$'s backward
# gives: the layers are undone last first. Every layer reads $M$, so the memory's gradient is the
# sum of what each sends back,
#
# $$\frac{\partial L}{\partial M} = \sum_{l=1}^{N} J_{l}^\top\, d_l,$$
#
# where $J_l$ is the Jacobian of layer $l$'s output with respect to $M$ and $d_l$ is the gradient
# that reaches that output.

# %% [markdown]
# Both are rules the decoder runs (`nn.Residual.backward` for the cross-attention block,
# `nn.Decoder.backward`), like lesson 9's `residual_backward`, and an op set can bring yours. The finite-difference check below runs a
# decoder layer on yours, with the decoder mask on padded targets and a padding mask on the memory:

# %%
layer = nn.DecoderLayer(6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=False,
                        activation="relu", rng=rng, dtype=np.float64)
self_mask = ops.padding_mask(np.array([[5, 6, 7, 0], [5, 6, 7, 8]])) & ops.causal_mask(4)
memory_mask = ops.padding_mask(np.array([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]]))
passed = check("residual_backward_with_memory", residual_backward_with_memory, strict=False).passed
with ops.using({"residual_backward_with_memory": residual_backward_with_memory} if passed else {}, name="yours"):
    report = gradcheck.check_module(
        layer, {"x": rng.standard_normal((2, 4, 6)), "memory": rng.standard_normal((2, 5, 6))},
        forward=lambda x, memory: layer.forward(x, memory, self_mask, memory_mask))
print(report.table().splitlines()[-1])
assert report.passed

# %% [markdown]
# ## The whole decoder
#
# A decoder is a stack of $N$ layers, each a list of residual blocks in the forward pass's order
# (self-attention, cross-attention, feed-forward), each block of the kind `pre_norm` says. Some blocks
# read the memory $M$ `(B, S, D)` (cross-attention), the others only the stream. A pre-norm stack
# ends with a final norm, since its layers leave the stream unnormalised (lesson 9); a post-norm
# stack has none:
#
# $$x_l = \operatorname{layer}_l(x_{l-1}, M), \qquad
# \text{out} = \begin{cases} \operatorname{LN}_\text{final}(x_N) & \text{pre-norm} \\
# x_N & \text{post-norm.}\end{cases}$$
#
# Before you write its backward pass: which gradient does the last layer's last block receive, in
# each kind of stack? Which block's backward hands each block the gradient at its output, across the
# boundary between two layers too? Which blocks send a share of the memory's gradient, and how do the
# shares combine?
#
# ### Your turn (3)
#
# Write `decoder_backward(dout, layers, pre_norm, final_norm_backward)`, returning `(dx, d_memory)`:
# the gradients at the first layer's input $x_0$ `(B, T, D)` and at the memory `(B, S, D)`, given
# `dout`, the gradient at the decoder's output. `layers` lists the layers in the forward pass's order,
# each a list of blocks `(sublayer_backward, norm_backward, dropout_backward, reads_memory)`: where
# `reads_memory` is True, `sublayer_backward(g)` returns `(d_input, d_memory)`, as in your
# `residual_backward_with_memory`; elsewhere it returns `d_input` alone. `final_norm_backward` is the
# final norm's backward pass, `None` in a post-norm stack. You may call your functions above. The
# grader's layers are made of linear maps, as before, among them a layer that reads the memory twice.


# %%
def decoder_backward(dout, layers, pre_norm, final_norm_backward):
    """(dx, d_memory) of a decoder given as layers of residual blocks, some reading the memory."""
    ### BEGIN SOLUTION
    d = final_norm_backward(dout) if pre_norm else dout  # the final norm is the last operation
    d_memory = 0
    for blocks in reversed(layers):
        for sublayer_backward, norm_backward, dropout_backward, reads_memory in reversed(blocks):
            d_sum = d if pre_norm else norm_backward(d)  # the gradient at the sum x + D(F(.))
            back = sublayer_backward(dropout_backward(d_sum))
            d_input, d_block_memory = back if reads_memory else (back, 0)
            d_memory = d_memory + d_block_memory  # every reader's share adds up
            d = d_sum + (norm_backward(d_input) if pre_norm else d_input)
    return d, d_memory
    ### END SOLUTION


# %%
print(check("decoder_backward", decoder_backward))

# %% [markdown] tags=["instructor"]
# ### The walk (instructor edition)
#
# In a pre-norm stack the decoder's output is the final norm's, so its backward comes first and the
# last block receives $J_{\mathrm{LN}}^\top \texttt{dout}$; in a post-norm stack it receives `dout`. The
# blocks are then undone last first across the whole stack: the first block of layer $l + 1$ hands
# its input's gradient to the last block of layer $l$. Every block that reads $M$ adds its share, so
# $\partial L / \partial M$ is the sum over all of them, two per layer in a layer that reads it twice.
# Below, the walk on a real two-layer decoder's blocks gives npformer's `nn.Decoder.backward`.

# %% tags=["instructor"]
for pre_norm in (False, True):
    walked = nn.Decoder(2, 6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                        activation="gelu", rng=np.random.default_rng(9), dtype=np.float64)
    walk_x, walk_memory = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 5, 6))
    walk_dout = rng.standard_normal((2, 4, 6))
    walked.forward(walk_x, walk_memory, self_mask, memory_mask)
    expected_dx, expected_memory = walked.backward(walk_dout)
    walk_layers = [[(block.sublayer.backward, block.norm.backward, lambda g: g, "memory" in block.reads)
                    for block in layer.sublayers] for layer in walked.layers]
    walk_dx, walk_d_memory = decoder_backward(walk_dout, walk_layers, pre_norm,
                                              walked.norm.backward if pre_norm else None)
    largest = max(np.abs(walk_dx - expected_dx).max(), np.abs(walk_d_memory - expected_memory).max())
    print(f"pre_norm={pre_norm}: the walk against nn.Decoder.backward, largest difference {largest:.1e}")
    assert largest < 1e-12

# %% [markdown]
# ## Causality, tested
#
# Changing the target after position $t$ must not change the output at positions $\le t$:

# %%
x = rng.standard_normal((1, 6, 6))
memory = rng.standard_normal((1, 5, 6))
out = layer.forward(x, memory, ops.causal_mask(6), None)
changed = x.copy()
changed[:, 3:] = rng.standard_normal((1, 3, 6))
out_changed = layer.forward(changed, memory, ops.causal_mask(6), None)
print("positions 0-2 unchanged:", np.array_equal(out[:, :3], out_changed[:, :3]),
      "| positions 3-5 changed:", not np.allclose(out[:, 3:], out_changed[:, 3:]))
assert np.array_equal(out[:, :3], out_changed[:, :3]) and not np.allclose(out[:, 3:], out_changed[:, 3:])
layer.forward(x, memory, ops.causal_mask(6), None)
figure = viz.attention_heatmaps([layer.self_attn.attn_weights[0]], [f"t{i}" for i in range(6)],
                                [f"t{i}" for i in range(6)], title="Causal self-attention: nothing above the diagonal",
                                path=viz.figures_dir() / "10_causal_self_attention.png")

# %% [markdown]
# ## Exercises
#
# 1. Why does cross-attention need no causal mask?
# 2. What would go wrong at translation time if training used no causal mask?
# 3. Count a decoder layer's parameters as a formula in $D$ and $d_{ff}$, compare it with an
#    encoder layer's, and check both with `num_params()`.
#
#    **Auto-graded part:** `decoder_layer_parameters(d_model, d_ff)`, returning your formula's count
#    as an int (graded on other sizes). The comparison with the encoder layer and the check with
#    `num_params()` stay for the rubric.


# %%
def decoder_layer_parameters(d_model, d_ff):
    """The parameters of a decoder layer of width d_model and feed-forward width d_ff."""
    ### BEGIN SOLUTION
    attention = 4 * (d_model * d_model + d_model)  # q, k, v and the output projection, each with a bias
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norms = 3 * 2 * d_model  # one per block, a gain and a shift each
    return 2 * attention + feed_forward + norms  # self-attention and cross-attention
    ### END SOLUTION


# %%
print(check("decoder_layer_parameters", decoder_layer_parameters))

# %% [markdown]
# 4. A sentence of `<pad>` only gives a row of `tgt_ids` that is all `PAD_ID`. What does
#    `decoder_mask` give for it, and what does `ops.attention_forward` then return for those
#    queries (lesson 7)?
#
#    **Auto-graded part:** `queries_attending_nothing(tgt_ids)`, for `tgt_ids` `(B, T)` with `<pad>`
#    anywhere (the grader also tries sentences that begin with `<pad>`): return a boolean array
#    `(B, T)`, True where the decoder's self-attention returns an all-zero output for that query. What
#    the mask is for the all-`<pad>` sentence, and why the output is zero rather than NaN, stay for the
#    rubric.


# %%
def queries_attending_nothing(tgt_ids):
    """(B, T) bool: True where a query of the decoder's self-attention may attend to no key at all."""
    ### BEGIN SOLUTION
    real_so_far = np.cumsum(tgt_ids != PAD_ID, axis=1)  # real keys at positions <= t
    return real_so_far == 0
    ### END SOLUTION


# %%
print(check("queries_attending_nothing", queries_attending_nothing))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. Cross-attention's keys and values come from the encoder's output, the source sentence, which is
#    known in full before the first target word is produced, at translation time as in training. It
#    holds no target token, so a query that reads all of it sees nothing of the target's future;
#    what position $i$ knows of the target comes through its own input $x_i$, which the causal
#    self-attention below it already restricted to positions $\le i$. Only the source padding mask
#    is needed. Full marks: the memory is the source, fully available; nothing of the future target
#    is in it.
# 2. The decoder's input is the target shifted right, so without the mask position $i$ could read
#    the input at position $i + 1$, which is the very token it must predict. Training would learn to
#    copy it (the training loss would fall close to zero) instead of learning to translate. At
#    translation time the target is produced one token at a time: the later positions do not exist
#    yet, the shortcut has nothing to copy, and the output is poor, however good the training loss
#    looked. Full marks: the leak of the next token, the shortcut, and the mismatch between training
#    and generation. The cell below shows the leak in one layer: without the mask, the outputs at
#    positions 0 to 2 change when only positions 3 to 5 of the input do.
# 3. Two attentions $8(D^2 + D)$, feed-forward $2DF + F + D$, three norms $6D$:
#    $P_\text{dec} = 8D^2 + 2DF + F + 15D$, against $P_\text{enc} = 4D^2 + 2DF + F + 9D$ (lesson 9):
#    the decoder layer holds $4D^2 + 6D$ more, one attention block and one norm. Checked below.
# 4. The padding mask of that row is all False, so `decoder_mask` gives an all-False $T \times T$
#    matrix for it: no query may attend to any key, not even itself. Every score of those rows is
#    $-\infty$, and `ops.attention_forward` (lesson 7) gives such a fully masked row all-zero
#    weights instead of $0/0$: the output of those queries is zero, never NaN, and so are their
#    gradients. (In the layer, the output projection then adds only its bias.) Checked below.

# %% tags=["instructor"]
out_unmasked = layer.forward(x, memory, None, None)
out_unmasked_changed = layer.forward(changed, memory, None, None)
leak = float(np.abs(out_unmasked[:, :3] - out_unmasked_changed[:, :3]).max())
print(f"answer 2: without the causal mask, positions 0-2 move by up to {leak:.2f} when only positions 3-5 change")
assert leak > 1e-3


# %% tags=["instructor"]
def layer_parameters(d_model, d_ff, decoder):
    attentions, norms = (2, 3) if decoder else (1, 2)
    return attentions * 4 * (d_model**2 + d_model) + 2 * d_model * d_ff + d_ff + d_model + norms * 2 * d_model


for d_model, d_ff in ((6, 12), (64, 256)):
    options = dict(n_heads=2, d_ff=d_ff, dropout=0.0, dropout_rng=None, pre_norm=False, activation="relu",
                   rng=np.random.default_rng(0))
    decoder_count = nn.DecoderLayer(d_model, **options).num_params()
    encoder_count = nn.EncoderLayer(d_model, **options).num_params()
    print(f"answer 3: D = {d_model}, d_ff = {d_ff}: decoder layer {decoder_count:,}, "
          f"encoder layer {encoder_count:,}, difference {decoder_count - encoder_count:,} "
          f"= 4D^2 + 6D = {4 * d_model**2 + 6 * d_model:,}")
    assert decoder_count == layer_parameters(d_model, d_ff, True)
    assert decoder_count == 8 * d_model**2 + 2 * d_model * d_ff + d_ff + 15 * d_model
    assert encoder_count == layer_parameters(d_model, d_ff, False)
    assert decoder_count - encoder_count == 4 * d_model**2 + 6 * d_model

# %% tags=["instructor"]
all_pad = np.array([[5, 6, 7, 8], [PAD_ID] * 4])
pad_mask = decoder_mask(all_pad)
answer_rng = np.random.default_rng(3)
q, k, v = (answer_rng.standard_normal((2, 2, 4, 3)) for _ in range(3))
context, attention_cache = ops.attention_forward(q, k, v, pad_mask)
print(f"answer 4: mask of the all-<pad> sentence any True: {pad_mask[1].any()}; its attention output: "
      f"all zero {not context[1].any()}, NaN anywhere {np.isnan(context).any()}; "
      f"its weights sum to {attention_cache['weights'][1].sum()}")
assert not pad_mask[1].any() and not context[1].any() and not np.isnan(context).any()
dq, dk, dv = ops.attention_backward(answer_rng.standard_normal(context.shape), attention_cache)
assert not (dq[1].any() or dk[1].any() or dv[1].any()), "no gradient flows through a fully masked sentence"
nothing = queries_attending_nothing(all_pad)
print("answer 4: queries attending to nothing:", nothing.astype(int).tolist())
assert np.array_equal(nothing, ~context.any(axis=-1)[:, 0])
