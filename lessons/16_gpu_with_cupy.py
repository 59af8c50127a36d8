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
loss, cache = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
model.zero_grad()
model.backward(ops.cross_entropy_backward(1.0, cache))
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
parts["loss"] = milliseconds(lambda: ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID))
loss, cache = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
dlogits = ops.cross_entropy_backward(1.0, cache)


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
assert 1.0 < ratio < 4.0, "the backward pass does about two matrix products for each one of the forward"

figure, axis = plt.subplots(figsize=(7, 2.8), constrained_layout=True)
axis.barh(list(parts), list(parts.values()), color="tab:green" if backend.is_cupy() else "tab:blue")
axis.invert_yaxis()
axis.set(xlabel="milliseconds (best of 3; d_model 256, 2 + 2 layers, 64 x (24 + 24) tokens)",
         title=f"Where one training step's time goes, on {backend.get_backend()}")
figure.savefig(viz.figures_dir() / "16_training_step.png", dpi=110)

# %% [markdown]
# The backward pass takes longer than the forward by the printed ratio: each linear layer's
# backward does two matrix products ($dX = dY W^\top$ and $dW = X^\top dY$) for the forward's one.
# The optimizer and the loss are small next to them.

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
# 1. On a GPU machine, time the step for `d_model` 256, 512 and 1024 on both backends: call
#    `backend.set_backend("numpy")` or `backend.set_backend("cupy")`, then build the model, the
#    optimizer and the batch anew (they stay on the backend they were made on). Where does the GPU
#    start to win?
# 2. Which of npformer's ops would you fuse into one CUDA kernel first, and why?
# 3. On a GPU, run `npformer --backend cupy gradcheck` and compare its errors with those of
#    `npformer gradcheck` on the CPU. Do they pass with the same tolerance? Are the errors identical,
#    and why?
