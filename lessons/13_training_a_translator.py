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
# This lesson trains the `tiny` preset for 600 steps (40 steps of smaller batches in quick mode,
# when the environment variable `NPFORMER_QUICK` is `1`) with the same code as `npformer train`,
# then looks at how BLEU, the score it reports, counts matches.

# %%
import io
import json
import math
import os
import re
import shutil
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, metrics, ops, pretrained, viz
from npformer.course import check
from npformer.data import encode_pairs, make_batches, toy_corpus
from npformer.tasks.translation import TrainOptions, Translator, pretrained_record, train
from npformer.tokens import PAD_ID
from npformer.tasks.translation import load_run

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

#
# ## Your turn: the training loop
#
# The loop that turns batches into updates is yours to write:
# `train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state)`. What it is given:
#
# * `params`: a dict, name $\to$ parameter array. The model reads **these arrays**, not your dict:
#   an update it is to see must change the arrays themselves.
# * `batches`: an iterable, read once. In `npformer train` it is a generator, and between two
#   batches the trainer logs, evaluates, saves a checkpoint and checks the budget and Ctrl-C; so
#   each step must be finished before the next batch is asked for.
# * `loss_and_grads(params, batch)`: returns `(loss, grads)`, the loss of the batch at the current
#   parameters and a dict of gradients with the keys and shapes of `params`. A parameter the
#   batch does not reach gets a gradient of zeros; it is still a parameter.
# * `max_norm`: clip the gradients as `optim.clip_grad_norm` does (lesson 12) before they are used:
#   when their global norm $\lVert g \rVert_2$ (every entry of every gradient) is above `max_norm`,
#   every gradient is multiplied by $c / (\lVert g \rVert_2 + 10^{-6})$ with $c$ = `max_norm`, and
#   left alone otherwise. `None`: no clipping.
# * `lr_at(t)`: the learning rate of update number $t$, the warm-up schedule; `betas` and `eps`: Adam's
#   (lesson 12, with bias correction).
# * `state`: a dict that outlives the call. It holds `state["step"]`, the number of updates taken so
#   far, and the moments, `state["m"][name]` and `state["v"][name]`. It starts empty (`{}`): create
#   what is missing. Given back to a second call, the loop must go on exactly as if it had never
#   stopped; this is how a run resumes from a checkpoint.
#
# Return the list of the losses, one float per batch. The grader checks the losses, the
# parameters, `state["step"]` and both moments after the loop, on a small two-layer perceptron
# (clipping on, clipping off, one batch, a resumed state, a parameter whose gradient is zero).
# Think about the order of the parts within a step, and about which number each part needs. A
# graded function sees only this lesson's functions: if you want your `adam_step` of lesson 12,
# copy it into this cell.

# %%
def train_loop(params, batches, loss_and_grads, lr_at, max_norm, betas, eps, state):
    """One pass over ``batches``: clipped, scheduled Adam steps on ``params`` (in place); the losses."""
    ### BEGIN SOLUTION
    beta1, beta2 = betas
    state.setdefault("step", 0)
    m, v = state.setdefault("m", {}), state.setdefault("v", {})
    losses = []
    for batch in batches:
        loss, grads = loss_and_grads(params, batch)
        losses.append(float(loss))
        if max_norm is not None:
            norm = math.sqrt(sum(float(np.sum(grad * grad)) for grad in grads.values()))
            scale = max_norm / (norm + 1e-6)
            if scale < 1:
                grads = {name: grad * scale for name, grad in grads.items()}
        state["step"] += 1
        step, lr = state["step"], lr_at(state["step"])
        for name, param in params.items():
            grad = grads[name]
            m[name] = beta1 * m.get(name, 0.0) + (1 - beta1) * grad
            v[name] = beta2 * v.get(name, 0.0) + (1 - beta2) * grad * grad
            m_hat = m[name] / (1 - beta1**step)
            v_hat = v[name] / (1 - beta2**step)
            param -= lr * m_hat / (np.sqrt(v_hat) + eps)
    return losses
    ### END SOLUTION


# %%
loop_report = check("train_loop", train_loop)
print(loop_report)

# %% [markdown]
# ### Your loop in the trainer
#
# `train(options, loop=train_loop)` runs the same trainer with your loop taking the steps:
# `params` are the Transformer's arrays, `loss_and_grads` runs its forward pass, the smoothed loss
# and the backward pass, `lr_at` is the run's schedule, `max_norm` its `clip`, and `state` is
# the optimizer's step count and moments, which the checkpoint saves. (`npformer train --ops
# my_npformer.py` does the same with the `train_loop` that `npformer course collect` found in
# this lesson.) The cell trains 8 steps of a small run twice from the same seed, once with
# npformer's loop and once with yours, and prints both losses.

# %%
def first_losses(name, loop=None):
    """The training losses of an 8-step run (300 pairs, small batches), and what the trainer logged."""
    shutil.rmtree(os.path.join("runs", name), ignore_errors=True)
    run_log = io.StringIO()
    options = TrainOptions(name=name, runs_dir="runs", max_steps=8, warmup=4, log_every=1, eval_every=8,
                           eval_sentences=5, test_sentences=5, token_budget=256, max_pairs=300)
    assert train(options, stream=run_log, loop=loop) == 0, run_log.getvalue()
    with open(os.path.join("runs", name, "metrics.jsonl"), encoding="utf-8") as file:
        return [json.loads(line)["loss"] for line in file if '"train"' in line], run_log.getvalue()


if loop_report.passed:
    npformers, _ = first_losses("lesson-13-npformer-loop")
    yours, yours_log = first_losses("lesson-13-your-loop", train_loop)
    print(next(line for line in yours_log.splitlines() if line.startswith("training loop")))
    print("step  npformer's loop  your loop  relative difference")
    for step, (theirs, mine) in enumerate(zip(npformers, yours), 1):
        print(f"{step:4d}  {theirs:15.6f}  {mine:9.6f}  {abs(mine - theirs) / theirs:.1e}")
    assert np.allclose(yours, npformers, rtol=1e-5, atol=0), "your loop must take the steps npformer's takes"
else:
    print("train_loop does not pass its check yet: the trainer runs it once it does")

# %% [markdown] tags=["instructor"]
# ### Notes on `train_loop` (instructor edition)
#
# * **The order of a step**: the loss and its gradients, the clipping, the count, then the learning
#   rate and Adam's bias correction of the counted step. `state["step"]` is both the schedule's step
#   and Adam's $t$, and it is 1 on the first update of a run: reading `lr_at` before counting asks
#   the schedule for step 0 (the grader's schedule refuses it, as `optim`'s do).
# * **One norm for all the gradients**: clipping shortens the update without turning it. Clipping each
#   tensor by its own norm changes the relative sizes of the tensors' gradients, so the direction of
#   the whole step; and their joint norm stays above `max_norm`, which is the property the hint states.
# * **Why clipping is hard to see through Adam**: Adam divides $m$ by $\sqrt{v}$, so a scale shared by
#   every step cancels but for `eps`; only a scale that changes from step to step shows. The grader's
#   first case therefore grows its inputs: no clipping on the first steps, clipping later, and the
#   mistakes "rescaled at every step" and "clipping never applied" then change the result.
# * **In place**: `param -= update` changes the array the model holds; `params[name] = param - update`
#   puts a new array in a dict the model never reads. The grader's model, like npformer's
#   (`Module.params()` builds a new dict of its arrays at each call), keeps its own dict, so the losses
#   after the first batch show the mistake. In `npformer train` it would train nothing at all.
# * **The state outlives the call**: a loop that starts its own count or its own moments passes every
#   case that starts from `{}` and fails the resumed one. In the trainer the state is the optimizer's
#   (`student_loop.state_from`), and a checkpoint stores it as npformer's loop's, so a run started with
#   one loop resumes with the other.
# * **The two runs above**: the same batches, dropout masks and ops; the losses agree to float32
#   rounding (in our runs, to the last printed digit). The only computation done differently is the
#   norm's sum (`clip_grad_norm` adds each tensor's float32 sum of squares in float64).
#
# The grader's first-tier hints, in the order a student tends to meet them: "the first update is
# 0.71 times the size it should be, and the ratio drifts toward 1" (no bias correction), "with max_norm
# set, the gradients that reach Adam have a norm above max_norm" (each tensor clipped alone), "the
# losses after the first batch are those of the starting parameters" (a new array, not in place),
# "this one resumes at step 3 ... your result is that of a run started afresh" (the state reset).

# %% [markdown]
# ## Training the tiny model
#
# Now the real run, with npformer's loop: the `tiny` preset on the whole embedded corpus.

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
folder = os.path.join("runs", "lesson-13")
shutil.rmtree(folder, ignore_errors=True)  # the lesson starts from scratch each time
log = io.StringIO()
status = train(TrainOptions(name="lesson-13", runs_dir="runs", max_steps=40 if QUICK else 600,
                            eval_every=20 if QUICK else 50, eval_sentences=20 if QUICK else 50,
                            test_sentences=20 if QUICK else 1000, log_every=5,
                            token_budget=512 if QUICK else 2048), stream=log)
for line in log.getvalue().splitlines():  # each evaluation and its three sample translations
    evaluation = re.search(r"step \d+: valid loss.*", line)
    if evaluation or "(reference:" in line or line.startswith("test BLEU"):
        print(evaluation.group(0) if evaluation else line.rstrip())
assert status == 0
if QUICK:
    print("quick mode: 40 steps leave this model far from right (its BLEU is printed below); the "
          "analyses after the training curves read the shipped pretrained toy translator instead")

# %% [markdown]
# ## The training curves
#
# The trainer writes one line of `metrics.jsonl` every 5 steps (the training loss and the learning
# rate) and one at every evaluation (the validation loss, token accuracy and BLEU).
# `viz.training_curves` draws the losses, the validation BLEU and the learning rate against the step.

# %%
with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as file:
    records = [json.loads(line) for line in file]
viz.training_curves(records, path=viz.figures_dir() / "13_training_curves.png", title="tiny model, embedded corpus")
train_records = [r for r in records if r["kind"] == "train"]
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
# The rest of the lesson looks at a trained model. In full mode that is this run's checkpoint. In
# quick mode, where 40 steps are far too few, it is `npformer.pretrained("toy")`: the same preset
# on the same corpus, trained for 900 steps by `npformer train` and shipped inside the package.
# Its recorded test BLEU is printed here.

# %%
if QUICK:
    trained = pretrained("toy")
    record = pretrained_record("toy")
    print(f"the pretrained toy translator ({record['command']}): test BLEU greedy "
          f"{record['bleu_greedy']:.1f}, beam {record['bleu_beam']:.1f} on {record['sentences']:,} sentences")
else:
    trained = run
    print(f"this run's checkpoint, step {evaluations[-1]['step']}")
#
# ## Right, and how sure?
#
# Token accuracy counts a position as right when the right token has the highest probability.
# The validation loss is the mean of $-\log p$ over the same positions, where $p$ is the
# probability the model gives the right token. So a model can be right everywhere and still have
# a loss well above zero, if it is right without being sure. `load_run` (above) read the run
# folder back: the trained model and its two vocabularies. The cell runs that model over every
# validation sentence, teacher-forced as in the evaluations (the decoder reads the reference's
# prefix), and keeps $p$ for every target token and the probabilities of the $V - 1$ wrong tokens.
# In full mode it also checks the mean of $-\log p$ and the accuracy against the last
# evaluation's: the checkpoint is the model that evaluation saw.

# %%
valid_examples = encode_pairs(splits.valid, trained.src_vocab, trained.tgt_vocab, trained.model.config.max_len)
right_probabilities, wrong_probabilities, right_answers = [], [], []
for batch in make_batches(valid_examples, trained.config["train"]["token_budget"]):
    logits = trained.model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
    real = batch.tgt_out != PAD_ID
    probabilities = backend.to_numpy(ops.softmax_forward(logits)[0]).astype(np.float64)[real]  # (tokens, V)
    targets = batch.tgt_out[real]
    is_right = np.arange(V) == targets[:, None]
    right_probabilities.append(probabilities[is_right])
    wrong_probabilities.append(probabilities[~is_right])
    right_answers.append(probabilities.argmax(axis=-1) == targets)
right_probabilities, wrong_probabilities, right_answers = map(
    np.concatenate, (right_probabilities, wrong_probabilities, right_answers))
loss_again, accuracy_again = -np.log(right_probabilities).mean(), right_answers.mean()
print(f"{right_probabilities.size:,} validation target tokens: mean -log p {loss_again:.4f}, "
      f"accuracy {accuracy_again:.2%}")
if not QUICK:
    last = evaluations[-1]
    assert last["step"] == train_records[-1]["step"], "the checkpoint must be the last evaluation's model"
    print(f"logged at step {last['step']}: {last['valid_loss']:.4f} and {last['valid_accuracy']:.2%}")
    assert abs(loss_again - last["valid_loss"]) < 1e-3 and abs(accuracy_again - last["valid_accuracy"]) < 1e-9
low, median, high = np.percentile(right_probabilities, [1, 50, 99])
print(f"p of the right token: lowest {right_probabilities.min():.3f}, 1st percentile {low:.3f}, "
      f"median {median:.3f}, 99th percentile {high:.3f}, highest {right_probabilities.max():.3f}")
print(f"the smoothed target puts 1 - epsilon + epsilon / V = {right:.3f} on the right token; "
      f"exp(-validation loss) = {math.exp(-loss_again):.3f}")
wrong = smoothing / V  # what the smoothed target puts on each wrong token
near_wrong = np.mean((wrong_probabilities > wrong / 3) & (wrong_probabilities < 3 * wrong))
print(f"{wrong_probabilities.size:,} wrong-token probabilities: median {np.median(wrong_probabilities):.1e}, "
      f"highest {wrong_probabilities.max():.3f}; within a factor 3 of epsilon / V = {wrong:.1e}: {near_wrong:.0%}")

# %%
figure, (right_axis, wrong_axis) = plt.subplots(1, 2, figsize=(13, 4.4), constrained_layout=True)
right_axis.hist(right_probabilities, bins=np.linspace(0, 1, 101), color="tab:blue")
right_axis.axvline(right, color="black", linestyle="--", label=f"smoothed target 1 - ε + ε/V = {right:.3f}")
right_axis.axvline(math.exp(-loss_again), color="tab:red", linestyle=":",
                   label=f"exp(-validation loss) = {math.exp(-loss_again):.3f}")
right_axis.set(xlim=(0, 1), xlabel="probability of the right token", ylabel="target tokens",
               title=f"The right token: {right_probabilities.size:,} validation positions")
right_axis.legend(loc="upper left")
right_axis.grid(True, alpha=0.3)
smallest_drawn = 1e-7  # smaller probabilities are drawn in the first bin, and the label says how many
below = int((wrong_probabilities < smallest_drawn).sum())
wrong_axis.hist(np.maximum(wrong_probabilities, smallest_drawn), bins=np.geomspace(smallest_drawn, 1, 141),
                color="tab:orange")
wrong_axis.axvline(wrong, color="black", linestyle="--", label=f"smoothed target ε/V = {wrong:.1e}")
wrong_axis.set(xscale="log", xlim=(smallest_drawn, 1),
               xlabel="probability of a wrong token (log scale)"
               + (f"; {below:,} below {smallest_drawn:g} drawn at {smallest_drawn:g}" if below else ""),
               ylabel="(position, wrong token) pairs",
               title=f"The {V - 1} wrong tokens at each position: {wrong_probabilities.size:,} probabilities")
wrong_axis.legend(loc="upper left")
wrong_axis.grid(True, alpha=0.3)
figure.suptitle(("The pretrained toy translator (900 steps)" if QUICK else f"The model at step {evaluations[-1]['step']}")
                + ": what it predicts on the validation set (teacher-forced)")
figure.savefig(viz.figures_dir() / "13_loss.png", dpi=110)

# %% [markdown]
# The trained model's accuracy is at least 99%, no right token gets a probability
# above 0.99, the median $p$ is within 0.05 of the smoothed target's 0.901, and most wrong tokens
# get within a factor 3 of $\epsilon / V$ (asserted below). So the model's predictions look like
# the smoothed target it was trained on, not like a one-hot vector: it puts a little over 0.9 on
# the right token (left panel) and spreads the rest thinly over the others (right panel). At that accuracy the validation loss, the mean of $-\log p$, measures how
# sure the model is, not how often it is wrong: $e^{-\text{loss}}$, the geometric mean of $p$, is
# printed above beside the 0.901 of the smoothed target, and with every $p$ below 0.99 the loss
# stays above $-\log 0.99 \approx 0.01$ however right the model is. Exercise 1 below trains
# without smoothing; draw the two histograms again for it.

# %%
assert accuracy_again >= 0.99 and right_probabilities.max() < 0.99 and near_wrong > 0.5
assert abs(median - right) < 0.05
assert loss_again > -math.log(0.99)

# %% [markdown]
# A `Translator` turns the model and its vocabularies into strings in, strings out: tokenise,
# encode, greedy search, detokenise.

# %%
translator = Translator.from_run(trained)
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
# precisions of the trained model's translations of three test sentences, and the corpus BLEU of the three:

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
#    Draw the two histograms of this lesson's last figure again: where are they now?
# 2. Train a pre-norm model, `TrainOptions(norm="pre")`. Is it faster to converge here?
# 3. Which French phenomenon does the model get right last? Look at the sample translations
#    printed during training.
# 4. What BLEU does `metrics.bleu` give a three-token translation, however good, and why? Read the
#    docstring of `npformer.metrics`, then try it.

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. The schedule does not depend on `max_steps`, so
#    `train(TrainOptions(label_smoothing=0, max_steps=300, ...))` with a new `name` is this run's
#    first 300 steps without smoothing; compare its last validation BLEU with this run's evaluation
#    at step 300 (printed below; in quick mode this run has none). Expect about the same BLEU: on
#    this corpus both are close to 100 by then, and smoothing is not what limits it (in our runs the
#    two were equal at step 300). The validation loss is much lower without smoothing. The
#    histograms move: the right token's $p$ piles up just below 1 instead of around
#    $1 - \epsilon + \epsilon/V$, and the wrong tokens' probabilities fall orders of magnitude below
#    $\epsilon / V$, with a thin tail of a few confident mistakes. Full marks: the BLEU comparison
#    at equal steps, and where each histogram's mass went and why (with a one-hot target the loss
#    keeps rewarding $p \to 1$; nothing holds mass on the wrong tokens).
# 2. Compare validation loss and BLEU at the same steps, same seed and schedule (`eval_every=50`
#    gives enough points). With 2 + 2 layers, a 300-step warm-up and gradient clipping the two
#    converge about equally fast; in our runs pre-norm was slightly ahead around steps 200 to 300
#    and no better at the end. Full marks: a like-for-like comparison, the finding that they are
#    close, and the reason: pre-norm's advantage shows in deep stacks and with little or no warm-up
#    (lessons 9 and 12), not in a shallow, warmed-up model. A careful answer notes that one seed and
#    50 validation sentences cannot separate small differences.
# 3. (Every evaluation's three samples are printed under the training cell, every 50 steps; in quick
#    mode the run is too short to show it.) Read them in order: first the question frame
#    (`est-ce que ... ?`) and the sentence's length come right, then the plural agreement of the
#    adjectives that follow the noun (`noirs`, `verts`), while adjectives that go before the noun
#    (`grandes`, `belle`), the elided article (`l'arbre`) and the question's verb and object are
#    still dropped or replaced; one evaluation later all three samples are right. So among the last
#    phenomena learned are adjectives placed before the noun, an exception to the rule the model has
#    just learned, and the elision in front of a vowel. The samples contain no negation, so `ne ... pas` cannot be judged
#    from them. Full marks: samples from several evaluations as evidence and a phenomenon named with
#    its step; extra credit for noticing that three fixed sentences cover few phenomena and checking
#    each one on more sentences (the validation sentences that contain it).
# 4. Zero, however good: BLEU is the geometric mean of $p_1, \dots, p_4$, and a three-token
#    translation has no 4-gram, so $p_4$ has no denominator. `npformer.metrics` follows sacreBLEU:
#    "an order with no hypothesis n-gram at all makes the score 0". In a corpus the counts are
#    summed over the sentences first, so a short sentence among longer ones does not zero the score.
#    Checked below.

# %% tags=["instructor"]
at_300 = min(evaluations, key=lambda r: abs(r["step"] - 300))
print(f"answer 1: this run (label smoothing {smoothing}) at step {at_300['step']}: validation BLEU "
      f"{at_300['valid_bleu']:.1f}, validation loss {at_300['valid_loss']:.3f}")

# %% tags=["instructor"]
answer_lines = [line.split("\r")[-1] for line in log.getvalue().splitlines()]
for line in answer_lines:
    if "valid loss" in line or ("->" in line and "(reference:" in line):
        print("answer 3:", line.strip())
assert sum("valid loss" in line for line in answer_lines) == len(evaluations)

# %% tags=["instructor"]
three_tokens = metrics.bleu(["le chat."], ["le chat."])
four_tokens = metrics.bleu(["le chat noir."], ["le chat noir."])
in_a_corpus = metrics.bleu(["le chat.", "le chat noir mange."], ["le chat.", "le chat noir mange."])
print(f"answer 4: perfect three-token translation {three_tokens:.1f}, perfect four-token {four_tokens:.1f}, "
      f"both perfect in one corpus {in_a_corpus:.1f} (tokens: {metrics.tokenize_13a('le chat.')})")
assert three_tokens == 0 and four_tokens == 100 and in_a_corpus == 100
