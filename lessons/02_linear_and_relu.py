# %% [markdown]
# # Lesson 2 — The linear layer and ReLU
#
# The workhorse of every network is the affine map $y = x W + b$, with `x` of shape `(..., Din)`,
# `W` of shape `(Din, Dout)` and `b` of shape `(Dout,)`. Then a non-linearity, here ReLU,
# $\operatorname{relu}(x) = \max(x, 0)$, and its smooth cousin GELU.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## One row first
#
# Take a single input row: $x$ holds $D_\text{in}$ numbers, and the layer returns $D_\text{out}$ numbers,
#
# $$y_j = \sum_k x_k W_{kj} + b_j, \qquad j = 1, \dots, D_\text{out}.$$
#
# The loss $L$ depends on $y$, and the upstream gradient $\texttt{dout}_j = \partial L / \partial y_j$ is
# given. By the chain rule, the gradient of any input is a sum over the entries of $y$ that the
# input appears in: each contributes $\texttt{dout}_j$ times $\partial y_j / \partial(\text{input})$. So
# for each input, read off the formula above:
#
# * $W_{kj}$: in which entries $y_j$ does it appear, and multiplied by what?
# * $x_k$: in which entries does it appear (how many terms), and multiplied by what in each?
# * $b_j$: the same question.
#
# Write each answer in index notation first, then as NumPy on whole arrays, and check it against
# the shapes: $\partial L / \partial W$ has the shape of $W$, $(D_\text{in}, D_\text{out})$, with the
# gradient of $W_{kj}$ at position $(k, j)$; $\partial L / \partial x$ has the shape of $x$.
#
# ### Your turn: one row
#
# Write `linear_row_backward(x, W, b, dout)` for `x` of shape `(Din,)`, `W` of shape
# `(Din, Dout)`, `b` of shape `(Dout,)` and `dout` of shape `(Dout,)`; return `(dx, dW, db)`, with
# the shapes of `x`, `W` and `b`. (`b` is an argument because the forward pass takes it.) The
# grader tries a square `W` too, where an answer laid out the wrong way round still has the right
# shape, and $D_\text{out} = 1$.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("02"))


# %%
def linear_row_backward(x, W, b, dout):
    """Gradients of y = x @ W + b for one row x (Din,), with respect to x, W and b."""
    ### BEGIN SOLUTION
    dx = W @ dout
    dW = np.outer(x, dout)
    db = np.array(dout, dtype=float)
    return dx, dW, db
    ### END SOLUTION


# %%
print(check("linear_row_backward", linear_row_backward))

# %% [markdown]
# ## A batch of rows
#
# A real input has leading axes, `(..., Din)`: a batch of $B$ sentences of $T$ tokens is
# `(B, T, Din)`. Flatten the leading axes, so that $X$ is $N \times D_\text{in}$ with $N$ rows (every
# sentence and position) and $Y = X W + b$ is $N \times D_\text{out}$:
#
# $$Y_{nj} = \sum_k X_{nk} W_{kj} + b_j .$$
#
# Every row uses the same $W$ and $b$. Ask the questions of the single row again: in which entries
# of $Y$ does $W_{kj}$ appear now, and $X_{nk}$, and $b_j$? What changes from your one-row answer
# for each gradient, and what stays one row per example? Then write each as a single matrix
# product or sum over the whole batch, with no loop over the rows, and check the shapes.
#
# ### Your turn
#
# Write `linear_backward(x, W, b, dout)` for `x` of shape `(..., Din)` (any number of leading
# axes) and `dout` of shape `(..., Dout)`. Reshape `x` and `dout` to 2-D arrays of rows
# (`reshape(-1, Din)`) and return `(dx, dW, db)` with the shapes of `x`, `W` and `b`. The check
# below grades your one-row step again; it tries a batch, a single token with a square `W`, and
# $D_\text{out} = 1$. Once yours passes, it shows npformer's compact form: compare it with yours.


# %%
def linear_backward(x, W, b, dout):
    """Gradients of y = x @ W + b with respect to x, W and b."""
    ### BEGIN SOLUTION
    d_in, d_out = W.shape
    x_rows = x.reshape(-1, d_in)
    dout_rows = dout.reshape(-1, d_out)
    dx = (dout_rows @ W.T).reshape(x.shape)
    dW = x_rows.T @ dout_rows
    db = dout_rows.sum(axis=0)
    return dx, dW, db
    ### END SOLUTION


# %%
print(check("linear_backward", linear_backward, steps=(linear_row_backward,)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# For one row, $W_{kj}$ appears in $y_j$ only, with coefficient $x_k$; $x_k$ appears in every $y_j$,
# with coefficient $W_{kj}$; $b_j$ in $y_j$ only, with coefficient $1$:
#
# $$\frac{\partial L}{\partial W_{kj}} = x_k\, \texttt{dout}_j, \qquad
# \frac{\partial L}{\partial x_k} = \sum_j W_{kj}\, \texttt{dout}_j, \qquad
# \frac{\partial L}{\partial b_j} = \texttt{dout}_j,$$
#
# that is $dW = x\, \texttt{dout}^\top$ (an outer product), $dx = W\, \texttt{dout}$, $db = \texttt{dout}$.
# For a batch, $W_{kj}$ appears in column $j$ of every row $n$, so the chain rule adds the rows'
# contributions; $X_{nk}$ appears in row $n$ only, so $dX$ keeps one row per example:
#
# $$dX = dY\, W^\top \;(N \times D_\text{in}), \qquad dW = X^\top dY \;(D_\text{in} \times D_\text{out}),
# \qquad db_j = \sum_n dY_{nj}.$$
#
# Each is a single matrix product (or sum), with no loop over the batch: $X^\top dY$ is the sum of
# the rows' outer products.

# %% [markdown]
# Now that yours passes, compare it with npformer's own `linear_backward`, in `npformer/ops/linear.py`.
# It computes the same three gradients from the cache that `linear_forward` keeps, and passes the
# finite-difference check of lesson 1. `ops.linear_forward` and `ops.linear_backward` are always
# those textbook functions. (Lesson 16 shows the fast forms that npformer's blocks run by default,
# equal to them.)

# %%
x, W, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
report = gradcheck.check_gradients(ops.linear_forward, ops.linear_backward,
                                   {"x": x, "W": W, "b": b}, name="linear")
print(report)
assert report.passed, "linear_backward must pass the finite-difference check"

# %% [markdown]
# ## ReLU
#
# $\operatorname{relu}(x) = \max(x, 0)$, entry by entry: $x$ where $x > 0$, and $0$ where $x < 0$. Each
# output entry depends on its own input entry only. What does that make the Jacobian
# $\partial y_i / \partial x_j$, and so how many terms does the chain rule's sum keep for each $x_i$?
# Differentiate each of the two pieces. At exactly $x = 0$ the derivative is not defined; take the
# left piece's there, as PyTorch does (the grader keeps its inputs away from $0$).
#
# ### Your turn
#
# Write `relu_backward(x, dout)`: return `dx`, the shape of `x` (any shape).

# %%
def relu_backward(x, dout):
    """Gradient of max(x, 0) with respect to x."""
    ### BEGIN SOLUTION
    return dout * (x > 0)
    ### END SOLUTION


# %%
print(check("relu_backward", relu_backward))

# %% [markdown]
# npformer's `ops.relu_backward` computes the same from a cache that keeps only a boolean array
# (one byte per entry, instead of the eight of a float64 `x`).
#
# Its finite-difference check must avoid the kink: an input within $2h$ of $0$ would straddle it,
# and the difference quotient there blends the slopes of the two sides, matching neither.

# %%
x = rng.standard_normal((3, 5))
x += np.where(x >= 0, 0.05, -0.05)  # keep away from the kink at 0
report = gradcheck.check_gradients(ops.relu_forward, ops.relu_backward, {"x": x}, name="relu")
print(report)
assert report.passed, "relu_backward must pass the finite-difference check away from the kink"
_, relu_cache = ops.relu_forward(x)
assert all(value.dtype == bool for value in relu_cache.values()), "ReLU's cache keeps only a boolean mask"

# %% [markdown]
# ## A network of layers, walked back
#
# A multi-layer perceptron (MLP) stacks $L$ linear layers with a ReLU between each two of them, and
# none after the last. With $h_0 = x$, of shape `(..., D_0)`:
#
# $$z_l = h_{l-1} W_l + b_l \quad (l = 1, \dots, L), \qquad h_l = \operatorname{relu}(z_l) \quad (l < L),
# \qquad y = z_L,$$
#
# where $W_l$ has shape $(D_{l-1}, D_l)$ and $b_l$ shape $(D_l,)$. The Transformer's feed-forward
# network (lesson 9) is this network with $L = 2$. You have written the backward pass of each piece;
# the network's is theirs, chained. Before you write it, answer from the equations:
#
# * Each piece's backward pass takes the *inputs* of its forward pass. Which values of the forward
#   pass must your function keep, layer by layer, so that the backward passes can be called?
# * Layer $l$'s backward pass needs the gradient at its output $z_l$. Which piece hands it over, so
#   in which order can the pieces' backward passes run?
# * Where does a ReLU's backward pass go in that order, and where is there none?
#
# ### Your turn
#
# Write `mlp_backward(x, weights, biases, dout)`: `weights` and `biases` are lists of the $L$ layers'
# $W_l$ and $b_l$, in the forward pass's order; `dout` is $\partial L / \partial y$, of $y$'s shape
# `(..., D_L)`. Return `(dx, dweights, dbiases)`: `dx` shaped like `x`, and two lists of $L$ arrays
# in the forward pass's order, each shaped like its parameter. You may call your `linear_backward`
# and `relu_backward`. This exercise grades how the pieces chain, in the lesson's own forms
# ($x W + b$ and $\max(x, 0)$) for every student: if your variants file changed the linear layer or
# ReLU, write those two pieces in the lesson's form here (`check` showed it to you when yours
# passed). The grader tries one, two, three and four layers, with square and non-square widths. When
# a gradient is wrong, its hint says which layers' gradients are right: reason from where the
# error enters.


# %%
def mlp_backward(x, weights, biases, dout):
    """(dx, [dW_1 .. dW_L], [db_1 .. db_L]) of L linear layers with a ReLU between each two."""
    ### BEGIN SOLUTION
    layer_inputs, pre_activations, h = [], [], x
    for layer, (W, b) in enumerate(zip(weights, biases)):
        layer_inputs.append(h)  # what dW needs
        pre_activations.append(h @ W + b)  # what the ReLU's backward needs
        h = np.maximum(pre_activations[-1], 0.0) if layer < len(weights) - 1 else pre_activations[-1]
    d, d_weights, d_biases = dout, [], []
    for layer in reversed(range(len(weights))):
        if layer < len(weights) - 1:  # a ReLU follows every layer but the last
            d = d * (pre_activations[layer] > 0)
        W = weights[layer]
        rows, d_rows = layer_inputs[layer].reshape(-1, W.shape[0]), d.reshape(-1, W.shape[1])
        d_weights.insert(0, rows.T @ d_rows)
        d_biases.insert(0, d_rows.sum(axis=0))
        d = d @ W.T
    return d, d_weights, d_biases
    ### END SOLUTION


# %%
print(check("mlp_backward", mlp_backward))

# %% [markdown] tags=["instructor"]
# ### The chain (instructor edition)
#
# The forward pass must keep each layer's input $h_{l-1}$ (for $dW_l$) and each pre-activation $z_l$
# (for the ReLU's backward). The backward passes run last layer first: layer $L$'s linear backward
# receives `dout` itself (no ReLU after it) and returns $dh_{L-1}$; the ReLU of layer $L-1$ turns that
# into $dz_{L-1}$, and so on down to $dx = dh_0$. Each $dW_l$ is the layer's own, so nothing is summed
# across layers; the lists are filled from the end. A classic mistake is a ReLU's backward after the
# last layer too (the last layer's gradients are then wrong before any ReLU is passed, as the hint
# says); another takes $z_{l-1}$ instead of $h_{l-1} = \operatorname{relu}(z_{l-1})$ as layer $l$'s input.
# Below, with $L = 2$, the chain is npformer's feed-forward network: the same gradients as
# `nn.FeedForward`'s backward pass.

# %% tags=["instructor"]
from npformer import nn  # noqa: E402

ffn = nn.FeedForward(4, 6, "relu", rng=np.random.default_rng(4), dtype=np.float64)
ffn_x = np.random.default_rng(5).standard_normal((2, 3, 4))
ffn_dout = np.random.default_rng(6).standard_normal((2, 3, 4))
ffn.forward(ffn_x)
ffn.zero_grad()
ffn_dx = ffn.backward(ffn_dout)
chained = mlp_backward(ffn_x, [ffn.fc1.W, ffn.fc2.W], [ffn.fc1.b, ffn.fc2.b], ffn_dout)
library_grads = ffn.grads()
differences = [np.abs(mine - library_grads[name]).max() for mine, name in
               zip(chained[1] + chained[2], ("fc1.W", "fc2.W", "fc1.b", "fc2.b"))]
print(f"the chain against nn.FeedForward: largest difference {max(differences):.1e} (parameters), "
      f"{np.abs(chained[0] - ffn_dx).max():.1e} (dx)")
assert max(differences) < 1e-12 and np.abs(chained[0] - ffn_dx).max() < 1e-12

# %% [markdown]
# ## GELU
#
# GELU, used by BERT and GPT, weights $x$ by the probability that a standard normal variable is
# below it:
#
# $$\operatorname{gelu}(x) = x\,\Phi(x), \qquad \Phi(x) = \frac{1}{2}\left(1 + \operatorname{erf}\frac{x}{\sqrt 2}\right),
# \qquad \operatorname{erf}(z) = \frac{2}{\sqrt\pi}\int_0^z e^{-t^2}\,dt,$$
#
# with $\Phi$ the standard normal distribution function. GELU is $x$ times a *gate*, $\Phi(x)$, that
# rises from $0$ (for very negative $x$) to $1$ (for large $x$). Like ReLU it acts entry by entry, so
# its backward pass is `dout` times its derivative, entry by entry; the derivation takes two steps.
#
# ### Step 1: the gate
#
# Differentiate $\Phi$ alone: $\operatorname{erf}$ is an integral whose upper limit is its argument
# (the fundamental theorem of calculus gives its derivative), and its argument here is
# $z = x / \sqrt 2$ (the chain rule). One check of your result before the grader's: $\Phi$ rises from
# $0$ to $1$, so its derivative is never negative and the area under it, over the whole real line,
# is exactly $1$.
#
# Write `gelu_gate_backward(x, dout)`, the backward pass of $y = \Phi(x)$ alone: return `dx`, the
# shape of `x`.

# %% [markdown]
# **Your variant.** If your variants file changes GELU, the cell at the top of this lesson printed
# your form, $x\,g(x)$ with another gate $g$: step 1 is then the backward pass of your $g$.


# %%
def gelu_gate_backward(x, dout):
    """Gradient of Phi(x), the standard normal distribution function, entry by entry."""
    ### BEGIN SOLUTION
    return dout * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    ### END SOLUTION


# %%
print(check("gelu_gate_backward", gelu_gate_backward))

# %% [markdown]
# ### Step 2: the product
#
# $\operatorname{gelu}(x) = x\,\Phi(x)$ is a product of two factors that both depend on $x$. Write
# `gelu_backward(x, dout)` for the exact GELU above (not the $\tanh$ approximation): return `dx`, the
# shape of `x`. You may call your gate step. Before you grade it, two checks you can do by hand:
# near $x = 0$, $\Phi(x) \approx 1/2$, so $\operatorname{gelu}(x) \approx x/2$; for large $x$,
# $\operatorname{gelu}(x) \approx x$. What must your derivative be there?
#
# NumPy has no $\operatorname{erf}$: Python's `math.erf` takes one number, and
# `np.vectorize(math.erf)` applies it entry by entry to an array (npformer's `ops.erf` cannot be
# called from graded code: the grader runs your function where npformer is not importable). The
# grader includes inputs as large as $|x| \approx 13$. The check below grades your gate step again,
# and once yours passes it shows npformer's compact form.


# %%
def gelu_backward(x, dout):
    """Gradient of the exact GELU, x * Phi(x), with respect to x."""
    ### BEGIN SOLUTION
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))
    return dout * cdf + x * gelu_gate_backward(x, dout)
    ### END SOLUTION


# %%
print(check("gelu_backward", gelu_backward, steps=(gelu_gate_backward,)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# $\operatorname{erf}'(z) = \frac{2}{\sqrt\pi} e^{-z^2}$, and $dz/dx = 1/\sqrt 2$, so the gate's slope is the
# normal density,
#
# $$\Phi'(x) = \frac{1}{2} \cdot \frac{2}{\sqrt\pi} e^{-x^2/2} \cdot \frac{1}{\sqrt 2} = \varphi(x)
# = \frac{e^{-x^2/2}}{\sqrt{2\pi}},$$
#
# whose area is $1$. By the product rule,
#
# $$\operatorname{gelu}'(x) = \Phi(x) + x\,\varphi(x), \qquad dx = \texttt{dout} \odot \operatorname{gelu}'(x):$$
#
# $1/2$ at $x = 0$, and $1$ for large $x$, where $\Phi \to 1$ and $x\varphi(x) \to 0$.

# %% [markdown]
# npformer's `ops.gelu_backward` passes the finite-difference check too:

# %%
report = gradcheck.check_op("gelu")
print(report)
assert report.passed, "gelu_backward must pass the finite-difference check"

# %% [markdown]
# ReLU and GELU, and their derivatives (the backward pass with $\texttt{dout} = 1$):

# %%
grid = np.linspace(-4, 4, 401)
figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
for name, forward, backward in (("ReLU", ops.relu_forward, ops.relu_backward),
                                ("GELU", ops.gelu_forward, ops.gelu_backward)):
    y, cache = forward(grid)
    left.plot(grid, y, label=name)
    derivative = backward(np.ones_like(grid), cache)
    right.plot(grid, derivative, label=name)
    if name == "GELU":  # smooth: no jump anywhere on the grid
        assert np.abs(np.diff(derivative)).max() < 0.05, "GELU's derivative must be smooth"
left.set(title="activation", xlabel="x")
right.set(title="derivative (the backward pass with dout = 1)", xlabel="x")
for axis in (left, right):
    axis.grid(True, alpha=0.3)
    axis.legend()
figure.savefig(viz.figures_dir() / "02_relu_gelu.png", dpi=110)

# %% tags=["instructor"]
# The prose below, for ReLU: its slope is 1 where x > 0, 0 where x < 0, and 0 at exactly x = 0 (the
# answer of relu_backward, so it stays out of the student edition).
relu_slope = ops.relu_backward(np.ones_like(grid), ops.relu_forward(grid)[1])
assert np.all(relu_slope[grid > 0] == 1) and np.all(relu_slope[grid <= 0] == 0), "ReLU's slope: 1 for x > 0, else 0"

# %% [markdown]
# ReLU's derivative jumps at $x = 0$; GELU's changes smoothly, dips below $0$ for negative $x$, and
# rises slightly above $1$ for positive $x$ before settling at $1$.

# %%
gelu_slope = ops.gelu_backward(np.ones_like(grid), ops.gelu_forward(grid)[1])
print(f"GELU's derivative on [-4, 4]: smallest {gelu_slope.min():.3f} at x = {grid[gelu_slope.argmin()]:.2f}, "
      f"largest {gelu_slope.max():.3f} at x = {grid[gelu_slope.argmax()]:.2f}")
assert gelu_slope.min() < 0 < grid[gelu_slope.argmax()] and gelu_slope.max() > 1, \
    "GELU's derivative must dip below 0 and rise above 1"

# %% [markdown]
# ## Exercises
#
# 1. For `x` of shape `(B, T, Din)`, write `dW` as one `np.einsum` call, with no reshape. Put it in
#    a copy of your `linear_backward` and grade the copy with `check`, as above.
# 2. Why does $dW$ sum over the batch, while $dX$ has one row per example?
# 3. A "leaky" ReLU is $\max(x, 0.01\,x)$. Write its forward and backward pass and check them with
#    `gradcheck.check_gradients`.
# 4. For very negative $x$, $\frac{1}{2}\bigl(1 + \operatorname{erf}(x/\sqrt 2)\bigr)$ is $1$ minus
#    almost $1$. Compute $\Phi(-10)$ that way and as $\frac{1}{2}\operatorname{erfc}(-x/\sqrt 2)$ with
#    `ops.erfc`: how many correct digits does each keep? Why does a `gelu_backward` written with
#    `erf` still pass the grader, whose cases reach $|x| \approx 13$? (The pass rule is in lesson 1.)
#
#    **Auto-graded part:** write `normal_cdf(x)`, $\Phi$ of an array `x` (any shape), that keeps its
#    digits however negative `x` is. The grader compares $\log \Phi$, from $x = -35$ up, so an answer
#    that rounds $\Phi(-10)$ to $0$ fails however small its absolute error. Graded code cannot import
#    npformer: `np.vectorize(math.erfc)` applies Python's `math.erfc` entry by entry. The digit counts
#    and the reason the `erf` form of `gelu_backward` passes stay for the rubric.


# %%
def normal_cdf(x):
    """Phi(x), the standard normal distribution function, entry by entry, accurate for very negative x."""
    ### BEGIN SOLUTION
    return 0.5 * np.vectorize(math.erfc)(-np.asarray(x, dtype=float) / math.sqrt(2.0))
    ### END SOLUTION


# %%
print(check("normal_cdf", normal_cdf))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. `dW = np.einsum("bti,btj->ij", x, dout)`: the repeated indices $b, t$ are summed, which is
#    $X^\top dY$ over every row. Full marks: the one call, and the copy passing the grader (run
#    below, with `dx` and `db` as before).
# 2. $W$ is shared: the same $W_{ij}$ multiplies $X_{ni}$ in every row $n$, so $L$ depends on it
#    through every row, and the chain rule adds the contributions of all those paths. $X_{ni}$
#    belongs to one example and reaches $L$ only through row $n$ of $Y$, so its gradient is that
#    row's alone. A full answer names the sharing (one parameter, many uses: sum) against the
#    per-example input (one use: no sum); $db$ sums for the same reason as $dW$.
# 3. Forward $\max(x, 0.01x)$, that is `np.where(x > 0, x, 0.01 * x)`, cached `x > 0`; backward
#    `dout * np.where(mask, 1.0, 0.01)`. The check must keep the inputs away from the kink at $0$,
#    as the ReLU check does. Reference code and a passing check below.
# 4. $\operatorname{erf}(-10/\sqrt 2) = -1 + 1.5 \cdot 10^{-23}$ rounds to $-1$ in float64 (whose
#    spacing near 1 is about $10^{-16}$), so $\frac{1}{2}(1 + \operatorname{erf})$ gives exactly
#    $0$: no correct digit of $\Phi(-10) \approx 7.6 \cdot 10^{-24}$. $\frac{1}{2}\operatorname{erfc}$
#    never subtracts nearly equal numbers and keeps nearly all of float64's digits (both printed
#    below). The `erf` form still passes because of the pass rule of lesson 1: where $\Phi(x)$
#    loses digits (very negative $x$), the gradient $\Phi(x) + x\varphi(x)$ is itself tiny, so the
#    absolute error is far below $10^{-9}$ times the largest gradient entry of the case, which is
#    of order 1. The relative error of such an entry can be far above $10^{-6}$ (printed below, for
#    the grader's case "with large $|x|$"), but the entry passes on the absolute test. Full marks:
#    the cancellation in $1 + \operatorname{erf}$, and the absolute part of the pass rule.

# %% tags=["instructor"]
def linear_backward_einsum(x, W, b, dout):
    dx = dout @ W.T
    dW = np.einsum("bti,btj->ij", x, dout)
    db = dout.sum(axis=(0, 1))
    return dx, dW, db


einsum_report = check("linear_backward", linear_backward_einsum, strict=False)
print("answer 1:", einsum_report.verdict)
assert einsum_report.passed

# %% tags=["instructor"]
def leaky_relu_forward(x):
    mask = x > 0
    return np.where(mask, x, 0.01 * x), mask


def leaky_relu_backward(dout, mask):
    return dout * np.where(mask, 1.0, 0.01)


leaky_x = np.random.default_rng(3).standard_normal((3, 5))
leaky_x += np.where(leaky_x >= 0, 0.05, -0.05)  # keep away from the kink at 0
leaky_report = gradcheck.check_gradients(leaky_relu_forward, leaky_relu_backward, {"x": leaky_x}, name="leaky relu")
print("answer 3:")
print(leaky_report)
assert leaky_report.passed

# %% tags=["instructor"]
from npformer.course.exercises import EXERCISES  # noqa: E402

exact_phi = 0.5 * math.erfc(10 / math.sqrt(2))  # the standard library's erfc, as a reference
phi_with_erf = float(0.5 * (1 + ops.erf(np.array(-10 / np.sqrt(2)))))
phi_with_erfc = float(0.5 * ops.erfc(np.array(10 / np.sqrt(2))))


def correct_digits(value):
    return 0.0 if value == 0 else -np.log10(abs(value - exact_phi) / exact_phi)


print(f"answer 4: Phi(-10) = {exact_phi:.6e}; with erf: {phi_with_erf:.6e} ({correct_digits(phi_with_erf):.0f} "
      f"correct digits); with erfc: {phi_with_erfc:.6e} ({correct_digits(phi_with_erfc):.1f} correct digits)")
assert phi_with_erf == 0 and correct_digits(phi_with_erfc) > 13
large = [case for case in EXERCISES["gelu_backward"].cases(np.random.default_rng(0)) if "large" in case.label][0]
with_erf = gelu_backward(**large.inputs)
reference = ops.gelu_backward(large.inputs["dout"], ops.gelu_forward(large.inputs["x"])[1])
relative = np.abs(with_erf - reference) / np.maximum(np.abs(with_erf) + np.abs(reference), 1e-12)
print(f"answer 4: on the case '{large.label}' (|x| up to {np.abs(large.inputs['x']).max():.1f}), the erf form "
      f"differs by at most {np.abs(with_erf - reference).max():.1e} in absolute terms, against 1e-9 x "
      f"{np.abs(reference).max():.2f} allowed; its worst relative error is {relative.max():.1e}, at "
      f"x = {large.inputs['x'].flat[relative.argmax()]:.2f}")
assert np.abs(with_erf - reference).max() < 1e-9 * np.abs(reference).max()
