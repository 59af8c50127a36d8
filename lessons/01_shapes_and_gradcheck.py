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
import numpy as np

from npformer import gradcheck, viz

rng = np.random.default_rng(0)

# %% [markdown]
# ## Shapes
#
# A batch of sentences is a 3-D array `(B, T, D)`: `B` sentences, `T` positions each, and a
# vector of `D` numbers per position (`D = d_model`). Attention splits `D` into `H` heads of
# `Dh = D / H`, giving `(B, H, T, Dh)`. Keeping these shapes straight is half the work.

# %%
B, T, D, H = 2, 5, 8, 2
x = rng.standard_normal((B, T, D))
heads = x.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
print("x", x.shape, "-> heads", heads.shape)

# %% [markdown]
# ## The chain rule, one layer at a time
#
# Suppose a layer computes `y = f(x)` and the rest of the network turns `y` into a scalar loss
# `L`. Backpropagation hands the layer `dout = dL/dy` (same shape as `y`) and asks for
# `dL/dx = (dy/dx)^T dout`. We never build the Jacobian `dy/dx`; each layer has a closed form.
#
# To **check** a backward pass we need a scalar. We take `L = sum(y * dout)` with a *random*
# `dout`: its exact gradient is what the backward pass must return. (Never use `dout = 1`:
# for softmax it makes the true gradient exactly zero, so a backward pass returning zeros
# would look right.)
#
# ## Central differences
#
# For each entry `x_i`, nudge it by `±h` and watch `L`:
#
# `dL/dx_i ≈ (L(x_i + h) - L(x_i - h)) / (2h)`
#
# Its error has two parts: **truncation**, which shrinks like `h^2`, and **rounding**, which grows
# like `eps / h` (float64 `eps ≈ 1e-16`). Let us see both for `f(x) = sin(x)`.

# %%
def cube_forward(x):
    return x**3, x


def cube_backward(dout, cache):
    return 3 * cache**2 * dout


x0 = 0.7
exact = np.cos(x0)
steps = np.logspace(-12, -0.5, 45)
forward_error = [abs((np.sin(x0 + h) - np.sin(x0)) / h - exact) for h in steps]
central_error = [abs((np.sin(x0 + h) - np.sin(x0 - h)) / (2 * h) - exact) for h in steps]
fourth_order = [abs((8 * (np.sin(x0 + h) - np.sin(x0 - h)) - (np.sin(x0 + 2 * h) - np.sin(x0 - 2 * h)))
                    / (12 * h) - exact) for h in steps]

# %%
import matplotlib.pyplot as plt  # noqa: E402

figure, axis = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
axis.loglog(steps, forward_error, label="forward difference  (error ~ h)")
axis.loglog(steps, central_error, label="central difference  (error ~ h²)")
axis.loglog(steps, fourth_order, label="4th-order central  (error ~ h⁴)")
axis.set(xlabel="step h", ylabel="|numeric - exact|", title="Finite differences of sin(x) at x = 0.7 (float64)")
axis.axvline(3e-4, color="gray", linestyle=":", label="npformer's h = 3e-4")
axis.legend()
axis.grid(True, which="both", alpha=0.3)
figure.savefig(viz.figures_dir() / "01_finite_differences.png", dpi=110)

# %% [markdown]
# Left of the minimum, rounding wins; right of it, truncation. The fourth-order formula
# `(8 D(h) - ...)/12h`, equivalently `(4 D(h) - D(2h)) / 3` (Richardson extrapolation), lets
# us use a larger `h` with less rounding noise. `npformer.gradcheck` uses it with `h = 3e-4`.
#
# ## The relative error
#
# Gradients come in all sizes, so we compare them relatively, entry by entry:
#
# `rel = |a - n| / max(|a| + |n|, 1e-12)`
#
# and report the worst entry of each tensor. Below `1e-6` in float64, the backward pass is right.

# %%
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

# %% [markdown]
# ## Exercises
#
# 1. Check `sin` with `gradcheck.check_gradients`: write `sin_forward` / `sin_backward`.
# 2. In the figure, where is the central difference most accurate? Derive the best `h` by
#    balancing `h^2` against `eps / h`.
# 3. Make `dout` all ones in a check of `ops.softmax_forward` with a backward pass that returns
#    zeros. Why does it pass? (See `tests/test_gradcheck.py`.)
