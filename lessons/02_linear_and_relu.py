# %% [markdown]
# # Lesson 2 — The linear layer and ReLU
#
# The workhorse of every network: `y = x @ W + b`, with `x (..., Din)`, `W (Din, Dout)`,
# `b (Dout,)`. Then a non-linearity, here ReLU, `max(x, 0)`.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz

rng = np.random.default_rng(0)

# %% [markdown]
# ## Deriving the backward pass
#
# Flatten the leading axes so that `X` is `(N, Din)` and `Y = X W + b` is `(N, Dout)`. For one
# entry, `Y[n, j] = sum_i X[n, i] W[i, j] + b[j]`. With the upstream gradient `dY`:
#
# * `dL/dX[n, i] = sum_j dY[n, j] W[i, j]`, that is **`dX = dY @ W.T`**;
# * `dL/dW[i, j] = sum_n X[n, i] dY[n, j]`, that is **`dW = X.T @ dY`**, a sum over every row
#   (every sentence and position);
# * `dL/db[j] = sum_n dY[n, j]`, that is **`db = dY.sum(0)`**.
#
# A shape check confirms each: `(N, Dout) @ (Dout, Din)` is `(N, Din)` and so on. Each is a single
# matrix product, with no loop over the batch. Here is the code in `npformer/ops/linear.py`:

# %%
import inspect  # noqa: E402

print(inspect.getsource(ops.linear_backward))

# %%
x, W, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
report = gradcheck.check_gradients(ops.linear_forward, ops.linear_backward, {"x": x, "W": W, "b": b},
                                   name="linear")
print(report)
assert report.passed, "linear_backward must pass the finite-difference check"

# %% [markdown]
# ## ReLU
#
# `relu(x) = max(x, 0)` has derivative 1 where `x > 0` and 0 where `x < 0` (at exactly 0 we take 0,
# as PyTorch does). So `dx = dout * (x > 0)`: the gradient flows through the units that were
# on. npformer's cache keeps only the boolean mask.
#
# The finite-difference check must avoid the kink: an input within `h` of 0 would straddle it.

# %%
x = rng.standard_normal((3, 5))
x += np.where(x >= 0, 0.05, -0.05)  # keep away from the kink at 0
report = gradcheck.check_gradients(ops.relu_forward, ops.relu_backward, {"x": x}, name="relu")
print(report)
assert report.passed, "relu_backward must pass the finite-difference check away from the kink"
_, relu_cache = ops.relu_forward(x)
assert all(value.dtype == bool for value in relu_cache.values()), "ReLU's cache keeps only a boolean mask"

# %% [markdown]
# GELU, `x Φ(x)`, is a smooth cousin used by BERT and GPT. Both and their derivatives:

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
# ## Exercises
#
# 1. Write your own `linear_backward` and check it with
#    `gradcheck.check_exercise("linear", my_linear_backward)`.
# 2. Why does `dW` sum over the batch, while `dX` has one row per example?
# 3. A "leaky" ReLU is `max(x, 0.01 x)`. Write its forward and backward pass and check them.
