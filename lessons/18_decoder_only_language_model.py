# %% [markdown]
# # Lesson 18 — A decoder-only language model: the same block, a causal mask, and sampling
#
# Remove the encoder and the cross-attention from the translator and what is left is GPT: a stack
# of blocks that each do causal self-attention and a feed-forward network, trained to predict the
# next word. In npformer such a block is literally `EncoderLayer`: what makes a decoder is the
# causal mask (lesson 6), not different code.
#
# `models.LanguageModel` adds learned positions (lesson 17), pre-norm blocks with a final LayerNorm
# (lesson 9) and a head to the vocabulary. `generate` samples one word at a time on a KV cache
# (lesson 14): each step runs `EncoderLayer.step`, which reuses the keys and values of every earlier
# position.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, gradcheck, models, viz
from npformer.course import EXERCISES, check
from npformer.data import detokenize
from npformer.tasks.language_model import sample, train_french_lm
from npformer.tokens import BOS_ID, EOS_ID

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
model = models.LanguageModel(models.LanguageModelConfig(13, d_model=6, n_heads=2, d_ff=8, n_layers=2, max_len=8),
                             dtype=np.float64)
ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 9, 4, 5, 2]])
# every gradient entry against finite differences (in quick mode, NPFORMER_QUICK=1, each parameter
# tensor along two random directions)
report = gradcheck.check_loss(model, {"ids": ids[:, :-1]}, ids[:, 1:], name="lm",  # <pad> targets ignored
                              directions=2 if QUICK else None)
print(report.table().splitlines()[-1])
assert report.passed

# %% [markdown]
# ## Sampling: temperature and top-k
#
# The model gives $p(w_t \mid w_1, \dots, w_{t-1})$, the distribution of the next word given the
# words so far. Greedy decoding always takes the most probable word, so it has no choice to make:
# from the same start it writes the same sentence every time (the cell below shows three greedy
# sentences and counts how many differ). Sampling draws from the distribution instead:
#
# * **temperature** $T$ divides the logits $z$ before the softmax, $p = \operatorname{softmax}(z / T)$:
#   $T < 1$ sharpens the distribution, $T > 1$ flattens it;
# * **top-k** keeps only the $k$ most probable words, so a rare, absurd word is never drawn
#   ($k = 1$ is greedy decoding).
#
# The generator is passed in and seeded, so a sample can be reproduced.
#
# ## Drawing one word
#
# At each step `generate` turns the last position's logits $z$ (one per word of the vocabulary) into
# a word:
#
# 1. **top-k**: every logit but the $k$ largest becomes $-\infty$. Since $e^{-\infty} = 0$, those
#    words get probability exactly 0 after the softmax, and the $k$ kept words share all of it in
#    their old proportions. Nothing is removed when $k \ge V$.
# 2. **temperature**: $p = \operatorname{softmax}(z / T)$, computed in float64 with the largest
#    logit subtracted first (lesson 3: the shift changes nothing, and $e^{1000}$ overflows).
# 3. **the draw**, by the *inverse of the cumulative distribution*: with $c_i = p_0 + \dots + p_i$
#    and one uniform number $u \in [0, 1)$, the word is the first $i$ with $c_i > u$. Word $i$ is
#    drawn exactly when $u$ falls in $[c_{i-1}, c_i)$, an interval of length $p_i$, so with
#    probability $p_i$; a word of probability 0 has an empty interval and is never drawn, not even
#    with $u = 0$.
#
# `generate` draws with `rng.choice(V, p=p)`, and NumPy does exactly step 3 with `u = rng.random()`:
# it divides the cumulative sums by the last one (which rounding may leave a hair away from 1) and
# takes `np.searchsorted(c, u, side="right")`, the first index with $c_i > u$. A function that is
# handed `u` is therefore deterministic, testable, and the same draw as `generate`'s.
#
# ### Your turn
#
# Write the two pieces, for one vector of logits of shape `(V,)`:
#
# * `top_k_filter(logits, k)` returns a new float array (leave `logits` as it is) in which every
#   logit but the `k` largest is `-np.inf`; with `k >= V` nothing changes. `np.argsort` sorts in
#   increasing order, so the `k` largest are its last `k` indices.
# * `sample_token(logits, temperature, u)` returns the token id (an `int`) drawn from
#   $\operatorname{softmax}(z / T)$ by step 3 with the given `u`. Some logits may be `-np.inf` (after
#   top-k).
#
# The grader checks `top_k_filter` with `k = 3` of 8 words, all-negative logits, `k = 1`, and
# `k > V` on logits that already hold `-inf`; no two logits are equal, so the `k` largest are
# always well defined. It calls `sample_token` with many draws `u` per case (none within rounding of
# a boundary $c_i$): at $T = 1$, at $T = 0.4$ on logits near 1000, at $T = 2.5$ on logits with
# `-inf` and with `u = 0`, and on a vocabulary of one word.

# %%
def top_k_filter(logits, k):
    """A copy of `logits` (V,) with every entry but the k largest set to -inf."""
    ### BEGIN SOLUTION
    filtered = np.array(logits, dtype=np.float64)
    if k < len(filtered):
        filtered[np.argsort(filtered)[:-k]] = -np.inf
    return filtered
    ### END SOLUTION


# %%
print(check("top_k_filter", top_k_filter))


# %%
def sample_token(logits, temperature, u):
    """The token drawn from softmax(logits / temperature) by the uniform draw u in [0, 1): the first
    index whose cumulative probability exceeds u."""
    ### BEGIN SOLUTION
    z = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(z - z.max())
    cumulative = np.cumsum(p / p.sum())
    cumulative /= cumulative[-1]
    return int(np.searchsorted(cumulative, u, side="right"))
    ### END SOLUTION


# %%
print(check("sample_token", sample_token))

# %% [markdown]
# ## Writing with your sampler
#
# `write` below generates sentences word by word with your two functions (npformer's, for one that
# has not passed its check yet). It runs the whole sentence through `model.forward` at every step and
# takes the last position's logits, where `generate` reuses a KV cache; both give the same logits up
# to rounding. It draws `u = rng.random()` where `generate` calls `rng.choice`, so from the same seed
# it writes the same sentences as npformer's `sample` (asserted with top-k), with one exception: the
# model gives `<pad>` a little probability (the loss ignores `<pad>` targets, so nothing drives it to
# zero), and once `<pad>` is drawn, `model.forward` masks it out as padding while `generate`'s cache
# attends to it. Without top-k, at a high temperature, that can happen.

# %%
result = train_french_lm(None, steps=40 if QUICK else 400, max_pairs=3000 if QUICK else 12000)
print(f"validation perplexity {result['valid_perplexity']:.2f} ({result['parameters']:,} parameters, "
      f"vocabulary {len(result['vocab'])} words)")

passed = check("top_k_filter", top_k_filter, strict=False).passed
keep_top_k = top_k_filter if passed else EXERCISES["top_k_filter"].reference
passed = check("sample_token", sample_token, strict=False).passed
draw = sample_token if passed else EXERCISES["sample_token"].reference


def write(model, vocab, count=3, temperature=0.8, top_k=10, seed=0, max_new_tokens=20):
    """`count` sentences from <bos>, drawn with `keep_top_k` and `draw` (`sample`'s defaults)."""
    rng = np.random.default_rng(seed)
    sentences = []
    with model.evaluating():
        for _ in range(count):
            ids = [BOS_ID]
            while len(ids) < min(1 + max_new_tokens, model.config.max_len):
                logits = backend.to_numpy(model.forward(backend.asarray(np.array([ids]))))[0, -1].astype(np.float64)
                if top_k is not None:
                    logits = keep_top_k(logits, top_k)
                ids.append(draw(logits, temperature, rng.random()))
                if ids[-1] == EOS_ID:
                    break
            sentences.append(detokenize(vocab.decode(ids[1:]), "fr"))
    return sentences


greedy = write(result["model"], result["vocab"], count=3, top_k=1)
sampled = write(result["model"], result["vocab"], count=3, temperature=1.0, top_k=10)
print("greedy (top-k=1), three times:")
for text in greedy:
    print("   ", text)
print(f"different sentences among three: greedy {len(set(greedy))}, sampled (T=1.0, top-k=10) {len(set(sampled))}")
assert len(set(greedy)) == 1, "greedy decoding writes the same sentence from the same start"
assert len(set(sampled)) > 1, "sampling gives different sentences from the same start"
assert greedy == sample(result["model"], result["vocab"], "", count=3, top_k=1)
assert sampled == sample(result["model"], result["vocab"], "", count=3, temperature=1.0, top_k=10)
for temperature, top_k in ((0.5, 5), (1.0, 10), (1.5, None)):
    texts = write(result["model"], result["vocab"], count=2, temperature=temperature, top_k=top_k)
    same = texts == sample(result["model"], result["vocab"], "", count=2, temperature=temperature, top_k=top_k)
    print(f"T={temperature}, top-k={top_k} (the same as npformer's sample: {'yes' if same else 'no'}):")
    for text in texts:
        print("   ", text)
    assert same or top_k is None, "the same draws as generate's, from the same seed"

# %% [markdown]
# Perplexity is the exponential of the mean cross-entropy per predicted token, over the $N$ tokens
# that the validation sentences ask the model to predict (their words and each `<eos>`):
#
# $$\text{perplexity} = \exp\Big(-\frac{1}{N} \sum_{t} \log p(w_t \mid w_1, \dots, w_{t-1})\Big)$$
#
# The model is, on average, as unsure as a uniform choice among that many words. A uniform guess
# over a vocabulary of $V$ words has perplexity $V$, over 100 here, and the trained model must do
# much better (asserted).

# %%
assert len(result["vocab"]) > 100, "a uniform guess over the vocabulary would score over 100"
assert result["valid_perplexity"] < len(result["vocab"]) / 2, "the model must beat a uniform guess by far"

figure, axis = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
axis.plot(np.exp(result["losses"]), alpha=0.6)
axis.set(xlabel="step", ylabel="training perplexity per batch", yscale="log",
         title=f"French language model: validation perplexity {result['valid_perplexity']:.1f}")
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "18_language_model.png", dpi=110)

# %% [markdown]
# ## Exercises
#
# 1. Implement nucleus (top-p) sampling: keep the smallest set of words whose probabilities sum to at
#    least $p$, and draw among them. `generate` has no such option: write the loop yourself on
#    `model.forward` (the whole sequence at every step), taking the last position's logits.
#
#    *Auto-graded:* the filter, `top_p_filter(logits, p)`, for one vector of logits of shape `(V,)`.
#    It returns a new float array (leave `logits` as it is) in which every word outside the nucleus is
#    `-np.inf`, the nucleus being taken from the probabilities $\operatorname{softmax}(z)$. Then
#    `sample_token(top_p_filter(logits, p), 1.0, u)` is one draw of nucleus sampling. The grader tries
#    $p$ near 0.9, a tiny $p$, logits near 1000, logits that are already `-np.inf` (probability 0) with
#    $p = 0.999$, and a vocabulary of one word; no two logits are equal and $p$ is never within
#    rounding of a sum of probabilities. *For the rubric:* the sampling loop, a few sentences at
#    $p = 0.9$, and how the number of words kept changes from step to step, against top-k's fixed $k$.

# %%
def top_p_filter(logits, p):
    """A copy of `logits` (V,) with every word outside the nucleus of probability p set to -inf."""
    ### BEGIN SOLUTION
    z = np.array(logits, dtype=np.float64)
    probabilities = np.exp(z - z.max())
    probabilities /= probabilities.sum()
    order = np.argsort(-probabilities)  # the most probable word first
    cumulative = np.cumsum(probabilities[order])
    count = min(int(np.searchsorted(cumulative, p)) + 1, len(z))  # the first count whose mass reaches p
    filtered = np.full_like(z, -np.inf)
    filtered[order[:count]] = z[order[:count]]
    return filtered
    ### END SOLUTION


# %%
print(check("top_p_filter", top_p_filter))

# %% [markdown]
# 2. Check that `generate` with `top_k=1` equals greedy decoding with the full forward pass.
# 3. Fetch the Tatoeba file once (`npformer data tatoeba`, in your course folder), train on its French
#    sentences (`npformer lm --data data/fra-eng/fra.txt`) and compare the validation perplexity with
#    this lesson's. Which is higher, and why?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Reference code below.) At each step: run `model.forward` on the whole sequence, take the last
#    position's logits, turn them into probabilities (float64, maximum subtracted), sort them in
#    decreasing order, keep the first $m$ words, where $m$ is the smallest count whose cumulative
#    probability reaches $p$, renormalise and draw; stop at `<eos>` or at `max_len`. Checks: a tiny
#    $p$ keeps one word, so it is greedy decoding (asserted), and $p = 1$ keeps every word. Unlike top-k,
#    the number of words kept adapts: few where the model is sure, many where it is not (the mean
#    nucleus size is printed).
# 2. (Checked below, from three prompts.) They are equal: with `top_k=1` only the most probable word
#    keeps any probability, so the draw is the argmax, and the KV cache gives the same logits as the
#    full forward pass (up to rounding), because a causal position never sees later ones. A full answer writes the loop on
#    `model.forward`, stops it where `generate` stops (`<eos>` or `max_len`), and compares the ids.
# 3. Rubric (the Tatoeba file is the student's download; this lesson's perplexity is printed
#    below). Tatoeba's perplexity is clearly higher. The embedded corpus is written by a small
#    grammar: a few hundred words and a handful of sentence patterns, so after the first words few
#    continuations are possible. Tatoeba's sentences are real French: thousands of words (after
#    `min_freq=2`), names, many constructions and topics, so the true next-word uncertainty is much
#    larger, and 400 steps fit it less well. Full marks also note that perplexities over different
#    vocabularies are not strictly comparable: a larger vocabulary raises the uniform baseline, and
#    rare words mapped to `<unk>` make the task easier than it looks.

# %% tags=["instructor"]
from npformer.data import tokenize  # noqa: E402

lm, lm_vocab = result["model"], result["vocab"]


def nucleus_sample(model, vocab, p, rng, max_new_tokens=20):
    """Top-p sampling with the full forward pass at every step; returns the sentence and the nucleus sizes."""
    ids, sizes = [BOS_ID], []
    with model.evaluating():
        while len(ids) < min(1 + max_new_tokens, model.config.max_len):
            logits = backend.to_numpy(model.forward(backend.asarray(np.array([ids]))))[0, -1].astype(np.float64)
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            order = np.argsort(-probs)
            keep = order[: int(np.searchsorted(np.cumsum(probs[order]), p)) + 1]  # smallest set with mass >= p
            assert set(np.flatnonzero(np.isfinite(top_p_filter(logits, p)))) == set(keep.tolist())
            sizes.append(len(keep))
            ids.append(int(rng.choice(keep, p=probs[keep] / probs[keep].sum())))
            if ids[-1] == EOS_ID:
                break
    return detokenize(vocab.decode(ids[1:]), "fr"), sizes


greedy_sentence, _ = nucleus_sample(lm, lm_vocab, 1e-9, np.random.default_rng(0))
assert greedy_sentence == greedy[0], "a nucleus of one word is greedy decoding"
nucleus_rng, all_sizes = np.random.default_rng(0), []
for _ in range(3):
    sentence, sizes = nucleus_sample(lm, lm_vocab, 0.9, nucleus_rng)
    all_sizes += sizes
    print("answer 1: top-p 0.9:", sentence)
print(f"answer 1: the nucleus of p = 0.9 held {np.mean(all_sizes):.1f} words on average "
      f"(from {min(all_sizes)} to {max(all_sizes)}), of {len(lm_vocab)}")


# %% tags=["instructor"]
def greedy_full_forward(model, prompt_ids, max_new_tokens):
    """Greedy decoding with the whole sequence through `model.forward` at every step, stopping as `generate` does."""
    tokens = list(prompt_ids)
    with model.evaluating():
        while len(tokens) < min(len(prompt_ids) + max_new_tokens, model.config.max_len):
            logits = model.forward(backend.asarray(np.array([tokens])))
            tokens.append(int(backend.to_numpy(logits[0, -1]).argmax()))
            if tokens[-1] == EOS_ID:
                break
    return tokens[len(prompt_ids):]


for prompt in ("", "le chat", "est-ce que"):
    prompt_ids = [BOS_ID] + lm_vocab.encode(tokenize(prompt, "fr"))
    cached = lm.generate(prompt_ids, 20, np.random.default_rng(0), top_k=1, stop_id=EOS_ID)
    assert cached == greedy_full_forward(lm, prompt_ids, 20), prompt
print("answer 2: generate(top_k=1) equals greedy decoding with the full forward pass from all three prompts")

# %% tags=["instructor"]
print(f"answer 3: this lesson's validation perplexity is {result['valid_perplexity']:.2f} over a vocabulary of "
      f"{len(lm_vocab)} words (embedded corpus, {result['valid_sentences']:,} validation sentences)")
