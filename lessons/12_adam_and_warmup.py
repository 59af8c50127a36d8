# %% [markdown]
# # Lesson 12 — Adam and the warm-up schedule
#
# **Adam** (Kingma and Ba, 2015) keeps running averages of the gradient (`m`) and of its square
# (`v`), and steps by `m / sqrt(v)`: each parameter gets its own step size, large where gradients
# are consistently small and small where they are noisy.
#
# `m = b1 m + (1 - b1) g`,  `v = b2 v + (1 - b2) g^2`,
# `p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`
#
# The `1 - b^t` factors correct the bias of averages that start at zero.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import nn, optim, viz

# %% [markdown]
# ## Adam against SGD on an ill-conditioned valley
#
# `f(w) = 50 w_0^2 + 0.5 w_1^2`: steep in one direction, flat in the other.

# %%
class Valley(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_param("w", np.array([1.0, 1.0]))

    def loss_and_grad(self):
        w = self.w
        self.grad["w"][...] = [100 * w[0], w[1]]
        return 50 * w[0] ** 2 + 0.5 * w[1] ** 2


histories = {}
for name, make in (("SGD lr 0.019", lambda m: optim.SGD(m, lr=0.019)),
                   ("SGD + momentum", lambda m: optim.SGD(m, lr=0.01, momentum=0.9)),
                   ("Adam lr 0.05", lambda m: optim.Adam(m, lr=0.05))):
    model = Valley()
    optimizer = make(model)
    losses = []
    for _ in range(150):
        losses.append(model.loss_and_grad())
        optimizer.step()
    histories[name] = losses
for name, losses in histories.items():
    print(f"{name:15s} loss {losses[0]:.1f} -> {losses[-1]:.1e} after {len(losses)} steps")
    assert losses[-1] < 1e-2 * losses[0], f"{name} must descend the valley"

# Adam's first step is lr * sign(g) for every parameter (m / sqrt(v) = g / |g| after bias correction),
# although the two gradients differ a hundredfold: each parameter gets its own step size.
model = Valley()
optimizer = optim.Adam(model, lr=0.05)
model.loss_and_grad()
optimizer.step()
print("Adam's first step:", 1.0 - model.w)
assert np.allclose(1.0 - model.w, 0.05, rtol=1e-6), "Adam's first step must be lr in every coordinate"

# SGD is stable only for lr < 2 / 100 in the steep direction: just above it, the loss grows.
model = Valley()
optimizer = optim.SGD(model, lr=0.021)
diverging = []
for _ in range(150):
    diverging.append(model.loss_and_grad())
    optimizer.step()
print(f"SGD lr 0.021: loss {diverging[0]:.1f} -> {diverging[-1]:.1f}")
assert diverging[-1] > diverging[0], "SGD with lr above 2/100 must diverge on this valley"

# %% [markdown]
# ## The paper's warm-up schedule
#
# `lr(step) = d_model^-0.5 min(step^-0.5, step warmup^-1.5)`: a linear rise for `warmup` steps,
# then a decay as `1/sqrt(step)`. Early on, Adam's `v` is a poor estimate and the residual stack
# of a post-norm model is fragile; a small learning rate gets through that phase.

# %%
steps = np.arange(1, 30001)
figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4), constrained_layout=True)
for name, losses in histories.items():
    left.semilogy(losses, label=name)
left.set(title="An ill-conditioned valley", xlabel="step", ylabel="loss")
left.legend()
for d_model, warmup in ((512, 4000), (512, 8000), (128, 4000)):
    schedule = optim.NoamSchedule(d_model, warmup)
    right.plot(steps, [schedule(int(s)) for s in steps], label=f"d_model {d_model}, warmup {warmup}")
cosine = optim.WarmupCosineSchedule(peak_lr=7e-4, warmup_steps=4000, total_steps=30000)
right.plot(steps, [cosine(int(s)) for s in steps], "--", label="linear warm-up + cosine")
right.set(title="Learning-rate schedules", xlabel="step", ylabel="learning rate")
right.legend()
for axis in (left, right):
    axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "12_adam_and_warmup.png", dpi=110)

schedule = optim.NoamSchedule(512, 4000)
rates = np.array([schedule(int(s)) for s in steps])
print(f"d_model 512, warmup 4000: the learning rate peaks at step {int(steps[rates.argmax()])}")
assert int(steps[rates.argmax()]) == 4000, "the schedule must peak at the end of the warm-up"
assert np.allclose(rates[:4000] / steps[:4000], rates[0]), "the warm-up must be a linear rise"
assert np.isclose(schedule(16000), schedule(4000) / 2), "after the warm-up the rate must decay as 1/sqrt(step)"
assert np.isclose(cosine(4000), 7e-4) and cosine(30000) < 1e-9, "the cosine schedule peaks after warm-up and ends at 0"

# %% [markdown]
# npformer's `Adam`, `AdamW` and `SGD` follow `torch.optim`'s update rules and defaults exactly:
# the tests compare them with closed forms and, when PyTorch is installed, with PyTorch itself.
# `clip_grad_norm(model, 1.0)` rescales all gradients together when their global norm exceeds 1.

# %%
model = Valley()
model.loss_and_grad()  # gradient (100, 1), norm about 100
norm_before = optim.clip_grad_norm(model, 1.0)
print(f"norm {norm_before:.2f} clipped to {np.linalg.norm(model.grad['w']):.4f}, gradient {model.grad['w']}")
assert np.isclose(np.linalg.norm(model.grad["w"]), 1.0, rtol=1e-5), "clipping must bring the global norm to 1"
assert np.isclose(model.grad["w"][0] / model.grad["w"][1], 100), "clipping must keep the gradient's direction"

# %% [markdown]
# ## Exercises
#
# 1. Why does SGD need `lr < 2/100` here, while Adam does not care about the scale of `f`?
# 2. Implement AdaGrad as an `optim.Optimizer` subclass and add it to the plot.
# 3. What is the peak learning rate of the paper's schedule for `d_model = 512`, `warmup = 4000`?
