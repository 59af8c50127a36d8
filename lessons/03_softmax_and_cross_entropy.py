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
assert not np.all(np.isfinite(naive)), "the naive softmax of [1000, 999, 0] must overflow"
assert np.all(np.isfinite(stable)) and abs(stable.sum() - 1) < 1e-12, "the stable softmax must be finite and sum to 1"
report = gradcheck.check_gradients(ops.softmax_forward, ops.softmax_backward,
                                   {"z": rng.standard_normal((3, 6))}, name="softmax")
print(report)
assert report.passed, "softmax_backward must pass the finite-difference check"

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
smoothed_losses = {}
for eps in (0.0, 0.1):
    loss, cache = ops.cross_entropy_forward(logits, targets, ignore_index=0, label_smoothing=eps)
    print(f"eps={eps}: loss {loss:.4f}")
    smoothed_losses[eps] = float(loss)
    dz = ops.cross_entropy_backward(1.0, cache)
    assert np.all(dz[targets == 0] == 0), "padding positions must get zero gradient"
    assert np.abs(dz.sum(-1)).max() < 1e-12, "dz = p - q sums to 0 over the vocabulary at every position"
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    q = (1 - eps) * np.eye(7)[targets] + eps / 7
    counted = targets != 0
    assert np.abs(dz[counted] - (p - q)[counted] / counted.sum()).max() < 1e-12, \
        "the gradient must be (p - q), averaged over the positions that count"
assert smoothed_losses[0.1] > smoothed_losses[0.0], "label smoothing raises the loss here"
padded_away = ops.cross_entropy_forward(np.where(targets[..., None] == 0, 1e4, logits), targets, ignore_index=0)[0]
assert abs(float(padded_away) - smoothed_losses[0.0]) < 1e-12, "padding positions must add nothing to the loss"
huge = ops.cross_entropy_forward(1e4 * rng.standard_normal((1, 3, 7)), np.array([[1, 2, 3]]), ignore_index=None)[0]
assert np.isfinite(float(huge)), "the fused loss must stay finite for logits of 1e4"
report = gradcheck.check_op("cross_entropy")
print(report)
assert report.passed, "cross_entropy_backward must pass the finite-difference check"

# %% [markdown]
# What smoothing does to the loss as the model grows confident: the correct logit is
# `margin` above the other `V - 1 = 9`.

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
# approaches 0 as the margin goes to infinity.
#
# ## Exercises
#
# 1. Show that `sum_j dz_j = 0` for every position. Why must it be?
# 2. Find the margin that minimises the smoothed loss for `V = 10`, `eps = 0.1`, analytically.
# 3. Check your own `cross_entropy_backward` with `gradcheck.check_exercise("cross_entropy", ...)`.
