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
# This lesson trains the `tiny` preset for about a minute (`NPFORMER_QUICK=1` for a few seconds)
# with the same code as `npformer train`.

# %%
import io
import json
import os
import shutil

import matplotlib.pyplot as plt

from npformer import viz
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
# The label-smoothed loss cannot go to zero: with `eps = 0.1` its floor is the entropy of the
# smoothed target. The validation loss (without smoothing) keeps falling.
#
# `load_run` reads the run folder back (the model and its two vocabularies), and a `Translator`
# turns them into strings in, strings out: tokenise, encode, greedy search, detokenise.

# %%
run = load_run(folder)
translator = Translator.from_run(run)
for sentence in ["the white cat eats the apple.", "she does not see a small bird.", "where are the green houses?"]:
    print(f"{sentence:35s} -> {translator.translate([sentence])[0]}")

# %% [markdown]
# ## Exercises
#
# 1. Train with `label_smoothing=0` and compare the validation BLEU after 300 steps.
# 2. Train a `norm="pre"` model. Is it faster to converge here?
# 3. Which French phenomenon does the model get right last? Look at the sample translations
#    printed during training.
