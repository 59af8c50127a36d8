# %% [markdown]
# # Lesson 9 — The encoder layer: residual connections and layer norm, post-norm vs pre-norm
#
# An encoder layer is two sub-layers, self-attention and a position-wise feed-forward network
# $\operatorname{FFN}(x) = \operatorname{ReLU}(x W_1 + b_1)\, W_2 + b_2$ of width $d_{ff}$, each
# wrapped in dropout, a residual connection and a layer norm. The paper puts the norm *after* the
# residual sum (**post-norm**):
#
# $$x \leftarrow \operatorname{LayerNorm}\big(x + \operatorname{Dropout}(\operatorname{Sublayer}(x))\big)$$
#
# Most later models put it *before* the sub-layer (**pre-norm**), with one final LayerNorm at
# the end of the stack:
#
# $$x \leftarrow x + \operatorname{Dropout}\big(\operatorname{Sublayer}(\operatorname{LayerNorm}(x))\big)$$

# %%
import inspect

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, nn, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Dropout
#
# While training, dropout sets each number to zero with probability $p$, independently, and scales
# the survivors by $1/(1 - p)$ (**inverted** dropout). With a boolean mask
# $\text{keep} \sim \operatorname{Bernoulli}(1 - p)$ drawn once per forward pass:
#
# $$\text{out} = \frac{x \odot \text{keep}}{1 - p}, \qquad
# \mathbb{E}[\text{out}] = \frac{x\,(1 - p)}{1 - p} = x$$
#
# so the expected output is the input, and at evaluation time dropout is simply the identity, with
# nothing to rescale. Here is one draw on a million ones, with $p = 0.1$:

# %%
p = 0.1
ones = np.ones((1000, 1000))
dropped, _ = ops.dropout_forward(ones, p, np.random.default_rng(0), training=True)
evaluated, _ = ops.dropout_forward(ones, p, np.random.default_rng(0), training=False)
print(f"training: fraction set to 0 = {np.mean(dropped == 0):.4f} (p = {p}), "
      f"survivors = {dropped[dropped != 0][0]:.4f} (1/(1-p) = {1 / (1 - p):.4f}), mean = {dropped.mean():.4f}")
print("evaluation: the identity:", np.array_equal(evaluated, ones))
assert abs(np.mean(dropped == 0) - p) < 0.005 and abs(dropped.mean() - 1) < 0.005
assert np.array_equal(evaluated, ones)

# %% [markdown]
# For the backward pass, the mask is fixed: it was drawn in the forward pass and is part of what
# the function is, a constant like $p$. Each output entry is then a function of $x$ alone.
#
# ### Your turn
#
# Which entries of $x$ does $\text{out}_i$ depend on, and how? Write the loss's change as a sum over
# the output's entries, and differentiate it with respect to one $x_j$.
#
# Write `dropout_backward(x, keep, p, dout)`: `x` the input (any shape), `keep` the boolean mask of
# the same shape (True where the number was kept), `p` the drop probability, `dout` the upstream
# gradient, shaped like `x`. Return `dx`, shaped like `x`.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("09"))


# %%
def dropout_backward(x, keep, p, dout):
    """Gradient of out = x * keep / (1 - p) with respect to x."""
    ### BEGIN SOLUTION
    return dout * keep / (1.0 - p)
    ### END SOLUTION


# %%
print(check("dropout_backward", dropout_backward))

# %% [markdown] tags=["instructor"]
# ### The answer (instructor edition)
#
# With the mask fixed, $\text{out}_i = c_i x_i$ with $c_i = \text{keep}_i / (1 - p)$, so
# $\partial\, \text{out}_i / \partial x_j = c_i\, \delta_{ij}$ and
#
# $$dx = \frac{d\text{out} \odot \text{keep}}{1 - p}$$
#
# A dropped number passes no gradient back; a kept one passes it back scaled by $1/(1-p)$, like
# its value.
#
# **The classic mistake** is to remember the mask and forget the scale, which the forward pass
# applied to every survivor. The grader recognises a gradient off by a constant factor:

# %% tags=["instructor"]
def dropout_backward_without_scale(x, keep, p, dout):
    return dout * keep


mistake = check("dropout_backward", dropout_backward_without_scale, strict=False)
print(mistake)
assert not mistake.passed and {row.tensor for row in mistake.rows if not row.passed} == {"dx"}

# %% [markdown]
# npformer's `ops.dropout_backward` passes the finite-difference check (with the same mask in every
# call: the mask is part of the function):

# %%
library = gradcheck.check_op("dropout")
print(library)
assert library.passed

# %% [markdown]
# ## The residual connection
#
# npformer's residual block (`nn.Residual`: a sub-layer with its norm and dropout), forward:

# %%
print(inspect.getsource(nn.Residual.forward))

# %% [markdown]
# With $F$ the sub-layer, $\operatorname{LN}$ the norm and $\operatorname{Drop}$ dropout (its mask
# fixed), every tensor `(B, T, D)`, a post-norm block computes
#
# $$s = x + \operatorname{Drop}(F(x)), \qquad y = \operatorname{LN}(s)$$
#
# and a pre-norm block
#
# $$y = x + \operatorname{Drop}(F(\operatorname{LN}(x))).$$
#
# ### Your turn
#
# Write `residual_backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm)`,
# which returns $dx = \partial L / \partial x$, `(B, T, D)`, given `dout`, $\partial L / \partial y$.
# The three backward passes are given as functions of an upstream gradient, each `(B, T, D)` to
# `(B, T, D)`: `sublayer_backward(g)` takes the gradient at $F$'s output and returns the one at its
# input, `norm_backward(g)` does the same for the norm and `dropout_backward(g)` for dropout (in a
# layer, they are the `.backward` methods of its blocks). `pre_norm` says which of the two blocks it is.
#
# Draw each forward pass as a graph: along how many paths does $x$ reach $y$, and which operations
# lie on each? Which gradient does each function receive, and in which order must they be called?
# The grader hands your function linear maps with random matrices, so a missing path or a function
# called in the wrong place changes the numbers. Your function is the rule every residual block's
# backward runs (`nn.Residual.backward`): `ops.using({"residual_backward": yours})` makes every
# encoder and decoder layer run yours (lesson 27 trains the model on yours).

# %%
def residual_backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    """dx of a residual block: post-norm LN(x + D(F(x))) or pre-norm x + D(F(LN(x)))."""
    ### BEGIN SOLUTION
    if pre_norm:
        return dout + norm_backward(sublayer_backward(dropout_backward(dout)))
    d_sum = norm_backward(dout)
    return d_sum + sublayer_backward(dropout_backward(d_sum))
    ### END SOLUTION


# %%
print(check("residual_backward", residual_backward))

# %% [markdown] tags=["instructor"]
# ### The answer (instructor edition)
#
# The backward pass follows the two arrows out of $x$. The identity path passes the gradient
# straight through; the sub-layer path goes back through dropout and the sub-layer $F$ (and the
# norm); the two are added. Writing $J$ for a Jacobian and $D_p(g) = g \odot \text{keep} / (1-p)$
# for dropout's backward, post-norm gives
#
# $$ds = J_{\mathrm{LN}}^\top\, dy, \qquad dx = ds + J_F^\top\, D_p(ds)$$
#
# and pre-norm gives
#
# $$dx = dy + J_{\mathrm{LN}}^\top J_F^\top\, D_p(dy).$$
#
# In post-norm the norm is the last operation, so its backward comes first and both paths start
# from $ds$; in pre-norm the identity path meets no norm at all.

# %% [markdown]
# A layer is a list of residual blocks, `layer.sublayers`, written once in its constructor: its
# forward walks the list, and its backward (`run_backward`, printed below) undoes it, block by block.
# The finite-difference check below builds the layer with GELU rather than ReLU: among the many
# hidden units of the feed-forward network, one whose input lies within the step $h$ of ReLU's kink
# at $0$ makes the finite difference straddle the kink (lesson 2), and the check fails for that
# reason alone. The backward code is the same for both activations apart from that one op. It runs
# with your `residual_backward` as the rule (`ops.using`), so the check is of your function inside
# the real layer.

# %%
print(inspect.getsource(nn.ResidualLayer.run_backward))
for pre_norm in (False, True):
    layer = nn.EncoderLayer(6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                            activation="gelu", rng=rng, dtype=np.float64)
    mask = ops.padding_mask(np.array([[5, 6, 7, 0], [5, 6, 7, 8]]))
    passed = check("residual_backward", residual_backward, strict=False).passed  # yours, when it passes
    with ops.using({"residual_backward": residual_backward} if passed else {}, name="yours"):
        report = gradcheck.check_module(layer, {"x": rng.standard_normal((2, 4, 6))},
                                        forward=lambda x: layer.forward(x, mask))
    print(f"pre_norm={pre_norm}:", report.table().splitlines()[-1])
    assert report.passed, f"the encoder layer (pre_norm={pre_norm}) must pass the finite-difference check"

# %% [markdown]
# ## The whole layer, with its parameters' gradients
#
# An encoder layer is two residual blocks, in the forward pass's order self-attention's and then the
# feed-forward network's, each of the kind `pre_norm` says:
#
# $$x_1 = \operatorname{block}_1(x_0), \qquad x_2 = \operatorname{block}_2(x_1), \qquad \text{every } x_i
# \text{ of shape } (B, T, D).$$
#
# npformer's modules keep their parameters' gradients inside themselves (`.grads()`). Here, as in a
# functional framework, every backward function *returns* them beside the gradient at its input:
#
# * `sublayer_backward(g)` returns `(d_input, d_weights)`: the gradients at $F$'s input and at $F$'s
#   parameters, given `g` at $F$'s output;
# * `norm_backward(g)` returns `(d_input, d_norm)`: the gradients at the norm's input and at its gain
#   and shift, given `g` at the norm's output;
# * `dropout_backward(g)` returns the gradient at dropout's input.
#
# Each parameter gradient is right only if its function received the gradient at *its own* output.
# For each kind of block, draw the forward pass again: which gradient reaches the norm's output, and
# which reaches $F$'s? From which block's backward does the gradient at $x_1$ come, so in which order
# are the blocks undone?
#
# ### Your turn
#
# Write `encoder_layer_backward(dout, blocks, pre_norm)`. `blocks` lists the layer's blocks in the
# forward pass's order, each a tuple `(sublayer_backward, norm_backward, dropout_backward)`; `dout` is
# the gradient at the last block's output, `(B, T, D)`. Return `(dx, d_sublayers, d_norms)`: `dx` at
# the first block's input, and two lists with one entry per block, in the forward pass's order: what
# each block's sub-layer and norm returned for their parameters. As for `residual_backward`, the
# grader hands you linear maps with random matrices (one to three blocks), so a gradient taken from the
# wrong place changes the numbers.


# %%
def encoder_layer_backward(dout, blocks, pre_norm):
    """(dx, d_sublayers, d_norms) of residual blocks given in the forward order, walked back."""
    ### BEGIN SOLUTION
    d, d_sublayers, d_norms = dout, [], []
    for sublayer_backward, norm_backward, dropout_backward in reversed(blocks):
        if pre_norm:  # y = x + D(F(LN(x))): F's output gets D's backward of dout, the norm's output F's
            d_normed, d_weights = sublayer_backward(dropout_backward(d))
            d_input, d_norm = norm_backward(d_normed)
            d = d + d_input
        else:  # y = LN(x + D(F(x))): the norm's output gets dout, F's output the sum's gradient
            d_sum, d_norm = norm_backward(d)
            d_input, d_weights = sublayer_backward(dropout_backward(d_sum))
            d = d_sum + d_input
        d_sublayers.insert(0, d_weights)
        d_norms.insert(0, d_norm)
    return d, d_sublayers, d_norms
    ### END SOLUTION


# %%
print(check("encoder_layer_backward", encoder_layer_backward))

# %% [markdown] tags=["instructor"]
# ### The walk (instructor edition)
#
# The gradient at $x_1$ comes out of block 2's backward, so the blocks are undone last first, each
# receiving what the one after it returned. Inside a block, the parameters' gradients come from the
# gradient at each function's own output: in post-norm, $y = \operatorname{LN}(s)$, so the norm's
# parameters take `dout` itself and $F$'s take $D_p(ds)$, with $ds$ the norm's input gradient; in
# pre-norm, $F$'s take $D_p(dy)$ and the norm's take what $F$'s backward returns, since the norm's
# output is $F$'s input. The lists are filled from the end, so that they come out in the forward
# order. Below, the walk on a real encoder layer's blocks (their `.backward` store the parameters'
# gradients and return the input's; a wrapper returns both) gives npformer's gradients.

# %% tags=["instructor"]
def returning_grads(module):
    """module.backward as a function returning (d_input, the gradients of the module's parameters, one vector)."""
    def backward(g):
        module.zero_grad()
        d_input = module.backward(g)
        return d_input, np.concatenate([grad.ravel() for grad in module.grads().values()])
    return backward


for pre_norm in (False, True):
    walked_layer = nn.EncoderLayer(6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                                   activation="gelu", rng=np.random.default_rng(8), dtype=np.float64)
    walk_x, walk_dout = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 4, 6))
    walked_layer.forward(walk_x, None)
    walked_layer.zero_grad()
    expected_dx = walked_layer.backward(walk_dout)
    expected = [np.concatenate([grad.ravel() for grad in module.grads().values()])
                for block in walked_layer.sublayers for module in (block.sublayer, block.norm)]
    walk_blocks = [(returning_grads(block.sublayer), returning_grads(block.norm), lambda g: g)
                   for block in walked_layer.sublayers]
    walk_dx, walk_sublayers, walk_norms = encoder_layer_backward(walk_dout, walk_blocks, pre_norm)
    walked = [grads for pair in zip(walk_sublayers, walk_norms) for grads in pair]
    largest = max(np.abs(mine - theirs).max() for mine, theirs in zip(walked + [walk_dx], expected + [expected_dx]))
    print(f"pre_norm={pre_norm}: the walk against npformer's layer, largest difference {largest:.1e}")
    assert largest < 1e-12

# %% [markdown]
# ## How the gradient travels down the stack
#
# In pre-norm, the identity path from the output to the first layer never passes through a norm:
# the gradient arrives untouched and every layer adds its own contribution on top. In post-norm,
# each layer's norm rescales the gradient on its way down. Compare the gradient reaching each
# layer's input in a 12-layer stack at initialisation, for the same random upstream gradient:

# %%
def gradient_norms(pre_norm, n_layers=12, d_model=32):
    encoder = nn.Encoder(n_layers, d_model, n_heads=4, d_ff=64, dropout=0.0, dropout_rng=None,
                         pre_norm=pre_norm, activation="relu", rng=np.random.default_rng(1))
    x = np.random.default_rng(2).standard_normal((8, 10, d_model)).astype(np.float32)
    out = encoder.forward(x, None)
    upstream = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    upstream /= np.linalg.norm(upstream)
    d = encoder.norm.backward(upstream) if encoder.norm else upstream
    norms = []
    for layer in reversed(encoder.layers):
        d = layer.backward(d)
        norms.append(float(np.linalg.norm(d)))
    return norms[::-1]


norms = {pre_norm: np.array(gradient_norms(pre_norm)) for pre_norm in (False, True)}
figure, axis = plt.subplots(figsize=(7, 4), constrained_layout=True)
for pre_norm, label in ((False, "post-norm (paper)"), (True, "pre-norm")):
    axis.semilogy(range(12), norms[pre_norm], "o-", label=label)
    print(f"{label:18s}", " ".join(f"{value:.2f}" for value in norms[pre_norm]))
axis.set(xlabel="layer (0 = first)", ylabel="|dL/d input of layer|",
         title="Gradient reaching each layer of a 12-layer encoder at initialisation")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "09_post_vs_pre_norm.png", dpi=110)
assert np.all(np.diff(norms[True]) < 0), "pre-norm: the gradient must grow toward the first layer"
lowest = int(np.argmin(norms[False]))
assert 0 < lowest < 11 and norms[False][lowest] < 0.5 * min(norms[False][0], norms[False][-1]), \
    "post-norm: the gradient must sag through the middle of the stack"
post, pre = norms[False], norms[True]
print(f"pre-norm:  layer 0 gets {pre[0] / pre[-1]:.1f} times what layer 11 gets")
print(f"post-norm: layer 0 gets {post[0] / post[-1]:.2f} times what layer 11 gets; "
      f"the lowest, at layer {lowest}, is {post[lowest] / post[-1]:.2f} times layer 11's")
assert 0.8 < post[0] / post[-1] < 1.25, "post-norm: layer 0 must get about what layer 11 gets"

# %% [markdown]
# Pre-norm's gradient *grows* at every step toward the first layer (each residual branch adds to
# it; the cell asserts it). Post-norm's is rescaled by every norm: it sags through the middle of the
# stack (asserted too) and comes back up, so that here its first layer gets about what its last
# one gets (the ratios printed above).
#
# That is all this figure shows: the gradient with respect to each layer's *input*, at
# initialisation, for one random upstream gradient. It does not show how either layout trains.
# Xiong et al. (2020) argue that at initialisation the *parameters* near the output of a
# post-norm stack get large gradients, so that a large learning rate early in training is unstable
# and post-norm needs a learning-rate warm-up (lesson 12), and pre-norm much less; this is one
# reason most later models use pre-norm. The gradients of the parameters are not measured here;
# exercise 4 asks you to measure them.

# %% [markdown]
# ## Exercises
#
# 1. Write the backward pass of a "sandwich" layout,
#    $y = x + \operatorname{Drop}\big(\operatorname{Norm}_2(\operatorname{Sublayer}(\operatorname{Norm}_1(x)))\big)$,
#    in the style of `residual_backward` above, and check it against finite differences.
#
#    **Auto-graded part:** `sandwich_backward(dout, sublayer_backward, norm1_backward, norm2_backward,
#    dropout_backward)`, returning $dx$ `(B, T, D)` given `dout` at $y$, each function mapping a
#    gradient at its operation's output to the one at its input, as in `residual_backward`. The
#    finite-difference check of the layout (a module with two norms and a sub-layer) stays for the
#    rubric.


# %%
def sandwich_backward(dout, sublayer_backward, norm1_backward, norm2_backward, dropout_backward):
    """dx of y = x + D(Norm2(F(Norm1(x))))."""
    ### BEGIN SOLUTION
    return dout + norm1_backward(sublayer_backward(norm2_backward(dropout_backward(dout))))
    ### END SOLUTION


# %%
print(check("sandwich_backward", sandwich_backward))

# %% [markdown]
# 2. Why does pre-norm need a final LayerNorm on the encoder's output?
# 3. Count an encoder layer's parameters as a formula in $D$ and $d_{ff}$ (the attention, the
#    feed-forward network and the two layer norms), and check it against
#    `nn.EncoderLayer(...).num_params()` for two different sizes.
#
#    **Auto-graded part:** `encoder_layer_parameters(d_model, d_ff)`, returning your formula's count as
#    an int (graded on other sizes than yours). The check against `num_params()` stays for the rubric.


# %%
def encoder_layer_parameters(d_model, d_ff):
    """The parameters of an encoder layer of width d_model and feed-forward width d_ff."""
    ### BEGIN SOLUTION
    attention = 4 * (d_model * d_model + d_model)  # q, k, v and the output projection, each with a bias
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norms = 2 * 2 * d_model  # a gain and a shift per norm
    return attention + feed_forward + norms
    ### END SOLUTION


# %%
print(check("encoder_layer_parameters", encoder_layer_parameters))

# %% [markdown]
# 4. Extend `gradient_norms` to record, for each layer, the norm of the gradient of its
#    parameters (`layer.grads()`, after `encoder.zero_grad()` and the backward pass). In which
#    layers are the parameters' gradients largest, for post-norm and for pre-norm? Does what you
#    find at this depth and width agree with the argument above?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. With $u = \operatorname{Norm}_1(x)$, $z = \operatorname{Sublayer}(u)$ and
#    $y = x + \operatorname{Drop}(\operatorname{Norm}_2(z))$, the identity path and the sub-layer path
#    add up (the auto-graded function, checked above):
#    $dx = dy + J_{\mathrm{N_1}}^\top J_F^\top J_{\mathrm{N_2}}^\top\, D_p(dy)$, that is
#    `dout + norm1_backward(sublayer_backward(norm2_backward(dropout_backward(dout))))`. Full marks:
#    the order (the second norm's backward first), both paths, and a finite-difference check that
#    passes for $x$ and every parameter of both norms and the sub-layer (reference code below, with
#    a GELU feed-forward network as the sub-layer, for the reason given above for the layer check).
# 2. In pre-norm the residual stream is never normalised: each layer adds its sub-layers' outputs to
#    $x$ and only the copies fed to the sub-layers go through a norm. So the stack's output is the
#    raw sum of the input and every layer's contributions, whose scale grows with depth, and the
#    decoder's cross-attention (or the output layer) would read it unnormalised. The final LayerNorm
#    does for the output what each post-norm layer's own norm does. A good answer says why post-norm
#    needs none (its last layer ends with a norm). The cell below prints the growth at
#    initialisation.
# 3. Attention $4(D^2 + D)$, feed-forward $2DF + F + D$, two norms $4D$:
#    $P_\text{enc} = 4D^2 + 2DF + F + 9D$ (the number of heads does not enter; post- and pre-norm
#    layers have the same count). Checked below for two sizes.
# 4. Reference code and its output below. At this depth and width, post-norm's parameter gradients
#    are largest in the last layer and smallest inside the stack, at neither end; pre-norm's are
#    largest in the first layer and fall, not quite monotonically, to their smallest in the last,
#    where they are well below post-norm's (printed and asserted below). This agrees with the
#    argument where it speaks: near the output, the post-norm parameters get the larger gradients.
#    It does not show pre-norm's gradients as uniform over the layers: at initialisation they follow
#    the input gradient's growth toward the first layer. Full marks: both profiles measured, the
#    layer of the largest gradient named for each, and a comparison with the argument that notes
#    what one initialisation of a 12-layer, $D = 32$ stack can and cannot say.

# %% tags=["instructor"]
class Sandwich(nn.Module):
    def __init__(self, d_model, d_ff, rng):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, dtype=np.float64)
        self.ffn = nn.FeedForward(d_model, d_ff, "gelu", rng=rng, dtype=np.float64)
        self.norm2 = nn.LayerNorm(d_model, dtype=np.float64)

    def forward(self, x):
        return x + self.norm2.forward(self.ffn.forward(self.norm1.forward(x)))

    def backward(self, dout):
        return sandwich_backward(dout, self.ffn.backward, self.norm1.backward, self.norm2.backward,
                                 lambda g: g)  # no dropout here: the identity


answer_rng = np.random.default_rng(7)
sandwich = Sandwich(6, 12, answer_rng)
sandwich.norm1.gamma[...] = answer_rng.uniform(0.5, 1.5, 6)  # away from the initial 1 and 0, so that
sandwich.norm2.beta[...] = answer_rng.standard_normal(6)     # a misplaced norm changes the numbers
sandwich_report = gradcheck.check_module(sandwich, {"x": answer_rng.standard_normal((2, 4, 6))})
print("answer 1:", sandwich_report.table().splitlines()[-1])
assert sandwich_report.passed

# %% tags=["instructor"]
answer_encoder = nn.Encoder(12, 32, n_heads=4, d_ff=64, dropout=0.0, dropout_rng=None, pre_norm=True,
                            activation="relu", rng=np.random.default_rng(1))
stream = np.random.default_rng(2).standard_normal((8, 10, 32)).astype(np.float32)
input_rms = float(np.sqrt(np.mean(stream**2)))
for answer_layer in answer_encoder.layers:
    stream = answer_layer.forward(stream, None)
stream_rms = float(np.sqrt(np.mean(stream**2)))
normed_rms = float(np.sqrt(np.mean(answer_encoder.norm.forward(stream) ** 2)))
print(f"answer 2: pre-norm, 12 layers, input RMS {input_rms:.2f}: the last layer's output has RMS {stream_rms:.2f}, "
      f"the final LayerNorm's {normed_rms:.2f}")
assert stream_rms > 2 * input_rms and abs(normed_rms - 1) < 0.01

# %% tags=["instructor"]
for d_model, d_ff in ((6, 12), (64, 256)):
    counted = nn.EncoderLayer(d_model, n_heads=2, d_ff=d_ff, dropout=0.0, dropout_rng=None, pre_norm=False,
                              activation="relu", rng=np.random.default_rng(0)).num_params()
    print(f"answer 3: D = {d_model}, d_ff = {d_ff}: formula {encoder_layer_parameters(d_model, d_ff):,}, "
          f"num_params() {counted:,}")
    assert counted == encoder_layer_parameters(d_model, d_ff)


# %% tags=["instructor"]
def parameter_gradient_norms(pre_norm, n_layers=12, d_model=32):
    """Like gradient_norms, but the norm of each layer's parameter gradients (all of them together)."""
    encoder = nn.Encoder(n_layers, d_model, n_heads=4, d_ff=64, dropout=0.0, dropout_rng=None,
                         pre_norm=pre_norm, activation="relu", rng=np.random.default_rng(1))
    x = np.random.default_rng(2).standard_normal((8, 10, d_model)).astype(np.float32)
    out = encoder.forward(x, None)
    upstream = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    upstream /= np.linalg.norm(upstream)
    encoder.zero_grad()
    encoder.backward(upstream)
    return np.array([np.sqrt(sum(float(np.sum(grad.astype(np.float64) ** 2)) for grad in layer.grads().values()))
                     for layer in encoder.layers])


parameter_norms = {pre_norm: parameter_gradient_norms(pre_norm) for pre_norm in (False, True)}
for pre_norm, label in ((False, "post-norm"), (True, "pre-norm")):
    values = parameter_norms[pre_norm]
    print(f"answer 4: {label:9s} " + " ".join(f"{value:.2f}" for value in values)
          + f"  (largest at layer {values.argmax()}, smallest at layer {values.argmin()})")
post_params, pre_params = parameter_norms[False], parameter_norms[True]
assert post_params.argmax() == 11 and 0 < post_params.argmin() < 11
assert pre_params.argmax() == 0 and pre_params.argmin() == 11
assert np.all(np.diff(pre_params[:3]) < 0) and post_params[-1] > 2 * pre_params[-1]
