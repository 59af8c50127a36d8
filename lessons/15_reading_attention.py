# %% [markdown]
# # Lesson 15 — Reading attention: the adjective-noun swap, measured against the truth
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
# ## Measuring attention against the truth
#
# A heatmap that *looks* aligned proves little: we picked the sentence, and we see what we expect.
# The embedded corpus lets us do better, because the grammar that wrote each pair knows which
# English words each French word comes from: its **gold word alignment**
# (`npformer.data.sentence_pair` builds any pair of the grammar with it). Following Och and Ney,
# links are *sure* (`cat`-`chat`, and both `ne` and `pas` from `not`) or merely *possible* (the
# auxiliary `do` of a negation, which French does not write, may link to `ne`, the verb and `pas`):

# %%
from npformer.data import noun_phrase, sentence_pair

english, french, gold = sentence_pair("statement", noun_phrase("cat", "black"), "eat", noun_phrase("apple"))
print(" ".join(english), "->", " ".join(french))
print("sure links:", sorted((english[e], french[f]) for e, f in gold.sure))
negated_en, negated_fr, negated_gold = sentence_pair("negation", "i", "eat", noun_phrase("apple"))
print(" ".join(negated_en), "->", " ".join(negated_fr))
print("sure:", sorted((negated_en[e], negated_fr[f]) for e, f in negated_gold.sure))
print("possible only:", sorted((negated_en[e], negated_fr[f]) for e, f in negated_gold.possible - negated_gold.sure))
assert ("black", "noir") in {(english[e], french[f]) for e, f in gold.sure}, "the adjective's link crosses"

# %% [markdown]
# An explanation proposes an alignment: link each French word to the source word with the largest
# score in its row. The **alignment error rate** (AER) of proposed links $A$ against sure links
# $S$ and possible links $P \supseteq S$, counted over the whole test split, is
#
# $$\mathrm{AER} = 1 - \frac{|A \cap S| + |A \cap P|}{|A| + |S|},$$
#
# $0$ for the gold alignment and $1$ when no proposed link is even possible. We score every
# cross-attention head, and three explanations that are not one raw head:
#
# * **the head average** of each layer;
# * **attention rollout** (Abnar and Zuidema, 2020): a residual block passes half of each position
#   on unchanged, so the encoder's layers compose as products of $A/2 + I/2$, and each decoder
#   layer mixes its positions the same way before reading half of its content from the source
#   (the docstring of `npformer.tasks.translation.alignment` has the equations);
# * **gradient $\times$ input saliency**: how much $\log p(y_i)$ moves with each source embedding,
#   $\lVert \partial \log p(y_i) / \partial e_j \odot e_j \rVert$. The gradient comes from the
#   same hand-written backward pass that trains the model, run once per target word.

# %%
from npformer.tasks.translation.alignment import explain, gold_test_split, score_alignments

pairs, golds = gold_test_split(run)
if os.environ.get("NPFORMER_QUICK") == "1":
    pairs, golds = pairs[:100], golds[:100]
scores = score_alignments(run.model, run.src_vocab, run.tgt_vocab, pairs, golds)
print(scores.table())
best, worst = scores.best_head(), scores.worst_head()
best_average = min(scores.layer_average)
print(f"best head: layer {best[0]}, head {best[1]}, AER {best[2]:.3f}; worst head: layer {worst[0]}, "
      f"head {worst[1]}, AER {worst[2]:.3f}")
for name, value in [("the best layer's head average", best_average), ("rollout", scores.rollout),
                    ("saliency", scores.saliency)]:
    verdict = "beats" if value < best[2] else "does not beat"
    print(f"{name}: AER {value:.3f}, {verdict} the best single head ({best[2]:.3f})")
assert 0 <= best[2] <= worst[2] <= 1
figure = viz.aer_heatmap(scores.heads, path=viz.figures_dir() / "15_aer.png",
                         title=f"AER of each cross-attention head ({scores.pairs} test pairs)")

# %% [markdown]
# The best and the worst head, the rollout and the saliency on the "black cat" sentence, beside
# the gold alignment (white squares are sure links, red dots the word each row picks):

# %%
explained = explain(run.model, run.src_vocab, run.tgt_vocab, [english], [french])
panels = [(f"best head: layer {best[0]}, head {best[1]}", explained["cross"][best[0]][0, best[1]]),
          (f"worst head: layer {worst[0]}, head {worst[1]}", explained["cross"][worst[0]][0, worst[1]]),
          ("rollout", explained["rollout"][0]), ("saliency", explained["saliency"][0])]
figure = viz.alignment_figure(panels, english, french, gold, path=viz.figures_dir() / "15_alignment.png",
                              title="Explanations of one sentence against the gold alignment (white squares)")
for name, scores_of_sentence in panels:
    picked = scores_of_sentence[: len(french), : len(english)].argmax(axis=1)
    print(f"{name:28s} " + "  ".join(f"{french[i]}->{english[j]}" for i, j in enumerate(picked)))

# %% [markdown]
# What does a head that does not align do? Where each row of the worst head looks, counted over
# the test split: the source word the gold alignment names, a neighbour of it (one or two words
# away), the last source token (the final punctuation), or elsewhere:

# %%
counts = {"the gold word": 0, "a neighbour of it": 0, "the last source token": 0, "elsewhere": 0}
for start in range(0, len(pairs), 64):
    chunk_src = [tokenize(e, "en") for e, _ in pairs[start:start + 64]]
    chunk_tgt = [tokenize(f, "fr") for _, f in pairs[start:start + 64]]
    weights = explain(run.model, run.src_vocab, run.tgt_vocab, chunk_src, chunk_tgt)["cross"][worst[0]]
    for b, (source, target) in enumerate(zip(chunk_src, chunk_tgt)):
        for i, j in enumerate(weights[b, worst[1], : len(target), : len(source)].argmax(axis=1)):
            gold_words = golds[start + b].sources_of(i)
            if j in gold_words:
                counts["the gold word"] += 1
            elif min(abs(j - g) for g in gold_words) <= 2:
                counts["a neighbour of it"] += 1
            elif j == len(source) - 1:
                counts["the last source token"] += 1
            else:
                counts["elsewhere"] += 1
total = sum(counts.values())
print(f"worst head (layer {worst[0]}, head {worst[1]}), {total} rows: "
      + ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in counts.items()))

# %% [markdown]
# Read the numbers above, not the heatmaps, to decide which heads align: the table ranks every
# head on a thousand sentences. A head with a high AER is not broken; it reads the source for
# another purpose (the count above says where it looks), and later layers and the feed-forward
# blocks decide what to do with it. `benchmarks/RESULTS.md` has the same table for the default run
# of `npformer train` (900 steps), and `npformer attention --score` prints it for any run on the
# embedded corpus.
#
# Attention weights still show where information was read, not why the output is what it is:
# even the best head is a hint. Saliency asks the model the causal question (how much would
# $\log p(y_i)$ move?) and is answered by the backward pass.
#
# ## Explore it yourself
#
# `npformer attention --run runs/lesson-13 "the black cat eats the apple." "where are the dogs?" --html
# attention.html` writes one self-contained page (no server, no network): choose the sentence, the
# kind of attention, the layer and one head or all of them, and hover a token to see what it
# attends to and what attends to it. In a notebook, `viz.attention_explorer([...])` shows the same
# page inline.
#
# ## Exercises
#
# 1. Find a sentence with a prenominal adjective ("the small house"). Does the crossing disappear?
# 2. Draw the encoder self-attention (`npformer attention --kind enc`). What does each head do?
# 3. Score the heads of a run of 40 steps (`TrainOptions(max_steps=40)`) with `score_alignments`.
#    Which explanation is already good, and which needs training?
# 4. With your `attention_entropy`, compare the mean entropy of each head of lesson 13's run of 600
#    steps (run without quick mode) with that of a run of 40 steps (`TrainOptions(max_steps=40)`).
#    Does the entropy of a head predict its AER?
