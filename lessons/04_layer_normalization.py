# %% [markdown]
# # Lesson 4 — Layer normalisation: the backward pass and its compact form
#
# Layer norm rescales each position's vector to zero mean and unit variance, then applies a
# learned scale $\gamma$ and shift $\beta$. Over the last axis, of size $D$:
#
# $$\mu = \frac{1}{D}\sum_i x_i, \qquad \sigma^2 = \frac{1}{D}\sum_i (x_i - \mu)^2, \qquad
# \hat x_i = \frac{x_i - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad y_i = \gamma_i \hat x_i + \beta_i$$
#
# (the biased variance, as in PyTorch, with $\epsilon = 10^{-5}$). The backward pass is the classic
# place where hand-written gradients go wrong.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Derivation
#
# The parameters are easy, because each $y_i$ depends on $\gamma_i$ and $\beta_i$ only. Summing
# over every position (every row of the batch):
#
# $$\frac{\partial L}{\partial \beta} = \sum_{\text{rows}} dy, \qquad
# \frac{\partial L}{\partial \gamma} = \sum_{\text{rows}} dy \odot \hat x$$
#
# For $dx$, let $g = dy \odot \gamma$, the gradient with respect to $\hat x$, and
# $r = 1/\sqrt{\sigma^2 + \epsilon}$. Each $\hat x_i$ depends on $x_i$ directly, and on every
# $x_j$ through $\mu$ and $\sigma^2$. With $\partial \sigma^2 / \partial x_j = 2 (x_j - \mu) / D$:
#
# $$\frac{\partial \hat x_i}{\partial x_j} = r\left(\delta_{ij} - \frac{1}{D}\right) - \frac{r}{D}\,\hat x_i \hat x_j$$
#
# Summing $g_i\, \partial \hat x_i / \partial x_j$ over $i$ gives the compact form:
#
# $$dx = r\left(g - \operatorname{mean}(g) - \hat x \operatorname{mean}(g \odot \hat x)\right)$$
#
# The two means remove what normalisation undoes anyway: a shift of the whole row
# ($\operatorname{mean}(g)$) and a rescaling of it ($\hat x \operatorname{mean}(g \odot \hat x)$).
#
# ### Your turn
#
# Write `layernorm_backward(x, gamma, beta, dout)` for `x` of shape `(..., D)`: recompute
# $\mu$, $r$ and $\hat x$ from `x`, then return `(dx, dgamma, dbeta)` with `dgamma` and `dbeta`
# of shape `(D,)`. The next cell checks it against npformer's and against finite differences,
# on a batch, a single token and rows of three numbers.

# %%
def layernorm_backward(x, gamma, beta, dout, eps=1e-5):
    """Gradients of y = gamma * x_hat + beta with respect to x, gamma and beta."""
    ### BEGIN SOLUTION
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    x_hat = (x - mean) * rstd
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
    d_model = x.shape[-1]
    dgamma = (dout * x_hat).reshape(-1, d_model).sum(axis=0)
    dbeta = dout.reshape(-1, d_model).sum(axis=0)
    return dx, dgamma, dbeta
    ### END SOLUTION


# %%
print(check("layernorm_backward", layernorm_backward))

# %% [markdown]
# **The classic mistake** is to forget that $\sigma^2$ depends on $x$, which drops the last term.
# The grader says which tensor is wrong, by how much, and where:

# %%
def layernorm_backward_without_variance_term(x, gamma, beta, dout, eps=1e-5):
    _, dgamma, dbeta = ops.layernorm_backward(dout, ops.layernorm_forward(x, gamma, beta, eps)[1])
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    g = dout * gamma
    return rstd * (g - g.mean(axis=-1, keepdims=True)), dgamma, dbeta


mistake = check("layernorm_backward", layernorm_backward_without_variance_term, strict=False)
print(mistake)
assert not mistake.passed and {row.tensor for row in mistake.rows if not row.passed} == {"dx"}

# %% [markdown]
# npformer's own `ops.layernorm_backward` is the compact form; it passes the same test:

# %%
library = gradcheck.check_op("layernorm")
print(library)
assert library.passed

# %% [markdown]
# ## What normalisation does to activations
#
# Below, 1,000 rows of 64 numbers, each row with its own mean (between $-5$ and $11$) and its own
# scale (between $0.8$ and $8$), go through layer norm with $\gamma = 1$, $\beta = 0$.

# %%
row_means = rng.uniform(-5, 11, size=(1000, 1))
row_scales = rng.uniform(0.8, 8, size=(1000, 1))
x = row_means + row_scales * rng.standard_normal((1000, 64))
y, _ = ops.layernorm_forward(x, np.ones(64), np.zeros(64))
figure, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
axes[0].hist(x.ravel(), bins=100, color="tab:gray")
axes[0].set(title="inputs: each row its own mean and scale", xlabel="value", ylabel="count")
axes[1].hist(y.ravel(), bins=100, color="tab:blue")
axes[1].set(title="after layer norm: every row mean 0, variance 1", xlabel="value", ylabel="count")
figure.savefig(viz.figures_dir() / "04_layernorm.png", dpi=110)
print(f"row means before: {x.mean(-1).min():.2f} to {x.mean(-1).max():.2f}; "
      f"row standard deviations before: {x.std(-1).min():.2f} to {x.std(-1).max():.2f}")
print(f"after: largest |row mean| {np.abs(y.mean(-1)).max():.1e}, "
      f"largest |row variance - 1| {np.abs(y.var(-1) - 1).max():.1e}")
assert np.abs(y.mean(-1)).max() < 1e-9, "after layer norm every row must have mean 0"
assert np.abs(y.var(-1) - 1).max() < 1e-4, "after layer norm every row must have variance 1 (up to eps)"

# %% [markdown]
# The variance is $1$ only up to $\epsilon$: $\operatorname{var}(\hat x) = \sigma^2 / (\sigma^2 + \epsilon)$,
# which is why the check above allows $10^{-4}$ and not $10^{-9}$.
#
# ## Exercises
#
# 1. From the compact form, show that $\sum_i dx_i = 0$ for every row, exactly. Then show that
#    $\sum_i dx_i \hat x_i = r\,\epsilon\,/(\sigma^2+\epsilon)\cdot\sum_i g_i \hat x_i$, which is
#    $0$ only when $\epsilon = 0$. Check both numerically with your `layernorm_backward`.
#    What do they say about the directions in which layer norm passes gradient back?
# 2. RMSNorm drops the mean: $y = \gamma\, x / \sqrt{\operatorname{mean}(x^2) + \epsilon}$. Derive its
#    backward pass, then check it with `gradcheck.check_gradients`.
# 3. Why does the grader check a row of three numbers? What goes wrong in the variance term
#    for $D = 1$?
