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
#    ($h^4$ against $\varepsilon / h$). Auto-graded: for the error model
#    $E(h) = a\,h^p + b\,\varepsilon / h$, write `most_accurate_step(truncation, power, rounding,
#    unit_roundoff)` ($a$, $p$, $b$, $\varepsilon$) returning the step $h^* > 0$ at which $E$ is
#    smallest and $E(h^*)$, from your derivation (no search over $h$). The comparison with the
#    measured minima stays for the rubric.

# %%
def most_accurate_step(truncation, power, rounding, unit_roundoff):
    """(step, smallest_error): the h > 0 minimising E(h) = truncation * h**power + rounding * unit_roundoff / h."""
    ### BEGIN SOLUTION
    # dE/dh = power * truncation * h**(power - 1) - rounding * unit_roundoff / h**2 = 0
    step = (rounding * unit_roundoff / (power * truncation)) ** (1 / (power + 1))
    smallest_error = truncation * step ** power + rounding * unit_roundoff / step
    return step, smallest_error
    ### END SOLUTION


# %%
print(check("most_accurate_step", most_accurate_step))

# %% [markdown]
# 3. Check `ops.softmax_forward` (`from npformer import ops`) on an `x` of shape `(2, 5)` with a
#    backward pass that returns zeros, `lambda dout, cache: np.zeros_like(dout)`, and an all-ones
#    upstream gradient: `gradcheck.check_gradients(ops.softmax_forward, zeros_backward, {"x": x},
#    dout=np.ones((2, 5)))`. Then check npformer's own, correct `ops.softmax_backward` with the same
#    `dout`, and both again without `dout=` (a random upstream gradient). What is the exact gradient
#    of $L = \sum_k \operatorname{softmax}(x)_k$? Why does the all-ones check give the wrong
#    backward and the right one the same verdict, and why does the random `dout` tell them apart?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. $\sin' = \cos$, so the forward keeps `x` as its cache and the backward returns
#    `dout * np.cos(cache)`. Full marks: both functions, and a report that passes (run below).
# 2. The error of $D(h)$ is about $E(h) = a h^2 + b\varepsilon / h$, with $a = |f'''(x_0)|/6$ and
#    $b$ of the order of $|f(x_0)|$. $E'(h) = 2ah - b\varepsilon/h^2 = 0$ gives
#    $h^* = (b\varepsilon / 2a)^{1/3} \sim \varepsilon^{1/3} \approx 6 \cdot 10^{-6}$ in float64, and a
#    smallest error of order $\varepsilon^{2/3} \approx 4 \cdot 10^{-11}$. The fourth-order form has
#    truncation error $\frac{h^4}{30} |f^{(5)}(x_0)|$ (expanding $D(h)$ to $h^4$), so balancing $h^4$
#    against $\varepsilon/h$ gives $h^* \sim \varepsilon^{1/5} \approx 7 \cdot 10^{-4}$ and an error
#    of order $\varepsilon^{4/5} \approx 3 \cdot 10^{-13}$. The measured minima over `steps` agree
#    with these to within the grid's spacing and the constants (printed below). Full marks needs
#    the balancing step, both exponents $1/3$ and $1/5$ (`most_accurate_step`, graded by `check`),
#    and the comparison.
# 3. $\sum_k \operatorname{softmax}(x)_k = 1$ for every $x$, so the exact gradient is $0$. With
#    `dout` all ones, the scalar that the check differentiates is this constant: the zeros
#    backward is exactly right, the correct backward returns $p \odot (1 - \sum_k p_k)$, zero up
#    to rounding, and the finite differences see nothing but rounding noise. The two analytic
#    answers agree to rounding, so they get the same verdict (here both FAIL against the noise;
#    the sizes are printed below), and that verdict says nothing about either backward pass. A
#    random `dout` makes $L = \sum_k \texttt{dout}_k\, p_k$ depend on $x$, with the gradient
#    $p \odot (\texttt{dout} - \sum_k \texttt{dout}_k p_k)$, far above the noise: the zeros backward
#    is wrong at every entry and fails, and the correct one passes.

# %% tags=["instructor"]
def sin_forward(x):
    return np.sin(x), x


def sin_backward(dout, cache):
    return dout * np.cos(cache)


sin_x = np.random.default_rng(1).standard_normal((3, 4))
sin_report = gradcheck.check_gradients(sin_forward, sin_backward, {"x": sin_x}, name="sin")
print("answer 1:")
print(sin_report)
assert sin_report.passed

# %% tags=["instructor"]
unit_roundoff = np.finfo(np.float64).eps
best_central, best_fourth = steps[int(np.argmin(central_error))], steps[int(np.argmin(fourth_order))]
print(f"answer 2: central difference: smallest error {min(central_error):.1e} at h = {best_central:.1e} "
      f"(eps^(1/3) = {unit_roundoff ** (1 / 3):.1e}); fourth-order form: smallest error {min(fourth_order):.1e} "
      f"at h = {best_fourth:.1e} (eps^(1/5) = {unit_roundoff ** (1 / 5):.1e})")
assert abs(np.log10(best_central / unit_roundoff ** (1 / 3))) < 1, "the best h must be near eps^(1/3)"
assert abs(np.log10(best_fourth / unit_roundoff ** (1 / 5))) < 1, "the best h must be near eps^(1/5)"

# %% tags=["instructor"]
from npformer import ops  # noqa: E402


def zeros_backward(dout, cache):
    return np.zeros_like(dout)


softmax_x = np.random.default_rng(2).standard_normal((2, 5))
verdicts = {}
for backward_name, backward in (("zeros", zeros_backward), ("ops.softmax_backward", ops.softmax_backward)):
    for dout_name, dout in (("all-ones dout", np.ones((2, 5))), ("random dout", None)):
        softmax_report = gradcheck.check_gradients(ops.softmax_forward, backward, {"x": softmax_x}, dout=dout,
                                                   name=backward_name)
        verdicts[backward_name, dout_name] = softmax_report.passed
        print(f"answer 3: {backward_name:20s} with {dout_name}: {'pass' if softmax_report.passed else 'FAIL'} "
              f"(worst relative error {softmax_report.results[0].max_rel_error:.1e})")
with_ones = ops.softmax_backward(np.ones((2, 5)), ops.softmax_forward(softmax_x)[1])
probe = softmax_x.copy()  # numerical_gradient nudges it in place
noise = gradcheck.numerical_gradient(lambda: ops.softmax_forward(probe)[0], probe, np.ones((2, 5)))
random_dout = np.random.default_rng(3).standard_normal((2, 5))
true_gradient = ops.softmax_backward(random_dout, ops.softmax_forward(softmax_x)[1])
print(f"answer 3: with an all-ones dout, the correct backward returns entries up to {np.abs(with_ones).max():.1e} "
      f"and the finite differences up to {np.abs(noise).max():.1e}; with a random dout the gradient reaches "
      f"{np.abs(true_gradient).max():.2f}")
assert verdicts["zeros", "all-ones dout"] == verdicts["ops.softmax_backward", "all-ones dout"]
assert not verdicts["zeros", "random dout"] and verdicts["ops.softmax_backward", "random dout"]
