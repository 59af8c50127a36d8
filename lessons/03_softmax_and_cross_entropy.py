# %% [markdown]
# # Lesson 3 — Softmax and cross-entropy: derivation, stability, label smoothing
#
# A translator outputs, at every position, a score (a *logit*) for every word of the target
# vocabulary. Softmax turns scores into probabilities; cross-entropy measures how little
# probability the correct word got.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ## Softmax, computed stably
#
# For a row of scores $z_1, \dots, z_V$ (the last axis of an array),
#
# $$p_i = \frac{e^{z_i}}{\sum_k e^{z_k}} .$$
#
# **Stability.** Written as it stands, this overflows: $e^{1000}$ is larger than any float64.

# %%
z = np.array([1000.0, 999.0, 0.0])
with np.errstate(over="ignore", invalid="ignore"):
    naive = np.exp(z) / np.exp(z).sum()
print("naive:", naive)
assert not np.all(np.isfinite(naive)), "the naive softmax of [1000, 999, 0] must overflow"

# %% [markdown]
# Softmax ignores a constant shift of the whole row: for any number $m$,
#
# $$\frac{e^{z_i - m}}{\sum_k e^{z_k - m}} = \frac{e^{-m}\, e^{z_i}}{e^{-m} \sum_k e^{z_k}} = p_i .$$
#
# With $m = \max_k z_k$, every exponent $z_i - m$ is at most $0$, so no $e^{z_i - m}$ overflows,
# and the largest of them is $e^0 = 1$, so the sum is at least $1$: never a division by $0$.
#
# ### Your turn
#
# Write `softmax(x)`: the softmax of `x` (any shape) over its last axis, an array the shape of
# `x` whose rows sum to 1. Subtract each row's maximum first (`keepdims=True` keeps the axis for
# broadcasting). The grader includes rows with scores near $+1000$ and near $-1000$.

# %%
def softmax(x):
    """Probabilities over the last axis of x, computed without overflow."""
    ### BEGIN SOLUTION
    exps = np.exp(x - x.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)
    ### END SOLUTION


# %%
print(check("softmax", softmax))

# %% [markdown]
# npformer's `ops.softmax_forward` subtracts the maximum too, and stays finite where the naive
# formula overflowed:

# %%
stable, _ = ops.softmax_forward(z)
print("stable:", stable)
assert np.all(np.isfinite(stable)) and abs(stable.sum() - 1) < 1e-12, "the stable softmax must be finite and sum to 1"

# %% [markdown]
# ## The backward pass of softmax
#
# Every $p_i = e^{z_i} / \sum_k e^{z_k}$ depends on every $z_j$: on $z_i$ through its numerator and
# its denominator, on the other $z_j$ through the denominator only. So the gradient is not one
# derivative per entry but a $V \times V$ matrix, the Jacobian $J_{ij} = \partial p_i / \partial z_j$.
# You derive it in two steps, each graded on its own.
#
# ### Step 1: the Jacobian
#
# Differentiate the quotient $p_i$ with respect to $z_j$, once for $j = i$ and once for $j \ne i$.
# Write both results in terms of $p$ alone (no exponentials left), then write
# `softmax_jacobian(x)` for one vector `x` of shape `(n,)`: return the `(n, n)` matrix whose entry
# `[i, j]` is $\partial p_i / \partial z_j$.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("03"))


# %%
def softmax_jacobian(x):
    """J[i, j] = d softmax(x)_i / d x_j, for one vector x (n,)."""
    ### BEGIN SOLUTION
    p = np.exp(x - x.max())
    p /= p.sum()
    return np.diag(p) - np.outer(p, p)
    ### END SOLUTION


# %%
print(check("softmax_jacobian", softmax_jacobian))

# %% [markdown]
# ### Step 2: the gradient, without building the Jacobian
#
# For an upstream gradient $g = \partial L / \partial p$ (`dout`), the chain rule gives
# $dz_j = \sum_i g_i\, J_{ij}$. Put your Jacobian into that sum and simplify it until no
# $V \times V$ matrix is left: a vocabulary of 30,000 would make one per position far too large.
#
# Write `softmax_backward(x, dout)` for `x` of any shape, softmax taken over the last axis:
# recompute $p$ from `x` (stably), then return `dx`, the shape of `x`. The check below also grades
# your Jacobian again and names the first wrong step if the gradient is wrong.

# %%
def softmax_backward(x, dout):
    """Gradient of softmax(x) (over the last axis) with respect to x."""
    ### BEGIN SOLUTION
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return p * (dout - (dout * p).sum(axis=-1, keepdims=True))
    ### END SOLUTION


# %%
print(check("softmax_backward", softmax_backward, steps=(softmax_jacobian,)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# With $\delta_{ij} = 1$ when $i = j$ and $0$ otherwise, the quotient rule gives
#
# $$\frac{\partial p_i}{\partial z_j} = \frac{\delta_{ij}\, e^{z_i}}{\sum_k e^{z_k}}
# - \frac{e^{z_i}\, e^{z_j}}{\bigl(\sum_k e^{z_k}\bigr)^2} = p_i\,(\delta_{ij} - p_j),$$
#
# so $J = \operatorname{diag}(p) - p\,p^\top$, and
#
# $$dz_j = \sum_i g_i\, p_i\,(\delta_{ij} - p_j) = p_j \Bigl(g_j - \sum_i g_i\, p_i\Bigr):$$
#
# one subtraction and one multiplication per entry. The classic mistakes: the diagonal alone,
# $p_i(1 - p_i)$, and the sum taken over the wrong axis of a batch.

# %% [markdown]
# npformer's `ops.softmax_backward` passes the finite-difference check of lesson 1:

# %%
report = gradcheck.check_gradients(ops.softmax_forward, ops.softmax_backward,
                                   {"x": rng.standard_normal((3, 6))}, name="softmax")
print(report)
assert report.passed, "softmax_backward must pass the finite-difference check"

# %% [markdown]
# ## Cross-entropy on logits, fused
#
# For the correct class $t$, with $m = \max_k z_k$, the loss of one position is
#
# $$\ell = -\log p_t = -(z_t - m) + \log \sum_k e^{z_k - m} .$$
#
# The sum is at least $1$ (the maximum contributes $e^0$), so the log is never $\log 0$. Computing
# $\log p$ from the logits directly (a log-softmax), rather than $\log(\operatorname{softmax}(z))$,
# is what keeps logits of $10^4$ finite: there, $\operatorname{softmax}(z)$ rounds most
# probabilities to $0$.
#
# A batch has logits of shape `(B, T, V)` and targets of shape `(B, T)`. Padding positions
# (target `<pad>` = 0) are ignored: they add nothing to the loss. The loss is the mean over the $N$
# positions that count (and $0$ when none does):
#
# $$L = \frac{1}{\max(N, 1)} \sum_{n:\ t_n \neq 0} \ell_n .$$
#
# Its upstream gradient $\texttt{dloss} = \partial(\text{final loss}) / \partial L$ is a number
# ($1$ when $L$ is the final loss). Written as a chain of named quantities, position by position,
#
# $$z \;\to\; \log p = z - \log \sum_k e^{z_k} \;\to\; \ell_n = -\log p_{n, t_n} \;\to\; L,$$
#
# the backward pass walks it from the end, one intermediate gradient at a time, each graded on its
# own: if your final `dlogits` is wrong, the check names the first wrong step.
#
# ### Step 1: back through the mean
#
# $L$ is a weighted sum of the per-position losses $\ell_n$. What is $\partial L / \partial \ell_n$
# at a position that counts, and at a padding position? Write
# `cross_entropy_d_position_losses(logits, targets, dloss)`: `logits` of shape `(..., V)`, `targets`
# of shape `(...)` (integers, `0` for `<pad>`), `dloss` a number; return one number per position,
# an array the shape of `targets`. The cases include a row of padding only and a single target.

# %% [markdown]
# **Your variant.** The loss has variants too (`show_variants("03")` above printed yours): each
# step is then the gradient of your variant's loss with respect to the same named quantity.

# %%
def cross_entropy_d_position_losses(logits, targets, dloss):
    """dL/d loss_pos: one number per position, the shape of targets."""
    ### BEGIN SOLUTION
    counted = targets != 0
    return dloss * counted / max(int(counted.sum()), 1)
    ### END SOLUTION


# %%
print(check("cross_entropy_d_position_losses", cross_entropy_d_position_losses))

# %% [markdown]
# ### Step 2: back through the loss of a position
#
# $\ell_n = -\log p_{n, t_n}$. Which entries of position $n$'s row of $\log p$ does $\ell_n$
# depend on, and how? Write `cross_entropy_d_log_probs(logits, targets, dloss)`, returning
# $\partial L / \partial \log p$, the shape of `logits` (you may call your step 1;
# `np.eye(V)[targets]` builds a row of the identity for each position).

# %%
def cross_entropy_d_log_probs(logits, targets, dloss):
    """dL/d log p, the shape of logits."""
    ### BEGIN SOLUTION
    d_position = cross_entropy_d_position_losses(logits, targets, dloss)
    return -d_position[..., None] * np.eye(logits.shape[-1])[targets]
    ### END SOLUTION


# %%
print(check("cross_entropy_d_log_probs", cross_entropy_d_log_probs))

# %% [markdown]
# ### Step 3: back through the log-softmax
#
# $\log p_j = z_j - \log \sum_k e^{z_k}$: every $\log p_j$ of a row depends on every $z_k$ of it,
# through the sum. Differentiate $\log p_j$ with respect to $z_k$ (once for $j = k$, once for
# $j \ne k$, in terms of $p$), then apply the chain rule with step 2's gradient $g$:
# $dz_k = \sum_j g_j\, \partial \log p_j / \partial z_k$. Simplify until no $V \times V$ matrix is left.
#
# Write `cross_entropy_backward(logits, targets, dloss)`, returning `dlogits`, the shape of `logits`
# ($p$ by a stable softmax; you may call your steps). The check grades both steps again and names
# the first wrong one; once it passes, it shows npformer's compact form: compare it with yours.

# %%
def cross_entropy_backward(logits, targets, dloss):
    """Gradient of the mean cross-entropy over the non-<pad> targets, with respect to the logits."""
    ### BEGIN SOLUTION
    g = cross_entropy_d_log_probs(logits, targets, dloss)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return g - p * g.sum(axis=-1, keepdims=True)
    ### END SOLUTION


# %%
print(check("cross_entropy_backward", cross_entropy_backward, steps=(cross_entropy_d_position_losses, cross_entropy_d_log_probs)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# Step 1: $\partial L / \partial \ell_n = \texttt{dloss} / \max(N, 1)$ where $t_n \ne 0$, and $0$ at
# padding. Step 2: $\ell_n$ reads one entry of its row, so
# $\partial L / \partial \log p_{n, j} = -\frac{\texttt{dloss}}{N} [j = t_n]$ at a counted position.
# Step 3: $\partial \log p_j / \partial z_k = \delta_{jk} - p_k$, so
# $dz_k = g_k - p_k \sum_j g_j$, and with step 2's $g$ (whose row sums to $-\texttt{dloss}/N$),
#
# $$\frac{\partial L}{\partial z_n} = \frac{\texttt{dloss}}{N}\,\bigl(p_n - \operatorname{onehot}(t_n)\bigr)$$
#
# at a counted position, $0$ at padding. The classic mistakes: dividing by every position
# ($B \cdot T$) instead of $N$, and padding positions left with a gradient.

# %% [markdown]
# ## Label smoothing
#
# The paper trains with label smoothing $\varepsilon = 0.1$: the target distribution is
#
# $$q = (1 - \varepsilon)\,\operatorname{onehot}(t) + \frac{\varepsilon}{V}$$
#
# instead of a one-hot vector ($\varepsilon / V$ goes to every class, the target included, as in
# PyTorch). The loss of one position is $\ell = -\sum_j q_j \log p_j$, and $L$ is still the mean over
# the $N$ positions that count. The model is discouraged from ever becoming certain: the paper
# reports that this hurts perplexity but improves accuracy and BLEU.
#
# ### Your turn: the loss itself
#
# Before its gradient, write the loss. `smoothed_cross_entropy_loss(logits, targets, label_smoothing)`
# takes `logits` of shape `(..., V)`, `targets` of shape `(...)` (integers, `0` for `<pad>`) and
# $\varepsilon$ = `label_smoothing`, and returns $L$ as a float: the mean over the $N$ positions that
# count of $\ell = -\sum_j q_j \log p_j$ ($0$ when no position counts). Three things to work out, each
# tested on its own case: the log-probabilities without ever taking $\log$ of a softmax (the section
# above shows how, and the grader sends logits of about $10^4$), the smoothed target distribution $q$
# of every position at once (an identity row per target, then the two terms), and the mean over the
# positions that count only. The grader compares your loss with npformer's, on a batch of padding
# only too.

# %%
def smoothed_cross_entropy_loss(logits, targets, label_smoothing):
    """The mean over the non-<pad> positions of -sum_j q_j log p_j: a float."""
    ### BEGIN SOLUTION
    shifted = logits - logits.max(axis=-1, keepdims=True)               # every exponent <= 0
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    vocab_size = logits.shape[-1]
    one_hot = np.eye(vocab_size)[targets]                                # (..., V)
    q = (1 - label_smoothing) * one_hot + label_smoothing / vocab_size
    position_losses = -(q * log_probs).sum(axis=-1)                       # (...)
    counted = targets != 0
    total = (position_losses * counted).sum()
    return float(total / max(int(counted.sum()), 1))
    ### END SOLUTION


# %%
print(check("smoothed_cross_entropy_loss", smoothed_cross_entropy_loss))

# %% [markdown]
# ### Step 2 again, with the smoothed targets
#
# Steps 1 and 3 of the walk above do not change: only the loss of a position does. Which entries of
# its row of $\log p$ does $\ell_n$ depend on now, and how? Write
# `smoothed_cross_entropy_d_log_probs(logits, targets, label_smoothing, dloss)`, with
# `label_smoothing` the $\varepsilon$ above, returning $\partial L / \partial \log p$, the shape of
# `logits`; padding positions still get $0$. With $\varepsilon = 0$ it must be your
# `cross_entropy_d_log_probs`.

# %%
def smoothed_cross_entropy_d_log_probs(logits, targets, label_smoothing, dloss):
    """dL/d log p with the smoothed targets, the shape of logits."""
    ### BEGIN SOLUTION
    vocab_size = logits.shape[-1]
    q = (1 - label_smoothing) * np.eye(vocab_size)[targets] + label_smoothing / vocab_size
    return -cross_entropy_d_position_losses(logits, targets, dloss)[..., None] * q
    ### END SOLUTION


# %%
print(check("smoothed_cross_entropy_d_log_probs", smoothed_cross_entropy_d_log_probs))

# %% [markdown]
# ### Step 3 again: the gradient of the logits
#
# Write `smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss)`: back through the
# log-softmax as in step 3 above, from your new step. Return `dlogits`, the shape of `logits`. What
# does each row of $q$ sum to, and what does that do to your answer?

# %%
def smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss):
    """Gradient of the label-smoothed mean cross-entropy over the non-<pad> targets."""
    ### BEGIN SOLUTION
    g = smoothed_cross_entropy_d_log_probs(logits, targets, label_smoothing, dloss)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return g - p * g.sum(axis=-1, keepdims=True)
    ### END SOLUTION


# %%
print(check("smoothed_cross_entropy_backward", smoothed_cross_entropy_backward, steps=(smoothed_cross_entropy_d_log_probs,)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# $\ell = -\sum_j q_j \log p_j$ reads every entry of its row, so step 2 gives
# $\partial L / \partial \log p_{n} = -\frac{\texttt{dloss}}{N}\, q_n$ at a counted position. Each row
# of $q$ sums to $(1 - \varepsilon) + V \cdot \varepsilon / V = 1$, so back through the log-softmax
#
# $$\frac{\partial L}{\partial z_n} = \frac{\texttt{dloss}}{N}\,(p_n - q_n),$$
#
# which is the gradient above for $\varepsilon = 0$.

# %% [markdown]
# npformer's `ops.cross_entropy_forward` and `ops.cross_entropy_backward` fuse all of this
# (`ignore_index=0` names `<pad>`, `label_smoothing` is $\varepsilon$). Below, their loss with and
# without smoothing, and checks: zero gradient at padding, a gradient that sums to $0$ over the
# vocabulary (exercise 1 below asks why), padding adding nothing to the loss, finite losses for
# logits of $10^4$.

# %%
logits = 2 * rng.standard_normal((2, 4, 7))
targets = np.array([[3, 5, 1, 0], [2, 0, 0, 0]])  # 0 = <pad>: ignored
smoothed_losses = {}
for eps in (0.0, 0.1):
    loss, cache = ops.cross_entropy_forward(logits, targets, ignore_index=0, label_smoothing=eps)
    print(f"eps={eps}: loss {loss:.4f}")
    smoothed_losses[eps] = float(loss)
    dz = ops.cross_entropy_backward(1.0, cache)
    assert np.all(dz[targets == 0] == 0), "padding positions must get zero gradient"
    assert np.abs(dz.sum(-1)).max() < 1e-12, "the gradient must sum to 0 over the vocabulary at every position"
assert smoothed_losses[0.1] > smoothed_losses[0.0], "label smoothing raises the loss here"
padded_away = ops.cross_entropy_forward(np.where(targets[..., None] == 0, 1e4, logits), targets, ignore_index=0)[0]
assert abs(float(padded_away) - smoothed_losses[0.0]) < 1e-12, "padding positions must add nothing to the loss"
huge_logits, huge_targets = 1e4 * rng.standard_normal((1, 3, 7)), np.array([[1, 2, 3]])
huge = ops.cross_entropy_forward(huge_logits, huge_targets, ignore_index=None)[0]
probabilities = ops.softmax_forward(huge_logits)[0]
with np.errstate(divide="ignore"):
    unfused = -np.log(np.take_along_axis(probabilities, huge_targets[..., None], axis=-1)).mean()
print(f"logits of about 1e4: fused loss {float(huge):.1f}, -log(softmax(z)) gives {unfused}")
assert np.isfinite(float(huge)), "the fused loss must stay finite for logits of 1e4"
assert not np.isfinite(unfused), "log(softmax(z)) must reach log(0) for logits of 1e4"
report = gradcheck.check_op("cross_entropy")
print(report)
assert report.passed, "cross_entropy_backward must pass the finite-difference check"

# %% tags=["instructor"]
# The library's gradient against p - q, averaged over the positions that count: the body of the
# exercise's solution, so it stays out of the student edition.
for eps in (0.0, 0.1):
    loss, cache = ops.cross_entropy_forward(logits, targets, ignore_index=0, label_smoothing=eps)
    dz = ops.cross_entropy_backward(1.0, cache)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    q = (1 - eps) * np.eye(7)[targets] + eps / 7
    counted = targets != 0
    assert np.abs(dz[counted] - (p - q)[counted] / counted.sum()).max() < 1e-12, \
        "the gradient must be (p - q), averaged over the positions that count"

# %% [markdown]
# What smoothing does to the loss as the model grows confident: the correct logit is a
# *margin* above the other $V - 1 = 9$, which are all $0$.

# %%
margins = np.linspace(-2, 12, 200)
figure, axis = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
curves = {}
for eps in (0.0, 0.1, 0.3):
    losses = []
    for margin in margins:
        row = np.zeros((1, 10))
        row[0, 0] = margin
        losses.append(float(ops.cross_entropy_forward(row, np.array([0]), ignore_index=None,
                                                      label_smoothing=eps)[0]))
    curves[eps] = np.array(losses)
    axis.plot(margins, losses, label=f"label smoothing {eps}")
axis.set(xlabel="margin of the correct logit", ylabel="loss",
         title="Smoothing makes over-confidence costly again")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "03_label_smoothing.png", dpi=110)
assert np.all(np.diff(curves[0.0]) < 0) and curves[0.0][-1] < 1e-4, "without smoothing the loss only falls toward 0"
for eps in (0.1, 0.3):
    best = int(np.argmin(curves[eps]))
    assert 0 < best < len(margins) - 1, f"with smoothing {eps} the loss has a minimum at a finite margin"
    print(f"label smoothing {eps}: smallest loss {curves[eps][best]:.3f} at margin {margins[best]:.2f}")

# %% [markdown]
# With smoothing the loss has a minimum at a finite margin. Without it, the loss only
# approaches $0$ as the margin goes to infinity.
#
# ## Exercises
#
# 1. Show that $\sum_j dz_j = 0$ at every position. Why must it be?
# 2. Find, as a formula in $\varepsilon$ and $V$, the margin that minimises the smoothed loss of the
#    figure (the correct logit is the margin, the other $V - 1$ logits are $0$). Check it against the
#    minima printed above for $V = 10$. Find the smallest loss as a formula too: the entropy of
#    which distribution is it?
#    Auto-graded: `smoothing_optimum(label_smoothing, vocab_size)`, your two formulas as code (NumPy
#    only), returning the minimising margin and the smallest loss, checked for other $\varepsilon$ and
#    $V$ too. Which distribution's entropy it is stays for the rubric.

# %%
def smoothing_optimum(label_smoothing, vocab_size):
    """(margin, smallest loss) of the row (margin, 0, ..., 0) with target 0, smoothed by label_smoothing."""
    ### BEGIN SOLUTION
    eps, vocab = label_smoothing, vocab_size
    q_target, q_other = 1 - eps + eps / vocab, eps / vocab
    margin = np.log((vocab - 1) * q_target / (1 - q_target))     # where p_target = q_target
    smallest = -q_target * np.log(q_target) - (vocab - 1) * q_other * np.log(q_other)
    return margin, smallest
    ### END SOLUTION


# %%
print(check("smoothing_optimum", smoothing_optimum))

# %% [markdown]
# 3. The loss divides by $N$, the number of targets that are not `<pad>`, not by the number of
#    positions $B \cdot T$. What would dividing by $B \cdot T$ do to the gradient of a batch of short
#    sentences padded to a long one, compared with a batch of long sentences?
#    Auto-graded: `padding_gradient_scale(targets)`, for `targets` of shape `(B, T)` (`0` for
#    `<pad>`), the number a counted position's gradient is multiplied by when the loss divides by
#    $B \cdot T$ instead of $N$. What that does to short and long batches stays for the rubric.

# %%
def padding_gradient_scale(targets):
    """What a counted position's gradient is multiplied by when the loss divides by B*T, not N: a float."""
    ### BEGIN SOLUTION
    counted = int((targets != 0).sum())
    return counted / targets.size
    ### END SOLUTION


# %%
print(check("padding_gradient_scale", padding_gradient_scale))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. At a counted position $dz = \frac{\texttt{dloss}}{N}(p - q)$, and
#    $\sum_j p_j = 1 = \sum_j q_j$ (for $q$: $(1 - \varepsilon) + V \cdot \varepsilon / V = 1$), so
#    $\sum_j dz_j = 0$; at a padding position $dz = 0$. It must be so because the loss depends on
#    the logits only through softmax, which ignores a shift $z \to z + c\mathbf{1}$: the derivative
#    of $L$ along $\mathbf{1}$, which is $\sum_j dz_j$, is zero. Full marks needs both the algebra
#    and the shift invariance. Checked below on the student's function.
# 2. With $z_t = m$ and the other $V - 1$ logits $0$, $p_t = e^m / (e^m + V - 1)$, and
#    $\partial \ell / \partial m = p_t - q_t$ with $q_t = 1 - \varepsilon + \varepsilon/V$. Setting
#    $p_t = q_t$:
#    $$m^* = \log \frac{(V - 1)\, q_t}{1 - q_t} = \log\left(1 + \frac{V (1 - \varepsilon)}{\varepsilon}\right),$$
#    $\log 91 \approx 4.51$ for $\varepsilon = 0.1$ and $\log(73/3) \approx 3.19$ for $\varepsilon = 0.3$
#    ($V = 10$), within one grid step ($14/199 \approx 0.07$) of the printed minima. At $m^*$, $p = q$
#    (by symmetry the other $p_j$ equal the other $q_j$ too), so the smallest loss is
#    $-\sum_j q_j \log q_j = H(q)$, the entropy of the smoothed target distribution:
#    $-(1 - \varepsilon + \frac{\varepsilon}{V}) \log(1 - \varepsilon + \frac{\varepsilon}{V})
#    - (V - 1)\frac{\varepsilon}{V} \log \frac{\varepsilon}{V}$, since
#    $\ell = H(q) + \operatorname{KL}(q \,\|\, p) \ge H(q)$. Both formulas against the grid below.
# 3. Every counted position's gradient would be $\frac{1}{BT}(p - q)$ instead of $\frac{1}{N}(p - q)$:
#    smaller by the factor $N / (BT)$, the fraction of real tokens. A batch of short sentences
#    padded to a long one has $N \ll BT$, so its tokens get a much smaller step than the tokens of a
#    batch of long sentences ($N \approx BT$): the effective learning rate would depend on how much
#    padding the batch happens to hold (and the reported loss would fall as padding grows). Full
#    marks: the factor $N/(BT)$, and that the weight of a token then depends on its batch rather
#    than being equal for all tokens.

# %% tags=["instructor"]
answer_rng = np.random.default_rng(5)
answer_logits = 3 * answer_rng.standard_normal((2, 3, 6))
answer_targets = np.array([[2, 4, 0], [1, 0, 0]])
answer_dz = smoothed_cross_entropy_backward(answer_logits, answer_targets, 0.1, 1.0)
print(f"answer 1: largest |sum_j dz_j| over the positions: {np.abs(answer_dz.sum(-1)).max():.1e}")
assert np.abs(answer_dz.sum(-1)).max() < 1e-14

# %% tags=["instructor"]
for eps in (0.1, 0.3):
    vocab = 10
    best_margin = np.log(1 + vocab * (1 - eps) / eps)
    q_target, q_other = 1 - eps + eps / vocab, eps / vocab
    entropy = -q_target * np.log(q_target) - (vocab - 1) * q_other * np.log(q_other)
    grid_best = int(np.argmin(curves[eps]))
    print(f"answer 2: eps = {eps}: margin log(1 + V(1 - eps)/eps) = {best_margin:.3f} "
          f"(grid: {margins[grid_best]:.3f}); entropy of q = {entropy:.4f} (grid: {curves[eps][grid_best]:.4f})")
    assert abs(best_margin - margins[grid_best]) < margins[1] - margins[0]
    assert 0 <= curves[eps][grid_best] - entropy < 1e-3
