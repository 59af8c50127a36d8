# %% [markdown]
# # Lesson 25 — From npformer to PyTorch
#
# Every layer of npformer was written by hand, forward and backward. Most Transformers in the world
# run in PyTorch, whose layers are written once and whose backward passes come from autograd. If
# npformer's model really is the Transformer of the paper, its weights should load into PyTorch
# layers and give the **same function**: the same logits, and the same gradient for every parameter.
#
# `npformer.interop` does the move. `to_torch(model)` builds a twin of an npformer `Transformer`
# from `torch.nn.Linear`, `torch.nn.Embedding` and `torch.nn.LayerNorm`, module for module, and
# copies the weights in; `from_torch(twin)` and `load_torch_state(model, twin)` bring them back.
# This lesson trains a small translator on the embedded corpus, moves it to PyTorch, compares the
# two frameworks number by number, trains it a little in PyTorch and moves it back.
#
# PyTorch is not a dependency of npformer itself, but it comes with the course extra, PyTorch 2.13.0
# (`pip install ".[course]"` from a clone, or the wheel's `[course]`; on Linux add
# `--extra-index-url https://download.pytorch.org/whl/cpu` for the CPU build, far smaller than the
# CUDA one). Without it, this lesson says so, skips the comparisons and still runs to the end; the
# graded exercise needs only NumPy. The tests (`.ci/run`) install it, so every comparison below runs there.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, interop, ops, optim, viz
from npformer.course import EXERCISES, check
from npformer.data import Vocab, encode_pairs, make_batches, pad_batch, tokenize, toy_corpus
from npformer.models import Transformer, TransformerConfig
from npformer.nn import EncoderLayer, SelfAttention
from npformer.tasks.translation import Translator
from npformer.tokens import PAD_ID
from npformer.training import train_step

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
try:
    import torch
    import torch.nn.functional as F

    # The models here are tiny. PyTorch's worker threads keep spinning for a while after each call,
    # and on a machine with few cores they take the CPU from NumPy's: one thread for PyTorch.
    torch.set_num_threads(1)
except ImportError:
    torch = None
print(f"PyTorch {torch.__version__}" if torch else
      "PyTorch is not installed (pip install torch): the PyTorch parts of this lesson are skipped")

# %% [markdown]
# ## A small translator, trained in npformer
#
# The `tiny` model of lesson 13 (two layers, $d_{model} = 64$, four heads, post-norm, ReLU), trained
# with the same step: Adam with the warm-up schedule, label smoothing 0.1, gradient clipping. A few
# hundred steps (ten in quick mode) are enough for this lesson: what matters is that the weights
# are not the ones the model started from.

# %%
splits = toy_corpus(n_train=2000 if QUICK else 12000)
src_vocab = Vocab.build(tokenize(english, "en") for english, _ in splits.train)
tgt_vocab = Vocab.build(tokenize(french, "fr") for _, french in splits.train)
config = TransformerConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), d_model=64, n_heads=4,
                           d_ff=256, n_layers=2, max_len=64, dropout=0.1, label_smoothing=0.1)
model = Transformer(config, seed=0)
train_batches = make_batches(encode_pairs(splits.train, src_vocab, tgt_vocab, config.max_len),
                             token_budget=512 if QUICK else 1024, rng=np.random.default_rng(0))
valid = pad_batch(encode_pairs(splits.valid[:16 if QUICK else 32], src_vocab, tgt_vocab, config.max_len))

steps = 10 if QUICK else 400
optimizer = optim.Adam(model, lr=0.0, betas=(0.9, 0.98), eps=1e-9)
schedule = optim.NoamSchedule(config.d_model, warmup_steps=100, factor=2e-3 * np.sqrt(config.d_model * 100))
losses = []
for step in range(1, steps + 1):
    batch = train_batches[step % len(train_batches)]
    optimizer.lr = schedule(step)
    inputs = (backend.asarray(batch.src), backend.asarray(batch.tgt_in))
    losses.append(train_step(model, inputs, backend.asarray(batch.tgt_out), optimizer,
                             label_smoothing=config.label_smoothing, max_norm=1.0).loss)
model.eval()  # from here on: no dropout (each framework would draw its own masks)
print(f"{model.num_params():,} parameters; training loss {losses[0]:.2f} at step 1, "
      f"{np.mean(losses[-10:]):.2f} over the last 10 of {steps} steps")
assert np.mean(losses[-10:]) < losses[0]

# %% [markdown]
# ## The map: names and one transpose
#
# The twin has npformer's module tree: `encoder.layers.0.self_attn.q` is a `Linear` in both. Only
# the last word of each name changes (`W` becomes `weight`, `b` becomes `bias`, a layer norm's
# `gamma` and `beta` become `weight` and `bias`), and one layout. npformer's `Linear` computes
# $y = x W + b$ with $W$ of shape $(d_{in}, d_{out})$; `torch.nn.Linear` computes
# $y = x\, \mathrm{weight}^\top + b$ with `weight` of shape $(d_{out}, d_{in})$. So
#
# $$\mathrm{weight} = W^\top, \qquad \frac{\partial L}{\partial\, \mathrm{weight}} = \left(\frac{\partial L}{\partial W}\right)^{\!\top}$$
#
# and the same map moves gradients. An embedding table is $(V, D)$ in both, so it moves as it is.
# `interop.parameter_map` lists every pair; here are the embeddings, the first encoder layer and
# the output projection:

# %%
pairs = interop.parameter_map(model)
shapes = {key: tuple(value.shape) for key, value in model.params().items()}
print(f"{'npformer':34s} {'shape':>10s}   {'PyTorch':40s} {'shape':>10s}")
for pair in pairs:
    if pair.npformer_key.startswith(("src_embed", "encoder.layers.0.", "out_proj")):
        shape = shapes[pair.npformer_key]
        torch_shape = shape[::-1] if pair.transposed else shape
        print(f"{pair.npformer_key:34s} {str(shape):>10s}   {pair.torch_key:40s} {str(torch_shape):>10s}"
              + ("  transposed" if pair.transposed else ""))
transposed = sum(pair.transposed for pair in pairs)
print(f"{len(pairs)} tensors, {transposed} of them transposed (every Linear's W)")
assert transposed == sum(key.endswith(".W") and "embed" not in key for key in model.params())

# %% [markdown]
# With tied embeddings (`tie_embeddings=True`) npformer's output projection owns only its bias and
# multiplies by $E^\top$, the target table transposed. PyTorch ties by making `out_proj.weight` the
# very tensor `tgt_embed.weight`: a `Linear`'s `weight` is $(d_{out}, d_{in}) = (V, D)$, the shape
# of the table, so the tie needs no transpose at all.
#
# ## The same logits
#
# `to_torch` builds the twin in the model's dtype, float32 here, as trained. The twin computes what
# npformer computes, in the same order: the embedding times $\sqrt{D}$ plus npformer's sinusoid
# table, the masks built from `<pad>`, each residual block post-norm,
# $x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$. Rounding is another matter: the two
# libraries add their products in different orders, so in float32 the logits agree to round-off,
# not bit for bit. To see whether anything beyond round-off differs, move to float64, where
# round-off is $2^{29}$ times smaller: `to_torch(model, dtype=torch.float64)` gives a float64
# twin, and `from_torch` of that twin gives a float64 npformer model with the same weights.

# %%
def npformer_loss_and_grads(model, batch):
    """npformer's logits, label-smoothed loss and hand-written gradients (host arrays)."""
    logits = model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
    loss, cache = ops.cross_entropy_forward(logits, backend.asarray(batch.tgt_out), ignore_index=PAD_ID,
                                            label_smoothing=config.label_smoothing)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    return backend.to_numpy(logits), float(loss), {k: backend.to_numpy(g).copy() for k, g in model.grads().items()}


def twin_loss(twin, batch):
    """The twin's logits and its label-smoothed loss, as PyTorch computes them."""
    logits = twin(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))
    return logits, F.cross_entropy(logits.flatten(0, 1), torch.from_numpy(batch.tgt_out).flatten(),
                                   ignore_index=PAD_ID, label_smoothing=config.label_smoothing)


def torch_loss_and_grads(twin, model, batch):
    """The twin's logits and loss, and autograd's gradients in npformer's names and layouts."""
    logits, loss = twin_loss(twin, batch)
    twin.zero_grad()
    loss.backward()
    return logits.detach().numpy(), loss.item(), interop.grads_from_torch(twin, model)


if torch:
    twin = interop.to_torch(model)
    twin64 = interop.to_torch(model, dtype=torch.float64)
    model64 = interop.from_torch(twin64)
    print(f"twin: {type(twin).__name__}, {sum(p.numel() for p in twin.parameters()):,} parameters, "
          f"{twin.src_embed.weight.dtype}, {'training' if twin.training else 'eval'} mode")
    padding = (valid.src == PAD_ID).mean()
    print(f"validation batch: {valid.src.shape[0]} sentences, source {valid.src.shape[1]} positions, "
          f"{padding:.0%} of them <pad>")
    results = {}
    for name, ours, theirs in (("float32", model, twin), ("float64", model64, twin64)):
        results[name] = npformer_loss_and_grads(ours, valid), torch_loss_and_grads(theirs, ours, valid)
        (logits, loss, _), (torch_logits, torch_loss, _) = results[name]
        print(f"{name}: max |logits npformer - PyTorch| = {np.abs(logits - torch_logits).max():.1e} "
              f"(largest |logit| {np.abs(logits).max():.1f}); loss {loss:.6f} against {torch_loss:.6f}")
    logit_gap = {name: np.abs(r[0][0] - r[1][0]).max() for name, r in results.items()}
    assert logit_gap["float64"] < 1e-10 and logit_gap["float32"] < 1e-4 * np.abs(results["float32"][0][0]).max()
    assert logit_gap["float32"] > 1e3 * logit_gap["float64"]  # round-off: it shrinks with the precision
else:
    print("skipped: the logits comparison needs PyTorch (pip install torch)")

# %% [markdown]
# The printed differences are round-off: in float32 they sit at the scale of float32's precision
# times the size of the logits, and in float64 they shrink by more than a thousand times (both
# asserted), which a wrong transpose, a missing $\sqrt{D}$ or a misplaced norm never would.
#
# ## The same gradients
#
# npformer's gradients come from its hand-written backward passes; PyTorch's from autograd, which
# knows nothing of them. `grads_from_torch` reads the `.grad` of every twin parameter and maps it
# back to npformer's names and layouts (transposing the `Linear` weights again). For each tensor,
# the relative difference is $\max |g_{npformer} - g_{torch}| / \max |g_{torch}|$.
#
# One kind of tensor needs care: the bias $b_k$ of every key projection. It adds $q \cdot b_k$ to
# every score of a query's row, the same number for every key, and the softmax ignores a constant
# added to a row. So its true gradient is exactly zero, and both frameworks hold round-off there.
# Its difference is measured against the largest gradient of its attention block instead.

# %%
def relative_differences(ours, theirs):
    """Per tensor, max |ours - theirs| / max |theirs|; a key bias against its attention block."""
    differences = {}
    for key in theirs:
        if key.endswith(".k.b"):
            block = key[: -len("k.b")]
            scale = max(np.abs(theirs[k]).max() for k in theirs if k.startswith(block))
        else:
            scale = np.abs(theirs[key]).max()
        differences[key] = np.abs(ours[key] - theirs[key]).max() / scale
    return differences


if torch:
    gaps = {name: relative_differences(r[0][2], r[1][2]) for name, r in results.items()}
    for name, gap in gaps.items():
        worst = max(gap, key=gap.get)
        print(f"{name}: {len(gap)} gradient tensors, largest relative difference {gap[worst]:.1e} ({worst}), "
              f"median {np.median(list(gap.values())):.1e}")
    grads64 = results["float64"][0][2]
    key_bias = "encoder.layers.0.self_attn.k.b"
    print(f"the key bias's gradient in float64: max |npformer| {np.abs(grads64[key_bias]).max():.1e}, "
          f"max |PyTorch| {np.abs(results['float64'][1][2][key_bias]).max():.1e}, against "
          f"{np.abs(grads64['encoder.layers.0.self_attn.q.W']).max():.1e} for the query weights")
    assert max(gaps["float64"].values()) < 1e-8
    assert np.abs(grads64[key_bias]).max() < 1e-12 * np.abs(grads64["encoder.layers.0.self_attn.q.W"]).max()
else:
    print("skipped: the gradient comparison needs PyTorch (pip install torch)")

# %%
figure, (loss_axis, gap_axis) = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
loss_axis.plot(np.arange(1, steps + 1), losses)
loss_axis.set(xlabel="step", ylabel="training loss (label-smoothed, nats)", title="npformer training")
loss_axis.grid(True, alpha=0.3)
if torch:
    keys = list(gaps["float64"])
    is_key_bias = np.array([key.endswith(".k.b") for key in keys])
    index = np.arange(len(keys))
    for name, color in (("float32", "tab:blue"), ("float64", "tab:orange")):
        values = np.array([gaps[name][key] for key in keys])
        gap_axis.semilogy(index[~is_key_bias], values[~is_key_bias], "o", color=color, markersize=3.5, label=name)
        gap_axis.semilogy(index[is_key_bias], values[is_key_bias], "x", color=color, markersize=6,
                          label=f"{name}, key biases (against their block)")
        gap_axis.axhline(np.finfo(name).eps, linestyle="--", linewidth=0.8, color=color)
    gap_axis.set(xlabel="parameter tensor (in the order of model.params())",
                 ylabel="max |npformer - PyTorch| / max |PyTorch|",
                 title="Gradient of every tensor: npformer backward against autograd")
    gap_axis.legend(title="dashed: machine epsilon", loc="center right", fontsize=8)
    gap_axis.grid(True, alpha=0.3, which="major")
else:
    gap_axis.text(0.5, 0.5, "PyTorch is not installed:\nno comparison (pip install torch)",
                  ha="center", va="center", transform=gap_axis.transAxes)
    gap_axis.set_axis_off()
figure.savefig(viz.figures_dir() / "25_torch_agreement.png", dpi=110)
if torch:
    ratio = np.median(list(gaps["float32"].values())) / np.median(list(gaps["float64"].values()))
    print(f"median relative difference, float32 over float64: {ratio:.1e} (2^29 = {2.0**29:.1e})")
    assert 1e7 < ratio < 1e10
    for name in gaps:
        assert max(gap for key, gap in gaps[name].items() if not key.endswith(".k.b")) < 1000 * np.finfo(name).eps

# %% [markdown]
# On the right, every mark is one parameter tensor; the crosses are the key biases, whose true
# gradient is zero. Both dtypes show the same pattern at different heights: every dot lies within
# a factor of 1000 of its own machine epsilon (the dashed lines), and the vertical gap between the
# two clouds is about the gap between the two precisions,
# $2^{52} / 2^{23} = 2^{29} \approx 5 \times 10^{8}$ (the cell printed the ratio of the medians;
# both claims are asserted). Nothing but rounding separates the hand-written backward passes from
# autograd.
#
# ## Train in PyTorch, come back
#
# The twin is an ordinary `torch.nn.Module`: `torch.optim.Adam` trains it like any other. A few
# steps in PyTorch (with dropout on: `twin.train()`), then `load_torch_state` copies the weights back
# into the npformer model, in place. Before that, the plain round trip: `from_torch(to_torch(model))`
# must give back every array bit for bit, since copying and transposing twice loses nothing.

# %%
if torch:
    back = interop.from_torch(interop.to_torch(model))
    identical = sum(np.array_equal(backend.to_numpy(back.params()[k]), backend.to_numpy(v))
                    for k, v in model.params().items())
    print(f"round trip: {identical} of {len(model.params())} tensors bit for bit identical")
    assert identical == len(model.params())

    torch_steps = 2 if QUICK else 50
    torch.manual_seed(0)  # PyTorch's dropout masks come from its own generator
    torch_optimizer = torch.optim.Adam(twin.parameters(), lr=3e-4, betas=(0.9, 0.98), eps=1e-9)
    twin.train()
    for step in range(torch_steps):
        batch = train_batches[(steps + step) % len(train_batches)]
        _, loss = twin_loss(twin, batch)
        torch_optimizer.zero_grad()
        loss.backward()
        torch_optimizer.step()
    twin.eval()
    with torch.no_grad():
        torch_valid_loss = twin_loss(twin, valid)[1].item()
    before = model.state_dict()
    interop.load_torch_state(model, twin)
    moved = max(np.abs(model.state_dict()[k] - before[k]).max() for k in before)
    npformer_valid_loss = npformer_loss_and_grads(model, valid)[1]
    print(f"{torch_steps} PyTorch steps moved the weights by up to {moved:.1e}; validation loss: "
          f"PyTorch {torch_valid_loss:.6f}, npformer after the move back {npformer_valid_loss:.6f}")
    assert moved > 0 and abs(npformer_valid_loss - torch_valid_loss) < 1e-5 * torch_valid_loss
else:
    print("skipped: training in PyTorch needs PyTorch (pip install torch)")

# %% [markdown]
# After the move back, npformer's validation loss equals the one PyTorch computed on the same
# weights (asserted, to float32 round-off). The model is an npformer model again, with all that
# npformer offers: KV-cached greedy decoding and beam search, attention maps, gradient checks.

# %%
translator = Translator(model, src_vocab, tgt_vocab, final_mark=".")
for sentence in ["the white cat eats the apple.", "where are the green houses?"]:
    print(f"{sentence:32s} -> {translator.translate([sentence])[0]}")

# %% [markdown]
# ## Every variant
#
# The model above is the paper's: post-norm, ReLU, separate embeddings. The twin follows the
# configuration: pre-norm blocks with the final layer norms, exact GELU, tied embeddings. Each of
# the eight combinations, on a small untrained float64 model and a padded batch:

# %%
if torch:
    small = dict(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), d_model=16, n_heads=2, d_ff=32,
                 n_layers=2, max_len=64, dropout=0.0, label_smoothing=0.1)
    print(f"{'norm':5s} {'activation':10s} {'tied':5s} {'max |logits diff|':>18s} {'max grad rel diff':>18s}")
    for norm in ("post", "pre"):
        for activation in ("relu", "gelu"):
            for tied in (False, True):
                variant = Transformer(TransformerConfig(**small, norm=norm, activation=activation,
                                                        tie_embeddings=tied), seed=1, dtype=np.float64)
                variant_twin = interop.to_torch(variant)
                logits, _, grads = npformer_loss_and_grads(variant, valid)
                torch_logits, _, torch_grads = torch_loss_and_grads(variant_twin, variant, valid)
                logit_diff = np.abs(logits - torch_logits).max()
                grad_diff = max(relative_differences(grads, torch_grads).values())
                print(f"{norm:5s} {activation:10s} {str(tied):5s} {logit_diff:18.1e} {grad_diff:18.1e}")
                assert logit_diff < 1e-10 and grad_diff < 1e-8
else:
    print("skipped: the variants need PyTorch (pip install torch)")

# %% [markdown]
# ## PyTorch's own attention: one matrix for three
#
# The twin keeps npformer's four `Linear` layers per attention (`q`, `k`, `v`, `o`).
# `torch.nn.MultiheadAttention`, the attention of PyTorch's own `torch.nn.Transformer`, does not: it
# keeps the three input projections in one parameter, `in_proj_weight` of shape $(3D, D)$, with
# `in_proj_bias` of shape $(3D,)$. For self-attention it computes all three in one product,
#
# $$\left[\, q \;\middle|\; k \;\middle|\; v \,\right] = x\, \mathrm{in\_proj\_weight}^\top + \mathrm{in\_proj\_bias}$$
#
# and splits the $3D$ outputs into three blocks of $D$: the queries, then the keys, then the values.
# Each block is one `torch.nn.Linear`'s weight in PyTorch's layout, $(d_{out}, d_{in})$: which of
# npformer's matrices is that, in which form, and along which axis are the three stacked? The
# output projection stays an ordinary `Linear`, `out_proj`.
#
# ### Your turn
#
# Write `to_torch_in_proj(Wq, Wk, Wv, bq, bk, bv)`: the weights of one npformer attention, each $W$
# of shape $(D, D)$ in npformer's layout ($y = x W + b$) and each $b$ of shape $(D,)$, as
# `(in_proj_weight, in_proj_bias)`, NumPy arrays of shapes $(3D, D)$ and $(3D,)$. The grader needs
# only NumPy (PyTorch need not be installed); it tries $D = 4$, $D = 1$ and $D = 6$, with random
# weights, so a forgotten transpose or a swapped block shows. npformer's own map
# (`interop.to_torch_layout`, `interop.parameter_map`) is unavailable while your function runs.

# %%
def to_torch_in_proj(Wq, Wk, Wv, bq, bk, bv):
    """npformer's q, k, v projections -> torch.nn.MultiheadAttention's (in_proj_weight (3D, D), in_proj_bias (3D,))."""
    ### BEGIN SOLUTION
    return np.concatenate([Wq.T, Wk.T, Wv.T], axis=0), np.concatenate([bq, bk, bv])
    ### END SOLUTION


# %%
print(check("to_torch_in_proj", to_torch_in_proj))

# %% [markdown]
# With PyTorch installed, the cell below loads an npformer `SelfAttention` (two heads, $D = 16$,
# float64) into `torch.nn.MultiheadAttention` with your map, once it passes (npformer's map, the
# course's reference built on `interop.to_torch_layout`, until then), and compares the two outputs
# on a random batch.

# %%
passed = check("to_torch_in_proj", to_torch_in_proj, strict=False).passed  # yours, when it passes
in_proj = to_torch_in_proj if passed else EXERCISES["to_torch_in_proj"].reference
if torch:
    width, heads = 16, 2
    ours = SelfAttention(width, heads, rng=np.random.default_rng(3), dtype=np.float64)
    theirs = torch.nn.MultiheadAttention(width, heads, batch_first=True, dtype=torch.float64)
    ours_params = {key: backend.to_numpy(value) for key, value in ours.params().items()}
    in_proj_weight, in_proj_bias = in_proj(*(ours_params[f"{n}.W"] for n in "qkv"),
                                           *(ours_params[f"{n}.b"] for n in "qkv"))
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.from_numpy(np.ascontiguousarray(in_proj_weight)))
        theirs.in_proj_bias.copy_(torch.from_numpy(np.ascontiguousarray(in_proj_bias)))
        theirs.out_proj.weight.copy_(torch.from_numpy(ours_params["o.W"].T.copy()))
        theirs.out_proj.bias.copy_(torch.from_numpy(ours_params["o.b"]))
        x_attention = np.random.default_rng(4).standard_normal((2, 5, width))
        x_torch = torch.from_numpy(x_attention)
        attention_gap = np.abs(backend.to_numpy(ours.forward(backend.asarray(x_attention)))
                               - theirs(x_torch, x_torch, x_torch, need_weights=False)[0].numpy()).max()
    whose = "your" if passed else "npformer's"
    print(f"npformer's SelfAttention in torch.nn.MultiheadAttention, with {whose} map: "
          f"largest difference of the outputs {attention_gap:.1e}")
    assert attention_gap < 1e-12
else:
    print("skipped: torch.nn.MultiheadAttention needs PyTorch (pip install torch)")

# %% [markdown]
# In float64 the two attentions agree to round-off: the same function, with PyTorch's layout.
#
# ## A whole layer in PyTorch's own class
#
# `torch.nn.TransformerEncoderLayer` is PyTorch's post-norm encoder layer: self-attention in a
# `MultiheadAttention` named `self_attn`, the feed-forward network as two `Linear`s named `linear1`
# and `linear2`, and two `LayerNorm`s, `norm1` after the attention's residual sum and `norm2` after
# the feed-forward's. Its state dict holds twelve arrays, in this order: `self_attn.in_proj_weight`,
# `self_attn.in_proj_bias`, `self_attn.out_proj.weight`, `self_attn.out_proj.bias`, `linear1.weight`,
# `linear1.bias`, `linear2.weight`, `linear2.bias`, `norm1.weight`, `norm1.bias`, `norm2.weight`,
# `norm2.bias`. An npformer `EncoderLayer` holds sixteen (print `layer.params()` below).
#
# ### Your turn
#
# Write `to_torch_encoder_layer(params)`: `params` is an npformer post-norm encoder layer's dict
# (its keys as `EncoderLayer.params()` names them, float64 arrays; $D$ and $d_{ff}$ are whatever
# the arrays say), and you return a dict of PyTorch's twelve names to NumPy arrays. For each of
# PyTorch's arrays, decide which of npformer's it comes from, whether its layout is npformer's or
# the transpose (which axis of a `torch.nn.Linear`'s weight is the output?), and which arrays are
# stacked into one (the part you wrote above; write it again here, so that this exercise stands on
# its own). The check tries
# $D = 4$, $D = 1$, and a feed-forward narrower than $D$, so that only the right transposes give
# the right shapes.

# %%
print(sorted(EncoderLayer(4, n_heads=2, d_ff=8, activation="relu", rng=np.random.default_rng(0), dropout=0.0,
                          dropout_rng=np.random.default_rng(0), pre_norm=False).params()))


# %%
def to_torch_encoder_layer(params):
    """An npformer post-norm encoder layer's params -> torch.nn.TransformerEncoderLayer's state dict."""
    ### BEGIN SOLUTION
    projections = ("self_attn.q", "self_attn.k", "self_attn.v")      # stacked in PyTorch's order q, k, v
    converted = {"self_attn.in_proj_weight": np.concatenate([params[f"{name}.W"].T for name in projections]),
                 "self_attn.in_proj_bias": np.concatenate([params[f"{name}.b"] for name in projections])}
    for torch_linear, ours in (("self_attn.out_proj", "self_attn.o"), ("linear1", "ffn.fc1"), ("linear2", "ffn.fc2")):
        converted[f"{torch_linear}.weight"] = params[f"{ours}.W"].T   # torch keeps (d_out, d_in)
        converted[f"{torch_linear}.bias"] = params[f"{ours}.b"]
    for norm in ("norm1", "norm2"):
        converted[f"{norm}.weight"] = params[f"{norm}.gamma"]
        converted[f"{norm}.bias"] = params[f"{norm}.beta"]
    return converted
    ### END SOLUTION


# %%
print(check("to_torch_encoder_layer", to_torch_encoder_layer))

# %% [markdown]
# With PyTorch installed, the cell below loads a random npformer encoder layer (two heads, $D = 8$,
# $d_{ff} = 16$, float64, no dropout) into `torch.nn.TransformerEncoderLayer` with your map once it
# passes (the course's reference until then) and prints the largest difference of the two layers'
# outputs on a random batch.

# %%
passed = check("to_torch_encoder_layer", to_torch_encoder_layer, strict=False).passed  # yours, when it passes
layer_map = to_torch_encoder_layer if passed else EXERCISES["to_torch_encoder_layer"].reference
if torch:
    ours_layer = EncoderLayer(8, n_heads=2, d_ff=16, activation="relu", rng=np.random.default_rng(5),
                              dtype=np.float64, dropout=0.0, dropout_rng=np.random.default_rng(5), pre_norm=False)
    theirs_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    arrays = layer_map({key: backend.to_numpy(value) for key, value in ours_layer.params().items()})
    theirs_layer.load_state_dict({name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in arrays.items()})
    theirs_layer.eval()
    x_layer = np.random.default_rng(6).standard_normal((2, 5, 8))
    with torch.no_grad():
        layer_gap = np.abs(backend.to_numpy(ours_layer.forward(backend.asarray(x_layer), None))
                           - theirs_layer(torch.from_numpy(x_layer)).numpy()).max()
    whose = "your" if passed else "the course's"
    print(f"npformer's EncoderLayer in torch.nn.TransformerEncoderLayer, with {whose} map: largest difference of "
          f"the outputs {layer_gap:.1e}")
    assert layer_gap < 1e-12
else:
    print("skipped: torch.nn.TransformerEncoderLayer needs PyTorch (pip install torch)")

# %% [markdown]
# ## Exercises
#
# 1. Forget the transpose for the square matrices only (the attention's $W_q, W_k, W_v, W_o$), in
#    both directions of the map. Does the round trip still give identical weights? Do the logits
#    still agree? Which of the two checks would you trust to catch a mapping bug?
# 2. Run the model and its twin in training mode, with dropout 0.1. How far apart are the logits
#    now, and why can no choice of seed make them agree?
# 3. In a tied model, check that the gradient PyTorch leaves in `tgt_embed.weight` is the sum of two
#    uses: compute each use's share separately in npformer (hint: `out_proj.backward` adds into the
#    table's gradient) and compare.
#
#    *Auto-graded:* `tied_embedding_gradient(ids, d_embedded, hidden, d_logits)`, the gradient of a
#    table $E$ of shape `(V, D)` used twice: as the target embedding, $x = E[\text{ids}]\,\sqrt{D} + PE$,
#    and as the output projection, $\text{logits} = \text{hidden}\; E^\top + b$. You are given `ids`
#    `(B, T)`; `d_embedded` `(B, T, D)`, the gradient of the loss with respect to $x$; `hidden`
#    `(B, T, D)`, the output projection's input; and `d_logits` `(B, T, V)`, the gradient with respect
#    to the logits. Return $dE$, of shape `(V, D)`. The grader tries ids that repeat, ids that never
#    occur, and a single token. *For the rubric:* the comparison with the gradient PyTorch leaves in
#    `tgt_embed.weight`, and with each share alone.

# %%
def tied_embedding_gradient(ids, d_embedded, hidden, d_logits):
    """dE (V, D) for a table used as the embedding (times sqrt(D)) and as the output projection (E^T)."""
    ### BEGIN SOLUTION
    vocab, d_model = d_logits.shape[-1], hidden.shape[-1]
    d_table = np.zeros((vocab, d_model))
    lookup_rows = d_embedded.reshape(-1, d_model) * np.sqrt(d_model)  # x = E[ids] sqrt(D) + PE
    np.add.at(d_table, ids.reshape(-1), lookup_rows)  # a repeated id collects every one of its rows
    d_table += d_logits.reshape(-1, vocab).T @ hidden.reshape(-1, d_model)  # logits = hidden E^T + b
    return d_table
    ### END SOLUTION


# %%
print(check("tied_embedding_gradient", tied_embedding_gradient))

# %% [markdown]
# 4. PyTorch's own `torch.nn.Transformer` is built from the `torch.nn.MultiheadAttention` whose
#    weights you mapped above. What does it add to a post-norm model that npformer's post-norm
#    model does not have? (Print its parameter names.)
# 5. How does the largest float32 logit difference change with `d_model`? Predict it from how many
#    terms each matrix product adds up, then measure it on untrained models.

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. The round trip still gives identical weights: a matrix left untransposed on the way out and
#    on the way back comes back as it was, so that check cannot see the bug. The logits no longer
#    agree: the twin now computes $x W^\top$ where npformer computes $x W$, the shapes fit because
#    the matrices are square, and the difference is of the size of the logits themselves, not
#    round-off (printed below, in float64). Trust the comparison of the function (logits, and
#    gradients), never a round trip, which only tests that the map is its own inverse.
# 2. The masks differ. npformer draws its dropout masks from its own NumPy generator, PyTorch from
#    its own generator, with different algorithms, draw orders and numbers of draws, so no pair
#    of seeds gives the same masks; seeding only makes each framework repeat itself. The logits are
#    then apart by the order of the logits themselves, against float64 round-off in evaluation mode
#    (printed below). To compare training-mode passes, feed both the same masks (the gradient
#    checker replays its masks for that reason).
# 3. Untie a copy of the model: give it a separate `out_proj.W` $= E^\top$ and the same other
#    weights, so that it computes the same function. Its `tgt_embed.W` gradient is the embedding's
#    share, its `out_proj.W` gradient, transposed, the output projection's share (which
#    `out_proj.backward` alone also adds into the tied table). Their sum equals the gradient that
#    PyTorch leaves in the tied `tgt_embed.weight` to float64 round-off, and neither share alone
#    does (printed below).
# 4. `torch.nn.Transformer` adds a final layer norm to the encoder and to the decoder
#    (`encoder.norm`, `decoder.norm`) even when it is post-norm (`norm_first=False`); npformer's
#    post-norm model has none (its final norms come with `norm="pre"` only). It also has no
#    embeddings, positions or output projection. The cell below prints its parameters outside its
#    layers. Full marks: the two final norms, and that they exist in post-norm mode too.
# 5. Each output of a product is a sum of $n$ terms ($n = d_{model}$, or $d_{ff} = 4 d_{model}$ in
#    the feed-forward block), and float32 rounds at each addition; with errors of random sign the
#    error of the sum grows like $\sqrt{n}\,u$ times the size of the terms ($n u$ in the worst
#    case), so predict a largest difference growing roughly like $\sqrt{d_{model}}$, a little faster
#    here because the untrained logits also grow with $d_{model}$. The cell below measures it on
#    untrained models for $d_{model}$ from 16 to 256 (three seeds each) and fits the slope of
#    $\log(\text{difference})$ against $\log d_{model}$ (printed; asserted between 0.2 and 1).

# %% tags=["instructor"]
if torch:
    square = [p for p in interop.parameter_map(model64) if "_attn." in p.npformer_key and p.npformer_key.endswith(".W")]
    weights64 = {key: backend.to_numpy(value) for key, value in model64.state_dict().items()}
    careless_torch = interop.to_torch_layout(model64)
    careless_back = interop.from_torch_layout(model64, careless_torch)
    for pair in square:  # the transpose forgotten, both ways
        careless_torch[pair.torch_key] = weights64[pair.npformer_key].copy()
        careless_back[pair.npformer_key] = careless_torch[pair.torch_key].copy()
    careless_round_trip = all(np.array_equal(careless_back[key], weights64[key]) for key in weights64)
    careless_twin = interop.to_torch(model64)
    careless_twin.load_state_dict({key: torch.from_numpy(value) for key, value in careless_torch.items()})
    with torch.no_grad():
        careless_logits = careless_twin(torch.from_numpy(valid.src), torch.from_numpy(valid.tgt_in)).numpy()
    careless_gap = np.abs(careless_logits - results["float64"][0][0]).max()
    print(f"answer 1: {len(square)} square matrices left untransposed: round trip identical: {careless_round_trip}; "
          f"float64 logits apart by up to {careless_gap:.2f} (largest |logit| {np.abs(results['float64'][0][0]).max():.1f})")
    assert careless_round_trip and careless_gap > 1e-3

# %% tags=["instructor"]
if torch:
    dropout_model = interop.from_torch(interop.to_torch(model, dtype=torch.float64))  # a copy, float64
    dropout_twin = interop.to_torch(dropout_model)
    dropout_model.train()
    dropout_twin.train()
    torch.manual_seed(0)
    train_logits = [backend.to_numpy(dropout_model.forward(backend.asarray(valid.src), backend.asarray(valid.tgt_in)))
                    for _ in range(2)]
    with torch.no_grad():
        train_twin_logits = dropout_twin(torch.from_numpy(valid.src), torch.from_numpy(valid.tgt_in)).numpy()
    dropout_gap = np.abs(train_logits[0] - train_twin_logits).max()
    print(f"answer 2: training mode, dropout {config.dropout}: npformer against PyTorch up to {dropout_gap:.2f}, "
          f"npformer against itself (new masks) up to {np.abs(train_logits[0] - train_logits[1]).max():.2f}; "
          f"evaluation mode, float64: {logit_gap['float64']:.1e}")
    assert dropout_gap > 1e6 * logit_gap["float64"]

# %% tags=["instructor"]
if torch:
    tied_model = Transformer(TransformerConfig(**small, tie_embeddings=True), seed=2, dtype=np.float64)
    _, _, tied_torch_grads = torch_loss_and_grads(interop.to_torch(tied_model), tied_model, valid)
    tied_state = tied_model.state_dict()
    untied_model = Transformer(TransformerConfig(**small), seed=2, dtype=np.float64)
    untied_model.load_state_dict({**tied_state, "out_proj.W": tied_state["tgt_embed.W"].T.copy()})
    _, _, untied_grads = npformer_loss_and_grads(untied_model, valid)
    embedding_share, output_share = untied_grads["tgt_embed.W"], untied_grads["out_proj.W"].T
    tied_logits = tied_model.forward(backend.asarray(valid.src), backend.asarray(valid.tgt_in))
    _, tied_cache = ops.cross_entropy_forward(tied_logits, backend.asarray(valid.tgt_out), ignore_index=PAD_ID,
                                              label_smoothing=config.label_smoothing)
    tied_model.zero_grad()
    tied_model.out_proj.backward(ops.cross_entropy_backward(1.0, tied_cache))  # the output projection's use only
    hint_share = backend.to_numpy(tied_model.grads()["tgt_embed.W"])
    total = tied_torch_grads["tgt_embed.W"]
    scale = np.abs(total).max()
    print(f"answer 3: |embedding share + output share - PyTorch's tied gradient| / max = "
          f"{np.abs(embedding_share + output_share - total).max() / scale:.1e}; each share alone is off by "
          f"{np.abs(embedding_share - total).max() / scale:.2f} and {np.abs(output_share - total).max() / scale:.2f}; "
          f"out_proj.backward alone against the output share: {np.abs(hint_share - output_share).max() / scale:.1e}")
    assert np.abs(embedding_share + output_share - total).max() < 1e-10 * scale
    assert min(np.abs(embedding_share - total).max(), np.abs(output_share - total).max()) > 1e-3 * scale
    assert np.abs(hint_share - output_share).max() < 1e-10 * scale

# %% tags=["instructor"]
if torch:
    reference = torch.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                     dim_feedforward=32, batch_first=True)
    outside_layers = [name for name, _ in reference.named_parameters() if ".layers." not in name]
    print(f"answer 4: torch.nn.Transformer's parameters outside its layers: {outside_layers}")
    assert outside_layers == ["encoder.norm.weight", "encoder.norm.bias", "decoder.norm.weight", "decoder.norm.bias"]
    assert not any(key.startswith(("encoder.norm", "decoder.norm")) for key in model.params())

# %% tags=["instructor"]
if torch:
    widths, float32_gaps = (16, 32, 64, 128, 256), []
    for width in widths:
        width_gaps = []
        for seed in range(3):
            untrained = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=width, n_heads=4,
                                                      d_ff=4 * width, n_layers=2, max_len=64, dropout=0.0), seed=seed)
            untrained.eval()
            with torch.no_grad():
                torch_logits = interop.to_torch(untrained)(torch.from_numpy(valid.src), torch.from_numpy(valid.tgt_in))
            ours_logits = backend.to_numpy(untrained.forward(backend.asarray(valid.src), backend.asarray(valid.tgt_in)))
            width_gaps.append(np.abs(ours_logits - torch_logits.numpy()).max())
        float32_gaps.append(np.mean(width_gaps))
    width_slope = np.polyfit(np.log(widths), np.log(float32_gaps), 1)[0]
    print("answer 5: largest float32 logit difference, mean of 3 untrained models: "
          + ", ".join(f"d_model {width}: {gap:.1e}" for width, gap in zip(widths, float32_gaps))
          + f"; slope of log(difference) against log(d_model): {width_slope:.2f}")
    assert 0.2 < width_slope < 1.0
