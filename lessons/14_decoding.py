# %% [markdown]
# # Lesson 14 — Decoding with greedy search, beam search and the KV cache
#
# A trained model gives $p(y_t \mid x, y_1, \dots, y_{t-1})$: the distribution of the next target
# word given the source $x$ and the words written so far. Translating means choosing words one at
# a time:
#
# * **greedy search** takes the most probable next word at every step;
# * **beam search** keeps the $k$ best partial translations and extends each, so it can find
#   translations that the model finds more probable than greedy's.
#
# Both run the decoder once per new word, which is where the KV cache comes in.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, models, viz
from npformer.course import check
from npformer.tasks.translation import beam_search, greedy_decode
from npformer.tasks.translation.decoding import length_penalty_factor
from npformer.tokens import BOS_ID

# %% [markdown]
# ## The KV cache
#
# Write $t = 1, \dots, T$ for the decoding steps of a translation of $T$ tokens. At step $t$ the
# decoder's self-attention needs, in every layer, the keys and values of the $t$ positions written
# so far (`<bos>` and the $t - 1$ words), and those of the first $t - 1$ do not change from step to
# step.
#
# * **Without a cache**, each step re-runs the decoder on the whole prefix: the projections (and
#   the feed-forward layers) of all $t$ positions again, and the attention of all $t$ queries over
#   the $t$ keys. Summed over a sentence, that is $\sum_t t = T(T+1)/2$ positions through every
#   layer, and $\sum_t t^2 = T(T+1)(2T+1)/6$ query-key products per layer and head.
# * **With a cache**, each step computes the projections of the **new** position only and
#   appends its key and value; the prefix's projections are never recomputed, so $T$ positions go
#   through every layer. The new query still attends over all $t$ cached keys: attention over the
#   prefix is $O(t)$ per new token and $O(T^2)$ per sentence, $\sum_t t = T(T+1)/2$ products.
#
# The cache therefore removes the recomputation of the prefix; it does not make attention linear
# in the length. The cross-attention keys and values of the source do not depend on the step at
# all: they are computed once per sentence (`Transformer.start_decoding`). The cell below counts
# both costs for the $T$ used here, then times the two decoders on a small random model.

# %%
model = models.Transformer(models.TransformerConfig(1000, 1000, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                                                    dropout=0.0), seed=0).eval()
rng = np.random.default_rng(0)
src = backend.asarray(rng.integers(4, 1000, size=(32, 20)))
LENGTH = 24
T = LENGTH
print(f"T = {T}: positions through each layer {T * (T + 1) // 2} without a cache, {T} with it; "
      f"query-key products {T * (T + 1) * (2 * T + 1) // 6} without, {T * (T + 1) // 2} with")


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
    runs = []
    for _ in range(3):  # the best of three: the least disturbed by other work on the machine
        start = time.perf_counter()
        result = decode(model, src, LENGTH)
        runs.append(time.perf_counter() - start)
    timings[name] = min(runs)
    print(f"{name:14s}: {timings[name] * 1000:7.1f} ms for {src.shape[0]} sentences x {LENGTH} tokens")
assert np.array_equal(decode_without_cache(model, src, 6), decode_with_cache(model, src, 6))
speedup = timings["without cache"] / timings["with KV cache"]
print(f"speed-up: {speedup:.1f}x (same tokens)")
# Timings depend on the machine's load, so only the direction is asserted, and only in the full run
# (the quick run's short sentences leave too small a gap to survive a busy machine).
if os.environ.get("NPFORMER_QUICK") != "1":
    assert timings["with KV cache"] < timings["without cache"], "the cached decoder must be faster"

# %%
figure, axis = plt.subplots(figsize=(6, 3), constrained_layout=True)
axis.barh(list(timings), [1000 * t for t in timings.values()], color=["tab:gray", "tab:green"])
axis.set(xlabel="milliseconds", title=f"Greedy decoding of {LENGTH} tokens: {speedup:.1f}x faster with the cache")
figure.savefig(viz.figures_dir() / "14_kv_cache.png", dpi=110)

# %% [markdown]
# ## The length penalty
#
# Beam search compares finished translations of different lengths. Their score, the
# log-probability $\log p(y \mid x) = \sum_t \log p(y_t \mid x, y_1, \dots, y_{t-1})$, gets one
# more negative term per token, so it favours short translations. GNMT (Wu et al., 2016) divides
# it by a penalty that grows with the length $|y|$:
#
# $$\mathrm{lp}(y) = \left(\frac{5 + |y|}{6}\right)^{\alpha}, \qquad
# \text{score}(y) = \frac{\log p(y \mid x)}{\mathrm{lp}(y)}$$
#
# $\alpha = 0$ gives $\mathrm{lp} = 1$, the raw log-probability; npformer's beam search uses
# $\alpha = 0.6$. As the score is negative, a larger penalty raises it.
#
# ### Your turn
#
# Write `length_penalty(length, alpha)`: $\mathrm{lp}$ for a length $|y| \ge 1$ (a number) and
# an exponent $\alpha \ge 0$. The next cell checks it for $\alpha = 0.6$, $0$ and $1$.

# %%
def length_penalty(length, alpha):
    """GNMT's length penalty for a translation of `length` tokens."""
    ### BEGIN SOLUTION
    return ((5 + length) / 6) ** alpha
    ### END SOLUTION


# %%
print(check("length_penalty", length_penalty))

# %% [markdown]
# Beam search calls npformer's `length_penalty_factor`. Take two finished hypotheses, a short one
# of 4 tokens with $\log p = -4.0$ and a long one of 10 tokens with $\log p = -4.8$: the raw
# log-probability prefers the short one, and the penalty can turn that around.

# %%
candidates = {"short, 4 tokens": (4, -4.0), "long, 10 tokens": (10, -4.8)}
choices = {}
for alpha in (0.0, 0.6, 1.0):
    scores = {name: log_p / length_penalty_factor(length, alpha) for name, (length, log_p) in candidates.items()}
    choices[alpha] = max(scores, key=scores.get)
    print(f"alpha = {alpha}: " + ", ".join(f"{name} {score:.2f}" for name, score in scores.items())
          + f" -> {choices[alpha]}")
assert choices[0.0] == "short, 4 tokens" and choices[0.6] == "long, 10 tokens", "alpha 0.6 must flip the choice"

# %% [markdown]
# ## Greedy against beam
#
# Beam search explores more candidates than greedy search, so it can find translations to which
# the model gives a higher score; it keeps only $k$ of them at each step, so it is not guaranteed
# to. Whether it raises BLEU depends on how good the model is (`npformer evaluate` reports both).
# The model here is untrained, so its two outputs below show only that the searches can differ.

# %%
small = backend.asarray(rng.integers(4, 1000, size=(8, 10)))
greedy = greedy_decode(model, small, 12)
beam = beam_search(model, small, beam_size=4, max_len=12)
print("greedy:", greedy[0][:8])
print("beam 4:", beam[0][:8])
assert list(greedy[0]) != list(beam[0]), "on this source the two searches must differ"

# %% [markdown]
# ## Exercises
#
# 1. Time the two decoders for 8, 24 and 64 tokens. How does the speed-up grow with length? Compare
#    it with the counts of positions and of query-key products above.
# 2. Beam search with a beam of one, `beam_search(model, src, beam_size=1, max_len=12)`, must equal
#    greedy search, `greedy_decode(model, src, 12)`. Check it.
# 3. Implement sampling with a temperature $\tau$: replace `argmax` with a draw from
#    $\operatorname{softmax}(z / \tau)$ of the logits $z$.
# 4. Run `beam_search` on the same sources with the argument `length_penalty` set to $0$ and to $1$. How do
#    the lengths of the chosen translations change, and why?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below, on the lesson's 32 sources.) The speed-up grows steadily with the length,
#    because the uncached decoder's work per step grows with $t$ while the cached step's hardly does.
#    It stays far below both counted ratios, $(T + 1)/2$ for positions and $(2T + 1)/3$ for query-key
#    products: a cached step works on one position per sentence, and such small matrix products are
#    dominated by fixed costs (Python, one call per op and per layer) that the counts ignore. Full
#    marks: the three speed-ups, that they grow with $T$, and why they fall short of the counts.
# 2. (Checked below.) They are equal. With $k = 1$ each step keeps the one best continuation of the one
#    beam, which is greedy's argmax, and at the end there is a single hypothesis for the length
#    penalty to rank. (`beam_search` has no default `max_len`: the call needs it.)
# 3. (Reference code below.) At each step take the logits $z$ of `decode_step`, compute
#    $\operatorname{softmax}(z / \tau)$ in float64 with the row maximum subtracted before `exp`, and draw
#    one token per row from a seeded generator. Checks: as $\tau \to 0$ the draw becomes greedy
#    decoding (asserted); $\tau = 1$ samples the model's own distribution, and $\tau > 1$ flattens it.
# 4. (Printed below.) With $\alpha = 0$ the score is the raw $\log p(y \mid x)$: every token adds a
#    negative term, so among its finished hypotheses beam search picks short ones. With $\alpha = 1$
#    the score is divided by $(5 + |y|)/6$, close to a per-token average, so length is no longer
#    punished and the chosen translations get longer (or stay the same). The lesson's model never
#    writes `<eos>`, so the cell below uses a random model made confident and given a likelier `<eos>`
#    (hypotheses then end at many lengths). A well-trained translator, such as lesson 13's full run, is
#    so sure of one translation that the choice rarely changes with $\alpha$: a full answer says that
#    the penalty matters only when finished hypotheses of different lengths have close log-probabilities.

# %% tags=["instructor"]
speedups = {}
for length in (8, 24, 64):
    best = {}
    for name, decode in (("without cache", decode_without_cache), ("with KV cache", decode_with_cache)):
        runs = []
        for _ in range(2):
            start = time.perf_counter()
            decode(model, src, length)
            runs.append(time.perf_counter() - start)
        best[name] = min(runs)
    speedups[length] = best["without cache"] / best["with KV cache"]
    print(f"answer 1: T = {length:2d}: speed-up {speedups[length]:4.1f}x; counted ratios: positions "
          f"{(length + 1) / 2:4.1f}, query-key products {(2 * length + 1) / 3:4.1f}")
if os.environ.get("NPFORMER_QUICK") != "1":  # timings: asserted only in the full run, as above
    assert speedups[64] > speedups[8], "the speed-up must grow with the length"

# %% tags=["instructor"]
assert beam_search(model, small, beam_size=1, max_len=12) == greedy_decode(model, small, 12)
print("answer 2: beam search with beam_size=1 equals greedy decoding on all", small.shape[0], "sources")


# %% tags=["instructor"]
def decode_with_sampling(model, src, length, temperature, rng):
    """Draw each next token from softmax(z / temperature) of the logits z (on the KV cache)."""
    cache = model.start_decoding(src, max_len=length)
    current = backend.xp.full(src.shape[0], BOS_ID)
    out = []
    for _ in range(length):
        z = backend.to_numpy(model.decode_step(cache, current)).astype(np.float64) / temperature
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        u = rng.random((p.shape[0], 1))  # inverse of the cumulative distribution, one draw per row
        drawn = np.minimum((p.cumsum(axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)
        out.append(drawn)
        current = backend.asarray(drawn)
    return np.stack(out, axis=1)


greedy_tokens = decode_with_cache(model, src, 12)
cold = decode_with_sampling(model, src, 12, 1e-8, np.random.default_rng(0))
warm = decode_with_sampling(model, src, 12, 1.0, np.random.default_rng(0))
assert np.array_equal(cold, greedy_tokens), "as the temperature goes to 0, sampling becomes greedy decoding"
print(f"answer 3: tau = 1e-8 reproduces greedy decoding; tau = 1 changes {(warm != greedy_tokens).mean():.0%} "
      "of the tokens")

# %% tags=["instructor"]
from npformer.tokens import EOS_ID  # noqa: E402

confident = models.Transformer(model.config, seed=0).eval()  # a model of its own: `model` is unchanged
confident.out_proj.W *= 10.0  # sharper next-word distributions
confident.out_proj.b[EOS_ID] += 6.0  # and <eos> likely enough that hypotheses end at many lengths
mean_length = {alpha: np.mean([len(y) for y in beam_search(confident, src, beam_size=4, max_len=24,
                                                            length_penalty=alpha)])
               for alpha in (0.0, 0.6, 1.0)}
print("answer 4: mean length of the chosen translations: "
      + ", ".join(f"alpha = {alpha}: {value:.2f}" for alpha, value in mean_length.items()))
assert mean_length[0.0] <= mean_length[0.6] <= mean_length[1.0] and mean_length[0.0] < mean_length[1.0]
