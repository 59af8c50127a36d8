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
# Both run the decoder once per new word, which is where the KV cache comes in. In this lesson you
# write the cached attention step, greedy search, one step of beam search and the whole beam search,
# and decode with them.
#
# What decoding does shows only on a model that has learnt something, so the demonstrations decode
# the translator that ships with npformer, `npformer.pretrained("toy")`, trained on lesson 13's
# embedded English-to-French corpus, on real English sentences. Two demonstrations use untrained
# models instead, and say so: the KV-cache timing (a random model: the speed of a step does not
# depend on the weights) and the exhaustive search (a tiny model: exhaustive search needs a tiny
# vocabulary).

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

import npformer
from npformer import backend, models, ops, viz
from npformer.course import check
from npformer.data import detokenize, noun_phrase, pad_batch, pad_rows, sentence_pair, tokenize, toy_corpus
from npformer.data.toy_corpus import ADJECTIVES_AFTER, ADJECTIVES_BEFORE, KINDS, NOUNS, VERBS
from npformer.tasks.translation import Translator, decoding, greedy_decode, pretrained_record
from npformer.tasks.translation.decoding import length_penalty_factor
from npformer.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from npformer.tasks.translation import RunFolder

# %% [markdown]
# ## The KV cache
#
# Write $t = 1, \dots, T$ for the decoding steps of a translation of $T$ tokens. At step $t$ the
# decoder has $t$ positions (`<bos>` and the $t - 1$ words written so far) and reads the next word's
# distribution at the last one.
#
# **Without a cache**, each step re-runs the decoder on the whole prefix: the projections (and the
# feed-forward layers) of all $t$ positions again, and the attention of all $t$ queries over the
# $t$ keys. Summed over a sentence, that is $\sum_t t = T(T+1)/2$ positions through every layer,
# and $\sum_t t^2 = T(T+1)(2T+1)/6$ query-key products per layer and head.
#
# Much of that work was already done at the step before. A **KV cache** keeps, from one step to
# the next, the keys and values the decoder's self-attention computed in every layer, so that a
# step computes only what is new. Why that is allowed, and what a step must still compute, is this
# lesson's first exercise, below. (The cross-attention keys and values come from the source, which
# does not change from step to step: they are computed once per sentence, by
# `Transformer.start_decoding`.) The cell below counts the cost without a cache for the $T$ used
# here, then times npformer's decoder without and with its cache, on a small random model.

# %%
model = models.Transformer(models.TransformerConfig(1000, 1000, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                                                    dropout=0.0), seed=0).eval()
rng = np.random.default_rng(0)
src = backend.asarray(rng.integers(4, 1000, size=(32, 20)))
LENGTH = 24
T = LENGTH
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
print(f"T = {T}, without a cache: {T * (T + 1) // 2} positions through each layer, "
      f"{T * (T + 1) * (2 * T + 1) // 6} query-key products per layer and head")


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
    for _ in range(1 if QUICK else 3):  # the best of three runs, the least disturbed (one run in the quick run)
        start = time.perf_counter()
        result = decode(model, src, LENGTH)
        runs.append(time.perf_counter() - start)
    timings[name] = min(runs)
    print(f"{name:14s}: {timings[name] * 1000:7.1f} ms for {src.shape[0]} sentences x {LENGTH} tokens")
assert np.array_equal(decode_without_cache(model, src, 6), decode_with_cache(model, src, 6))
speedup = timings["without cache"] / timings["with KV cache"]
print(f"speed-up: {speedup:.1f}x (same tokens)")
# Timings depend on the machine's load, so only the direction is asserted, and only in the full run
# (the quick run's single timing of each leaves too small a gap to survive a busy machine).
if not QUICK:
    assert timings["with KV cache"] < timings["without cache"], "the cached decoder must be faster"

# %%
figure, axis = plt.subplots(figsize=(6, 3), constrained_layout=True)
axis.barh(list(timings), [1000 * t for t in timings.values()], color=["tab:gray", "tab:green"])
axis.set(xlabel="milliseconds", title=f"Greedy decoding of {LENGTH} tokens: {speedup:.1f}x faster with the cache")
figure.savefig(viz.figures_dir() / "14_kv_cache.png", dpi=110)

# %% [markdown]
# ### The cached step of one attention head
#
# Take one layer and one head at step $t$, counting positions from $0$. The new position's input
# gives, through the projections of lesson 8, a query $q_t$, a key $k_t$ and a value $v_t$, each of
# shape `(B, H, 1, Dh)`. The cache holds the keys and values that the earlier steps computed,
# $K_{<t} = [k_0; \dots; k_{t-1}]$ and $V_{<t}$, each of shape `(B, H, t, Dh)` (empty, $t = 0$, at
# the first step).
#
# The step must give what the decoder run on the whole prefix gives at position $t$: lesson 7's
# attention under lesson 6's causal mask $A$, whose row $t$ is
#
# $$\mathrm{out}_t = \sum_{j:\, A_{tj}} P_{tj}\, v_j, \qquad
# P_{tj} = \frac{\exp(q_t \cdot k_j / \sqrt{D_h})}{\sum_{l:\, A_{tl}} \exp(q_t \cdot k_l / \sqrt{D_h})}$$
#
# Work out, before writing any code:
#
# * which keys and values does the mask let $q_t$ see? Is the new position among them?
# * why do the $k_j$ and $v_j$ of an earlier position $j < t$, computed at step $j$, never change at
#   the later steps? (On which positions does position $j$'s input to this layer depend, in a
#   decoder whose every layer is causal?)
# * does the step need a mask of its own?
#
# ### Your turn
#
# Write `cached_attention_step(q, k_new, v_new, k_cache, v_cache) -> (out, k_cache, v_cache)`, in
# plain NumPy: `out`, position $t$'s output row, of shape `(B, H, 1, Dh)`, and the caches the next
# step needs, of shape `(B, H, t + 1, Dh)`, their positions in order along axis 2. The next cell
# checks all three on an empty cache (the first step), one head, one cached position, and
# `Dh = 1`.

# %%
def cached_attention_step(q, k_new, v_new, k_cache, v_cache):
    """One decoding step of one attention layer's heads: out (B, H, 1, Dh) and the caches (B, H, t + 1, Dh)."""
    ### BEGIN SOLUTION
    k_cache = np.concatenate([k_cache, k_new], axis=2)
    v_cache = np.concatenate([v_cache, v_new], axis=2)
    scores = q @ k_cache.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # (B, H, 1, t + 1)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v_cache, k_cache, v_cache
    ### END SOLUTION


# %%
print(check("cached_attention_step", cached_attention_step))

# %% [markdown] tags=["instructor"]
# **The answers.** The causal mask lets position $t$ see the keys $j \le t$: every earlier position
# and itself. So the step appends the new key and value at the end of the caches (axis 2),
# $K = [K_{<t}; k_t]$ and $V = [V_{<t}; v_t]$, of shape `(B, H, t + 1, Dh)`, and attends the one
# query over all $t + 1$ positions: $\mathrm{out} = \operatorname{softmax}(q_t K^\top / \sqrt{D_h})\, V$.
# It needs no mask: the cache holds only the past and the present, exactly what the mask lets
# position $t$ see. The earlier keys and values never change because position $j$'s input to every
# layer depends on positions $0, \dots, j$ only (every self-attention below is causal, and the
# feed-forward layers and the norms work position by position), so what step $j$ computed for it
# is what a later step would compute again. (npformer's `SelfAttention.forward_step` writes into
# buffers of `max_len` positions made once by `start_decoding`, rather than growing arrays, so that
# no step copies the cache; the arithmetic is the same.) With the cache, $T$ positions go through
# every layer, and step $t$ makes $t$ query-key products: $T(T+1)/2$ per sentence, layer and head.
# The cache removes the recomputation of the prefix; it does not make attention linear in the
# length.

# %% [markdown]
# Decoding a sequence one position at a time with the cached step must give, position by
# position, what causal attention over the whole sequence gives at once (lesson 7's
# `attention_forward` with lesson 6's causal mask). The cell below runs your step on 7 positions,
# once it passes:

# %%
passed = check("cached_attention_step", cached_attention_step, strict=False).passed  # yours, when it passes
step_rng = np.random.default_rng(14)
q_all, k_all, v_all = (step_rng.standard_normal((2, 4, 7, 8)) for _ in range(3))  # (B, H, T, Dh)
at_once = ops.attention_forward(q_all, k_all, v_all, ops.causal_mask(7))[0]
if passed:
    k_cache, v_cache = np.zeros((2, 4, 0, 8)), np.zeros((2, 4, 0, 8))
    outputs = []
    for t in range(7):
        out, k_cache, v_cache = cached_attention_step(q_all[:, :, t:t + 1], k_all[:, :, t:t + 1],
                                                      v_all[:, :, t:t + 1], k_cache, v_cache)
        outputs.append(out)
    print(f"your step, 7 positions: largest difference from causal attention "
          f"{np.abs(np.concatenate(outputs, axis=2) - at_once).max():.1e}; cache {k_cache.shape}")
    assert np.allclose(np.concatenate(outputs, axis=2), at_once, atol=1e-12) and k_cache.shape == (2, 4, 7, 8)
else:
    print("cached_attention_step does not pass yet: this comparison runs once it does")


# %% [markdown]
# ## Greedy search
#
# To write the searches without the details of a Transformer, treat the model as a function of the
# prefixes: `next_log_probs(prefixes)` takes a list of $n$ prefixes, each the list of tokens
# written so far (without `<bos>`: the empty list at the start), and returns an `(n, V)` array whose
# row $i$ holds $\log p(w \mid x, \text{prefix}_i)$ for every token $w$ of the vocabulary. The
# source $x$ is fixed inside the function. The cell below makes that function from a Transformer and
# one source sentence; it re-runs the decoder on the whole prefix at each call, like
# `decode_without_cache`: clear, not fast.
#
# Greedy search starts from the empty prefix and, at each step, appends the token with the highest
# log-probability. A translation ends at its first `<eos>`; `<eos>` is not part of the returned
# tokens. `max_len` caps the number of steps, `<eos>` included: a search that has written `max_len`
# tokens without `<eos>` stops there, and its translation is cut.
#
# ### Your turn
#
# Write `greedy_search(next_log_probs, max_len, eos) -> tokens`: the list of token ids chosen,
# without the `<eos>`. On a tie the first (smallest) id wins, as `np.argmax` does. The grader runs
# it on made-up models (a small vocabulary, a next-token distribution drawn from the prefix): one
# that ends at once with `<eos>` (the empty translation), one that never writes `<eos>` within
# `max_len`, and `max_len = 1`.

# %%
def next_log_probs_of(model, source):
    """``next_log_probs(prefixes) -> (n, V)`` of ``model`` for one source sentence ``source (Ts,)``."""
    memory, src_mask = model.encode(backend.asarray(np.asarray(source)[None]))
    vocab = model.config.tgt_vocab

    def next_log_probs(prefixes):
        rows = []
        for prefix in prefixes:  # one decoder run per prefix, over the whole prefix
            ids = backend.asarray(np.array([[BOS_ID, *[int(token) for token in prefix]]]))
            logits = backend.to_numpy(model.decode(ids, memory, src_mask)[0, -1]).astype(np.float64)
            logits -= logits.max()
            rows.append(logits - np.log(np.exp(logits).sum()))  # log-softmax
        return np.array(rows).reshape(len(rows), vocab)

    return next_log_probs


def greedy_search(next_log_probs, max_len, eos):
    """The most probable next token at each step, until <eos> or max_len tokens."""
    ### BEGIN SOLUTION
    tokens = []
    for _ in range(max_len):
        token = int(np.argmax(next_log_probs([tokens])[0]))
        if token == eos:
            break
        tokens.append(token)
    return tokens
    ### END SOLUTION


# %%
print(check("greedy_search", greedy_search))

# %% [markdown]
# ### A trained translator
#
# npformer ships a trained translator: `npformer.pretrained("toy")` loads the run folder of the
# default `npformer train` (the `tiny` preset, 900 steps on the toy corpus of lesson 13), with its
# model in eval mode, its two vocabularies and its test split; `pretrained_record("toy")` holds the
# test BLEU it reached when it was built. The cell below loads it and prints its size and that BLEU.
#
# On this translator your greedy search must write the tokens of npformer's `greedy_decode`, which
# runs every sentence of the batch at once on the KV cache. The comparison uses a float64 copy of the
# translator (the same weights, through `load_state_dict`), so that the two ways of computing the
# log-probabilities, the whole prefix through `model.decode` in `next_log_probs_of` and one cached
# step in `decode_step`, agree far below any gap between two tokens. The sentences are the first
# four of the corpus's test split (sentences kept out of training); each translation is printed
# beside its reference.

# %%
run = npformer.pretrained("toy")
record = pretrained_record("toy")
print(f"pretrained toy translator: {run.model.num_params():,} parameters, {len(run.src_vocab)} English and "
      f"{len(run.tgt_vocab)} French token ids; test BLEU when built: {record['bleu_greedy']:.1f} greedy, "
      f"{record['bleu_beam']:.1f} with a beam of {record['beam_size']}")
toy64 = models.Transformer(run.model.config, dtype=np.float64).eval()
toy64.load_state_dict({name: value.astype(np.float64) for name, value in run.model.state_dict().items()})
test_pairs = RunFolder(run.folder).split("test")  # (English, French reference) pairs
MAX_LEN = 24  # the longest translation a search may write, <eos> included


def source_ids(english):
    """The translator's source ids of one English sentence."""
    return run.src_vocab.encode(tokenize(english, "en"))


def french(ids):
    """The French sentence that a list of target ids spells."""
    return detokenize(run.tgt_vocab.decode(ids), "fr")


examples = test_pairs[:4]
example_src = backend.asarray(pad_rows([source_ids(english) for english, _ in examples]))
passed = check("greedy_search", greedy_search, strict=False).passed  # yours, when it passes
if passed:
    yours = [[int(token) for token in greedy_search(next_log_probs_of(toy64, source_ids(english)), MAX_LEN, EOS_ID)]
             for english, _ in examples]
else:
    yours = greedy_decode(toy64, example_src, MAX_LEN)
print(f"{'your greedy_search' if passed else 'greedy_decode'} on the pretrained translator:")
for (english, reference), tokens in zip(examples, yours):
    print(f"  {english} -> {french(tokens)} ({'equals' if french(tokens) == reference else 'differs from'} "
          "the reference)")
assert yours == greedy_decode(toy64, example_src, MAX_LEN)

# %% [markdown]
# ## Why greedy search is not optimal
#
# The model scores a whole translation $y = (y_1, \dots, y_T)$ by the chain rule:
#
# $$\log p(y \mid x) = \sum_{t=1}^{T} \log p(y_t \mid x, y_1, \dots, y_{t-1}).$$
#
# Greedy search maximises each term in turn, given the words it has already chosen. But the first
# word also decides which distributions the later terms come from, and greedy never weighs that.
# Take a vocabulary of two words, $a$ and $b$, plus `<eos>`, and `max_len` $= 2$:
#
# | first word | $p$ | the best second token after it | $p$ | the whole translation | $p$ |
# |---|---|---|---|---|---|
# | $a$ | 0.6 | $a$ (also $b$ 0.3, `<eos>` 0.3) | 0.4 | $a\,a$ (cut at `max_len`) | $0.24$ |
# | $b$ | 0.4 | `<eos>` | 0.9 | $b$ `<eos>` | $0.36$ |
#
# Greedy takes $a$ (0.6 > 0.4) and ends with probability 0.24; the best translation starts with the
# less probable word and has probability 0.36. A locally best word can lead where every
# continuation is uncertain.
#
# The exact best is a search over every translation: $V^T$ of them for $T$ tokens, which the cell
# below prints for the pretrained translator's French vocabulary and twelve tokens: out of reach.
# On a tiny vocabulary it is possible, and it shows how often greedy misses. The cell makes a tiny
# untrained model with a target vocabulary of 6 ids (the special ids act as words here, except
# `<pad>`, made impossible: `model.decode` reads id 0 in a prefix as padding and hides it, while the
# KV-cached `decode_step` does not, so a model that wrote `<pad>` would be read two ways), searches
# every translation of up to 4 tokens for 20 source sentences (10 in the quick run), and scores each
# translation by $\log p(y \mid x) / \mathrm{lp}(y)$, the score beam search uses below ($\mathrm{lp}$
# is GNMT's length penalty with $\alpha = 0.6$, the subject of a section below; it does not change
# the argument). Greedy search is your `greedy_search` when it passes, otherwise npformer's
# `greedy_decode`.

# %%
print(f"every translation of 12 tokens over the pretrained translator's {len(run.tgt_vocab)} French ids: "
      f"{len(run.tgt_vocab)}^12 = {float(len(run.tgt_vocab)) ** 12:.1e}")
tiny = models.Transformer(models.TransformerConfig(50, 6, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0),
                          seed=2, dtype=np.float64).eval()
tiny.out_proj.b[PAD_ID] = -1e4
tiny_sources = np.random.default_rng(1).integers(4, 50, size=(10 if QUICK else 20, 6))
TINY_LEN, ALPHA = 4, 0.6


def exhaustive_search(next_log_probs, max_len, alpha, eos):
    """Every translation of up to max_len tokens (ended by <eos>, or cut at max_len): the best
    (tokens, log p / lp). One call of next_log_probs per prefix: sum of V' ** t for t < max_len."""
    best = ([], -np.inf)

    def extend(prefix, log_p):
        nonlocal best
        for token, token_log_p in enumerate(next_log_probs([prefix])[0]):
            if token == eos or len(prefix) + 1 == max_len:  # a translation is complete
                tokens = prefix if token == eos else prefix + [token]
                score = (log_p + token_log_p) / length_penalty_factor(len(prefix) + 1, alpha)
                if score > best[1]:
                    best = (tokens, score)
            else:
                extend(prefix + [token], log_p + token_log_p)

    extend([], 0.0)
    return best


def translation_score(next_log_probs, tokens, max_len, alpha, eos):
    """log p(y | x) / lp(y) of one translation; <eos> ends it unless it was cut at max_len."""
    steps = list(tokens) + ([eos] if len(tokens) < max_len else [])
    log_p = sum(next_log_probs([steps[:t]])[0, token] for t, token in enumerate(steps))
    return log_p / length_penalty_factor(len(steps), alpha)


passed = check("greedy_search", greedy_search, strict=False).passed  # yours, when it passes
best, greedy_tokens, greedy_scores = {}, {}, {}
for i, row in enumerate(tiny_sources):
    next_log_probs = next_log_probs_of(tiny, row)
    best[i] = exhaustive_search(next_log_probs, TINY_LEN, ALPHA, EOS_ID)
    greedy_tokens[i] = [int(token) for token in (greedy_search(next_log_probs, TINY_LEN, EOS_ID) if passed
                                                 else greedy_decode(tiny, backend.asarray(row[None]), TINY_LEN)[0])]
    greedy_scores[i] = translation_score(next_log_probs, greedy_tokens[i], TINY_LEN, ALPHA, EOS_ID)
missed = [i for i in best if greedy_scores[i] < best[i][1] - 1e-12]
print(f"greedy misses the best translation on {len(missed)} of {len(best)} sources")
i = max(missed, key=lambda i: len(best[i][0]))  # the longest best translation: the clearest example
print(f"source {i}: greedy writes {greedy_tokens[i]}, score {greedy_scores[i]:.3f}; "
      f"the best is {best[i][0]}, score {best[i][1]:.3f}")
assert missed and all(greedy_scores[i] <= best[i][1] + 1e-12 for i in best)

# %% [markdown]
# ## Beam search: one step
#
# Beam search keeps the $k$ best partial translations, the **beam** ($k$ is the beam size), each
# with its **score** $s_i = \log p(y^{(i)} \mid x)$, the sum of its tokens' log-probabilities. One
# step extends every hypothesis $i$ of the beam by every token $w$ of the vocabulary; by the chain
# rule the candidate's score is
#
# $$s_{(i, w)} = s_i + \log p(w \mid x, y^{(i)}),$$
#
# a $k \times V$ matrix, the column of scores plus the matrix of next-token log-probabilities
# (broadcasting, lesson 2). The step keeps the $k$ best of these $kV$ candidates, wherever they come
# from: two, or all $k$, may extend the same hypothesis, and a hypothesis with no child among them
# is dropped. Flatten the matrix row by row; the candidate at flat index $j$ extends hypothesis
# $j \,/\!/\, V$ (its **parent**) with token $j \bmod V$.
#
# This **pruning** is what keeps the search affordable, $kV$ candidates and $k$ decoder rows per
# step instead of $V^T$ translations, and it is also why beam search is not exact: a prefix pruned at
# step $t$ never comes back, even if its continuations would have been the most probable (the
# prefix $b$ of the table above, with a beam of 1). With $k = 1$ the step is greedy search; a wider
# beam keeps more of the prefixes that greedy would have dropped.
#
# Two details make the step well defined:
#
# * **ties** go to the candidate listed first in the flattened matrix: the earlier beam, then the
#   smaller token id (a *stable* sort of `-candidates`; npformer's `decoding.beam_search` sorts its
#   candidates the same way);
# * **the first step** has one hypothesis, the empty prefix. npformer starts with $k$ copies of it,
#   the first with score $0$ and the others with $-\infty$, so that all rows have the same shape;
#   were all $k$ scores 0, the $k$ copies would offer the same candidates $k$ times and the beam
#   would fill with duplicates.
#
# npformer's `decoding.beam_search` runs a batch of sentences and all their beams at once on the
# KV cache: after each step every new hypothesis takes its parent's cache
# (`DecoderCache.select(parents)`). It also ranks $k \times k$ candidates instead of $k \times V$: a
# token outside its beam's own $k$ best cannot be among the $k$ best candidates (the $k$ better
# tokens of the same beam rank above it), so each beam offers only its $k$ best
# (`top_k_log_probs`).
#
# ### Your turn
#
# Write `beam_step(scores, log_probs, beam_size) -> (scores, parents, tokens)`: `scores (B,)` the
# beam's scores (some may be $-\infty$), `log_probs (B, V)` the next-token log-probabilities of each
# hypothesis; return the `beam_size` best candidates' scores, parent indices and token ids, best
# first, each of shape `(beam_size,)` (`beam_size` $\le BV$). The grader compares them exactly. It
# tries ties (two beams with equal scores and equal rows), a step whose 3 best candidates all extend
# beam 0, a first step with two beams at $-\infty$, and `beam_size = 1`.

# %%
def beam_step(scores, log_probs, beam_size):
    """The beam_size best (score, parent, token) among every hypothesis extended by every token."""
    ### BEGIN SOLUTION
    candidates = (scores[:, None] + log_probs).reshape(-1)  # row by row: index = parent * V + token
    best = np.argsort(-candidates, kind="stable")[:beam_size]
    vocab = log_probs.shape[1]
    return candidates[best], best // vocab, best % vocab
    ### END SOLUTION


# %%
print(check("beam_step", beam_step))

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
# Where does the penalty change what the pretrained translator writes? Only where it hesitates
# between finished translations of different lengths with close log-probabilities. To make it
# hesitate, give it a construction it never saw. The toy grammar puts `a` or `an` before objects
# ("the boy sees a white horse.") but never before a subject. The first cell below regenerates the
# corpus the translator was trained on (`toy_corpus` with the run's seed, which gives the shipped test
# split: asserted) and counts the training and validation sentences with `a` or `an` anywhere and
# before the subject. It then makes sentences with an indefinite subject ("a big bird is blue.") with
# the grammar's own functions, `noun_phrase(noun, adjective, determiner="a")` and
# `sentence_pair(kind, subject, ...)`, which build the French reference too: for every noun, with
# every adjective or none, one sentence of each of the grammar's six kinds, with the verb, the object
# and the adjective after "is" drawn by a seeded generator. These **made-up sentences** use only words
# the translator knows.

# %%
splits = toy_corpus(n_train=run.config["data"]["train"], seed=run.config["train"]["seed"])
assert splits.test == test_pairs, "toy_corpus with the run's seed must give the shipped test split"


def subject_is_indefinite(english):
    """Whether the subject of a sentence of the grammar starts with a or an."""
    words = tokenize(english, "en")
    return words[{"do": 1, "does": 1, "where": 2}.get(words[0], 0)] in ("a", "an")


seen = [english for english, _ in splits.train + splits.valid]
with_a = sum(bool({"a", "an"} & set(tokenize(english, "en"))) for english in seen)
before_subject = sum(subject_is_indefinite(english) for english in seen)
print(f"training and validation sentences: {len(seen)}; with a or an: {with_a}; with a or an before the "
      f"subject: {before_subject}")
assert with_a > 0 and before_subject == 0

ADJECTIVES = [*ADJECTIVES_AFTER, *ADJECTIVES_BEFORE]
made_rng = np.random.default_rng(1)
made_up = []  # (English, French reference)
for noun, *_ in NOUNS:
    for adjective in [None, *ADJECTIVES]:
        subject = noun_phrase(noun, adjective, determiner="a")
        for kind in KINDS:
            if kind in ("statement", "negation", "question"):
                obj = noun_phrase(NOUNS[made_rng.integers(len(NOUNS))][0],
                                  [None, *ADJECTIVES][made_rng.integers(len(ADJECTIVES) + 1)],
                                  determiner="a" if made_rng.random() < 0.4 else "the")
                english, french_tokens, _ = sentence_pair(kind, subject, VERBS[made_rng.integers(len(VERBS))][0], obj)
            elif kind == "where":
                english, french_tokens, _ = sentence_pair(kind, subject)
            else:  # "is", "is_not"
                english, french_tokens, _ = sentence_pair(kind, subject,
                                                          adjective=ADJECTIVES[made_rng.integers(len(ADJECTIVES))])
            made_up.append((detokenize(english, "en"), detokenize(french_tokens, "fr")))
assert all(subject_is_indefinite(english) for english, _ in made_up)
assert all(UNK_ID not in source_ids(english) for english, _ in made_up), "only words the translator knows"
made_src = backend.asarray(pad_rows([source_ids(english) for english, _ in made_up]))
print(f"{len(made_up)} made-up sentences, e.g.", "; ".join(f"{e} -> {f}" for e, f in made_up[:2]))

# %% [markdown]
# The cell below runs npformer's beam search (a beam of 4) on the made-up sentences with
# $\alpha = 0$, $0.6$ and $1$, counts the sentences on which $\alpha = 0$ and $\alpha = 1$ choose
# differently, and takes the shortest of them. In npformer's beam search the penalty enters only the
# final choice: the beam is pruned by the raw $\log p$ at every step, so the three runs end with the
# same beam, and the translations they choose are all in it. The cell scores the two chosen with
# $\alpha = 0$ and $\alpha = 1$ by their $\log p(y \mid x)$, summed over their tokens and `<eos>` in
# one teacher-forced forward pass (`sequence_log_probs`), and divides by your `length_penalty` when it
# passes (npformer's `length_penalty_factor` otherwise): at each $\alpha$ the winner is the one that
# beam search chose (asserted). The translation chosen with $\alpha = 1$ is the longer (asserted: a
# larger $\alpha$ can only favour a longer translation); whether each equals the reference is printed.

# %%
def sequence_log_probs(model, src, hypotheses):
    """log p(y | x) of each hypothesis (ids without <eos>, which is added and counted) given its
    source row of ``src (N, Ts)``: one forward pass with the hypotheses as the decoder's input."""
    batch = pad_batch([([PAD_ID], [BOS_ID, *tokens, EOS_ID]) for tokens in hypotheses])
    with model.evaluating():
        logits = backend.to_numpy(model.forward(src, backend.asarray(batch.tgt_in))).astype(np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))  # log-softmax
    picked = np.take_along_axis(log_probs, batch.tgt_out[..., None], axis=-1)[..., 0]
    return (picked * (batch.tgt_out != PAD_ID)).sum(axis=-1)


passed = check("length_penalty", length_penalty, strict=False).passed  # yours, when it passes
penalty = length_penalty if passed else length_penalty_factor
ALPHAS = (0.0, 0.6, 1.0)
chosen = {alpha: decoding.beam_search(run.model, made_src, beam_size=4, max_len=MAX_LEN, length_penalty=alpha)
          for alpha in ALPHAS}
assert max(len(tokens) for tokens in chosen[0.0] + chosen[1.0]) < MAX_LEN, "every translation ends with <eos>"
changed = [i for i in range(len(made_up)) if chosen[0.0][i] != chosen[1.0][i]]
print(f"alpha = 0 and alpha = 1 choose different translations for {len(changed)} of {len(made_up)} made-up sentences")
i = min(changed, key=lambda i: len(made_up[i][0]))
english, reference = made_up[i]
pair = {"alpha = 0's": chosen[0.0][i], "alpha = 1's": chosen[1.0][i]}
log_p = dict(zip(pair, sequence_log_probs(run.model, backend.asarray(pad_rows([source_ids(english)] * 2)),
                                          list(pair.values()))))
print(f"{english} (reference: {reference})")
for name, tokens in pair.items():
    print(f"  {name} choice: '{french(tokens)}', |y| = {len(tokens) + 1} with <eos>, log p = {log_p[name]:.3f}, "
          f"{'equals' if french(tokens) == reference else 'differs from'} the reference")
for alpha in ALPHAS:
    scores = {name: log_p[name] / penalty(len(tokens) + 1, alpha) for name, tokens in pair.items()}
    winner = max(scores, key=scores.get)
    print(f"alpha = {alpha}: " + ", ".join(f"{name} {score:.3f}" for name, score in scores.items()) + f" -> {winner}")
    assert chosen[alpha][i] not in pair.values() or pair[winner] == chosen[alpha][i]
assert len(pair["alpha = 1's"]) > len(pair["alpha = 0's"]), "a larger alpha can only favour a longer translation"

# %% [markdown]
# ## Beam search: the whole search
#
# The step is repeated until the beam has finished, with these rules (those of npformer's
# `decoding.beam_search`):
#
# 1. The beam starts as one hypothesis, the empty prefix, with score 0.
# 2. A candidate whose token is `<eos>` is a **finished** hypothesis: `<eos>` counts in its length
#    $|y|$ but is not one of its tokens.
# 3. A finished hypothesis stays in the beam with its score, and competes for the $k$ places with
#    the new candidates at every later step; it is not extended. (npformer gives it one candidate,
#    itself, at no cost: a row of log-probabilities that is $0$ at one token, `<pad>` there and
#    `<eos>` in the solution below, and $-\infty$ elsewhere.) A finished hypothesis that falls out of
#    the $k$ best is gone, as any other.
# 4. The search stops when every hypothesis in the beam has finished, or after `max_len` steps; a
#    hypothesis still going then is cut, with $|y| =$ `max_len`.
# 5. The final choice is the hypothesis of the beam with the highest $\log p(y \mid x) /
#    \mathrm{lp}(y)$; on a tie, the first.
#
# Each step calls the model only on the hypotheses still going, and at the first step the beam has
# one hypothesis, so it can hold fewer than $k$ candidates whose score is finite: keep only those.
# When the beam is wide enough to hold every hypothesis at every step, nothing is ever pruned and
# the search is exhaustive: it must then return the exact best.
#
# ### Your turn
#
# Write `beam_search(next_log_probs, beam_size, max_len, alpha, eos) -> tokens` with the rules
# above: the tokens of the chosen hypothesis, without `<eos>`. Use your `beam_step` for the step
# (rule 3's row for the finished hypotheses, then drop the candidates at $-\infty$) and your
# `length_penalty` for the final choice. The grader runs it on made-up models: a case where
# greedy's answer is not the best, a beam of 15 that holds every hypothesis of up to 3 tokens of a
# 3-id vocabulary (the exact best), $\alpha = 1$ where the length penalty changes the choice, and a
# beam of 1 (greedy search).

# %%
def beam_search(next_log_probs, beam_size, max_len, alpha, eos):
    """The beam_size best hypotheses at each step; the best by log p / lp(length) at the end."""
    ### BEGIN SOLUTION
    hypotheses = [[]]  # the tokens of each hypothesis of the beam, without <eos>
    scores = np.zeros(1)  # their log p(y | x)
    finished = np.zeros(1, dtype=bool)
    for _ in range(max_len):
        if finished.all():
            break
        rows = np.asarray(next_log_probs([h for h, done in zip(hypotheses, finished) if not done]))
        log_probs = np.full((len(hypotheses), rows.shape[1]), -np.inf)
        log_probs[~finished] = rows
        log_probs[finished, eos] = 0.0  # a finished hypothesis stays as it is, at no cost
        new_scores, parents, tokens = beam_step(scores, log_probs, beam_size)
        real = np.isfinite(new_scores)  # fewer than beam_size real candidates (the first steps)
        new_scores, parents, tokens = new_scores[real], parents[real], tokens[real]
        hypotheses = [hypotheses[p] if finished[p] or t == eos else hypotheses[p] + [int(t)]
                      for p, t in zip(parents, tokens)]
        scores, finished = new_scores, finished[parents] | (tokens == eos)
    lengths = np.array([len(h) + 1 if done else len(h) for h, done in zip(hypotheses, finished)])  # <eos> counts
    return hypotheses[int(np.argmax(scores / length_penalty(lengths, alpha)))]
    ### END SOLUTION


# %%
print(check("beam_search", beam_search))

# %% [markdown]
# Back to the tiny untrained model and its sources. With the beam as wide as the number of
# hypotheses of up to 4 tokens ($1 + 5 + 5^2 + 5^3$ finished ones and $5^4$ still going: 781), beam
# search must find the exhaustive search's best on every source; with narrower beams, count how often
# it does. A beam of 1 is greedy search, so it misses where greedy did; a wider beam keeps more of the
# prefixes that lead to the best, but only a beam that prunes nothing is sure to find it. The cell
# runs your `beam_search` when it passes, otherwise npformer's `decoding.beam_search`:

# %%
passed = check("beam_search", beam_search, strict=False).passed  # yours, when it passes


def search(model, source, beam_size, max_len, alpha=0.6):
    """Beam search of one source sentence: yours when it passes, else npformer's."""
    if passed:
        tokens = beam_search(next_log_probs_of(model, source), beam_size, max_len, alpha, EOS_ID)
        return [int(token) for token in tokens]
    return decoding.beam_search(model, backend.asarray(np.asarray(source)[None]), beam_size=beam_size,
                                   max_len=max_len, length_penalty=alpha)[0]


WIDE = 1 + 5 + 5**2 + 5**3 + 5**4
found = {}
for beam_size in (1, 2, 4, WIDE):
    found[beam_size] = sum(search(tiny, row, beam_size, TINY_LEN, ALPHA) == best[i][0]
                           for i, row in enumerate(tiny_sources))
    print(f"beam of {beam_size:3d}: the best translation on {found[beam_size]:2d} of {len(tiny_sources)} sources")
assert found[WIDE] == len(tiny_sources), "a beam that holds every hypothesis must find the exact best"
assert found[1] == len(tiny_sources) - len(missed), "a beam of 1 is greedy search"

# %% [markdown]
# On the pretrained translator (its float64 copy `toy64`, as for greedy search), the search must
# choose the same translations as npformer's `decoding.beam_search`, which runs all the sentences and
# their beams at once on the KV cache. The cell below takes the made-up sentences on which npformer's
# greedy search and beam search (a beam of 4, $\alpha = 0.6$) choose differently, and runs the search
# on the first three of them:

# %%
greedy_made = greedy_decode(run.model, made_src, MAX_LEN)
differ = [i for i in range(len(made_up)) if greedy_made[i] != chosen[0.6][i]]
shown = differ[:3]
shown_src = backend.asarray(pad_rows([source_ids(made_up[i][0]) for i in shown]))
yours = [search(toy64, source_ids(made_up[i][0]), 4, MAX_LEN) for i in shown]
assert yours == decoding.beam_search(toy64, shown_src, beam_size=4, max_len=MAX_LEN)
for i, greedy_tokens, beam_tokens in zip(shown, greedy_decode(toy64, shown_src, MAX_LEN), yours):
    print(f"{made_up[i][0]}\n  greedy_decode:  {french(greedy_tokens)}\n"
          f"  {'your beam_search' if passed else 'npformer beam_search'}: {french(beam_tokens)}")
    assert greedy_tokens != beam_tokens

# %% [markdown]
# ## Greedy against beam
#
# Beam search explores more candidates than greedy search, so it can find translations to which
# the model gives a higher score; it keeps only $k$ of them at each step, so it is not guaranteed
# to. Whether that gives better translations depends on the model (`npformer evaluate` reports the
# BLEU of both). First the corpus's test split, through the `Translator` of lesson 13 (strings in,
# strings out, as `npformer translate`), with greedy search and a beam of 4: the cell counts the
# sentences on which the two searches differ, and those on which each equals the reference.

# %%
translator = Translator.from_run(run)
compared = test_pairs[:250] if QUICK else test_pairs
test_english = [english for english, _ in compared]
by_greedy = translator.translate(test_english, beam_size=1)
by_beam = translator.translate(test_english, beam_size=4, length_penalty=0.6)
test_differ = sum(g != b for g, b in zip(by_greedy, by_beam))
print(f"test split: greedy and beam 4 differ on {test_differ} of {len(compared)} sentences; equal to the "
      f"reference: greedy {sum(g == f for g, (_, f) in zip(by_greedy, compared))}, "
      f"beam {sum(b == f for b, (_, f) in zip(by_beam, compared))}")
assert test_differ == 0

# %% [markdown]
# On this easy corpus the two searches never differ: the count the cell prints is zero (asserted).
# They do differ on the made-up sentences, whose indefinite subject the translator never saw. The
# cell below runs both searches on all of them (npformer's, on the KV cache; a beam of 4 and
# $\alpha = 0.6$), scores every translation by its $\log p(y \mid x)$ (`sequence_log_probs`) and by
# beam search's final score $\log p(y \mid x) / \mathrm{lp}(y)$, and counts, among the sentences on
# which the searches differ, those on which beam's score is the higher and those on which each
# translation equals the reference. Then it prints one sentence of each kind: greedy right and beam
# wrong, beam right and greedy wrong, both wrong (the first of each, where there is one).

# %%
hypotheses = {"greedy": greedy_made, "beam": chosen[0.6]}
assert max(len(tokens) for tokens in greedy_made) < MAX_LEN, "every translation ends with <eos>"
log_p = {name: sequence_log_probs(run.model, made_src, found) for name, found in hypotheses.items()}
score = {name: log_p[name] / length_penalty_factor(np.array([len(tokens) + 1 for tokens in found]), 0.6)
         for name, found in hypotheses.items()}
right = {name: np.array([french(tokens) == reference for tokens, (_, reference) in zip(found, made_up)])
         for name, found in hypotheses.items()}
d = np.array(differ)
print(f"made-up sentences: greedy and beam 4 differ on {len(differ)} of {len(made_up)}; equal to the reference: "
      f"greedy {right['greedy'].sum()}, beam {right['beam'].sum()}")
print(f"where they differ: beam's score is the higher on {(score['beam'][d] > score['greedy'][d]).sum()}, "
      f"its log p on {(log_p['beam'][d] > log_p['greedy'][d]).sum()}; right: greedy {right['greedy'][d].sum()}, "
      f"beam {right['beam'][d].sum()}, neither {(~right['greedy'][d] & ~right['beam'][d]).sum()}")
kinds = {"greedy right, beam wrong": right["greedy"] & ~right["beam"],
         "beam right, greedy wrong": right["beam"] & ~right["greedy"],
         "both wrong": ~right["greedy"] & ~right["beam"]}
for kind, where in kinds.items():
    firsts = [i for i in differ if where[i]]
    if firsts:
        i = firsts[0]
        print(f"{kind}: {made_up[i][0]} (reference: {made_up[i][1]})")
        for name in hypotheses:
            print(f"  {name:6s} {french(hypotheses[name][i])}  log p {log_p[name][i]:.3f}, score {score[name][i]:.3f}")
assert differ and np.all(score["beam"] >= score["greedy"] - 1e-6), "beam's score is at least greedy's"
assert np.all(score["beam"][d] > score["greedy"][d]), "where they differ, beam's score is the higher"
assert right["greedy"][d].sum() > right["beam"][d].sum() > 0

# %% [markdown]
# Beam search did its job: on every made-up sentence its final score is at least greedy's
# (asserted; beam search does not guarantee it in general), and where the two differ it is higher.
# Yet where they differ, greedy's translation equals the reference more often than beam's (the
# counts above, asserted). Two kinds of error meet here:
#
# * a **search error**: the model gives the reference a higher score ($\log p / \mathrm{lp}$, the score
#   beam search ranks by) than the translation the search returned. Where beam is right and greedy
#   wrong, greedy made one: a better search fixes it.
# * a **model error**: the model gives a wrong translation a higher score than the reference. Where
#   greedy is right and beam wrong, beam's wrong translation scores higher than greedy's, which is the
#   reference: the model prefers the wrong one, and a better search only finds it more surely.
#
# On a construction it never saw, this translator makes model errors, and there a wider search does
# not help: the remedy is the model's (more data, or data with that construction), not the search's.

# %% [markdown]
# ## Exercises
#
# 1. Count, as above, the positions through each layer and the query-key products per layer and
#    head with the cache, and the ratios of the two decoders' counts. Time the two decoders for 8, 24
#    and 64 tokens. How does the speed-up grow with length? Compare it with the ratios. Auto-graded
#    part: `kv_cache_counts(length)` below returns the two counts with the cache and the two ratios
#    (the count without the cache over the count with it); the timings and the comparison stay for
#    the rubric.
# 2. Beam search with a beam of one, `decoding.beam_search(run.model, made_src, beam_size=1,
#    max_len=MAX_LEN)`, must equal greedy search, `greedy_decode(run.model, made_src, MAX_LEN)`, on the
#    pretrained translator and the made-up sentences. Check it.
# 3. Implement sampling with a temperature $\tau$: replace `argmax` with a draw from
#    $\operatorname{softmax}(z / \tau)$ of the logits $z$. Auto-graded part: one step's draw for a
#    batch, `sample_with_temperature(logits, temperature, u)` below: `logits` `(B, V)`, one uniform
#    draw `u[b]` in $(0, 1)$ per row, and row $b$'s token is the first whose cumulative probability
#    exceeds `u[b]` (the grader tries $\tau$ from $10^{-8}$ to $3$, and logits near 1000); the decoder
#    that calls it at every step stays for the rubric.
# 4. The length-penalty section ran `decoding.beam_search` on the made-up sentences with the argument
#    `length_penalty` set to $0$, $0.6$ and $1$ (`chosen`). How does the mean length of the chosen
#    translations change with $\alpha$, and why? On how many sentences does the choice change at all?
#    Auto-graded part: `length_penalty_choices(log_probs, lengths, alphas)` below makes the final
#    choice from each sentence's finished hypotheses, `log_probs` and `lengths` `(N, K)` (lengths
#    with `<eos>`, as `length_penalty` reads them), at each $\alpha$ of `alphas`, and returns the
#    mean length of the chosen hypotheses at each $\alpha$ and the number of sentences whose choice at
#    the last $\alpha$ differs from the one at the first; the why stays for the rubric.

# %%
def kv_cache_counts(length):
    """Question 1: (positions, products, positions_ratio, products_ratio) for a translation of T = length tokens."""
    ### BEGIN SOLUTION
    positions_without, products_without = length * (length + 1) // 2, length * (length + 1) * (2 * length + 1) // 6
    positions, products = length, length * (length + 1) // 2  # one new position per step, t keys at step t
    return positions, products, positions_without / positions, products_without / products
    ### END SOLUTION


# %%
print(check("kv_cache_counts", kv_cache_counts))


# %%
def sample_with_temperature(logits, temperature, u):
    """Question 3: tokens (B,), row b's drawn from softmax(logits[b] / temperature) by the uniform draw u[b]."""
    ### BEGIN SOLUTION
    z = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(z - z.max(axis=-1, keepdims=True))  # the row maximum subtracted: no overflow, same softmax
    cumulative = np.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    cumulative /= cumulative[:, -1:]
    return (cumulative <= np.asarray(u)[:, None]).sum(axis=-1)
    ### END SOLUTION


# %%
print(check("sample_with_temperature", sample_with_temperature))


# %%
def length_penalty_choices(log_probs, lengths, alphas):
    """Question 4: (mean_lengths (A,), changed): the final choice among finished hypotheses at each alpha."""
    ### BEGIN SOLUTION
    rows = np.arange(len(lengths))
    chosen = [np.argmax(log_probs / ((5 + lengths) / 6) ** alpha, axis=-1) for alpha in alphas]
    mean_lengths = np.array([lengths[rows, best].mean() for best in chosen])
    return mean_lengths, int((chosen[0] != chosen[-1]).sum())
    ### END SOLUTION


# %%
print(check("length_penalty_choices", length_penalty_choices))


# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below, on the random model and the 32 sources of the timing section.) The speed-up
#    grows steadily with the length, because the uncached decoder's work per step grows with $t$ while
#    the cached step's hardly does.
#    With the cache, $T$ positions go through each layer and $T(T+1)/2$ query-key products are made
#    per layer and head, so the counted ratios are $(T + 1)/2$ for positions and $(2T + 1)/3$ for
#    query-key products. The speed-up stays far below both: a cached step works on one position per sentence, and such small matrix products are
#    dominated by fixed costs (Python, one call per op and per layer) that the counts ignore. Full
#    marks: the three speed-ups, that they grow with $T$, and why they fall short of the counts.
# 2. (Checked below.) They are equal. With $k = 1$ each step keeps the one best continuation of the one
#    beam, which is greedy's argmax, and at the end there is a single hypothesis for the length
#    penalty to rank. (`decoding.beam_search` has no default `max_len`: the call needs it.)
# 3. (Reference code below.) At each step take the logits $z$ of `decode_step`, compute
#    $\operatorname{softmax}(z / \tau)$ in float64 with the row maximum subtracted before `exp`, and draw
#    one token per row from a seeded generator. Checks: as $\tau \to 0$ the draw becomes greedy
#    decoding (asserted); $\tau = 1$ samples the model's own distribution, and $\tau > 1$ flattens it.
# 4. (Printed below, on the pretrained translator and the made-up sentences.) With $\alpha = 0$ the
#    score is the raw $\log p(y \mid x)$: every token adds a negative term, so among its finished
#    hypotheses beam search picks short ones. With $\alpha = 1$ the score is divided by
#    $(5 + |y|)/6$, close to a per-token average, so length is no longer punished and the chosen
#    translations get longer or stay the same: the mean length does not fall as $\alpha$ grows
#    (asserted). The three runs end with the same beam, so $\alpha$ only moves the final choice among
#    its finished hypotheses, and a larger $\alpha$ can only move it to a longer one. The choice changes
#    on few of the sentences (the count is printed): on the others, no finished hypothesis of another
#    length comes close enough in log-probability for the penalty to overturn the choice. A full answer
#    says that the penalty matters only when finished hypotheses of different lengths have close
#    log-probabilities.

# %% tags=["instructor"]
speedups = {}
for length in (8, 24, 64):
    best = {}
    for name, decode in (("without cache", decode_without_cache), ("with KV cache", decode_with_cache)):
        runs = []
        for _ in range(1 if QUICK else 2):
            start = time.perf_counter()
            decode(model, src, length)
            runs.append(time.perf_counter() - start)
        best[name] = min(runs)
    speedups[length] = best["without cache"] / best["with KV cache"]
    print(f"answer 1: T = {length:2d}: speed-up {speedups[length]:4.1f}x; counted ratios: positions "
          f"{(length + 1) / 2:4.1f}, query-key products {(2 * length + 1) / 3:4.1f}")
if not QUICK:  # timings: asserted only in the full run, as above
    assert speedups[64] > speedups[8], "the speed-up must grow with the length"

# %% tags=["instructor"]
assert decoding.beam_search(run.model, made_src, beam_size=1, max_len=MAX_LEN) == greedy_made
print("answer 2: beam search with beam_size=1 equals greedy decoding on all", len(made_up), "made-up sentences")


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
mean_length = {alpha: np.mean([len(tokens) for tokens in chosen[alpha]]) for alpha in ALPHAS}
print("answer 4: mean length of the chosen translations: "
      + ", ".join(f"alpha = {alpha}: {value:.3f}" for alpha, value in mean_length.items())
      + f"; the choice changes between alpha = 0 and 1 on {len(changed)} of {len(made_up)} sentences")
assert mean_length[0.0] <= mean_length[0.6] <= mean_length[1.0]
assert all(len(chosen[1.0][i]) > len(chosen[0.0][i]) for i in changed)
