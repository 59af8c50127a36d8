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

rng = np.random.default_rng(0)

# %% [markdown]
# ## Softmax and its backward pass
#
# `p_i = exp(z_i) / sum_k exp(z_k)`. Its Jacobian is `dp_i/dz_j = p_i (δ_ij - p_j)`, so for an
# upstream gradient `g`:
#
# `dz_j = sum_i g_i p_i (δ_ij - p_j) = p_j (g_j - sum_i g_i p_i)`
#
# That is one subtraction and one multiplication per entry, with no `V x V` Jacobian.
#
# **Stability.** `exp(1000)` overflows. Since softmax ignores a constant shift, we subtract the
# row maximum first: every exponent is then `<= 0`.

# %%
z = np.array([1000.0, 999.0, 0.0])
with np.errstate(over="ignore", invalid="ignore"):
    naive = np.exp(z) / np.exp(z).sum()
stable, _ = ops.softmax_forward(z)
print("naive:", naive, " stable:", stable)
print(gradcheck.check_gradients(ops.softmax_forward, ops.softmax_backward,
                                {"z": rng.standard_normal((3, 6))}, name="softmax"))

# %% [markdown]
# ## Cross-entropy on logits, fused
#
# For the correct class `t`, the loss is `-log p_t = -(z_t - m) + log(sum_k exp(z_k - m))`
# with `m = max z`. The sum is at least 1 (the maximum contributes `exp(0)`), so the log is
# never `log(0)`. Computing `log p` from the logits directly (log-softmax) rather than
# `log(softmax(z))` is what keeps logits of `1e4` finite.
#
# The gradient is beautifully simple: **`dz = p - onehot(t)`**, averaged over the positions
# that count. Padding positions (target `<pad>` = 0) are ignored: they add nothing to the
# loss and get zero gradient.
#
# ## Label smoothing
#
# The paper trains with label smoothing `eps = 0.1`: the target distribution is
# `q = (1 - eps) onehot(t) + eps / V` instead of a one-hot vector. The loss is `-sum_j q_j log p_j`
# and the gradient becomes **`dz = p - q`**. The model is discouraged from ever becoming
# certain, which improves BLEU even though it raises the training loss.

# %%
logits = 2 * rng.standard_normal((2, 4, 7))
targets = np.array([[3, 5, 1, 0], [2, 0, 0, 0]])  # 0 = <pad>: ignored
for eps in (0.0, 0.1):
    loss, cache = ops.cross_entropy_forward(logits, targets, ignore_index=0, label_smoothing=eps)
    print(f"eps={eps}: loss {loss:.4f}")
print(gradcheck.check_op("cross_entropy"))

# %% [markdown]
# What smoothing does to the loss as the model grows confident: the correct logit is
# `margin` above the other `V - 1 = 9`.

# %%
margins = np.linspace(-2, 12, 200)
figure, axis = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
for eps in (0.0, 0.1, 0.3):
    losses = []
    for margin in margins:
        row = np.zeros((1, 10))
        row[0, 0] = margin
        losses.append(float(ops.cross_entropy_forward(row, np.array([0]), ignore_index=None,
                                                      label_smoothing=eps)[0]))
    axis.plot(margins, losses, label=f"label smoothing {eps}")
axis.set(xlabel="margin of the correct logit", ylabel="loss",
         title="Smoothing makes over-confidence costly again")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "03_label_smoothing.png", dpi=110)

# %% [markdown]
# With smoothing the loss has a minimum at a finite margin. Without it, the loss only
# approaches 0 as the margin goes to infinity.
#
# ## Exercises
#
# 1. Show that `sum_j dz_j = 0` for every position. Why must it be?
# 2. Find the margin that minimises the smoothed loss for `V = 10`, `eps = 0.1`, analytically.
# 3. Check your own `cross_entropy_backward` with `gradcheck.check_exercise("cross_entropy", ...)`.
