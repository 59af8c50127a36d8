# %% [markdown]
# # Lesson 15 — Reading attention: the adjective-noun swap, measured against the truth
#
# English puts most adjectives before the noun ("the black cat"), French after it ("le chat
# noir"). A trained translator must therefore look at "cat" while writing `chat` and at "black"
# while writing `noir`: its cross-attention crosses over. Let us look, at the run of lesson 13 (in
# quick mode, whose 40 steps teach too little to read, at the translator that ships with npformer:
# the default `npformer train` run, 900 steps on the same corpus).

# %%
import os

import numpy as np

import npformer
from npformer import backend, metrics, viz
from npformer.course import check
from npformer.data import tokenize
from npformer.tokens import BOS_ID
from npformer.tasks.translation import TrainOptions, Translator, train
from npformer.tasks.translation import load_run

folder = os.path.join("runs", "lesson-13")
if os.environ.get("NPFORMER_QUICK") == "1":  # quick mode trains too little to read: the shipped translator
    run = npformer.pretrained("toy")
else:
    if not os.path.isfile(os.path.join(folder, "checkpoint.npz")):  # lesson 13 not run yet: train here
        status = train(TrainOptions(name="lesson-15", runs_dir="runs", max_steps=600, eval_every=10_000,
                                    test_sentences=20))
        assert status == 0, "training must succeed"
        folder = os.path.join("runs", "lesson-15")
    run = load_run(folder)
print(f"reading the run in {run.folder}: {run.config['train']['max_steps']} training steps")

# %%
sentence = "the black cat eats the apple."
[translation] = Translator.from_run(run).translate([sentence])
print(sentence, "->", translation)
src_tokens, tgt_tokens = tokenize(sentence, "en"), tokenize(translation, "fr")
src = np.array([run.src_vocab.encode(src_tokens)])
tgt_in = np.array([[BOS_ID] + run.tgt_vocab.encode(tgt_tokens)])
run.model.forward(backend.asarray(src), backend.asarray(tgt_in))
cross = [backend.to_numpy(layer[0]) for layer in run.model.attention_maps()["cross"]]
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

# %% [markdown] tags=["instructor"]
# **The direct formula**, `-np.sum(weights * np.log(weights))` over the last axis, is right on
# every row without a zero, and `nan` on the others:

# %% tags=["instructor"]
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
# head on a thousand sentences (a hundred in quick mode). A head with a high AER is not broken; it
# reads the source for another purpose (the count above says where it looks), and later layers and
# the feed-forward blocks decide what to do with it. `benchmarks/RESULTS.md` has the same table for
# the default run of `npformer train` (900 steps), and `npformer attention --score` prints it for
# any run on the embedded corpus.
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
#    Auto-graded: `crossing_links(links)`, with `links` of shape `(L, 2)`, one `(english, french)`
#    row of token indices per link, returns how many pairs of links cross (an int). The sentence
#    and its heatmap stay for the rubric.

# %%
def crossing_links(links):
    """How many pairs of links cross; links: (L, 2) integers, one (english, french) row per link."""
    ### BEGIN SOLUTION
    english, french = np.asarray(links).reshape(-1, 2).T
    before_in_english = english[:, None] < english[None, :]   # (L, L): link a's English word comes first
    after_in_french = french[:, None] > french[None, :]       # (L, L): and its French word comes later
    return int((before_in_english & after_in_french).sum())
    ### END SOLUTION


# %%
print(check("crossing_links", crossing_links))

# %% [markdown]
# 2. Draw the encoder self-attention (`npformer attention --kind encoder`). What does each head do?
# 3. Score the heads of a run of 40 steps (`TrainOptions(max_steps=40)`) with `score_alignments`.
#    Which explanation is already good, and which needs training? Auto-graded: what
#    `score_alignments` computes for one head, `head_aer(weights, source_lengths, target_lengths,
#    sure, possible)`: `weights` of shape `(B, Tt, Ts)` are the head's rows for a padded batch (row
#    $i$ of sentence $b$ is French token $i$ over the English tokens), `source_lengths` and
#    `target_lengths` of shape `(B,)` the real lengths, `sure` and `possible` booleans of shape
#    `(B, Tt, Ts)` the gold links; return the AER, as a float, of the alignment that links each
#    French token to its largest weight, over the whole batch. Which explanation is good stays for
#    the rubric.

# %%
def head_aer(weights, source_lengths, target_lengths, sure, possible):
    """The batch's AER of one head's argmax alignment. weights: (B, Tt, Ts); lengths: (B,);
    sure, possible: (B, Tt, Ts) booleans."""
    ### BEGIN SOLUTION
    proposed = sure_found = possible_found = 0
    for b in range(len(weights)):
        rows = weights[b, : target_lengths[b], : source_lengths[b]]   # real French tokens over real English ones
        links = np.zeros(sure[b].shape, dtype=bool)
        links[np.arange(len(rows)), rows.argmax(axis=-1)] = True     # one link per French token
        proposed += len(rows)
        sure_found += (links & sure[b]).sum()
        possible_found += (links & possible[b]).sum()
    return 1 - (sure_found + possible_found) / (proposed + sure.sum())
    ### END SOLUTION


# %%
print(check("head_aer", head_aer))

# %% [markdown]
# 4. With your `attention_entropy`, compare the mean entropy of each head of lesson 13's run of 600
#    steps (run without quick mode) with that of a run of 40 steps (`TrainOptions(max_steps=40)`).
#    Does the entropy of a head predict its AER?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below.) Yes: in "the small cat eats the apple." French keeps the English order, `le
#    petit chat`, so the gold links run down the diagonal and nothing crosses (asserted on the gold
#    alignment, and counted by `crossing_links`, graded by `check`). A head that aligns then shows a
#    diagonal, `petit` on "small" and `chat` on "cat". That needs a trained run: after 40 steps the
#    model's picks are not yet an alignment.
#    Full marks: a prenominal sentence (`small`, `big`, `beautiful` are the embedded corpus's
#    prenominal adjectives), its heatmap from an aligning head, and the observation that the
#    crossing follows the French word order, not the attention mechanism.
# 2. Rubric (the argmax of each row of each encoder head of this run is printed below). A full
#    answer names a pattern for each head and supports it with several sentences, not one. In a
#    trained run (600 steps or more) expect heads that mostly read the token itself, heads that read a
#    neighbour, determiners and adjectives reading their noun (the information French agreement
#    needs: `le`/`la`/`les`, `petit`/`petite`), and rows resting on the final punctuation when there
#    is nothing useful to read. After 40 steps the rows are nearly uniform and no pattern is clear.
# 3. (Printed below; one head's AER is what `head_aer`, graded by `check`, computes.) After 40 steps
#    no explanation is good yet: every head, both head averages,
#    the rollout and the saliency have AERs far above that of a trivial diagonal alignment (French
#    word $i$ linked to English word $\approx i T_s / T_t$), because the cross-attention rows are still
#    close to uniform and the model translates badly; saliency, which asks the model, has nothing
#    learned to explain either. All of them need training. In a trained run the second layer's heads,
#    its head average and the rollout come close to the gold alignment and beat the diagonal by far;
#    saliency improves too but stays behind them. A full answer gives the 40-step table next to the
#    trained run's (or a baseline) and concludes that an explanation is only as good as the model.
# 4. (Printed below: this run's entropies, and a 40-step run's beside them; in quick mode the
#    40-step run of answers 3 and 4 trains on smaller batches from fewer pairs.) At 40
#    steps every head's mean row entropy is close to its largest value $\log T_k$ and every AER is
#    poor: entropy tells the heads apart no better than AER does. In a trained run the entropies fall
#    well below $\log T_k$, differ from head to head, and the sharper heads align better (a strong
#    positive correlation between a head's entropy and its AER): an aligning head must put its weight
#    on one source word. It is a tendency, not a rule: a head that always reads the final `.` is sharp
#    and still wrong, so low entropy is necessary for a low AER, not sufficient; and eight heads are
#    little evidence.

# %% tags=["instructor"]
from npformer.data import noun_phrase, sentence_pair  # noqa: E402


def crosses(links):
    """True when two (english, french) links cross: their French order differs from their English order."""
    return any(e1 < e2 and f1 > f2 for e1, f1 in links for e2, f2 in links)


small_en, small_fr, small_gold = sentence_pair("statement", noun_phrase("cat", "small"), "eat", noun_phrase("apple"))
assert crosses(gold.sure) and not crosses(small_gold.sure), "black cat crosses, small cat does not"
assert crossing_links(np.array(sorted(gold.sure))) > 0 == crossing_links(np.array(sorted(small_gold.sure)))
small_best = explain(run.model, run.src_vocab, run.tgt_vocab, [small_en], [small_fr])["cross"][best[0]][0, best[1]]
picks = small_best[: len(small_fr), : len(small_en)].argmax(axis=1)
print(f"answer 1: {' '.join(small_en)} -> {' '.join(small_fr)}; the gold links do not cross; best head "
      f"(layer {best[0]}, head {best[1]}) picks: "
      + "  ".join(f"{small_fr[i]}->{small_en[j]}" for i, j in enumerate(picks)))

# %% tags=["instructor"]
encoder_src = np.array([run.src_vocab.encode(src_tokens)])
run.model.forward(backend.asarray(encoder_src), backend.asarray(tgt_in))
for layer_index, layer in enumerate(run.model.attention_maps()["encoder"]):
    layer = backend.to_numpy(layer[0])
    for head in range(layer.shape[0]):
        looks_at = layer[head].argmax(axis=-1)
        print(f"answer 2: encoder layer {layer_index}, head {head}: "
              + "  ".join(f"{src_tokens[i]}->{src_tokens[j]}" for i, j in enumerate(looks_at)))

# %% tags=["instructor"]
import io  # noqa: E402
import tempfile  # noqa: E402

from npformer.metrics import alignment_error_rate  # noqa: E402

sample_pairs, sample_golds = pairs[:64], golds[:64]


def head_entropies(model, src_vocab, tgt_vocab):
    """Each cross-attention head's mean row entropy over the sample pairs, by your `attention_entropy`,
    and the mean of log T_k over the same rows."""
    sources = [tokenize(e, "en") for e, _ in sample_pairs]
    targets = [tokenize(f, "fr") for _, f in sample_pairs]
    cross_maps = explain(model, src_vocab, tgt_vocab, sources, targets)["cross"]
    per_head = np.array([[np.concatenate([attention_entropy(weights[b, head, : len(t) + 1, : len(s)])
                                          for b, (s, t) in enumerate(zip(sources, targets))]).mean()
                          for head in range(weights.shape[1])] for weights in cross_maps])
    largest_mean = np.mean([np.log(len(s)) for s, t in zip(sources, targets) for _ in range(len(t) + 1)])
    return per_head.ravel(), largest_mean


diagonal = [{(min(len(tokenize(e, "en")) - 1, round(i * len(tokenize(e, "en")) / len(tokenize(f, "fr")))), i)
             for i in range(len(tokenize(f, "fr")))} for e, f in pairs]
diagonal_aer = alignment_error_rate(diagonal, golds)
steps = run.config["train"]["max_steps"]
runs_to_compare = [(f"this run ({steps} steps)", run, scores)]
# in quick mode (NPFORMER_QUICK=1) the 40 steps take batches of 512 tokens from 2,000 pairs
short_run = {"token_budget": 512, "max_pairs": 2000} if os.environ.get("NPFORMER_QUICK") == "1" else {}
with tempfile.TemporaryDirectory() as scratch:
    if steps != 40:  # a trained run: train the 40-step run of the question beside it (a few seconds)
        assert train(TrainOptions(name="short", runs_dir=scratch, max_steps=40, eval_every=10_000,
                                  test_sentences=20, **short_run), stream=io.StringIO()) == 0
        short = load_run(os.path.join(scratch, "short"))
        runs_to_compare.append(("a run of 40 steps", short,
                                score_alignments(short.model, short.src_vocab, short.tgt_vocab, pairs, golds)))
    for name, compared, compared_scores in runs_to_compare:
        values = dict(compared_scores.rows())
        best_explanation = min(values, key=values.get)
        print(f"answer 3: {name}: best explanation {best_explanation}, AER {values[best_explanation]:.3f}; "
              f"rollout {compared_scores.rollout:.3f}, saliency {compared_scores.saliency:.3f}; "
              f"a diagonal alignment scores {diagonal_aer:.3f}")
        entropies, largest_mean = head_entropies(compared.model, compared.src_vocab, compared.tgt_vocab)
        aers = np.array([aer for row in compared_scores.heads for aer in row])
        correlation = np.corrcoef(entropies, aers)[0, 1]
        print(f"answer 4: {name}: mean row entropy per head " + ", ".join(f"{h:.2f}" for h in entropies)
              + f" nats (mean log T_k {largest_mean:.2f}); correlation of entropy with AER over the heads "
              f"{correlation:+.2f}")
        if compared.config["train"]["max_steps"] == 40:
            assert values[best_explanation] > diagonal_aer, "after 40 steps no explanation beats the diagonal"
            assert entropies.min() > 0.8 * largest_mean, "after 40 steps every head is close to uniform"
        elif compared.config["train"]["max_steps"] >= 600:
            assert values[best_explanation] < diagonal_aer and correlation > 0.5
