# %% [markdown]
# # Lesson 16 — Moving to a GPU with CuPy
#
# Every op in npformer reaches the array library through `npformer.backend.xp`, which is NumPy
# by default. CuPy implements the NumPy API on NVIDIA GPUs, so one switch moves the whole
# library, lessons and training included:
#
# ```python
# from npformer import backend
# backend.set_backend("cupy")        # or run with NPFORMER_BACKEND=cupy
# ```
#
# Arrays made before the switch stay where they are: `backend.asarray(a)` moves host arrays to
# the active module, and `backend.to_numpy(a)` brings anything back.

# %%
import time

import numpy as np

from npformer import backend, models, ops, optim
from npformer.tokens import PAD_ID
from npformer.training import train_step

try:
    backend.set_backend("cupy")
    print("running on the GPU with CuPy")
except backend.BackendUnavailableError as error:
    print(f"no GPU here, so this lesson runs on NumPy. ({error})")
print("active backend:", backend.get_backend())

# %% [markdown]
# ## The same training step, on whichever backend is active
#
# One training step is five lines: the forward pass to the logits, the cross-entropy loss
# (lesson 3) on the shifted targets, `zero_grad`, the backward pass from the loss's gradient, and
# the optimizer's update (lesson 12). Nothing in it names NumPy or CuPy. The batch is 64 pairs of
# a 24-token source and a 25-token target; the decoder reads the target's first 24 tokens and
# predicts its last 24, so each pair puts $24 + 24 = 48$ tokens through the model:

# %%
xp = backend.xp
model = models.Transformer(models.TransformerConfig(4000, 4000, d_model=256, n_heads=8, d_ff=1024, n_layers=2,
                                                    dropout=0.1), seed=0)
optimizer = optim.Adam(model, lr=1e-3)
rng = np.random.default_rng(0)
src = backend.asarray(rng.integers(4, 4000, size=(64, 24)))
tgt = backend.asarray(rng.integers(4, 4000, size=(64, 25)))
tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
tokens_per_step = src.size + tgt_in.size  # the tokens the encoder and the decoder read
print(f"{src.shape[0]} pairs x ({src.shape[1]} + {tgt_in.shape[1]}) tokens = {tokens_per_step:,} tokens per step")
assert tokens_per_step == 64 * 48

logits = model.forward(src, tgt_in)
loss, cache = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)  # the active set's loss
model.zero_grad()
model.backward(ops.current().cross_entropy_backward(1.0, cache))
optimizer.step()
print(f"first step: loss {float(loss):.3f}")
assert np.isfinite(float(loss))

# %% [markdown]
# `npformer.training.train_step(model, inputs, targets, optimizer)` is these five lines, written
# once for every model and trainer in npformer (with optional label smoothing and gradient
# clipping), and it returns the loss and, when it clips, the gradient norm. Like the cell above, it
# never names NumPy or CuPy. The timed loop calls it (the step above was the warm-up: the first call
# of anything on a GPU also compiles its kernels). All four steps train on the same batch, so the
# loss must fall:

# %%
start = time.perf_counter()
for _ in range(3):
    result = train_step(model, (src, tgt_in), tgt_out, optimizer)
if backend.is_cupy():
    xp.cuda.Stream.null.synchronize()  # GPU work is asynchronous: wait before reading the clock
seconds = (time.perf_counter() - start) / 3
print(f"{backend.get_backend()}: {seconds * 1000:.0f} ms per training step, "
      f"{tokens_per_step / seconds:,.0f} tokens/s, loss {result.loss:.3f}")
import inspect  # noqa: E402

source = inspect.getsource(train_step).lower()
assert "numpy" not in source and "cupy" not in source, "train_step must not name NumPy or CuPy"
assert np.isfinite(result.loss) and result.loss < float(loss), "four steps on one batch must lower its loss"
assert seconds > 0

# %%
import matplotlib.pyplot as plt  # noqa: E402

from npformer import viz  # noqa: E402

def synchronize():
    if backend.is_cupy():
        xp.cuda.Stream.null.synchronize()


def milliseconds(work):
    """The best of three runs of ``work()``, in milliseconds."""
    times = []
    for _ in range(3):
        synchronize()
        start = time.perf_counter()
        work()
        synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


parts = {}
parts["forward"] = milliseconds(lambda: model.forward(src, tgt_in))
logits = model.forward(src, tgt_in)
parts["loss"] = milliseconds(lambda: ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID))
loss, cache = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
dlogits = ops.current().cross_entropy_backward(1.0, cache)


def backward():
    model.zero_grad()
    model.backward(dlogits)


parts["backward"] = milliseconds(backward)
parts["Adam"] = milliseconds(optimizer.step)
for name, value in parts.items():
    print(f"{name:9s} {value:7.1f} ms")
print(f"sum of the parts {sum(parts.values()):.0f} ms, the whole step {seconds * 1000:.0f} ms")
ratio = parts["backward"] / parts["forward"]
print(f"backward / forward: {ratio:.1f}")

figure, axis = plt.subplots(figsize=(7, 2.8), constrained_layout=True)
axis.barh(list(parts), list(parts.values()), color="tab:green" if backend.is_cupy() else "tab:blue")
axis.invert_yaxis()
axis.set(xlabel="milliseconds (best of 3; d_model 256, 2 + 2 layers, 64 x (24 + 24) tokens)",
         title="Where one training step's time goes\n"
               + ("CuPy, on the GPU" if backend.is_cupy() else "NumPy, on the CPU (no GPU on this machine)"))
figure.savefig(viz.figures_dir() / "16_training_step.png", dpi=110)

# %% [markdown]
# Each linear layer's backward does two matrix products ($dX = dY W^\top$ and $dW = X^\top dY$)
# for the forward's one, so the printed backward / forward ratio is near 2 on a quiet machine
# (timings on a busy one wander). The optimizer and the loss are small next to them.
#
# ## The textbook ops and the fast ops
#
# The files of `npformer/ops/` are the textbook: the equations of lessons 2-12, a few lines each.
# Beside them, `npformer/ops/fast/` holds *fast forms* of the busiest ones: the same equations,
# but with the rows cut into one block per CPU core (NumPy runs elementwise work on one core),
# results written into arrays made in advance, fewer temporaries. `ops.using(...)` chooses which
# set every block, the loss and Adam call; `"fast"` is the default. The names `ops.linear_forward`
# and so on always stay the textbook functions; the active set is what the blocks run.
#
# Beside the op sets, the training step has a *fast path* (`npformer.fastpath`): the same blocks
# run on the real tokens alone, packed side by side so that no work is spent on `<pad>`, with the
# q, k and v projections fused into one product, and only the counted targets projected onto the
# vocabulary. `train_step(..., only_counted_targets=True)` takes it (the trainer and
# `npformer bench` do); the plain step runs the textbook forward and backward of the model.
# Here are the two forms of the linear layer's forward pass, and the training step timed three
# ways, from the same weights, on the batch above as training would see it: each sentence keeps 12
# to 24 of its tokens and is padded to 24 with `<pad>` (the share of padding is printed):

# %%
import inspect  # noqa: E402,F811

from npformer.ops import fast, linear  # noqa: E402


def code_lines(function):
    """Lines of code in ``function``: no docstring, comments or blank lines."""
    body = inspect.getsource(function).split('"""')[-1]
    return sum(1 for line in body.splitlines() if line.strip() and not line.strip().startswith("#"))


print(inspect.getsource(linear.linear_forward).split('"""')[-1])
print(f"textbook linear_forward: {code_lines(linear.linear_forward)} lines of code; "
      f"fast: {code_lines(fast.linear_forward)}")

real = np.arange(24) < rng.integers(12, 25, size=(64, 1))                 # (64, 24): True = a real token
padded_src = backend.asarray(np.where(real, backend.to_numpy(src), PAD_ID))
padded_tgt = backend.to_numpy(tgt).copy()
padded_tgt[:, 1:][~real] = PAD_ID                                         # targets of the same lengths
padded_tgt_in, padded_tgt_out = backend.asarray(padded_tgt[:, :-1]), backend.asarray(padded_tgt[:, 1:])
print(f"padding: {1 - real.mean():.0%} of the source and target positions")
step_ms, set_losses = {}, {}
ways = {"textbook ops, textbook step": ("textbook", False), "fast ops, textbook step": ("fast", False),
        "fast ops, fast path": ("fast", True)}
for way, (op_set, fast_path) in ways.items():
    twin = models.Transformer(model.config, seed=0)
    twin_optimizer = optim.Adam(twin, lr=1e-3)

    def step():
        return train_step(twin, (padded_src, padded_tgt_in), padded_tgt_out, twin_optimizer,
                          only_counted_targets=fast_path)

    with ops.using(op_set):
        step()  # warm-up
        set_losses[way] = step().loss
        step_ms[way] = milliseconds(step)
    print(f"{way:28s} {step_ms[way]:6.0f} ms per step; second step's loss {set_losses[way]:.6f}")
textbook = step_ms["textbook ops, textbook step"]
print(f"time / textbook ops' textbook step: fast ops {step_ms['fast ops, textbook step'] / textbook:.2f}, "
      f"fast ops and fast path {step_ms['fast ops, fast path'] / textbook:.2f}")
assert all(abs(loss - set_losses["textbook ops, textbook step"]) < 1e-3 * abs(loss) for loss in set_losses.values())

# %% [markdown]
# The three give the same loss to float32 rounding (the printed digits), because they compute
# the same equations; `tests/test_fast_ops.py` shows every fast form equal to its twin in float64,
# and `tests/test_fastpath.py` the fast path equal to the textbook step. The printed time ratios
# are what the fast forms and the fast path buy on this machine and this batch; on a GPU each op is
# already one kernel over every row, so the two op sets take about the same time there. The recorded
# figures for both bench presets are in `benchmarks/RESULTS.md` ("Op sets" and "One textbook core,
# the speed paths beside it, and the user's own loop").

# %% [markdown]
# What changes on a GPU, and what does not:
#
# * the math, the gradients and the code are the same; `bash benchmarks/gpu_check.sh` compares
#   every op on CuPy with NumPy and runs the finite-difference checks on the GPU;
# * the embedding backward uses `cupyx.scatter_add` (atomic additions) instead of NumPy's
#   sort-and-`reduceat`, and GELU uses `cupyx.scipy.special.erf`;
# * GPU calls return before the work is done, so timings must synchronise first.
#
# ## Exercises
#
# Unlike the lessons around it, this one has no graded exercise. One would have to run on a GPU,
# and no GPU has yet proven one here: the course is developed and tested on machines without a
# GPU, and the CuPy path itself still awaits its first run on one (`benchmarks/RESULTS.md`, "CuPy
# backend on a GPU"), so a graded GPU exercise could not be checked before it reached a student.
# The questions below are open, with a rubric in the instructor edition.
#
# 1. On a GPU machine, time the step for `d_model` 256, 512 and 1024 on both backends: call
#    `backend.set_backend("numpy")` or `backend.set_backend("cupy")`, then build the model, the
#    optimizer and the batch anew (they stay on the backend they were made on). Where does the GPU
#    start to win?
# 2. Which of npformer's ops would you fuse into one CUDA kernel first, and why?
# 3. On a GPU, run `npformer --backend cupy gradcheck` and compare its errors with those of
#    `npformer gradcheck` on the CPU. Do they pass with the same tolerance? Are the errors identical,
#    and why?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. Rubric (this needs a GPU; no numbers here). A correct measurement: after each
#    `set_backend`, the model, the optimizer and the batch are built anew; one warm-up step runs
#    before the clock starts (the first CuPy call of each kernel compiles and caches it, and the
#    memory pool fills); the clock is read only after `xp.cuda.Stream.null.synchronize()`; several
#    steps are timed; the report gives ms per step (or tokens/s) for all six combinations and their
#    ratio. What it shows: at a fixed number of tokens NumPy's time follows the matrix products, whose
#    cost grows like $d_{\text{model}}^2$ for the attention projections and like $d_{\text{model}}$ for
#    the feed-forward layers (with `d_ff` kept at 1024) and the output layer (attention's $T^2 d$ term
#    is small at $T = 24$): between two and four times per doubling, nearer four for the larger
#    sizes. The GPU's time grows far less because it is not yet saturated: each step launches hundreds
#    of small kernels, and their fixed cost dominates.
#    So the GPU's lead widens with $d_{\text{model}}$. With this batch (3,072 tokens per step) a
#    current GPU should win already at 256; the crossover lies where a step does little work (a tiny
#    model, a batch of a few sentences), and a full answer finds it by shrinking the batch or the
#    model. A GPU that looks many times faster than its arithmetic allows means the clock was read
#    before synchronising.
# 2. Rubric (open). Any of these, argued from memory traffic and kernel launches, earns full marks:
#    attention (scores, scale, mask, softmax and the product with $V$ in one kernel, as
#    FlashAttention does, so the $(B, H, T, T)$ scores and weights are never written to memory, and
#    the backward pass recomputes them); the softmax and cross-entropy over the 4,000-word
#    vocabulary (each of max, subtract, exp, sum and log is a full pass over a $64 \times 24 \times
#    4000$ array); LayerNorm (mean, variance, normalise, scale and shift: several passes for one); the
#    bias, activation and dropout chains; Adam (about ten elementwise operations per parameter
#    tensor, for every tensor). The reason must be that these elementwise and reduction ops are
#    limited by memory bandwidth and launch count, not arithmetic, whereas the matrix products already
#    run in cuBLAS and gain nothing from fusion. Better answers back the choice with a profile of the
#    step on the GPU (the op's share of the time).
# 3. (The active backend's own check is printed below.) Both pass with the same tolerance,
#    $10^{-6}$: gradcheck works in float64 on both backends, and its inputs are drawn on the host from
#    the same seed, so the check is the same. The errors are not identical, though of the same
#    order (far below the tolerance): what they measure is rounding noise in the finite differences
#    and in the analytic gradients, and that depends on the order of the floating-point operations.
#    cuBLAS and the CPU's BLAS split and sum the matrix products differently, GPU reductions add in
#    a tree, GPUs fuse multiply-adds, `cupyx.scatter_add` adds in an unspecified order, and `exp`,
#    `log` and `erf` may differ in the last bit. The truncation part of the error, $O(h^4)$, is the
#    same on both. Full marks need the reason (a different order of rounding), not "the GPU is less
#    precise": both compute in float64.

# %% tags=["instructor"]
from npformer import gradcheck  # noqa: E402

op_report = gradcheck.check_all_ops()
worst = max(result.max_rel_error for result in op_report.results)
print(f"answer 3: on {backend.get_backend()}, {len(op_report.results)} tensors, worst relative error "
      f"{worst:.1e}, tolerance {op_report.tol:.0e}: {'all passed' if op_report.passed else 'FAILED'}")
assert op_report.passed and worst < op_report.tol
