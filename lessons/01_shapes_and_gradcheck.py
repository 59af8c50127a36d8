# %% [markdown]
# # Lesson 1 — Shapes, and checking a gradient with finite differences
#
# Every lesson in this course builds one piece of a Transformer by hand: a **forward** pass
# that computes an output, and a **backward** pass that computes the gradient of a loss with
# respect to every input. Nothing is automatic. That makes it essential to *check* each
# backward pass, and the tool for that is the finite difference. This lesson builds it.
#
# Run it as a script (`python lessons/01_shapes_and_gradcheck.py`) or open it as a notebook
# (`jupytext --to notebook lessons/01_shapes_and_gradcheck.py`, or VS Code's "Run Cell").

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Shapes
#
# A batch of sentences is a 3-D array `(B, T, D)`: $B$ sentences, $T$ positions each, and a
# vector of $D$ numbers per position ($D$ is `d_model`). Attention splits $D$ into $H$ heads of
# $D_h = D / H$ numbers, giving `(B, H, T, Dh)`. Keeping these shapes straight is half the work.

# %%
B, T, D, H = 2, 5, 8, 2
x = rng.standard_normal((B, T, D))
heads = x.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
print("x", x.shape, "-> heads", heads.shape)

# %% [markdown]
# ## The chain rule, one layer at a time
#
# Suppose a layer computes $y = f(x)$ and the rest of the network turns $y$ into a scalar loss
# $L$. Backpropagation hands the layer the upstream gradient
# $\texttt{dout} = \partial L / \partial y$ (the shape of $y$) and asks for
#
# $$\frac{\partial L}{\partial x} = \left(\frac{\partial y}{\partial x}\right)^{\!\top} \texttt{dout}.$$
#
# We never build the Jacobian $\partial y / \partial x$; each layer has a closed form.
#
# To **check** a backward pass we need a scalar. We take
#
# $$L = \sum_k y_k \, \texttt{dout}_k$$
#
# with a *random* $\texttt{dout}$: the exact gradient of this $L$ with respect to $x$ is what the
# backward pass must return when it is handed $\texttt{dout}$. (Random, not all ones: exercise 3
# shows what an all-ones $\texttt{dout}$ can hide.)
#
# ## Central differences
#
# To estimate $\partial L / \partial x_i$ without knowing the derivative, nudge the entry $x_i$ by
# $\pm h$ ($e_i$ is the array with a 1 at entry $i$ and 0 elsewhere) and watch $L$. Taylor's
# formula gives
#
# $$L(x \pm h e_i) = L(x) \pm h \frac{\partial L}{\partial x_i} + \frac{h^2}{2} \frac{\partial^2 L}{\partial x_i^2}
# \pm \frac{h^3}{6} \frac{\partial^3 L}{\partial x_i^3} + O(h^4).$$
#
# Subtracting the two signs cancels the even terms, which leaves the **central difference**
#
# $$D_i(h) = \frac{L(x + h e_i) - L(x - h e_i)}{2h}
# = \frac{\partial L}{\partial x_i} + \frac{h^2}{6} \frac{\partial^3 L}{\partial x_i^3} + O(h^4).$$
#
# Its **truncation** error shrinks like $h^2$. The one-sided forward difference
# $\bigl(L(x + h e_i) - L(x)\bigr)/h$ keeps the $\frac{h}{2} \partial^2 L / \partial x_i^2$ term, so
# its error shrinks only like $h$. Both also suffer from **rounding**: each value of $L$ is off by
# about $\varepsilon |L|$ (in float64, $\varepsilon \approx 10^{-16}$), and dividing by $h$ makes
# that error grow like $\varepsilon / h$ as $h$ shrinks.
#
# ### Your turn
#
# Write `central_difference(f, x, h)`. `f` takes an array shaped like `x` and returns a scalar.
# Return a float64 array shaped like `x` whose entry $i$ is $D_i(h)$ for $L = f$: for every entry
# (`np.ndindex(x.shape)` walks them all), evaluate `f` once with the entry raised by $h$ and once
# with it lowered by $h$, then put it back. Work on a float64 copy of `x`, so that the caller's
# array is left alone. The grader tries three functions with $h = 10^{-5}$, among them a single
# entry, and compares your estimate with a far more accurate one (the fourth-order form below).

# %%
def central_difference(f, x, h):
    """The central difference of the scalar function f at x, entry by entry: shaped like x."""
    ### BEGIN SOLUTION
    x = np.array(x, dtype=np.float64)  # a copy we may nudge
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        original = x[i]
        x[i] = original + h
        above = f(x)
        x[i] = original - h
        below = f(x)
        x[i] = original
        grad[i] = (above - below) / (2 * h)
    return grad
    ### END SOLUTION


# %%
print(check("central_difference", central_difference))

# %% [markdown]
# ## Truncation against rounding
#
# For a function of one number, $D(h) = \bigl(f(x_0 + h) - f(x_0 - h)\bigr) / (2h)$. Below, the
# error of the forward difference, of $D(h)$, and of a fourth-order form (derived after the
# figure) for $f = \sin$ at $x_0 = 0.7$, whose exact derivative is $\cos(0.7)$.

# %%
x0 = 0.7
exact = np.cos(x0)


def central_sin(h):
    """D(h) of the prose: the central difference of sin at x0, with step h."""
    return (np.sin(x0 + h) - np.sin(x0 - h)) / (2 * h)


steps = np.logspace(-12, -0.5, 45)
forward_error = [abs((np.sin(x0 + h) - np.sin(x0)) / h - exact) for h in steps]
central_error = [abs(central_sin(h) - exact) for h in steps]
fourth_order = [abs((4 * central_sin(h) - central_sin(2 * h)) / 3 - exact) for h in steps]

# %%
figure, axis = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
axis.loglog(steps, forward_error, label="forward difference  (error ~ h)")
axis.loglog(steps, central_error, label="central difference  (error ~ h²)")
axis.loglog(steps, fourth_order, label="4th-order central  (error ~ h⁴)")
axis.set(xlabel="step h", ylabel="|numeric - exact|", title="Finite differences of sin(x) at x = 0.7 (float64)")
axis.axvline(3e-4, color="gray", linestyle=":", label="npformer's h = 3e-4")
axis.legend()
axis.grid(True, which="both", alpha=0.3)
figure.savefig(viz.figures_dir() / "01_finite_differences.png", dpi=110)

h = 3e-4
central_at_h = abs(central_sin(h) - exact)
fourth_at_h = abs((4 * central_sin(h) - central_sin(2 * h)) / 3 - exact)
print(f"at h = {h:g}: central difference error {central_at_h:.1e}, fourth-order error {fourth_at_h:.1e}")
assert fourth_at_h < central_at_h / 100, "at h = 3e-4 the fourth-order form must be far more accurate"

# %% [markdown]
# Left of each curve's minimum, rounding wins; right of it, truncation. The truncation error of
# $D(h)$ is $c\,h^2 + O(h^4)$ for some constant $c$, so
#
# $$D(h) = f'(x_0) + c\,h^2 + O(h^4), \qquad D(2h) = f'(x_0) + 4c\,h^2 + O(h^4),$$
#
# and the combination that cancels $c\,h^2$ (Richardson extrapolation) is
#
# $$\frac{4\,D(h) - D(2h)}{3} = f'(x_0) + O(h^4).$$
#
# Its truncation error shrinks like $h^4$, so a larger $h$, with less rounding noise, is already
# accurate enough: the numbers printed above compare the two at $h = 3 \cdot 10^{-4}$.
# `npformer.gradcheck` uses this fourth-order form with $h = 3 \cdot 10^{-4}$, entry by entry, on
# $L = \sum_k y_k \, \texttt{dout}_k$.
#
# ## The relative error
#
# Gradients come in all sizes, so we compare the analytic gradient $a$ (from the backward pass)
# with the numeric one $n$ relatively, entry by entry:
#
# $$\text{rel} = \frac{|a - n|}{\max\bigl(|a| + |n|,\ 10^{-12}\bigr)}$$
#
# and report the worst entry of each tensor. Below $10^{-6}$ in float64, the backward pass is right.
# (An entry also passes when $|a - n|$ is at most $10^{-9}$ times the largest numeric gradient entry
# of the check: finite differences cannot resolve anything smaller.)
#
# `gradcheck.check_gradients(forward, backward, inputs)` does all of this for an op written as
# `forward(*inputs) -> (out, cache)` and `backward(dout, cache) -> gradients`. Here, $y = x^3$:

# %%
def cube_forward(x):
    return x**3, x


def cube_backward(dout, cache):
    return 3 * cache**2 * dout


report = gradcheck.check_gradients(cube_forward, cube_backward, {"x": rng.standard_normal((3, 4))},
                                   name="cube")
print(report)
assert report.passed

# %% [markdown]
# A wrong derivative fails loudly:

# %%
wrong = gradcheck.check_gradients(cube_forward, lambda dout, x: 2 * x * dout,
                                  {"x": rng.standard_normal((3, 4))}, name="cube (wrong)")
print(wrong)
assert not wrong.passed

# %% [markdown]
# Every op of npformer passes this test (`npformer gradcheck` on the command line):

# %%
all_ops = gradcheck.check_all_ops()
viz.gradcheck_chart(all_ops, path=viz.figures_dir() / "01_gradcheck_all_ops.png")
print(all_ops.table().splitlines()[-1])
assert all_ops.passed, "every op of npformer must pass the finite-difference check"

# %% [markdown]
# ## Exercises
#
# 1. Check $\sin$ with `gradcheck.check_gradients`: write `sin_forward(x) -> (out, cache)` and
#    `sin_backward(dout, cache) -> dx`.
# 2. Derive the step $h$ at which the central difference is most accurate, by balancing its
#    truncation error $\propto h^2$ against its rounding error $\propto \varepsilon / h$. Then find
#    the minimum of `central_error` over `steps` and compare. Do the same for the fourth-order form
#    ($h^4$ against $\varepsilon / h$).
# 3. Check `ops.softmax_forward` (`from npformer import ops`) on an `x` of shape `(2, 5)` with a
#    backward pass that returns zeros, `lambda dout, cache: np.zeros_like(dout)`, and an all-ones
#    upstream gradient: `gradcheck.check_gradients(ops.softmax_forward, zeros_backward, {"x": x},
#    dout=np.ones((2, 5)))`. Then check npformer's own, correct `ops.softmax_backward` with the same
#    `dout`, and both again without `dout=` (a random upstream gradient). What is the exact gradient
#    of $L = \sum_k \operatorname{softmax}(x)_k$? Why does the all-ones check give the wrong
#    backward and the right one the same verdict, and why does the random `dout` tell them apart?
