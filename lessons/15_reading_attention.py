# %% [markdown]
# # Lesson 15 — Reading attention heatmaps: the adjective-noun swap
#
# English puts most adjectives before the noun ("the black cat"), French after it ("le chat
# noir"). A trained translator must therefore look at "cat" while writing `chat` and at "black"
# while writing `noir`: its cross-attention crosses over. Let us look.

# %%
import os

import numpy as np

from npformer import backend, metrics, viz
from npformer.course import check
from npformer.data import tokenize
from npformer.tokens import BOS_ID
from npformer.tasks.translation import TrainOptions, Translator, train
from npformer.training import load_run

folder = os.path.join("runs", "lesson-13")
if not os.path.isfile(os.path.join(folder, "checkpoint.npz")):  # lesson 13 not run yet: train here
    quick = os.environ.get("NPFORMER_QUICK") == "1"
    status = train(TrainOptions(name="lesson-15", runs_dir="runs", max_steps=40 if quick else 600,
                                eval_every=10_000, test_sentences=20))
    assert status == 0, "training must succeed"
    folder = os.path.join("runs", "lesson-15")
run = load_run(folder)

# %%
sentence = "the black cat eats the apple."
[translation] = Translator.from_run(run).translate([sentence])
print(sentence, "->", translation)
src_tokens, tgt_tokens = tokenize(sentence, "en"), tokenize(translation, "fr")
src = np.array([run.src_vocab.encode(src_tokens)])
tgt_in = np.array([[BOS_ID] + run.tgt_vocab.encode(tgt_tokens)])
run.model.forward(backend.asarray(src), backend.asarray(tgt_in))
cross = [backend.to_numpy(layer[0]) for layer in run.model.attention_maps()["decoder_cross"]]
for layer in cross:  # (heads, target positions, source tokens): one distribution over the source per row
    assert layer.shape[1:] == (tgt_in.shape[1], len(src_tokens))
    assert np.allclose(layer.sum(-1), 1), "each row of cross-attention must be a distribution over the source"

# %% [markdown]
# Decoder position $t$ reads token $t$ of its input (`<bos>` first) and **produces** output token
# $t$. So the rows are labelled with the tokens being written, and the columns with the source.

# %%
rows = tgt_tokens + ["<eos>"]
assert len(rows) == tgt_in.shape[1], "one row per decoder position: the tokens written, then <eos>"
figure = viz.attention_heatmaps(cross, rows, src_tokens, title=f"Cross-attention: {sentence} -> {translation}",
                                path=viz.figures_dir() / "15_cross_attention.png")

# %% [markdown]
# Which heads show the swap, with the row that writes `chat` pointing at "cat" and the row that
# writes `noir` pointing at "black"?

# %%
found = []
if "chat" in rows and "noir" in rows:
    for layer_index, layer in enumerate(cross):
        for head in range(layer.shape[0]):
            chat_looks_at = src_tokens[int(layer[head, rows.index("chat")].argmax())]
            noir_looks_at = src_tokens[int(layer[head, rows.index("noir")].argmax())]
            marker = "  <- swap" if (chat_looks_at, noir_looks_at) == ("cat", "black") else ""
            if marker:
                found.append((layer_index, head))
            print(f"layer {layer_index}, head {head}: chat -> {chat_looks_at:6s} noir -> {noir_looks_at:6s}{marker}")
print("heads showing the swap:", found or "none in this run (train longer: lesson 13 without QUICK)")

# %% [markdown]
# ## How spread out is a head?
#
# A heatmap shows one sentence; a number per row summarises it. Each row of attention weights
# $a_1, \dots, a_{T_k}$ is a distribution over the $T_k$ keys, and its **entropy**
#
# $$H(a) = -\sum_{j=1}^{T_k} a_j \log a_j \quad \text{(in nats)}$$
#
# is $0$ when the row puts all its weight on one key, and $\log T_k$, its largest value, when the row
# is uniform. A weight of exactly $0$ contributes nothing: $0 \log 0 = 0$, the limit of
# $a \log a$ as $a \to 0$. A query that may attend to no key at all (a fully masked row) gets
# all-zero weights from npformer's attention, and so entropy $0$.
#
# ### Your turn
#
# Write `attention_entropy(weights)`: `weights` has shape `(..., T_k)` (for instance
# `(B, H, T_q, T_k)`), each row summing to 1 or all zeros; return the entropy of every row, shape
# `(...)`, natural logarithm. Take care that a zero weight gives $0$, not `nan`
# ($\log 0 = -\infty$ and $0 \cdot (-\infty)$ is `nan` in floating point). The next cell checks
# random softmax rows, uniform rows, one-hot rows and an all-zero row.

# %%
def attention_entropy(weights):
    """Entropy in nats of each row (last axis) of attention weights; 0 log 0 = 0."""
    ### BEGIN SOLUTION
    logs = np.log(np.where(weights > 0, weights, 1.0))  # log 1 = 0 where the weight is 0
    return -np.sum(weights * logs, axis=-1)
    ### END SOLUTION


# %%
print(check("attention_entropy", attention_entropy))

# %% [markdown]
# **The direct formula**, `-np.sum(weights * np.log(weights))` over the last axis, is right on
# every row without a zero, and `nan` on the others:

# %%
def attention_entropy_direct(weights):
    return -np.sum(weights * np.log(weights), axis=-1)


with np.errstate(divide="ignore", invalid="ignore"):  # log(0) warns
    mistake = check("attention_entropy", attention_entropy_direct, strict=False)
print(mistake)
assert not mistake.passed and "NaN" in str(mistake)

# %% [markdown]
# With npformer's own `metrics.attention_entropy`, the mean entropy of
# the rows of each cross-attention head of this run, next to the largest possible value,
# $\log T_k$ for the $T_k$ source tokens:

# %%
entropy = metrics.attention_entropy
largest = np.log(len(src_tokens))
for layer_index, layer in enumerate(cross):
    per_head = entropy(layer).mean(axis=-1)  # (heads,): the mean over the rows
    print(f"layer {layer_index}: mean row entropy per head "
          + ", ".join(f"{value:.2f}" for value in per_head) + f" nats (uniform: {largest:.2f})")
    assert np.all(per_head >= 0) and np.all(per_head <= largest + 1e-9), "0 <= H <= log T_k"

# %% [markdown]
# A head near $\log T_k$ spreads each row over the whole source; a head near $0$ reads one source
# token per row, as an aligning head must. Compare the numbers with the heatmaps above.
#
# Not every head need align words. A head can look at the punctuation or at the previous word, and
# in a layer above the first, a head may attend to the word that *precedes* the one being written,
# because the query already carries context. Attention weights show where information was read,
# not why the output is what it is: read them as hints, not proofs.
#
# ## Exercises
#
# 1. Find a sentence with a prenominal adjective ("the small house"). Does the crossing disappear?
# 2. Draw the encoder self-attention (`npformer attention --kind enc`). What does each head do?
# 3. Average the cross-attention over heads and extract a word alignment by taking the argmax of
#    each row. How often is it right on the test sentences?
# 4. With your `attention_entropy`, compare the mean entropy of each head of lesson 13's run of 600
#    steps (run without quick mode) with that of a run of 40 steps (`TrainOptions(max_steps=40)`).
#    Which heads sharpen with training?
