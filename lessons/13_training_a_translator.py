# %% [markdown]
# # Lesson 13 — Training a tiny translator on the embedded corpus
#
# Everything so far, put to work. The embedded corpus (`npformer.data.toy_corpus`) is a small
# English-French grammar with real French phenomena: agreement (`les maisons blanches`), the
# adjectives that go before the noun (`la petite voiture`), conjugation (`nous voyons`),
# `ne ... pas`, questions and elision (`l'homme`, `j'aime`). Its test sentences are **new
# combinations**: every one contains a noun-adjective pair, such as "white cat", never seen in
# training.
#
# This lesson trains the `tiny` preset for 600 steps (40 in quick mode, when the environment
# variable `NPFORMER_QUICK` is `1`) with the same code as `npformer train`, then looks at how BLEU,
# the score it reports, counts matches.

# %%
import io
import json
import math
import os
import shutil
from collections import Counter

import matplotlib.pyplot as plt

from npformer import metrics, viz
from npformer.course import check
from npformer.data import toy_corpus
from npformer.tasks.translation import TrainOptions, Translator, train
from npformer.training import load_run

splits = toy_corpus()
print(splits.counts())
for english, french in splits.train[:4]:
    print(f"  {english:45s} -> {french}")
print("a test sentence (new combination):", splits.test[0])

# %% [markdown]
# ## The training step
#
# One step is: learning rate from the warm-up schedule, forward pass, loss (cross-entropy with
# label smoothing 0.1), `zero_grad`, backward pass, gradient clipping, and Adam. The last six are
# `npformer.training.train_step`, one function shared by every model in npformer. The trainer
# (`npformer.tasks.translation.train`, which is also what `npformer train` runs) adds batching,
# evaluation, checkpoints and a progress bar.

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
folder = os.path.join("runs", "lesson-13")
shutil.rmtree(folder, ignore_errors=True)  # the lesson starts from scratch each time
log = io.StringIO()
status = train(TrainOptions(name="lesson-13", runs_dir="runs", max_steps=40 if QUICK else 600,
                            eval_every=20 if QUICK else 150, eval_sentences=50,
                            test_sentences=100 if QUICK else 1000, log_every=5), stream=log)
print(log.getvalue()[-1500:])
assert status == 0

# %% [markdown]
# ## The loss curve

# %%
with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as file:
    records = [json.loads(line) for line in file]
viz.training_curves(records, path=viz.figures_dir() / "13_training_curves.png", title="tiny model, embedded corpus")
train_records = [r for r in records if r["kind"] == "train"]
figure, axis = plt.subplots(figsize=(7, 4), constrained_layout=True)
axis.plot([r["step"] for r in train_records], [r["loss"] for r in train_records])
axis.set(xlabel="step", ylabel="training loss (label-smoothed)", yscale="log", title="Training loss")
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "13_loss.png", dpi=110)
test = next(r for r in records if r["kind"] == "test")
print(f"test BLEU on new combinations: greedy {test['bleu_greedy']:.1f}, beam {test['bleu_beam']:.1f}")

# %% [markdown]
# The training loss is label-smoothed, and cannot go to zero. npformer's smoothed loss with
# $\epsilon = 0.1$ over a target vocabulary of $V$ tokens is the cross-entropy against the target
# distribution $q$ that puts $1 - \epsilon + \epsilon / V$ on the right token and $\epsilon / V$ on
# each of the others. A cross-entropy is at least the entropy of its target, so the floor is
#
# $$H(q) = -\left(1 - \epsilon + \frac{\epsilon}{V}\right)\log\left(1 - \epsilon + \frac{\epsilon}{V}\right)
# - (V - 1)\,\frac{\epsilon}{V}\log\frac{\epsilon}{V}$$
#
# The validation loss is measured without smoothing, so it has no such floor. The cell prints
# the floor, the last training loss, and the validation numbers of every evaluation.

# %%
run = load_run(folder)
V, smoothing = run.model.config.tgt_vocab, run.model.config.label_smoothing
right = 1 - smoothing + smoothing / V
floor = -right * math.log(right) - (V - 1) * (smoothing / V) * math.log(smoothing / V)
print(f"V = {V}, epsilon = {smoothing}: floor of the smoothed loss {floor:.3f} nats; "
      f"last training loss {train_records[-1]['loss']:.3f}")
assert train_records[-1]["loss"] >= floor, "a cross-entropy cannot be below the entropy of its target"
evaluations = [r for r in records if r["kind"] == "eval"]
print(" step  validation loss  token accuracy  BLEU")
for r in evaluations:
    print(f"{r['step']:5d}  {r['valid_loss']:15.3f}  {r['valid_accuracy']:13.1%}  {r['valid_bleu']:5.1f}")
lowest = min(evaluations, key=lambda r: r["valid_loss"])
print(f"lowest validation loss {lowest['valid_loss']:.3f} at step {lowest['step']}; "
      f"at the last evaluation (step {evaluations[-1]['step']}) {evaluations[-1]['valid_loss']:.3f}")
assert evaluations[1]["valid_loss"] < evaluations[0]["valid_loss"], "the validation loss must fall at first"

# %% [markdown]
# The validation loss falls from the first evaluation to the second (asserted). Whether it is
# still falling at the end is in the last line: the lowest value need not be the last one.
#
# `load_run` read the run folder back (the model and its two vocabularies), and a `Translator`
# turns them into strings in, strings out: tokenise, encode, greedy search, detokenise.

# %%
translator = Translator.from_run(run)
for sentence in ["the white cat eats the apple.", "she does not see a small bird.", "where are the green houses?"]:
    print(f"{sentence:35s} -> {translator.translate([sentence])[0]}")

# %% [markdown]
# ## How BLEU counts matches
#
# BLEU (Papineni et al., 2002) compares the $n$-grams (runs of $n$ tokens) of a translation, the
# hypothesis, with those of one or more references, for $n = 1, \dots, 4$. Counting every
# hypothesis $n$-gram found in a reference would reward "the the the the" against "the cat is on
# the mat" with 4 matches of 4. So each $n$-gram $g$ counts at most as often as it occurs in the
# reference that has most of it (**clipping**). With $c_h(g)$ the count of $g$ in the hypothesis
# and $c_r(g)$ its count in reference $r$, the **modified precision** is
#
# $$p_n = \frac{\sum_{g} \min\left(c_h(g),\, \max_r c_r(g)\right)}{\sum_{g} c_h(g)}$$
#
# over the distinct $n$-grams $g$ of the hypothesis; "the the the the" matches 2 of 4 unigrams.
# Corpus BLEU adds the numerators and denominators up over all sentences before dividing, takes
# the geometric mean of $p_1, \dots, p_4$, and multiplies it by a penalty for translations shorter
# than their references.
#
# ### Your turn
#
# Write `modified_precision(hypothesis, references, n)`: `hypothesis` is a list of tokens,
# `references` a list of token lists, `n` the $n$-gram order. Return `(matches, total)` as two
# `int`s: the numerator and the denominator of $p_n$. A hypothesis shorter than $n$ tokens has no
# $n$-gram: `(0, 0)`. `Counter` (imported above) counts hashable things, such as tuples of tokens.

# %%
def modified_precision(hypothesis, references, n):
    """BLEU's clipped n-gram matches and the number of n-grams of the hypothesis."""
    ### BEGIN SOLUTION
    def ngrams(tokens):
        return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))

    counts = ngrams(hypothesis)
    most = Counter()
    for reference in references:
        for gram, count in ngrams(reference).items():
            most[gram] = max(most[gram], count)
    matches = sum(min(count, most[gram]) for gram, count in counts.items())
    return matches, sum(counts.values())
    ### END SOLUTION


# %%
print(check("modified_precision", modified_precision))

# %% [markdown]
# npformer's `metrics.modified_precision` is what `metrics.bleu` counts with, after splitting each
# sentence with `metrics.tokenize_13a` (the tokenisation of sacreBLEU's default). Here are the
# precisions of this run's translations of three test sentences, and the corpus BLEU of the three:

# %%
pairs = splits.test[:3]
hypotheses = translator.translate([english for english, _ in pairs])
for (english, french), hypothesis in zip(pairs, hypotheses):
    tokens, reference = metrics.tokenize_13a(hypothesis), metrics.tokenize_13a(french)
    counts = [metrics.modified_precision(tokens, [reference], n) for n in (1, 2, 3, 4)]
    print(f"{english}\n  -> {hypothesis!r}\n  reference {french!r}\n  "
          + ", ".join(f"p{n} = {matches}/{total}" for n, (matches, total) in enumerate(counts, 1)))
print(f"corpus BLEU of these three: {metrics.bleu(hypotheses, [french for _, french in pairs]):.1f}")

# %% [markdown]
# ## Exercises
#
# 1. Train with `TrainOptions(label_smoothing=0)` and compare the validation BLEU after 300 steps.
# 2. Train a pre-norm model, `TrainOptions(norm="pre")`. Is it faster to converge here?
# 3. Which French phenomenon does the model get right last? Look at the sample translations
#    printed during training.
# 4. What BLEU does `metrics.bleu` give a three-token translation, however good, and why? Read the
#    docstring of `npformer.metrics`, then try it.
