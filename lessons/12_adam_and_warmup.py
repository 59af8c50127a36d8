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

# %% [markdown]
# npformer's `Adam`, `AdamW` and `SGD` follow `torch.optim`'s update rules and defaults exactly:
# the tests compare them with closed forms and, when PyTorch is installed, with PyTorch itself.
# `clip_grad_norm(model, 1.0)` rescales all gradients together when their global norm exceeds 1.
#
# ## Exercises
#
# 1. Why does SGD need `lr < 2/100` here, while Adam does not care about the scale of `f`?
# 2. Implement AdaGrad as an `optim.Optimizer` subclass and add it to the plot.
# 3. What is the peak learning rate of the paper's schedule for `d_model = 512`, `warmup = 4000`?
