# %% [markdown]
# # Lesson 14 — Decoding with greedy search, beam search and the KV cache
#
# A trained model gives `P(next word | source, words so far)`. Translating means choosing words
# one at a time:
#
# * **greedy search** takes the most probable next word at every step;
# * **beam search** keeps the `k` best partial translations and extends each, which finds more
#   probable translations. The final choice divides the log-probability by the GNMT length
#   penalty `((5 + |y|) / 6)^0.6`, so longer translations are not penalised just for having more terms.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, models, viz
from npformer.tasks.translation import beam_search, greedy_decode
from npformer.tokens import BOS_ID

# %% [markdown]
# ## The KV cache
#
# At step `t` the decoder needs the keys and values of positions `0..t-1` in every layer, and they
# do not change from step to step. Recomputing them re-runs the decoder on the whole prefix:
# `O(t)` work per step and `O(T^2)` in all. With a cache, each step computes the keys and values of
# the **new** position only and appends them. The cross-attention keys and values of the source
# are computed once per sentence (`Transformer.start_decoding`).

# %%
model = models.Transformer(models.TransformerConfig(1000, 1000, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                                                    dropout=0.0), seed=0).eval()
rng = np.random.default_rng(0)
src = backend.asarray(rng.integers(4, 1000, size=(32, 20)))
LENGTH = 24


def decode_without_cache(model, src, length):
    """Greedy decoding that re-runs the full decoder on the whole prefix at every step."""
    memory, src_mask = model.encode(src)
    prefix = np.full((src.shape[0], 1), BOS_ID)
    for _ in range(length):
        logits = model.decode(backend.asarray(prefix), memory, src_mask)
        prefix = np.concatenate([prefix, backend.to_numpy(logits[:, -1].argmax(-1))[:, None]], axis=1)
    return prefix[:, 1:]


def decode_with_cache(model, src, length):
    cache = model.start_decoding(src, max_len=length)
    current = backend.xp.full(src.shape[0], BOS_ID)
    out = []
    for _ in range(length):
        current = model.decode_step(cache, current).argmax(-1)
        out.append(current)
    return backend.to_numpy(backend.xp.stack(out, axis=1))


timings = {}
for name, decode in (("without cache", decode_without_cache), ("with KV cache", decode_with_cache)):
    decode(model, src, 4)  # warm up
    start = time.perf_counter()
    result = decode(model, src, LENGTH)
    timings[name] = time.perf_counter() - start
    print(f"{name:14s}: {timings[name] * 1000:7.1f} ms for {src.shape[0]} sentences x {LENGTH} tokens")
assert np.array_equal(decode_without_cache(model, src, 6), decode_with_cache(model, src, 6))
speedup = timings["without cache"] / timings["with KV cache"]
print(f"speed-up: {speedup:.1f}x (same tokens)")
# Timings depend on the machine's load, so only the direction is asserted: the cache must win.
assert timings["with KV cache"] < timings["without cache"], "the cached decoder must be faster"

# %%
figure, axis = plt.subplots(figsize=(6, 3), constrained_layout=True)
axis.barh(list(timings), [1000 * t for t in timings.values()], color=["tab:gray", "tab:green"])
axis.set(xlabel="milliseconds", title=f"Greedy decoding of {LENGTH} tokens: {speedup:.1f}x faster with the cache")
figure.savefig(viz.figures_dir() / "14_kv_cache.png", dpi=110)

# %% [markdown]
# ## Greedy against beam
#
# Beam search scores at least as well as greedy on the model's own measure, the log-probability
# of the translation, on average. Whether it raises BLEU depends on how good the model is
# (`npformer evaluate` reports both).

# %%
small = backend.asarray(rng.integers(4, 1000, size=(8, 10)))
greedy = greedy_decode(model, small, 12)
beam = beam_search(model, small, beam_size=4, max_len=12)
print("greedy:", greedy[0][:8])
print("beam 4:", beam[0][:8])

# %% [markdown]
# ## Exercises
#
# 1. Time the two decoders for 8, 24 and 64 tokens. How does the speed-up grow with length?
# 2. Beam search with `beam_size=1` must equal greedy search. Check it.
# 3. Implement sampling with a temperature: replace `argmax` with a draw from `softmax(logits / T)`.
