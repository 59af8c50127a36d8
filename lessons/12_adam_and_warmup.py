# %% [markdown]
# # Lesson 12 — Adam and the warm-up schedule
#
# **Adam** (Kingma and Ba, 2015) keeps, for every entry of every parameter, running averages of the
# gradient and of its square, and uses them to give each entry its own step size: large where
# gradients are consistently small, small where they are noisy.
#
# The two averages are *exponential moving averages*. At step $t = 1, 2, \dots$, with gradient $g_t$,
# starting from $m_0 = v_0 = 0$:
#
# $$m_t = \beta_1 m_{t-1} + (1 - \beta_1)\, g_t, \qquad v_t = \beta_2 v_{t-1} + (1 - \beta_2)\, g_t^2,$$
#
# every operation elementwise, with $0 < \beta_1, \beta_2 < 1$ (the paper's Transformer uses
# $\beta_1 = 0.9$ and $\beta_2 = 0.98$). $m_t$ estimates the gradient's mean, $v_t$ its mean square.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import nn, optim, viz
from npformer.course import check

# %% [markdown]
# ## Step 1: the bias of a start at zero
#
# An average that starts at $0$ is too small on the first steps: after one step $m_1$ holds only a
# fraction of $g_1$. Suppose every gradient so far was the same $g$. Unroll the recursion of $m_t$
# back to $m_0 = 0$ (a geometric sum), and find the factor $c_t$, a number that depends on $\beta_1$
# and $t$ only, for which $c_t\, m_t = g$ exactly. The same factor, with $\beta_2$ in place of
# $\beta_1$, does it for $v_t$ when every squared gradient was $g^2$. Adam's corrected moments are
#
# $$\hat m_t = c_t(\beta_1)\, m_t, \qquad \hat v_t = c_t(\beta_2)\, v_t .$$
#
# Write `adam_bias_correction(beta, step)`: the factor $c_t$ for $\beta$ = `beta` at $t$ = `step`
# ($\ge 1$), a float. Before you run the check: what must $c_t$ tend to as $t$ grows, and why?

# %%
def adam_bias_correction(beta, step):
    """The factor c_t that makes c_t * m_t equal g when every gradient so far was g (from m_0 = 0)."""
    ### BEGIN SOLUTION
    return 1.0 / (1.0 - beta**step)
    ### END SOLUTION


# %%
print(check("adam_bias_correction", adam_bias_correction))

# %% [markdown]
# ## Step 2: the update
#
# Adam moves each entry against its corrected first moment $\hat m_t$, times the learning rate
# $\eta$, divided by a scale of that entry's gradients taken from its corrected second moment
# $\hat v_t$. Choose that scale from two requirements:
#
# - multiplying every gradient by a number $k > 0$ leaves the update unchanged ($\hat m_t$ scales as
#   $k$ and $\hat v_t$ as $k^2$: which power of $\hat v_t$ scales as $k$?);
# - when every gradient so far was the same $g$, every entry moves by exactly $\eta$, against the
#   sign of $g$, from the first step on.
#
# A small $\epsilon$ ($10^{-8}$ or $10^{-9}$) keeps the division finite where an entry's gradients
# vanish. It has the units of a gradient, not of a squared gradient: add it where the units agree.
#
# ### Your turn
#
# Write `adam_step(param, grad, m, v, step, lr, beta1, beta2, eps)`: one update of one parameter
# array. `grad`, `m` and `v` have the shape of `param`; `step` is $t$, the number of the update
# being taken (1 on the first). Update $m$ and $v$, correct them with your step 1 at **this** step,
# and return `(param, m, v)`: the new parameter and the new moments $m_t$, $v_t$ (uncorrected: the
# next step continues from them). The check grades your step 1 again, then your update on a first
# step from $m = v = 0$, on step 7, on step 1000 and on gradients near $10^{-7}$, where $\epsilon$
# matters. Once it passes, it shows the paper's form of the update.

# %%
def adam_step(param, grad, m, v, step, lr, beta1, beta2, eps):
    """One Adam update: returns the new (param, m, v)."""
    ### BEGIN SOLUTION
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m * adam_bias_correction(beta1, step)
    v_hat = v * adam_bias_correction(beta2, step)
    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)
    return param, m, v
    ### END SOLUTION


# %%
print(check("adam_step", adam_step, steps=(adam_bias_correction,)))

# %% [markdown] tags=["instructor"]
# ### The paper's algorithm (instructor edition)
#
# Unrolled from $m_0 = 0$, $m_t = (1 - \beta_1) \sum_{i=1}^{t} \beta_1^{t-i} g_i$; with every
# $g_i = g$ the geometric sum gives $m_t = (1 - \beta_1^t)\, g$, so $c_t = 1 / (1 - \beta_1^t)$,
# which tends to $1$ as the start at zero is forgotten. The update is then
#
# $$\hat m_t = \frac{m_t}{1 - \beta_1^t}, \qquad \hat v_t = \frac{v_t}{1 - \beta_2^t}, \qquad
# \theta_t = \theta_{t-1} - \eta\, \frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon} :$$
#
# $\sqrt{\hat v_t}$ scales as the gradients do, and with a constant $g$ the ratio is
# $g / |g| = \operatorname{sign}(g)$ (for $\epsilon \to 0$), a step of exactly $\eta$.

# %% [markdown] tags=["instructor"]
# **Forgetting the bias correction** changes the early steps most. The grader recognises it:

# %% tags=["instructor"]
def adam_step_without_correction(param, grad, m, v, step, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * m / (np.sqrt(v) + eps), m, v


mistake = check("adam_step", adam_step_without_correction, strict=False)
print(mistake)
assert not mistake.passed and "a factor that tends to 1" in str(mistake)

# %% [markdown]
# The correction matters most on the first steps. Without it, how large would the first step be,
# in units of $\eta$ (for $\epsilon \to 0$), with the paper's $\beta_2 = 0.98$ and with PyTorch's
# default $\beta_2 = 0.999$, both with $\beta_1 = 0.9$? Too small, or too large?

# %% [markdown] tags=["instructor"]
# Without the correction the first step is $\eta (1 - \beta_1) / \sqrt{1 - \beta_2}$ in every
# coordinate (for $\epsilon \to 0$), not $\eta$: too small with the paper's $\beta_2 = 0.98$ and too
# large with PyTorch's default $\beta_2 = 0.999$:

# %% tags=["instructor"]
for beta2 in (0.98, 0.999):
    print(f"beta1 = 0.9, beta2 = {beta2}: uncorrected first step = {(1 - 0.9) / np.sqrt(1 - beta2):.2f} x lr")

# %% [markdown]
# ## Adam against SGD on an ill-conditioned valley
#
# $f(w) = 50 w_0^2 + 0.5 w_1^2$: steep in one direction, flat in the other. npformer's
# `optim.Adam` does the update above for every parameter of a model.

# %%
class Valley(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_param("w", np.array([1.0, 1.0]))

    def loss_and_grad(self):
        w = self.w
        self.grad["w"][...] = [100 * w[0], w[1]]
        return 50 * w[0] ** 2 + 0.5 * w[1] ** 2


histories, paths = {}, {}
for name, make in (("SGD lr 0.019", lambda m: optim.SGD(m, lr=0.019)),
                   ("SGD lr 0.01 + momentum 0.9", lambda m: optim.SGD(m, lr=0.01, momentum=0.9)),
                   ("Adam lr 0.05", lambda m: optim.Adam(m, lr=0.05))):
    model = Valley()
    optimizer = make(model)
    losses, path = [], []
    for _ in range(150):
        losses.append(model.loss_and_grad())
        path.append(model.w.copy())
        optimizer.step()
    histories[name], paths[name] = losses, np.array(path)
for name, losses in histories.items():
    print(f"{name:15s} loss {losses[0]:.1f} -> {losses[-1]:.1e} after {len(losses)} steps")
    assert losses[-1] < 1e-2 * losses[0], f"{name} must descend the valley"

# Adam's first step is lr for every parameter (the second requirement of step 2, with the first gradient),
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
# The paper sets the learning rate at step $s = 1, 2, \dots$ from the model width $D$ and a
# number of warm-up steps $w$:
#
# $$\eta(s) = D^{-1/2} \min\left(s^{-1/2},\; s\, w^{-3/2}\right)$$
#
# The second term is smaller while $s < w$, so the rate rises linearly for $w$ steps, then
# decays as $1/\sqrt{s}$. Early on, Adam's $v$ is a poor estimate and the residual stack of a
# post-norm model is fragile; a small learning rate gets through that phase.
#
# ### Your turn
#
# Write `noam_lr(step, d_model, warmup_steps)`: $\eta(s)$ for one step $s \ge 1$, as a float.
# The next cell checks it on steps before, at and after the warm-up, and with $w = 1$ (no warm-up).

# %%
def noam_lr(step, d_model, warmup_steps):
    """The paper's learning rate at step (>= 1)."""
    ### BEGIN SOLUTION
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    ### END SOLUTION


# %%
print(check("noam_lr", noam_lr))

# %% [markdown]
# npformer's `optim.NoamSchedule(d_model, warmup)` is this rule (with an optional factor);
# the figure's right panel compares three settings with a linear warm-up followed by a cosine
# decay. Its left panels return to the valley: the losses of the three optimisers, and Adam's two
# coordinates. Adam's loss does not fall smoothly: it dips almost to zero and climbs back, again
# and again. The middle panel shows why. Its two curves lie on top of each other: Adam divides
# each coordinate's step by that coordinate's own gradient scale, so the steep and the flat
# direction move alike (their gradients differ a hundredfold; their paths do not). Momentum
# ($\beta_1 = 0.9$) carries both *through* the minimum at $0$; the loss is tiny at the instant of
# the crossing and grows as the coordinates swing out on the other side, until the gradient, now
# pointing back, turns them round.
# Each swing is smaller than the one before (printed below the figure): a damped oscillation,
# whose envelope falls as fast as SGD with momentum's.

# %%
steps = np.arange(1, 30001)
figure, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4), constrained_layout=True)
for name, losses in histories.items():
    left.semilogy(losses, label=name)
left.set(title="An ill-conditioned valley", xlabel="step", ylabel="loss")
left.legend()
adam_path = paths["Adam lr 0.05"]
middle.plot(adam_path[:, 0], label="w_0 (steep: curvature 100)")
middle.plot(adam_path[:, 1], "--", label="w_1 (flat: curvature 1), on top of w_0")
middle.axhline(0, color="black", linewidth=0.8)
middle.set(title="Adam's coordinates swing through the minimum", xlabel="step", ylabel="w")
middle.legend()
for d_model, warmup in ((512, 4000), (512, 8000), (128, 4000)):
    schedule = optim.NoamSchedule(d_model, warmup)
    right.plot(steps, [schedule(int(s)) for s in steps], label=f"d_model {d_model}, warmup {warmup}")
cosine = optim.WarmupCosineSchedule(peak_lr=7e-4, warmup_steps=4000, total_steps=30000)
right.plot(steps, [cosine(int(s)) for s in steps], "--", label="linear warm-up + cosine")
right.set(title="Learning-rate schedules", xlabel="step", ylabel="learning rate")
right.legend()
for axis in (left, middle, right):
    axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "12_adam_and_warmup.png", dpi=110)

crossings = np.flatnonzero(np.diff(np.sign(adam_path[:, 1])) != 0) + 1  # where w_1 changes sign
swings = [float(np.abs(adam_path[start:end, 1]).max()) for start, end in zip(crossings[:-1], crossings[1:])]
print(f"Adam's w_1 crosses 0 at steps {crossings.tolist()}; the largest |w_1| between crossings: "
      + ", ".join(f"{swing:.2g}" for swing in swings))
print(f"largest |w_0 - w_1| along Adam's path: {np.abs(adam_path[:, 0] - adam_path[:, 1]).max():.1e}")
assert np.abs(adam_path[:, 0] - adam_path[:, 1]).max() < 1e-3, "Adam moves both coordinates alike"
assert len(crossings) >= 3 and all(later < earlier for earlier, later in zip(swings, swings[1:])), \
    "each swing through the minimum must be smaller than the one before"

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
#
# `AdamW` (Loshchilov and Hutter) takes weight decay out of the gradient: each step it shrinks a
# parameter directly, $p \leftarrow p\,(1 - \eta \lambda)$, before the Adam update, so the decay is
# not divided by Adam's per-entry scale as an L2 term in the gradient would be. npformer's `AdamW` shrinks
# the weight matrices and embedding tables (two or more axes) and leaves the gains and biases
# alone: pulling a layer norm's $\gamma$ towards 0 would shrink the whole layer's output, and a
# bias carries no capacity worth limiting. (PyTorch's `AdamW` decays whatever it is given; its
# users get this rule by putting gains and biases in a parameter group with `weight_decay=0`.)
# One step with a zero gradient shows which parameters of a small Transformer shrink:

# %%
from npformer import models  # noqa: E402

tiny = models.Transformer(models.TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16,
                                                   n_layers=1), seed=0, dtype=np.float64)
before = {key: value.copy() for key, value in tiny.params().items()}
optim.AdamW(tiny, lr=0.1, weight_decay=0.5).step()  # zero gradients: only the decay moves anything
shrunk = sorted(key for key, value in tiny.params().items() if not np.allclose(value, before[key]))
kept = sorted(key for key in before if key not in shrunk)
print(f"shrunk ({len(shrunk)}):", ", ".join(shrunk[:4]), "...")
print(f"kept ({len(kept)}):", ", ".join(kept[:4]), "...")
assert all(tiny.params()[key].ndim >= 2 for key in shrunk) and all(before[key].ndim == 1 for key in kept)

# %% [markdown]
# `clip_grad_norm(model, 1.0)` rescales all gradients together, by $1 / \lVert g \rVert_2$, when
# their global norm $\lVert g \rVert_2$ (over every entry of every parameter's gradient) exceeds 1.

# %%
model = Valley()
model.loss_and_grad()  # gradient (100, 1), norm about 100
norm_before = optim.clip_grad_norm(model, 1.0)
print(f"norm {norm_before:.2f} clipped to {np.linalg.norm(model.grad['w']):.4f}, gradient {model.grad['w']}")
assert np.isclose(np.linalg.norm(model.grad["w"]), 1.0, rtol=1e-5), "clipping must bring the global norm to 1"
assert np.isclose(model.grad["w"][0] / model.grad["w"][1], 100), "clipping must keep the gradient's direction"

# %% [markdown]
# ### Your turn: one step of training, over a whole model
#
# A model's optimiser step is these three rules together, in this order: clip every gradient together,
# decay the parameters AdamW decays, then Adam's update of every parameter from its clipped gradient.
# Write `adamw_step(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm)`:
# `params` is a dict from each parameter's name to its array (a model's `params()`), and `grads`, `m`
# and `v` are dicts with the same names and shapes (the gradients, and each parameter's moments after
# `step - 1` steps). Return three new dicts `(params, m, v)` and leave the ones you were given unchanged.
#
# - The clipping is `torch.nn.utils.clip_grad_norm_`'s, as `clip_grad_norm` above: with $n$ the global
#   norm over every entry of every gradient, every gradient is multiplied by $\text{max\_norm} /
#   (n + 10^{-6})$ when that number is below $1$, and left alone otherwise.
# - The decay: a parameter that AdamW decays loses the fraction $\eta \lambda$ of its value
#   ($\lambda$ = `weight_decay`) before the Adam update. Which parameters are they? The dict gives you
#   names and arrays only: tell a weight matrix or an embedding table from a gain or a bias by what
#   you can see.
# - The update: call your `adam_step` on each parameter, at this step.
#
# The check tries a first step from $m = v = 0$, steps with the clipping active and inactive, and
# a step with zero gradients, where only the decay moves anything; it compares your step with
# npformer's `clip_grad_norm` and `AdamW`.

# %%
def adamw_step(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    """One step of training over dicts name -> array: (new params, new m, new v)."""
    ### BEGIN SOLUTION
    norm = np.sqrt(sum(float((grad * grad).sum()) for grad in grads.values()))
    scale = min(1.0, max_norm / (norm + 1e-6))
    new_params, new_m, new_v = {}, {}, {}
    for name, param in params.items():
        if param.ndim >= 2:                            # weight matrices and tables: decayed, gains and biases not
            param = param * (1 - lr * weight_decay)
        new_params[name], new_m[name], new_v[name] = adam_step(
            param, scale * grads[name], m[name], v[name], step, lr, beta1, beta2, eps)
    return new_params, new_m, new_v
    ### END SOLUTION


# %%
print(check("adamw_step", adamw_step))

# %% [markdown]
# ## Exercises
#
# 1. Why does SGD need $\eta < 2/100$ here, while Adam does not care about the scale of $f$?
#    Auto-graded: `sgd_largest_stable_lr(hessian)`, the largest learning rate at which SGD converges
#    from every start on any quadratic valley $f(w) = \frac{1}{2} w^\top H w$, for a symmetric `hessian`
#    $H$ of shape `(n, n)` with positive eigenvalues (the lesson's valley is $H = \operatorname{diag}(100, 1)$;
#    the grader turns it too). Why Adam does not care stays for the rubric.

# %%
def sgd_largest_stable_lr(hessian):
    """The largest lr at which SGD converges on f(w) = w^T H w / 2 from every start: a float."""
    ### BEGIN SOLUTION
    curvatures = np.linalg.eigvalsh(hessian)       # the valley's curvatures, along its own axes
    return float(2.0 / curvatures.max())
    ### END SOLUTION


# %%
print(check("sgd_largest_stable_lr", sgd_largest_stable_lr))

# %% [markdown]
# 2. Implement AdaGrad as an `optim.Optimizer` subclass and add it to the plot. Auto-graded: its
#    update of one array, `adagrad_step(param, grad, sum_of_squares, lr, eps)`, returning the new
#    parameter and the new sum of squared gradients (AdaGrad divides each entry's step by the root of
#    that sum, plus `eps`). The subclass and the plot stay for the rubric.

# %%
def adagrad_step(param, grad, sum_of_squares, lr, eps):
    """AdaGrad's update of one array: (new param, new sum_of_squares)."""
    ### BEGIN SOLUTION
    sum_of_squares = sum_of_squares + grad * grad
    return param - lr * grad / (np.sqrt(sum_of_squares) + eps), sum_of_squares
    ### END SOLUTION


# %%
print(check("adagrad_step", adagrad_step))

# %% [markdown]
# 3. What is the peak learning rate of the paper's schedule for $D = 512$, $w = 4000$? Derive it
#    from the formula, then check it with your `noam_lr`. Auto-graded: `noam_peak(d_model,
#    warmup_steps)`, the step at which the schedule peaks and its learning rate there, from your
#    derivation (no search over the steps). The derivation stays for the rubric.

# %%
def noam_peak(d_model, warmup_steps):
    """(step, learning rate) at the peak of the paper's schedule."""
    ### BEGIN SOLUTION
    return warmup_steps, (d_model * warmup_steps) ** -0.5
    ### END SOLUTION


# %%
print(check("noam_peak", noam_peak))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. SGD's update in the steep direction is
#    $w_0 \leftarrow w_0 - \eta \cdot 100\, w_0 = (1 - 100\eta)\, w_0$, which shrinks only if
#    $|1 - 100\eta| < 1$, that is $0 < \eta < 2/100$ (in general $\eta < 2/\lambda_\text{max}$, the
#    largest curvature; the flat direction alone would allow $\eta < 2$). Adam steps by
#    $\eta\, \hat m / (\sqrt{\hat v} + \epsilon)$: multiplying $f$, hence every gradient, by $c > 0$
#    multiplies $\hat m$ by $c$ and $\sqrt{\hat v}$ by $c$, so the step is unchanged (as long as
#    $\epsilon \ll \sqrt{\hat v}$); each coordinate moves by about $\eta$ at most, whatever its
#    curvature. Full marks: the stability condition with its derivation, and the invariance of
#    $\hat m / \sqrt{\hat v}$ to the gradient's scale. The cell below runs Adam on $f$ and on
#    $1000 f$: the same path.
# 2. Reference code below: AdaGrad keeps the sum of squared gradients $G$ for each entry and steps
#    by $\eta\, g / (\sqrt{G} + \epsilon)$. As an `optim.Optimizer` subclass it needs
#    `_state_names`, `_update` (in place on `param` and the state) and `_hyperparameters`. On this
#    valley its first step is $\eta$ in both coordinates, like Adam's, and, because $G$ is a
#    per-coordinate scale, both coordinates then follow the same path, $w_0 = w_1$ at every step.
#    Its steps shrink like $1/\sqrt{t}$ (the sum $G$ only grows), so it needs a larger $\eta$ than
#    Adam: with Adam's $\eta = 0.05$ it is still far from the minimum after 150 steps (printed
#    below). Full marks: a working subclass that descends the valley, drawn beside the three others.
# 3. For $s \le w$ the second term is the smaller, so $\eta$ rises to its peak at $s = w$:
#    $\eta(w) = D^{-1/2} w^{-1/2} = 1/\sqrt{512 \cdot 4000}$, about $6.99 \times 10^{-4}$. Checked
#    below with `noam_lr`.

# %% tags=["instructor"]
def adam_path(scale, steps=150, lr=0.05):
    w, m, v = np.array([1.0, 1.0]), np.zeros(2), np.zeros(2)
    path = []
    for step in range(1, steps + 1):
        grad = scale * np.array([100 * w[0], w[1]])
        w, m, v = adam_step(w, grad, m, v, step, lr, 0.9, 0.999, 1e-8)
        path.append(w)
    return np.array(path)


path_gap = np.abs(adam_path(1.0) - adam_path(1000.0)).max()
print(f"answer 1: Adam on f and on 1000 f, 150 steps: the paths differ by at most {path_gap:.1e}")
assert path_gap < 1e-6


# %% tags=["instructor"]
class AdaGrad(optim.Optimizer):
    """AdaGrad (Duchi et al., 2011): each entry's step is divided by the root of its summed squared gradients."""

    _state_names = ("sum_of_squares",)

    def __init__(self, model, lr=0.01, eps=1e-10):
        super().__init__(model, lr)
        self.eps = eps

    def _update(self, param, grad, state):
        state["sum_of_squares"] += grad * grad
        param -= self.lr * grad / (np.sqrt(state["sum_of_squares"]) + self.eps)

    def _hyperparameters(self):
        return {"eps": self.eps}


model = Valley()
optimizer = AdaGrad(model, lr=0.2)
adagrad_losses, adagrad_path = [], []
for _ in range(150):
    adagrad_losses.append(model.loss_and_grad())
    optimizer.step()
    adagrad_path.append(model.w.copy())
adagrad_path = np.array(adagrad_path)
print(f"answer 2: AdaGrad lr 0.2: loss {adagrad_losses[0]:.1f} -> {adagrad_losses[-1]:.1e} after 150 steps; "
      f"first step {1.0 - adagrad_path[0]}, "
      f"largest |w0 - w1| on the way {np.abs(adagrad_path[:, 0] - adagrad_path[:, 1]).max():.1e}")
assert adagrad_losses[-1] < 1e-2 * adagrad_losses[0] and np.allclose(adagrad_path[:, 0], adagrad_path[:, 1])
model = Valley()
optimizer = AdaGrad(model, lr=0.05)
for _ in range(150):
    slow_loss = model.loss_and_grad()
    optimizer.step()
print(f"answer 2: AdaGrad lr 0.05 (Adam's): loss {slow_loss:.2f} at step 150, "
      f"against Adam's {histories['Adam lr 0.05'][-1]:.1e}")
assert slow_loss > 100 * histories["Adam lr 0.05"][-1]
answer_figure, answer_axis = plt.subplots(figsize=(6, 4), constrained_layout=True)  # shown, not saved
for name, losses in {**histories, "AdaGrad lr 0.2": adagrad_losses}.items():
    answer_axis.semilogy(losses, label=name)
answer_axis.set(title="An ill-conditioned valley, with AdaGrad", xlabel="step", ylabel="loss")
answer_axis.legend()

# %% tags=["instructor"]
peak = noam_lr(4000, 512, 4000)
print(f"answer 3: noam_lr(4000, 512, 4000) = {peak:.4e}; 1 / sqrt(512 * 4000) = {1 / np.sqrt(512 * 4000):.4e}")
assert np.isclose(peak, 1 / np.sqrt(512 * 4000))
assert peak > noam_lr(3999, 512, 4000) and peak > noam_lr(4001, 512, 4000)
