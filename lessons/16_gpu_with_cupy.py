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
import os
import time

import numpy as np

from npformer import backend, models, ops, optim
from npformer.course import check
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


RUNS = 1 if os.environ.get("NPFORMER_QUICK") == "1" else 3  # the quick run (the tests) times once


def milliseconds(work):
    """The best of ``RUNS`` runs of ``work()``, in milliseconds."""
    times = []
    for _ in range(RUNS):
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
timed = "one run" if RUNS == 1 else f"best of {RUNS}"
axis.set(xlabel=f"milliseconds ({timed}; d_model 256, 2 + 2 layers, 64 x (24 + 24) tokens)",
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
# Beside the op sets, the training step has a *fast path*, a layout passed down the same blocks
# (`nn.Packed`): they run on the real tokens alone, packed side by side so that no work is spent on
# `<pad>`, and only the counted targets are projected onto the vocabulary. `train_step(..., only_counted_targets=True)` takes it (the trainer and
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
# The two op sets give the same loss to float32 rounding (the printed digits), because they compute
# the same equations; `tests/test_fast_ops.py` shows every fast form equal to its twin in float64.
# The fast path's second loss differs a little (printed): its dropout draws masks for the packed
# real tokens, not for the padded batch, so its first step dropped other units;
# `tests/test_fastpath.py` shows it equal to the textbook step without dropout. The printed time ratios
# are what the fast forms and the fast path buy on this machine and this batch. On a GPU the blocks
# the CPU's fast forms cut their rows into would be more kernels to launch: the first H100 run, which
# used them there, recorded that set slower than the textbook one (the roofline section below prints
# both). So on CuPy the fast set is another one, fused GPU kernels (`npformer/ops/gpu/`); what they
# bought on the same card is printed at the end of that section. The recorded CPU figures for both
# bench presets are in `benchmarks/RESULTS.md` ("Op sets" and "One textbook core, the speed paths
# beside it, and the user's own loop").

# %% [markdown]
# What changes on a GPU, and what does not:
#
# * the math, the gradients and the blocks are the same; `bash benchmarks/gpu_check.sh` compares
#   every op on CuPy with NumPy, runs the finite-difference checks on the GPU, and trains,
#   interrupts and resumes a translator there;
# * the fast op set is fused GPU kernels (`npformer/ops/gpu/`: layer norm, attention's softmax,
#   the loss, dropout and the embedding backward in one or two kernels each, Adam in one launch for
#   the whole model), each tested equal to its textbook twin; GELU uses `cupyx.scipy.special.erf`;
# * dropout draws from npformer's counter generator (`npformer/counter_random.py`), whose state is
#   two integers a checkpoint can hold, where CuPy's own keeps its state in GPU memory;
# * GPU calls return before the work is done, so timings must synchronise first.
#
# ## Reasoning about a GPU without one: the roofline
#
# This lesson, with this model and this batch, ran once on one NVIDIA H100 80GB HBM3 with CuPy
# 14.2 (the project's GPU logs of 2026-11-26: `lesson16_quick.log` for the times, `gradcheck_cli.log`
# for the gradient check; summarised in `benchmarks/RESULTS.md`, "CuPy backend on a GPU"). The cell
# below holds what it printed there, copied as numbers. Look at the optimizer: Adam does about a
# dozen arithmetic operations per parameter, a few million operations, yet it took longer than the
# whole forward pass with its matrix products. A model of the card explains it, and you can build
# that model on a CPU.
#
# Two limits bound any op on any processor. Its arithmetic cannot go faster than the card's peak
# rate, so it takes at least `flops / peak_flops` seconds; its data cannot move faster than the
# memory's bandwidth, so it takes at least `bytes_moved / bandwidth` seconds. The card does both at
# once, so the slower of the two is the floor: this is the **roofline** (Williams, Waterman and
# Patterson, 2009). An op whose arithmetic takes longer is *compute-bound*; one whose traffic takes
# longer is *memory-bound*. Which one it is depends on its *arithmetic intensity*, FLOPs per byte
# moved, against the card's ratio `peak_flops / bandwidth` (about 20 FLOPs a byte on the H100).
# A GPU adds a third cost that a roofline leaves out: each kernel is launched from the host, through
# CuPy's Python code and the driver, and each launch costs a fixed time however little the kernel does.
#
# The ops that dominate a Transformer are matrix products. Write `roofline` for a list of them: each
# op is `batch` products of an $(m, k)$ matrix by a $(k, n)$ matrix (a linear layer on $N$ tokens is
# one product, $(1, N, D_{in}, D_{out})$; attention's scores are $B \cdot H$ of them). Count its FLOPs
# (each of the $m n$ results is a sum of $k$ terms), the bytes it moves at the least (each operand read
# once, the result written once, `itemsize` bytes a number), and from them the floor of its time, the
# slower of its arithmetic and its traffic plus one launch, and whether it is compute-bound.

# %%
RECORDED_H100 = {  # lesson 16 on one NVIDIA H100 80GB HBM3, CuPy 14.2.0, 2026-11-26: lesson16_quick.log
    "step_ms": 101.0, "forward_ms": 17.8, "loss_ms": 1.3, "backward_ms": 16.8, "adam_ms": 31.9,
    "textbook_ops_step_ms": 56.0, "fast_ops_step_ms": 67.0,
    "gradcheck_tensors": 22, "gradcheck_worst": 4.0e-10,  # npformer --backend cupy gradcheck: gradcheck_cli.log
}
H100_CARD = {"peak_flops": 67e12, "bandwidth": 3.35e12}  # float32 without tensor cores, HBM3 (NVIDIA's datasheet, SXM)
print("recorded on an H100: " + ", ".join(f"{name} {value:g}" for name, value in RECORDED_H100.items()))


def roofline(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    """The floor of each matrix product's time on a GPU, and whether its arithmetic sets it.

    shapes: (ops, 4) integers, one row (batch, m, k, n) per op: `batch` products of an (m, k) matrix
    by a (k, n) matrix. itemsize: bytes per number (4 for float32). peak_flops (FLOP/s), bandwidth
    (bytes/s), launch_seconds (one kernel per op): numbers.
    Returns (flops, bytes_moved, seconds, compute_bound), each (ops,).
    """
    ### BEGIN SOLUTION
    batch, m, k, n = shapes.T                                  # (ops,) each
    flops = 2.0 * batch * m * k * n                            # a multiply and an add per term of each sum
    bytes_moved = itemsize * batch * (m * k + k * n + m * n)   # both operands read, the result written
    compute = flops / peak_flops                               # (ops,) seconds of arithmetic at the peak
    memory = bytes_moved / bandwidth                           # (ops,) seconds of traffic at the bandwidth
    return flops, bytes_moved, np.maximum(compute, memory) + launch_seconds, compute > memory
    ### END SOLUTION


# %%
print(check("roofline", roofline))

# %% [markdown]
# Now the model's forward pass, product by product. Write `forward_products`: every matrix product
# that npformer's Transformer makes in its forward pass (its textbook form: q, k and v are three
# products), as a dict from a name of your choice to `(batch, m, k, n)`, for a batch of `pairs`
# sentence pairs of `src_len` source and `tgt_len` target tokens. Go through the model's modules
# (lesson 11) and ask of each product how many tokens it reads, from which side, and how many
# heads and sentences repeat it. The check compares the set of shapes, not the names. Then the
# cell checks that the list holds every weight matrix of the lesson's model, and estimates each
# product with your `roofline` (npformer's when yours does not pass yet), without launches:

# %%
def forward_products(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len):
    """Every matrix product of the Transformer's forward pass: name -> (batch, m, k, n)."""
    ### BEGIN SOLUTION
    n_src, n_tgt, d_head = pairs * src_len, pairs * tgt_len, d_model // n_heads
    products = {}

    def attention(prefix, queries, tq, keys, tk):
        for name, tokens in (("q", queries), ("k", keys), ("v", keys), ("o", queries)):
            products[f"{prefix} {name}"] = (1, tokens, d_model, d_model)
        products[f"{prefix} scores"] = (pairs * n_heads, tq, d_head, tk)         # Q K^T, per sentence and head
        products[f"{prefix} weighted sum"] = (pairs * n_heads, tq, tk, d_head)   # P V

    for i in range(n_layers):
        attention(f"encoder.{i} self", n_src, src_len, n_src, src_len)
        products[f"encoder.{i} fc1"] = (1, n_src, d_model, d_ff)
        products[f"encoder.{i} fc2"] = (1, n_src, d_ff, d_model)
    for i in range(n_layers):
        attention(f"decoder.{i} self", n_tgt, tgt_len, n_tgt, tgt_len)
        attention(f"decoder.{i} cross", n_tgt, tgt_len, n_src, src_len)        # k and v read the source
        products[f"decoder.{i} fc1"] = (1, n_tgt, d_model, d_ff)
        products[f"decoder.{i} fc2"] = (1, n_tgt, d_ff, d_model)
    products["output layer"] = (1, n_tgt, d_model, tgt_vocab)
    return products
    ### END SOLUTION


# %%
print(check("forward_products", forward_products))

# %%
from npformer.course import EXERCISES  # noqa: E402


products_of = forward_products if check("forward_products", forward_products, strict=False).passed \
    else EXERCISES["forward_products"].reference  # yours, when it passes


def model_products(config, pairs, src_len, tgt_len):
    """The forward pass's products (`products_of`) for a model's configuration."""
    return products_of(config.d_model, config.n_heads, config.d_ff, config.n_layers, config.tgt_vocab,
                       pairs, src_len, tgt_len)


def kind_of(shape, config):
    """Which part of the model a product (batch, m, k, n) belongs to: a weight matrix's shape, or attention."""
    batch, m, k, n = shape
    d, d_ff = config.d_model, config.d_ff
    weights = {(d, d): "projections q, k, v, o", (d, d_ff): "feed-forward", (d_ff, d): "feed-forward",
               (d, config.tgt_vocab): "output layer"}
    attention = "attention: scores, weighted sums"
    return weights.get((k, n), attention) if batch == 1 else attention


passed = check("roofline", roofline, strict=False).passed  # yours, when it passes
floor = roofline if passed else EXERCISES["roofline"].reference
products = model_products(model.config, src.shape[0], src.shape[1], tgt_in.shape[1])
weights = sorted(value.shape for name, value in model.params().items() if value.ndim == 2 and "embed" not in name)
assert sorted((k, n) for batch, m, k, n in products.values() if batch == 1) == weights, "one product per weight matrix"
shapes = np.array(list(products.values()))
flops, bytes_moved, seconds, compute_bound = floor(shapes, 4, launch_seconds=0.0, **H100_CARD)
kinds = np.array([kind_of(shape, model.config) for shape in products.values()])
print(f"{'products':33s} {'count':>5s} {'GFLOP':>6s} {'MB':>6s} {'FLOP/B':>6s} {'floor ms':>8s} {'memory-bound':>12s}")
for kind in dict.fromkeys(kinds):
    rows = kinds == kind
    print(f"{kind:33s} {rows.sum():5d} {flops[rows].sum() / 1e9:6.2f} {bytes_moved[rows].sum() / 1e6:6.1f} "
          f"{flops[rows].sum() / bytes_moved[rows].sum():6.0f} {seconds[rows].sum() * 1e3:8.3f} "
          f"{(~compute_bound[rows]).sum():12d}")
products_floor_ms = seconds.sum() * 1e3
print(f"all {len(products)} products: {flops.sum() / 1e9:.2f} GFLOP, floor {products_floor_ms:.3f} ms; "
      f"the H100's ridge {H100_CARD['peak_flops'] / H100_CARD['bandwidth']:.0f} FLOP/B; "
      f"recorded forward {RECORDED_H100['forward_ms']} ms = {RECORDED_H100['forward_ms'] / products_floor_ms:.0f} x the floor")
assert products_floor_ms < RECORDED_H100["forward_ms"] / 5, "the products' floor is far below the recorded forward"

# %% [markdown]
# The floor of every matrix product together is a small fraction of the forward time the H100
# recorded (the ratio is printed). The time goes elsewhere, and Adam shows where. For every parameter
# it reads the parameter, its gradient and the two moments and writes three of them back, 7 float32
# numbers, for about 12 operations: under one FLOP a byte, memory-bound, so its floor is its traffic.
# npformer's Adam (`ops/fast/adam.py`) cuts each tensor into chunks of 65,536 numbers, so that a chunk
# stays in a CPU's cache, and runs 13 array operations per chunk: on a GPU each is a kernel. What the
# recorded Adam time holds beyond its floor is the launches, and dividing by their count gives the cost
# of one:

# %%
from npformer.ops.fast.adam import CHUNK  # noqa: E402

sizes = {name: value.size for name, value in model.params().items()}
n_params = sum(sizes.values())
adam_floor = 7 * 4 * n_params / H100_CARD["bandwidth"]              # seconds: its traffic
adam_kernels = 13 * sum(-(-n // CHUNK) for n in sizes.values())     # 13 array operations per chunk
launch = (RECORDED_H100["adam_ms"] / 1e3 - adam_floor) / adam_kernels
print(f"Adam: {n_params:,} parameters in {len(sizes)} tensors, floor {adam_floor * 1e3:.3f} ms, {adam_kernels:,} "
      f"kernels; the recorded {RECORDED_H100['adam_ms']} ms is {RECORDED_H100['adam_ms'] / 1e3 / adam_floor:.0f} x "
      f"its floor: {launch * 1e6:.1f} microseconds per kernel")
fused_adam = adam_floor + len(sizes) * launch
print(f"Adam as one kernel per tensor at that launch cost: {fused_adam * 1e3:.2f} ms")
_, _, launched, _ = floor(shapes, 4, launch_seconds=launch, **H100_CARD)
rest_ms = RECORDED_H100["forward_ms"] - launched.sum() * 1e3
print(f"the forward's {len(products)} products with their launches: {launched.sum() * 1e3:.2f} ms of the recorded "
      f"{RECORDED_H100['forward_ms']} ms; the other {rest_ms:.1f} ms would be about {rest_ms / 1e3 / launch:.0f} more "
      "launches (layer norms, softmaxes, masks, residuals, reshapes)")
assert adam_floor * 1e3 < RECORDED_H100["adam_ms"] / 10, "Adam's floor is far below what the H100 took"
assert fused_adam < RECORDED_H100["adam_ms"] / 1e3 / 5

# %% [markdown]
# The printed floors are fractions of a millisecond; the measured times are tens of milliseconds.
# On this small model the H100 is neither compute-bound nor memory-bound: it waits for the host to
# launch its kernels, and Adam, with thousands of tiny ones, waits the most. The same launches on a
# CPU cost nearly nothing (a NumPy call is a function call), which is why the chunking that helps
# the CPU's cache hurts the GPU, and why the fast op set was measured *slower* than the textbook one
# on the H100. Fusing (one kernel per tensor, or one for all of them, as PyTorch's `foreach` and
# `fused` Adam do) removes launches, not arithmetic. npformer's GPU set now does both (the cell below
# prints what the same card recorded the next day, on the bench's small preset, with the fused set
# and the textbook set in one run, and PyTorch eager beside them).

# %%
RECORDED_H100_FUSED = {  # npformer bench --presets small base on the same H100, 2026-11-27 (RESULTS.md, issue 46)
    "small_fast_ms": 33.4, "small_textbook_ms": 73.1, "small_torch_ms": 15.9,
    "base_fast_ms": 28.8, "base_textbook_ms": 101.9, "base_torch_ms": 28.0,
    "small_adam_fast_ms": 0.9, "small_adam_textbook_ms": 29.3,
    "small_ratio": 2.09, "base_ratio": 1.03,  # npformer / PyTorch, from the unrounded times
}
for preset in ("small", "base"):
    fast, textbook_ms, torch_ms = (RECORDED_H100_FUSED[f"{preset}_{kind}_ms"] for kind in ("fast", "textbook", "torch"))
    print(f"{preset}: fused set {fast} ms a step, textbook set {textbook_ms} ms ({textbook_ms / fast:.1f} x slower), "
          f"PyTorch eager {torch_ms} ms (npformer / PyTorch {RECORDED_H100_FUSED[preset + '_ratio']})")
print(f"Adam on the small preset: {RECORDED_H100_FUSED['small_adam_textbook_ms']} ms with a kernel for every array "
      f"operation of every parameter, {RECORDED_H100_FUSED['small_adam_fast_ms']} ms as one launch for all of them")

# %% [markdown]
# ## Exercises
#
# Each question is answered with this lesson's run, your `roofline`, `forward_products` and the
# recorded H100 figures printed above: no GPU is needed. The strict stand-in for CuPy
# (`NPFORMER_BACKEND=strict`, `npformer/strict_backend.py`) runs the step on a CPU under CuPy's
# rules, for the bugs only a GPU would otherwise show.
#
# 1. With your `roofline`, `forward_products` and `H100_CARD`, estimate the forward pass's matrix
#    products for `d_model` 256, 512 and 1024 (the same batch, `d_ff` four times `d_model`, the same
#    two layers): at which size do the products alone, without launches, reach the recorded forward
#    time? What does that say about where a GPU starts to pay off for npformer?
# 2. Which of npformer's ops would you fuse into one CUDA kernel first, and why? Argue from the
#    recorded times, the kernel counts, and what your `roofline` says about each op.
# 3. Run `npformer gradcheck` here, and once more with `NPFORMER_BACKEND=strict`. Compare the worst
#    relative errors with the H100's (printed above). Do they pass with the same tolerance? Are the
#    errors identical, and why?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below.) The products' floor grows three to four times per doubling of `d_model` (every
#    layer's weight matrix is $d \times d$ or $d \times 4d$; the output layer's and attention's
#    products grow only like $d$), yet even at 1024 it stays below the forward time recorded at 256
#    (the ratio is printed): at these sizes the H100 spends its time launching kernels, not
#    computing, so a larger model costs the GPU little more time while it costs the CPU about
#    fourfold per doubling. The projections, the feed-forward and the output layer are compute-bound
#    at every size; attention's small per-head products stay memory-bound (a few FLOPs a byte, far
#    under the card's ridge of about 20). The GPU pays off once each kernel has enough work to hide
#    its launch: a larger model, a larger batch, or fewer, fused kernels. Full marks need the
#    estimate for all three sizes, the comparison with the recorded time, and that conclusion; a GPU
#    timing that beats the roofline floor means the clock was read before synchronising.
# 2. Rubric (open, argued from the numbers). Full marks: Adam first. Its recorded time is the
#    largest part of the step although its floor is a fraction of a millisecond: it is
#    launch-bound, thousands of kernels (13 per 65,536-number chunk of every tensor), so one kernel
#    per tensor, or one for all of them, removes almost all of its time (the estimate is printed
#    above). Then layer norm and the softmax chains (several passes and launches each for one
#    memory-bound result), then attention (FlashAttention: scores, mask, softmax and the product with
#    V in one kernel, so the $(B, H, T, T)$ arrays never reach memory). Matrix products gain nothing
#    from fusion: cuBLAS already runs each at speed. An answer that picks attention first with a
#    good argument gets most marks; one that picks the matrix products, none.
# 3. (The active backend's own check is printed below; run it with `NPFORMER_BACKEND=strict` too.)
#    They all pass with the same tolerance, $10^{-6}$: gradcheck works in float64 on every backend,
#    and its inputs are drawn on the host from the same seed. The strict stand-in is NumPy underneath,
#    so its errors equal NumPy's to the last digit. The H100's worst error equals this run's to the
#    two printed digits: the worst entry's error is the finite differences' truncation, $O(h^4)$,
#    which is the same on both. Entry by entry the errors need not be identical, because their
#    rounding part depends on the order of the operations, and that differs: cuBLAS and the
#    CPU's BLAS split and sum the products differently, GPU reductions add in a tree, GPUs fuse
#    multiply-adds, `cupyx.scatter_add` adds in an unspecified order, and `exp`, `log` and `erf` may
#    differ in the last bit. Full marks need that reason, not "the GPU is less precise": both compute
#    in float64.

# %% tags=["instructor"]
for d_model in (256, 512, 1024):
    wider = models.TransformerConfig(4000, 4000, d_model=d_model, n_heads=8, d_ff=4 * d_model, n_layers=2)
    wider_shapes = np.array(list(model_products(wider, src.shape[0], src.shape[1], tgt_in.shape[1]).values()))
    wider_flops, _, wider_seconds, wider_bound = floor(wider_shapes, 4, launch_seconds=0.0, **H100_CARD)
    floor_ms = wider_seconds.sum() * 1e3
    print(f"answer 1: d_model {d_model:4d}: products {wider_flops.sum():.2e} FLOPs, floor {floor_ms:.2f} ms "
          f"({(~wider_bound).sum()} of {len(wider_bound)} memory-bound), "
          f"{RECORDED_H100['forward_ms'] / floor_ms:.0f} x below the recorded forward at 256")
    assert floor_ms < RECORDED_H100["forward_ms"]

# %% tags=["instructor"]
from npformer import gradcheck  # noqa: E402

op_report = gradcheck.check_all_ops()
worst = max(result.max_rel_error for result in op_report.results)
print(f"answer 3: on {backend.get_backend()}, {len(op_report.results)} tensors, worst relative error "
      f"{worst:.1e}, tolerance {op_report.tol:.0e}: {'all passed' if op_report.passed else 'FAILED'}")
assert op_report.passed and worst < op_report.tol
