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
# ## Deriving the backward pass
#
# Flatten the leading axes, so that $X$ is $N \times D_\text{in}$ (`(N, Din)`) and $Y = X W + b$
# is $N \times D_\text{out}$, with $N$ the number of rows (every sentence and position). One
# entry is
#
# $$Y_{nj} = \sum_i X_{ni} W_{ij} + b_j .$$
#
# With the upstream gradient $dY = \partial L / \partial Y$, the chain rule sums over every entry of
# $Y$ that an input touches:
#
# * $X_{ni}$ appears in row $n$ of $Y$, once per column $j$:
#   $$\frac{\partial L}{\partial X_{ni}} = \sum_j dY_{nj} W_{ij}, \qquad\text{that is}\qquad dX = dY\, W^\top;$$
# * $W_{ij}$ appears in column $j$ of every row $n$:
#   $$\frac{\partial L}{\partial W_{ij}} = \sum_n X_{ni}\, dY_{nj}, \qquad\text{that is}\qquad dW = X^\top dY,$$
#   a sum over every row;
# * $b_j$ appears in column $j$ of every row:
#   $$\frac{\partial L}{\partial b_j} = \sum_n dY_{nj}.$$
#
# A shape check confirms each: $dY\,W^\top$ is $(N \times D_\text{out})(D_\text{out} \times D_\text{in})
# = N \times D_\text{in}$, the shape of $X$, and $X^\top dY$ is $D_\text{in} \times D_\text{out}$, the
# shape of $W$. Each is a single matrix product, with no loop over the batch.
#
# ### Your turn
#
# Write `linear_backward(x, W, b, dout)` for `x` of shape `(..., Din)` (any number of leading
# axes) and `dout` of shape `(..., Dout)`. Reshape `x` and `dout` to 2-D arrays of rows
# (`reshape(-1, Din)`), apply the three formulas, and return `(dx, dW, db)` with the shapes of `x`,
# `W` and `b`. (`b` does not enter any of the gradients; it is an argument because the forward
# pass takes it.) The grader checks a batch, a single token with a square `W`, and $D_\text{out} = 1$.

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
print(check("linear_backward", linear_backward))

# %% [markdown]
# Now that yours passes, compare it with npformer's own `linear_backward`, in `npformer/ops/linear.py`.
# It computes the same three products from the cache that `linear_forward` keeps, and passes the
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
# $\operatorname{relu}(x) = \max(x, 0)$, entry by entry, has derivative $1$ where $x > 0$ and $0$
# where $x < 0$ (at exactly $x = 0$ we take $0$, as PyTorch does). Each output entry depends on
# its own input entry only, so the Jacobian is diagonal and the backward pass is a product,
# entry by entry:
#
# $$dx = \texttt{dout} \odot [x > 0],$$
#
# with $[x > 0]$ equal to $1$ where the condition holds and $0$ elsewhere: the gradient flows
# through the units that were on.
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
# npformer's `ops.relu_backward` does the same, from a cache that keeps only the boolean mask
# $[x > 0]$ (one byte per entry, instead of the eight of a float64 `x`).
#
# Its finite-difference check must avoid the kink: an input within $2h$ of $0$ would straddle it,
# and the difference quotient there is neither $0$ nor $1$.

# %%
x = rng.standard_normal((3, 5))
x += np.where(x >= 0, 0.05, -0.05)  # keep away from the kink at 0
report = gradcheck.check_gradients(ops.relu_forward, ops.relu_backward, {"x": x}, name="relu")
print(report)
assert report.passed, "relu_backward must pass the finite-difference check away from the kink"
_, relu_cache = ops.relu_forward(x)
assert all(value.dtype == bool for value in relu_cache.values()), "ReLU's cache keeps only a boolean mask"

# %% [markdown]
# ## GELU
#
# GELU, used by BERT and GPT, weights $x$ by the probability that a standard normal variable is
# below it:
#
# $$\operatorname{gelu}(x) = x\,\Phi(x), \qquad \Phi(x) = \frac{1}{2}\left(1 + \operatorname{erf}\frac{x}{\sqrt 2}\right),$$
#
# with $\Phi$ the standard normal distribution function and
# $\operatorname{erf}(z) = \frac{2}{\sqrt\pi}\int_0^z e^{-t^2}\,dt$. The derivative of $\Phi$ is the
# normal density,
#
# $$\Phi'(x) = \varphi(x) = \frac{e^{-x^2/2}}{\sqrt{2\pi}},$$
#
# so by the product rule
#
# $$\operatorname{gelu}'(x) = \Phi(x) + x\,\varphi(x), \qquad dx = \texttt{dout} \odot \operatorname{gelu}'(x).$$
#
# ### Your turn
#
# Write `gelu_backward(x, dout)` for the exact GELU above (not the $\tanh$ approximation): return
# `dx`, the shape of `x`. NumPy has no $\operatorname{erf}$: Python's `math.erf` takes one number,
# and `np.vectorize(math.erf)` applies it entry by entry to an array (npformer's `ops.erf` cannot be
# called from graded code: the grader runs your function where npformer is not importable). The
# grader includes inputs as large as $|x| \approx 13$.

# %%
def gelu_backward(x, dout):
    """Gradient of the exact GELU, x * Phi(x), with respect to x."""
    ### BEGIN SOLUTION
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))
    density = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return dout * (cdf + x * density)
    ### END SOLUTION


# %%
print(check("gelu_backward", gelu_backward))

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
    if name == "ReLU":  # the prose: 1 where x > 0, 0 where x < 0, and 0 at exactly x = 0
        assert np.all(derivative[grid > 0] == 1) and np.all(derivative[grid <= 0] == 0), \
            "ReLU's derivative must be 1 for x > 0 and 0 for x <= 0"
    else:  # GELU is smooth: no jump anywhere on the grid
        assert np.abs(np.diff(derivative)).max() < 0.05, "GELU's derivative must be smooth"
left.set(title="activation", xlabel="x")
right.set(title="derivative (the backward pass with dout = 1)", xlabel="x")
for axis in (left, right):
    axis.grid(True, alpha=0.3)
    axis.legend()
figure.savefig(viz.figures_dir() / "02_relu_gelu.png", dpi=110)

# %% [markdown]
# ReLU's derivative jumps from $0$ to $1$ at $x = 0$; GELU's changes smoothly, dips below $0$ for
# negative $x$ (where $x\,\varphi(x) < 0$ outweighs $\Phi(x)$), and rises slightly above $1$ for
# positive $x$ before settling at $1$.

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
