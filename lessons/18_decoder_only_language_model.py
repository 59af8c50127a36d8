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

from npformer import gradcheck, models, viz
from npformer.tasks.language_model import sample, train_french_lm

model = models.LanguageModel(models.LanguageModelConfig(13, d_model=6, n_heads=2, d_ff=8, n_layers=2, max_len=8),
                             dtype=np.float64)
ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 9, 4, 5, 2]])
report = gradcheck.check_loss(model, {"ids": ids[:, :-1]}, ids[:, 1:], name="lm")  # <pad> targets ignored
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

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
result = train_french_lm(None, steps=80 if QUICK else 400, max_pairs=3000 if QUICK else 12000)
print(f"validation perplexity {result['valid_perplexity']:.2f} ({result['parameters']:,} parameters, "
      f"vocabulary {len(result['vocab'])} words)")
greedy = sample(result["model"], result["vocab"], "", count=3, top_k=1)
sampled = sample(result["model"], result["vocab"], "", count=3, temperature=1.0, top_k=10)
print("greedy (top-k=1), three times:")
for text in greedy:
    print("   ", text)
print(f"different sentences among three: greedy {len(set(greedy))}, sampled (T=1.0, top-k=10) {len(set(sampled))}")
assert len(set(greedy)) == 1, "greedy decoding writes the same sentence from the same start"
assert len(set(sampled)) > 1, "sampling gives different sentences from the same start"
for temperature, top_k in ((0.5, 5), (1.0, 10), (1.5, None)):
    print(f"T={temperature}, top-k={top_k}:")
    for text in sample(result["model"], result["vocab"], "", count=2, temperature=temperature, top_k=top_k):
        print("   ", text)

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
# 2. Check that `generate` with `top_k=1` equals greedy decoding with the full forward pass.
# 3. Train on the Tatoeba French sentences (`npformer lm --data ../shared/data/fra-eng/fra.txt`, from
#    the repository's folder) and compare the validation perplexity with this lesson's. Which is
#    higher, and why?
