# %% [markdown]
# # Lesson 27 — Your Transformer
#
# Since lesson 2 you have written the backward passes of a Transformer one at a time: the linear
# layer, ReLU and GELU, the loss, layer normalisation, the embedding, dropout, attention, the masks,
# the positional table, the residual blocks of the encoder and decoder layers (lessons 9 and 10),
# and Adam's update. Each was graded alone. This lesson puts them together:
# your functions become the ops that npformer's blocks call, and the translator of lesson 13 trains
# on them, with your training loop of lesson 13 taking the steps.
#
# 1. **Collect** your graded functions from your lessons into one module, `my_npformer.py`.
# 2. **Plug them in**: `course.student_ops` turns each function that passes its exercise into an op
#    (`linear_backward(x, W, b, dout)` becomes the op `linear_backward(dy, cache)`), and
#    `ops.using(...)` makes every block, the loss and Adam call them. What you have not written, or
#    not yet got right, stays npformer's, and the report says which is which.
# 3. **Check** the whole model's gradients through your ops against finite differences.
# 4. **Train** the translator on your ops and your loop, and on npformer's, and compare the two runs.
# 5. **Break** one backward pass on purpose, and see what the check and the training say.
#
# The same three steps are commands: `npformer course collect LESSONS --out my_npformer.py`,
# `npformer gradcheck --model --ops my_npformer.py`, `npformer train --ops my_npformer.py`.

# %%
import io
import json
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from npformer import course, gradcheck, ops, viz
from npformer.tasks.translation import TrainOptions, train

QUICK = os.environ.get("NPFORMER_QUICK") == "1"

# %% [markdown]
# ## 1. Collect
#
# Your lessons are the files you have been filling in: run this notebook in their folder, or set
# `NPFORMER_LESSONS` to it. (Otherwise the lesson uses the lessons installed with npformer: the
# student edition, whose stubs keep npformer's ops; a clone of the repository has the instructor's.)

# %%
def lessons_folder():
    """The folder of your lessons: the current one if it holds them, else $NPFORMER_LESSONS, else
    the lessons installed with npformer."""
    for folder in (Path.cwd(), Path(os.environ.get("NPFORMER_LESSONS", Path.cwd())), course.lessons_folder()):
        if any(folder.glob("02_linear_and_relu.*")):
            return folder
    raise FileNotFoundError("no lessons here: run this lesson in the folder of your lessons, "
                            "or set NPFORMER_LESSONS to it")


folder = lessons_folder()
collected = course.collect(folder, "my_npformer.py")
print(collected.summary())

# %% [markdown]
# ## 2. Plug them in
#
# Each function is graded first, on its exercise's cases; a function that is missing, not written
# yet, or failing keeps npformer's op.

# %%
yours = course.load_student_ops("my_npformer.py")  # a function that fails its exercise stops here, named
print(yours.report())
n_yours = len(yours.yours())  # the forward ops that only keep your inputs are npformer's

# %% [markdown]
# ## 3. Check the whole model
#
# `gradcheck.check_model` builds a tiny float64 Transformer, with padding, dropout and label
# smoothing, and compares the gradient of every parameter with finite differences of the loss, one
# random direction per tensor. Under `ops.using(yours)` every gradient flows through your backward
# passes, from the loss down to the embedding tables.

# %%
with ops.using(yours):
    model_check = gradcheck.check_model(seed=0, directions=1)
print(model_check.table().splitlines()[-1])
assert model_check.passed, "the whole model's gradients must pass through your ops"

# %% [markdown]
# ## 4. Train on your ops, and on npformer's
#
# The same command twice: `npformer train` on the embedded corpus (lesson 13), once on your ops and
# once on npformer's, from the same seed. When your lessons hold a `train_loop` that passes its
# exercise (lesson 13), your run's steps are taken by it (`train(..., loop=...)`, what `npformer train
# --ops` does), and the line printed after the runs says whose loop it was.

# %%
FULL_RUN = {"max_steps": 900, "eval_every": 300, "test_sentences": 1000}
# the quick run (NPFORMER_QUICK=1): 80 steps of smaller batches, a short warm-up to a higher peak, on
# fewer pairs and sentences; long enough for the test BLEU to tell a right run from a broken one (section 5)
QUICK_RUN = {"max_steps": 80, "warmup": 15, "lr": 6e-3, "eval_every": 80, "test_sentences": 60,
             "eval_sentences": 20, "max_pairs": 2000, "token_budget": 512}


def run(name, op_set):
    """Train, and return (training losses by step, test BLEU greedy, seconds)."""
    settings = QUICK_RUN if QUICK else FULL_RUN
    options = TrainOptions(name=name, runs_dir="runs", log_every=5, **settings)
    start = time.perf_counter()
    with ops.using(op_set):  # your train_loop of lesson 13 takes the steps when your op set holds one
        assert train(options, stream=io.StringIO(), loop=getattr(op_set, "train_loop", None)) == 0
    seconds = time.perf_counter() - start
    with open(os.path.join("runs", name, "metrics.jsonl"), encoding="utf-8") as file:
        records = [json.loads(line) for line in file]
    losses = {r["step"]: r["loss"] for r in records if r["kind"] == "train"}
    test = next(r for r in records if r["kind"] == "test")
    return losses, test["bleu_greedy"], seconds


results = {"npformer's": run("lesson-27-npformer", "fast")}
if n_yours or yours.train_loop is not None:
    results = {"yours": run("lesson-27-yours", yours), **results}
else:  # nothing of yours runs yet: the two runs would be one run twice
    print("none of the ops is yours yet, nor the training loop: npformer's run stands for yours")
    results = {"yours": results["npformer's"], **results}
print(f"{n_yours} of {len(ops.OP_NAMES)} ops were yours; the training loop was "
      + ("yours (train_loop, lesson 13)" if yours.train_loop is not None else "npformer's"))
for label, (losses, bleu, seconds) in results.items():
    print(f"{label:10s} last training loss {list(losses.values())[-1]:.5f}, test BLEU (greedy) {bleu:.1f}, "
          f"{seconds:.0f} s")
gap = max(abs(results["yours"][0][step] - results["npformer's"][0][step]) for step in results["yours"][0])
print(f"largest difference between the two loss curves: {gap:.1e}")

# %% [markdown]
# When all your functions are right, the two runs compute the same numbers up to float32 rounding,
# in a different order: the printed gap between the curves is that rounding, grown over the steps
# of training, and the two test BLEU scores agree but for the few sentences where that rounding tips a
# near-tie of greedy decoding one way or the other. Your run is slower: your functions are the textbook
# forms, without npformer's fast forms (lesson 16), and every op hands its inputs to your function.

# %% [markdown]
# ## 5. One wrong backward pass
#
# The bug zoo of lesson 22, applied to your own code: ReLU's backward that forgets its mask
# (`dx = dout` everywhere). The grader refuses it, so it is used here with `allow_failing=True`,
# as `npformer train --ops ... --allow-failing` would.

# %%
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("my_npformer", "my_npformer.py")
my_npformer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(my_npformer)


def relu_backward_without_mask(x, dout):
    return dout


functions = {name: value for name, value in vars(my_npformer).items() if callable(value)}
functions["relu_backward"] = relu_backward_without_mask
broken = course.student_ops(functions, allow_failing=True, source="my_npformer.py, relu_backward broken")
with ops.using(broken):
    broken_check = gradcheck.check_model(seed=0, directions=1)
print(broken_check.table().splitlines()[-1])
right = [row.tensor for row in broken_check.results if row.passed]
print(f"{len(broken_check.failures)} of {len(broken_check.results)} gradients wrong; right: {', '.join(right)}")
assert not broken_check.passed, "a backward pass without ReLU's mask must fail the model check"
results["relu mask forgotten"] = run("lesson-27-broken", broken)
losses, bleu, seconds = results["relu mask forgotten"]
print(f"relu mask forgotten: last training loss {list(losses.values())[-1]:.5f}, test BLEU (greedy) {bleu:.1f}")

figure, axis = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
for (label, (losses, bleu, _)), style in zip(results.items(), ("-", "--", ":")):
    axis.plot(list(losses), list(losses.values()), style, label=f"{label} (test BLEU {bleu:.1f})")
axis.set(xlabel="step", ylabel="training loss (label-smoothed)",
         title=f"The translator on your ops ({n_yours} of {len(ops.OP_NAMES)} yours) and on npformer's")
axis.legend()
figure.savefig(viz.figures_dir() / "27_your_transformer.png", dpi=110)

# %% [markdown]
# The model check names the parameters whose gradients went wrong, and the printed list of those
# still right is short: the parameters that the loss reaches before it passes back through any
# ReLU (the output projection, the last layer norm, the last feed-forward layer's `fc2`), and the
# key biases, whose gradient is zero whatever the backward pass does (adding one number to every
# score of a row leaves its softmax unchanged). Everything under a ReLU receives the wrong gradient. Training does not stop: it goes on along that wrong gradient, and the figure
# and the printed numbers show where it ends next to the two right runs. A wrong gradient rarely
# crashes a run, which is why the check comes before the training.
#
# ## Exercises
#
# 1. Break a different function of yours (`layernorm_backward` without its mean term, `adam_step`
#    without its bias correction) and compare the three curves again. Which mistake costs the most?
#    Why can the model check not see the Adam mistake?
# 2. `npformer gradcheck --model --ops my_npformer.py --allow-failing` names the exercise that breaks
#    the model when one of your functions fails. How does it find it? (Read `_blame_student_ops` in
#    `npformer/cli/gradcheck.py`.)
# 3. Time both runs with `npformer train --ops my_npformer.py` and `npformer train`. Where does your
#    run spend the extra time? (Lesson 16's profile, and `npformer bench --ops textbook`.)

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. The cell below checks the model through each new mistake: layer norm without its mean term
#    fails most tensors, Adam without bias correction passes. Which mistake costs most is measured
#    with two more runs (the full-length ones, 900 steps, take a few minutes each). In our runs on
#    the embedded corpus neither new mistake left a trace at the end: both reached the right runs'
#    final loss and a test BLEU of 100, and of the three, ReLU's forgotten mask cost the most, and
#    even it only a little (`benchmarks/RESULTS.md` records that run). The task is easy, and a
#    gradient that is wrong but still points downhill trains. Adam without bias correction does not
#    change the direction of any update, only its size, by $(1-\beta_1^t)/\sqrt{1-\beta_2^t}$
#    (printed below: below 1 at step 1, above 1 for tens of steps, 1 after a few hundred), while the
#    warm-up keeps the learning rate small. The model check cannot see it because it compares the
#    gradient of the loss with finite differences, and the optimizer takes no part in computing
#    gradients: `adam_step` only consumes them. A check of the update itself (`check_adam`, the
#    closed form over a few steps, lesson 21's mutant "adam: no bias correction") is what sees it.
#    Full marks: the curves, a ranking read from them (small differences of one run each are
#    noise), and the gradient-versus-update argument.
# 2. `_blame_student_ops` runs only when the model check through the student's ops fails. It
#    first names every exercise that failed its own grading but was let in by `--allow-failing`
#    (status "failing"). Then, for each exercise that passed its grading and whose ops are not
#    already blamed, it puts just that exercise's ops in (`ops.using({...})`) and runs the
#    gradient check of each op case it covers (`gradcheck.check_op`, the op's hard case: padding,
#    repeated ids, a row of small variance); an op that fails or raises names its exercise and
#    lesson too. If nothing is named, every op is right alone and the message says to look at how
#    they combine. Full marks: the two stages (grading verdicts, then op checks one exercise at a
#    time) and why the second exists (the public grading cases can miss what an op case catches).
#    The cell below calls it on this lesson's broken set: it names `relu_backward` (lesson 02).
# 3. Both commands print their seconds; the full-marks answer compares steps per second and then
#    says where the extra time goes, from a profile (`bench.profile_step`, which
#    `npformer bench` prints, or `--ops textbook` for npformer's own textbook set). The cell below
#    profiles a few `tiny`-preset training steps on your ops and on npformer's fast set, family
#    by family. Expected: the extra time is in the families where npformer has fast forms:
#    attention (whose student op also runs the textbook forward, for the weights, beside the
#    student's own), the loss, layer norm and the Adam update; the linear layers' products are not
#    where it goes (both sets run GEMMs), nor the Python of the blocks. Part of it is the adapter,
#    which hands every op's inputs to the student's function and casts its results back to the
#    model's dtype. The profile is a few steps on a shared machine: read its shares, not its
#    third digit.

# %% tags=["instructor"]
def layernorm_backward_without_mean(x, gamma, beta, dout, eps=1e-5):
    """The exercise of lesson 4 with the mean term of dx left out."""
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) * rstd
    g = dout * gamma
    dx = rstd * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))  # "- g.mean(-1)" forgotten
    d = x.shape[-1]
    return dx, (dout * x_hat).reshape(-1, d).sum(axis=0), dout.reshape(-1, d).sum(axis=0)


def adam_step_without_bias_correction(param, grad, m, v, step, lr, beta1, beta2, eps):
    """The exercise of lesson 12 without m_hat and v_hat."""
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * m / (np.sqrt(v) + eps), m, v


right_functions = {name: value for name, value in vars(my_npformer).items() if callable(value)}  # relu_backward right
for label, name, wrong in (("layer norm without its mean term", "layernorm_backward", layernorm_backward_without_mean),
                           ("Adam without bias correction", "adam_step", adam_step_without_bias_correction)):
    wrong_set = course.student_ops({**right_functions, name: wrong}, allow_failing=True, source=f"my_npformer.py, {label}")
    with ops.using(wrong_set):
        wrong_check = gradcheck.check_model(seed=0, directions=1)
    print(f"answer 1: {label}: model check {wrong_check.table().splitlines()[-1]}")
    assert wrong_check.passed == (name == "adam_step"), "the model check sees gradients, never the optimizer"
steps = np.array([1, 10, 100, 1000])
ratio = (1 - 0.9 ** steps) / np.sqrt(1 - 0.98 ** steps)  # uncorrected step / corrected step, betas (0.9, 0.98)
print("answer 1: Adam without bias correction, step size over the right one (betas 0.9, 0.98): "
      + ", ".join(f"step {step}: {value:.2f}" for step, value in zip(steps, ratio)))
assert abs(ratio[-1] - 1) < 1e-6

# %% tags=["instructor"]
from npformer.cli.gradcheck import _blame_student_ops  # noqa: E402
import argparse  # noqa: E402

verdict = _blame_student_ops(argparse.Namespace(seed=0), broken, broken_check)
print(f"answer 2: {verdict}")
assert "relu_backward (lesson 02)" in verdict

# %% tags=["instructor"]
from npformer import backend, bench, optim  # noqa: E402
from npformer.models import Transformer, TransformerConfig  # noqa: E402

preset = bench.PRESETS["tiny"]
profile_batches = [(backend.asarray(s), backend.asarray(t)) for s, t in bench.random_batches(preset, 6)]
profiles = {}
for label, op_set in (("yours", yours), ("fast", "fast")):
    with ops.using(op_set):
        profile_model = Transformer(TransformerConfig(**{k: preset[k] for k in ("src_vocab", "tgt_vocab", "d_model",
                                                                                 "n_heads", "d_ff", "n_layers")},
                                                      dropout=0.0), seed=0)
        profiles[label] = bench.profile_step(profile_model, optim.Adam(profile_model, lr=1e-4), profile_batches)
print(f"answer 3: ms per tiny-preset step: yours {1000 * profiles['yours']['seconds_per_step']:.0f}, "
      f"npformer's fast set {1000 * profiles['fast']['seconds_per_step']:.0f}; by family (yours / fast):")
for family in profiles["yours"]["families"]:
    print(f"  {family:55s} {1000 * profiles['yours']['families'][family]:6.1f} / "
          f"{1000 * profiles['fast']['families'][family]:6.1f}")
