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
# ## Derivation, one path at a time
#
# Write the forward pass as a chain of named quantities, each computed from the ones before it:
#
# $$x \;\to\; \mu \;\to\; \sigma^2 \;\to\; \hat x \;\to\; y.$$
#
# Each $x_j$ reaches the loss along **three paths**: directly, through $x_j - \mu$ in $\hat x_j$;
# through the mean $\mu$, which every $\hat x_i$ uses; and through the variance $\sigma^2$, which
# every $\hat x_i$ uses too. The backward pass walks the chain from the end, one intermediate
# gradient at a time. Each step below is graded on its own, so if your final `dx` is wrong the
# grader tells you which step is. Use $r = 1/\sqrt{\sigma^2 + \epsilon}$ as a shorthand.
#
# ### Step 1: back through the scale and shift
#
# $y_i = \gamma_i \hat x_i + \beta_i$. What is $\partial L / \partial \hat x$, given
# $dy = \partial L / \partial y$ (`dout`)? Write `layernorm_dx_hat(x, gamma, beta, dout)`, returning
# it in the shape of `x`. (While you are here: what are $\partial L / \partial \gamma$ and
# $\partial L / \partial \beta$, given that every row of the batch uses the same $\gamma$ and
# $\beta$? The last step returns them.)

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("04"))


# %%
def layernorm_dx_hat(x, gamma, beta, dout, eps=1e-5):
    """dL/dx_hat, shaped like x."""
    ### BEGIN SOLUTION
    return dout * gamma
    ### END SOLUTION


# %%
print(check("layernorm_dx_hat", layernorm_dx_hat))

# %% [markdown]
# ### Step 2: the variance
#
# $\sigma^2$ enters every $\hat x_i$ of its row through the factor $r = (\sigma^2 + \epsilon)^{-1/2}$.
# Differentiate $\hat x_i$ with respect to $\sigma^2$, holding $x$ and $\mu$ fixed, and sum the
# contributions of the row. Write `layernorm_dvar(x, gamma, beta, dout)`, returning
# $\partial L / \partial \sigma^2$ with shape `(..., 1)`: one number per row.

# %%
def layernorm_dvar(x, gamma, beta, dout, eps=1e-5):
    """dL/dvar, one number per row: shape (..., 1)."""
    ### BEGIN SOLUTION
    centered = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)
    dx_hat = dout * gamma
    return -0.5 * (dx_hat * centered).sum(axis=-1, keepdims=True) * rstd ** 3
    ### END SOLUTION


# %%
print(check("layernorm_dvar", layernorm_dvar))

# %% [markdown]
# ### Step 3: the mean
#
# $\mu$ reaches the loss along two paths: through $x_i - \mu$ in every $\hat x_i$, and through the
# variance, $\sigma^2 = \frac{1}{D}\sum_i (x_i - \mu)^2$, whose gradient you have from step 2. Add
# both. (One of the two is exactly zero: which, and why?) Write
# `layernorm_dmean(x, gamma, beta, dout)`, returning $\partial L / \partial \mu$ with shape `(..., 1)`.

# %%
def layernorm_dmean(x, gamma, beta, dout, eps=1e-5):
    """dL/dmean, one number per row: shape (..., 1)."""
    ### BEGIN SOLUTION
    centered = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)
    direct = -(dout * gamma * rstd).sum(axis=-1, keepdims=True)
    through_variance = layernorm_dvar(x, gamma, beta, dout, eps) * (-2.0 * centered).mean(axis=-1, keepdims=True)
    return direct + through_variance
    ### END SOLUTION


# %%
print(check("layernorm_dmean", layernorm_dmean))

# %% [markdown]
# ### Step 4: the three paths together
#
# Now $x_j$ itself: directly through $\hat x_j$ (step 1's gradient times
# $\partial \hat x_j / \partial x_j$ with $\mu$ and $\sigma^2$ held fixed), through $\sigma^2$ (step 2's
# gradient times $\partial \sigma^2 / \partial x_j$) and through $\mu$ (step 3's gradient times
# $\partial \mu / \partial x_j$). Add the three.
#
# Write `layernorm_backward(x, gamma, beta, dout)` for `x` of shape `(..., D)`: return
# `(dx, dgamma, dbeta)`, with `dgamma` and `dbeta` of shape `(D,)`. You may call your three steps.
# The check below grades the steps again and names the first wrong one; it compares with npformer
# and with finite differences, on a batch, a single token and rows of three numbers. Once it
# passes, it shows npformer's compact form of the same gradient: compare it with yours.

# %%
def layernorm_backward(x, gamma, beta, dout, eps=1e-5):
    """Gradients of y = gamma * x_hat + beta with respect to x, gamma and beta."""
    ### BEGIN SOLUTION
    d_model = x.shape[-1]
    centered = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)
    direct = layernorm_dx_hat(x, gamma, beta, dout, eps) * rstd
    through_variance = layernorm_dvar(x, gamma, beta, dout, eps) * 2.0 * centered / d_model
    through_mean = layernorm_dmean(x, gamma, beta, dout, eps) / d_model
    dx = direct + through_variance + through_mean
    dgamma = (dout * centered * rstd).reshape(-1, d_model).sum(axis=0)
    dbeta = dout.reshape(-1, d_model).sum(axis=0)
    return dx, dgamma, dbeta
    ### END SOLUTION


# %%
print(check("layernorm_backward", layernorm_backward, steps=(layernorm_dx_hat, layernorm_dvar, layernorm_dmean)))

# %% [markdown] tags=["instructor"]
# ### The compact form (instructor edition)
#
# Let $g = dy \odot \gamma$ (step 1). Each $\hat x_i$ depends on $x_i$ directly, and on every
# $x_j$ through $\mu$ and $\sigma^2$; with $\partial \sigma^2 / \partial x_j = 2 (x_j - \mu) / D$:
#
# $$\frac{\partial \hat x_i}{\partial x_j} = r\left(\delta_{ij} - \frac{1}{D}\right) - \frac{r}{D}\,\hat x_i \hat x_j$$
#
# Summing $g_i\, \partial \hat x_i / \partial x_j$ over $i$ gives the compact form, the sum of the three
# paths of the steps (the variance's path through $\mu$ is zero, since $\sum_i (x_i - \mu) = 0$):
#
# $$dx = r\left(g - \operatorname{mean}(g) - \hat x \operatorname{mean}(g \odot \hat x)\right), \qquad
# d\gamma = \sum_{\text{rows}} dy \odot \hat x, \qquad d\beta = \sum_{\text{rows}} dy.$$
#
# The two means remove what normalisation undoes anyway: a shift of the whole row
# ($\operatorname{mean}(g)$) and a rescaling of it ($\hat x \operatorname{mean}(g \odot \hat x)$).

# %% [markdown] tags=["instructor"]
# **The classic mistake** is to forget that $\sigma^2$ depends on $x$, which drops the last term.
# The grader says which tensor is wrong, by how much, and where:

# %% tags=["instructor"]
def layernorm_backward_without_variance_term(x, gamma, beta, dout, eps=1e-5):
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) * rstd
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True))  # the term - x_hat * mean(g * x_hat) is missing
    d_model = x.shape[-1]
    return dx, (dout * x_hat).reshape(-1, d_model).sum(axis=0), dout.reshape(-1, d_model).sum(axis=0)


mistake = check("layernorm_backward", layernorm_backward_without_variance_term, strict=False)
print(mistake)
assert not mistake.passed and {row.tensor for row in mistake.rows if not row.passed} == {"dx"}

# %% [markdown]
# npformer's own `ops.layernorm_backward` is the compact form; it passes the finite-difference
# check of lesson 1:

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
# 1. Simplify your `dx` to one line in terms of $g = dy \odot \gamma$, $\hat x$ and $r$ (the grader
#    shows npformer's form once your exercise passes). Show that $\sum_i dx_i = 0$ for every row, exactly. Then show that
#    $\sum_i dx_i \hat x_i = r\,\epsilon\,/(\sigma^2+\epsilon)\cdot\sum_i g_i \hat x_i$, which is
#    $0$ only when $\epsilon = 0$. Check both numerically with your `layernorm_backward`.
#    What do they say about the directions in which layer norm passes gradient back?
# 2. RMSNorm drops the mean: $y = \gamma\, x / \sqrt{\operatorname{mean}(x^2) + \epsilon}$. Derive its
#    backward pass, then check it with `gradcheck.check_gradients`.
# 3. Why does the grader check a row of three numbers? What goes wrong in the variance term
#    for $D = 1$?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. $\sum_i \hat x_i = 0$ exactly (it is $r \sum_i (x_i - \mu)$), so
#    $$\sum_i dx_i = r\Bigl(\sum_i g_i - D \operatorname{mean}(g)
#    - \operatorname{mean}(g \odot \hat x) \sum_i \hat x_i\Bigr) = 0.$$
#    With $\sum_i \hat x_i^2 = D \sigma^2 r^2 = D\sigma^2 / (\sigma^2 + \epsilon)$:
#    $$\sum_i dx_i \hat x_i = r\Bigl(\sum_i g_i \hat x_i - \operatorname{mean}(g) \cdot 0
#    - \frac{1}{D}\sum_j g_j \hat x_j \cdot \frac{D\sigma^2}{\sigma^2 + \epsilon}\Bigr)
#    = r\,\frac{\epsilon}{\sigma^2 + \epsilon} \sum_i g_i \hat x_i .$$
#    So $dx$ is orthogonal to $\mathbf{1}$ and, up to $\epsilon$, to $\hat x$: layer norm passes no
#    gradient in the directions that shift the row or rescale it about its mean, because its output
#    does not change (shift) or hardly changes (rescaling, only through $\epsilon$) along them.
#    Only the $D - 2$ other directions carry gradient (up to $\epsilon$). Checked below, on rows
#    with a small $\sigma^2$ so that the $\epsilon$ term is visible.
# 2. With $\rho = \sqrt{\operatorname{mean}(x^2) + \epsilon}$, $\hat x = x / \rho$, $y = \gamma \odot \hat x$
#    and $g = dy \odot \gamma$: $\partial \rho / \partial x_j = x_j / (D\rho)$, so
#    $\partial \hat x_i / \partial x_j = \frac{1}{\rho}\left(\delta_{ij} - \frac{\hat x_i \hat x_j}{D}\right)$ and
#    $$dx = \frac{1}{\rho}\left(g - \hat x \operatorname{mean}(g \odot \hat x)\right), \qquad
#    d\gamma = \sum_{\text{rows}} dy \odot \hat x.$$
#    It is layer norm's compact form without the $\operatorname{mean}(g)$ term (no mean is removed).
#    Full marks: the formula and a passing `check_gradients` (reference code below).
# 3. Small $D$ is where the $1/D$ terms weigh most and where each row is most strongly curved, so
#    slips whose effect fades as $D$ grows (the unbiased variance, off by $D/(D-1)$) show up
#    clearly; and $D = 3$ is the smallest $D$ at which $dx$ is not degenerate. For $D = 1$:
#    $x - \mu = 0$, so $\sigma^2 = 0$, $\hat x = 0$ and $y = \beta$ whatever $x$ is; both
#    $g - \operatorname{mean}(g)$ and the variance term vanish, $dx = 0$ exactly, and a backward that
#    drops the variance term (or returns zeros) cannot be told from a correct one (an unbiased
#    variance would even divide by $D - 1 = 0$). For $D = 2$,
#    $\hat x = \pm\sqrt{\sigma^2 / (\sigma^2 + \epsilon)}\,(1, -1)$, almost $\pm(1, -1)$ whatever $x$
#    is, and $g - \operatorname{mean}(g)$ lies along $\hat x$: the variance term cancels it almost
#    entirely, and the true $dx$ is the gradient without that term times
#    $\epsilon / (\sigma^2 + \epsilon)$. The output hardly depends on $x$, so the check would compare
#    tiny, $\epsilon$-driven gradients. From $D = 3$ on, a row has a direction orthogonal to both
#    $\mathbf{1}$ and $\hat x$, and $dx$ is of order 1. The sizes are printed below.

# %% tags=["instructor"]
answer_rng = np.random.default_rng(4)
small_x = 0.01 * answer_rng.standard_normal((4, 6))  # sigma^2 near 1e-4: epsilon = 1e-5 is not negligible
answer_gamma, answer_dout = 1 + 0.5 * answer_rng.standard_normal(6), answer_rng.standard_normal((4, 6))
answer_dx = layernorm_backward(small_x, answer_gamma, np.zeros(6), answer_dout)[0]
variance = small_x.var(-1)
rstd = 1 / np.sqrt(variance + 1e-5)
x_hat = (small_x - small_x.mean(-1, keepdims=True)) * rstd[:, None]
along_x_hat = (answer_dx * x_hat).sum(-1)
predicted = rstd * 1e-5 / (variance + 1e-5) * (answer_dout * answer_gamma * x_hat).sum(-1)
print(f"answer 1: largest |sum_i dx_i| = {np.abs(answer_dx.sum(-1)).max():.1e} (largest |dx_i| "
      f"{np.abs(answer_dx).max():.1e}); sum_i dx_i x_hat_i per row: {np.round(along_x_hat, 4)}, "
      f"predicted {np.round(predicted, 4)}")
assert np.abs(answer_dx.sum(-1)).max() < 1e-12 * np.abs(answer_dx).max()
assert np.allclose(along_x_hat, predicted, rtol=1e-9, atol=0)

# %% tags=["instructor"]
def rmsnorm_forward(x, gamma, eps=1e-5):
    rms = np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    x_hat = x / rms
    return gamma * x_hat, (x_hat, rms, gamma)


def rmsnorm_backward(dout, cache):
    x_hat, rms, gamma = cache
    g = dout * gamma
    dx = (g - x_hat * (g * x_hat).mean(-1, keepdims=True)) / rms
    dgamma = (dout * x_hat).reshape(-1, x_hat.shape[-1]).sum(0)
    return dx, dgamma


rms_report = gradcheck.check_gradients(rmsnorm_forward, rmsnorm_backward,
                                       {"x": answer_rng.standard_normal((2, 3, 5)),
                                        "gamma": 1 + 0.5 * answer_rng.standard_normal(5)}, name="rmsnorm")
print("answer 2:")
print(rms_report)
assert rms_report.passed

# %% tags=["instructor"]
for width in (1, 2, 3, 5):
    rows = 3 + 2 * answer_rng.standard_normal((6, width))
    row_gamma, row_dout = 1 + 0.5 * answer_rng.standard_normal(width), answer_rng.standard_normal((6, width))
    right = layernorm_backward(rows, row_gamma, np.zeros(width), row_dout)[0]
    g = row_dout * row_gamma
    without_variance_term = (g - g.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-5)
    print(f"answer 3: D = {width}: largest |dx| {np.abs(right).max():.1e}, without the variance term "
          f"{np.abs(without_variance_term).max():.1e}")
    if width == 1:
        assert np.all(right == 0) and np.all(without_variance_term == 0)
    if width == 2:
        shrink = 1e-5 / (rows.var(-1, keepdims=True) + 1e-5)
        assert np.allclose(right, shrink * without_variance_term, rtol=1e-6, atol=0)
    if width >= 3:
        assert np.abs(right).max() > 0.1
