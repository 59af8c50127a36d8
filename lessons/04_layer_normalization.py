# %% [markdown]
# # Lesson 4 — Layer normalisation: the backward pass and its compact form
#
# Layer norm rescales each position's vector to zero mean and unit variance, then applies a
# learned scale `gamma` and shift `beta`:
#
# `mu = mean(x)`, `var = mean((x - mu)^2)`, `x̂ = (x - mu) / sqrt(var + eps)`, `y = gamma x̂ + beta`
#
# (over the last axis, biased variance, as in PyTorch). The backward pass is the classic
# place where hand-written gradients go wrong.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz

rng = np.random.default_rng(0)

# %% [markdown]
# ## Derivation
#
# `dbeta = sum dy` and `dgamma = sum dy * x̂` (sums over every position). For `dx`, let
# `g = dy * gamma`, the gradient with respect to `x̂`, and `r = 1 / sqrt(var + eps)`. Each `x̂_i`
# depends on `x_i` directly, and on every `x_j` through `mu` and `var`:
#
# * `dx̂_i / dx_j = r (δ_ij - 1/D) - r x̂_i x̂_j / D`
#
# (the second term uses `dvar/dx_j = 2 (x_j - mu) / D`). Summing `g_i dx̂_i/dx_j` over `i`:
#
# **`dx = r (g - mean(g) - x̂ mean(g x̂))`**
#
# This is the compact form. The two means remove what normalisation undoes anyway: a shift of
# the whole row (`mean(g)`) and a rescaling of it (`x̂ mean(g x̂)`).

# %%
def layernorm_backward_compact(dy, cache):
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    dgamma = (dy * x_hat).reshape(-1, x_hat.shape[-1]).sum(0)
    dbeta = dy.reshape(-1, x_hat.shape[-1]).sum(0)
    return dx, dgamma, dbeta


report = gradcheck.check_exercise("layernorm", layernorm_backward_compact)
print(report)
assert report.passed, "the compact layer-norm backward pass must pass the finite-difference check"

# %% [markdown]
# **The classic mistake** is to forget that `var` depends on `x`, which drops the last term:

# %%
def layernorm_backward_missing_variance(dy, cache):
    dx, dgamma, dbeta = layernorm_backward_compact(dy, cache)
    rstd, gamma = cache["rstd"], cache["gamma"]
    g = dy * gamma
    return rstd * (g - g.mean(-1, keepdims=True)), dgamma, dbeta


report = gradcheck.check_exercise("layernorm", layernorm_backward_missing_variance)
print(report)
assert not report.passed

# %% [markdown]
# ## What normalisation does to activations

# %%
x = 3 + 4 * rng.standard_normal((1000, 64)) * rng.uniform(0.2, 2, size=(1000, 1))
y, _ = ops.layernorm_forward(x, np.ones(64), np.zeros(64))
figure, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
axes[0].hist(x.ravel(), bins=100, color="tab:gray")
axes[0].set(title="inputs: each row its own mean and scale", xlabel="value")
axes[1].hist(y.ravel(), bins=100, color="tab:blue")
axes[1].set(title="after layer norm: every row mean 0, variance 1", xlabel="value")
figure.savefig(viz.figures_dir() / "04_layernorm.png", dpi=110)
print(f"largest |row mean| {np.abs(y.mean(-1)).max():.1e}, largest |row variance - 1| {np.abs(y.var(-1) - 1).max():.1e}")
assert np.abs(y.mean(-1)).max() < 1e-9, "after layer norm every row must have mean 0"
assert np.abs(y.var(-1) - 1).max() < 1e-4, "after layer norm every row must have variance 1 (up to eps)"

# %% [markdown]
# ## Exercises
#
# 1. Derive `dx` yourself without looking, then check it with `gradcheck.check_exercise`.
# 2. Show that `sum_i dx_i = 0` and `sum_i dx_i x̂_i = 0` for every row. What does that mean?
# 3. RMSNorm drops the mean: `y = gamma x / sqrt(mean(x^2) + eps)`. Derive its backward pass.
