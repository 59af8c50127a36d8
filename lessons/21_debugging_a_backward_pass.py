# %% [markdown]
# # Lesson 21 — Debugging a backward pass: from the checker's report to the line
#
# Every lesson so far wrote a backward pass and checked it. This one starts from the other end: a
# backward pass is wrong, and the gradient check has failed. What does the report say, and how do
# we get from it to the line that is wrong?
#
# `npformer.gradcheck.mutants` is a catalogue of realistic backward bugs, each one small change to
# a correct backward pass: the kind of mistake that hand-written backward passes are full of. A
# mutant is applied without editing the library (`with mutant.applied(): ...` patches one function
# for the duration of the block), so we can watch the checker meet each bug.

# %%
import os
import time

import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check
from npformer.gradcheck import mutants

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
print(f"{len(mutants.MUTANTS)} mutants in the catalogue")


def mutant(name):
    return next(m for m in mutants.MUTANTS if m.name == name)


def failing_rows(report):
    """The report's table, the failing rows only (and its header)."""
    lines = report.table().splitlines()
    return "\n".join(lines[:2] + [line for line in lines[2:-1] if "FAIL" in line] + lines[-1:])

# %% [markdown]
# ## Bug 1: a factor
#
# Scaled dot-product attention divides its scores by $\sqrt{d_k}$, so both $dQ$ and $dK$ carry the
# factor $1/\sqrt{d_k}$. Here the backward pass forgets it in $dK$:

# %%
bug = mutant("attention: 1/sqrt(d_k) missing from dK")
print(bug.bug)
with bug.applied():
    report = gradcheck.check_op("attention")
print(failing_rows(report))
assert not report.passed and "constant factor" in report.failures[0].note

# %% [markdown]
# Read the report from left to right. Only `k` fails, so the bug is in the lines that compute
# $dK$, not in the shared softmax backward (that would break $dQ$ too). The error is the same
# factor at every entry, and the factor is $\sqrt{3}$: the op case has $d_k = 3$. A constant
# factor that is a square root of a size almost always means a forgotten (or doubled) scale.
#
# ## Bug 2: one row
#
# The embedding's backward pass adds each position's gradient into the row of its token. Written
# with fancy-index assignment, `dW[ids] = dout`, a token that occurs twice keeps only one write:

# %%
bug = mutant("embedding: repeated ids overwrite")
with bug.applied():
    report = gradcheck.check_op("embedding")
print(failing_rows(report))
row = report.failures[0]
_, _, inputs = gradcheck.embedding_case(np.random.default_rng(0))
ids, counts = np.unique(inputs["ids"], return_counts=True)
print(f"worst entry at {row.worst_index}: token {row.worst_index[0]} occurs "
      f"{counts[ids == row.worst_index[0]].sum()} times in the batch")
print("ids that occur more than once:", ids[counts > 1].tolist())
assert counts[ids == row.worst_index[0]].sum() > 1

# %% [markdown]
# The error sits in a few rows of $dW$, and the worst one is the row of a token that occurs more
# than once in the batch. That is the signature of a scatter written as an assignment; `np.add.at`
# (or a sum over a one-hot matrix) adds the repeated rows up. Note that a batch with no repeated id
# would not catch this bug at all: the op case draws 8 ids from a vocabulary of 7 on purpose.
#
# ## Bug 3: gradient where there should be none
#
# Cross-entropy ignores the `<pad>` targets: they add nothing to the loss, so their logits must get
# no gradient. Here the backward pass forgets the mask:

# %%
bug = mutant("cross-entropy: gradient at <pad> targets")
with bug.applied():
    report = gradcheck.check_op("cross_entropy")
print(failing_rows(report))
assert "exactly 0" in report.failures[0].note

# %% [markdown]
# "Non-zero only where the right answer is exactly 0": the finite differences say those entries
# do not affect the loss at all, and the backward pass gives them a gradient anyway. The same note
# appears for ReLU's mask and dropout's mask forgotten. Look for the mask.
#
# ## Bug 4: a whole model, one missing sum
#
# The decoder's cross-attention sends a gradient to the encoder's output from every layer, and the
# decoder sums them. Here layer 0's share is dropped. Op by op everything is right; only a check of
# the whole model can see it:

# %%
bug = mutant("decoder: memory gradient dropped in one layer")
with bug.applied():
    started = time.perf_counter()
    report = gradcheck.check_model(directions=1)
    seconds = time.perf_counter() - started
failed = [row.tensor for row in report.failures]
print(f"fast check of the tiny Transformer: {len(report.results)} tensors, {seconds:.2f} s")
print(f"{len(failed)} tensors wrong, from {failed[0]} to {failed[-1]}")
print("decoder tensors wrong:", [name for name in failed if name.startswith("decoder")])
assert failed and all(name.startswith(("src_embed", "encoder")) for name in failed)

# %% [markdown]
# Every encoder tensor is wrong and no decoder tensor is. The gradient reaches the decoder
# correctly and goes wrong on its way into the encoder: the culprit is what the decoder hands the
# encoder, `d_memory`. That is the whole method: **find the boundary between the right tensors and
# the wrong ones**; the bug sits on it.
#
# This check did not difference every entry. `directions=1` compares, for one random unit direction
# $u$ per tensor, the analytic $u \cdot \nabla L$ with the finite difference of $L$ along $u$:
#
# $$u \cdot \nabla L \approx \frac{4 D(h) - D(2h)}{3}, \qquad D(h) = \frac{L(\theta + h u) - L(\theta - h u)}{2h}$$
#
# Four forward passes per tensor, whatever its size, instead of four per entry. A gradient wrong by
# a fraction $f$ of its norm moves $u \cdot \nabla L$ by about $f$ of its typical size, so the same
# tolerance applies; the price is that it says which tensor is wrong, not which entry.
#
# ## Your turn: the verdict
#
# Every report above ends in a verdict per tensor, and the method starts from it: which tensors
# fail, and which pass. Write that verdict yourself. `failing_tensors(analytic, numeric, tol)`
# takes two dicts that map each tensor's name to its analytic gradient and to its numeric one
# (the same names, one shape per name) and the tolerance, and returns the names of the tensors
# that fail, as a list sorted by Python's `sorted`.
#
# The error of a tensor is the error of its worst entry,
#
# $$e = \max_i \frac{|a_i - n_i|}{\max(|a_i| + |n_i|,\ 10^{-12})}$$
#
# and the tensor fails when $e \ge$ `tol`: it passes only below. Each part of the rule is there
# for a reason, and the grader tries each one:
#
# - **relative**, because gradients come in every size: entries near $10^5$ right to ten digits
#   differ by about $10^{-5}$ and are right, entries near $10^{-8}$ off by a factor of 2 differ by
#   less than $10^{-8}$ and are wrong;
# - **entry by entry, then the worst**: a tensor wrong at one entry is wrong (bug 2 showed in a few
#   rows), but one entry slightly off hides in the mean of the errors, and a small entry off by a
#   factor hides behind the large ones in a single ratio for the whole tensor;
# - **the floor** $10^{-12}$: where both gradients are exactly 0 (a padded position, an unused
#   embedding row, bug 3's entries) the ratio would be $0/0$; with the floor it is 0;
# - **a NaN never passes**: an analytic gradient may hold a NaN (lesson 7's fully masked row,
#   divided by zero). NumPy's `max` of an array with a NaN is NaN, `NaN >= tol` is False, and
#   `np.nanmax` skips the NaN, so either would pass the tensor: count a NaN entry as an infinite error.
#
# npformer's checker adds one refinement that this exercise leaves out: an entry also passes when
# $|a_i - n_i|$ is below $10^{-9}$ of the check's largest gradient entry, the resolution of float64
# finite differences (`npformer/gradcheck/report.py`). The grader tries attention's three gradients
# (one off by a factor, one wrong at a single entry, one with a small entry wrong beside large
# ones), gradients of very different sizes beside a fully padded row, a NaN and an error of exactly
# `tol`, a model whose tensors are all right (the empty list), and an unseen case.

# %%
def failing_tensors(analytic, numeric, tol):
    """The names of the tensors whose worst relative error is >= tol, sorted."""
    ### BEGIN SOLUTION
    failing = []
    for name in analytic:
        a = np.asarray(analytic[name], dtype=np.float64)
        n = np.asarray(numeric[name], dtype=np.float64)
        with np.errstate(invalid="ignore"):  # inf / inf, should a gradient be infinite
            errors = np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), 1e-12)
        errors = np.where(np.isnan(errors), np.inf, errors)  # a NaN never passes
        if errors.max() >= tol:
            failing.append(name)
    return sorted(failing)
    ### END SOLUTION


# %%
print(check("failing_tensors", failing_tensors))

# %% [markdown]
# Now read four bugs from their verdicts alone. The catalogue has four mutants of attention's
# backward pass; `gradients` computes both dicts for the checker's attention case (its inputs, a
# random upstream gradient, the fourth-order finite differences), and your `failing_tensors` (the
# same rule from npformer's `relative_error` until yours passes) says which tensors fail. The
# mutants' names are printed only in the next cell: first say, from each verdict, where the bug
# must be.

# %%
def gradients(op_name, seed=0):
    """The analytic and the numeric gradients of the checker's case for `op_name`, as two dicts."""
    forward, backward, inputs = gradcheck.OP_CASES[op_name](np.random.default_rng(seed))
    inputs = {name: np.array(value, dtype=np.float64) for name, value in inputs.items()}
    out, cache = forward(*inputs.values())
    dout = np.random.default_rng(seed + 1).standard_normal(out.shape)
    analytic = dict(zip(inputs, backward(dout, cache)))
    numeric = {name: gradcheck.numerical_gradient(lambda: forward(*inputs.values())[0], value, dout)
               for name, value in inputs.items()}
    return analytic, numeric


def npformers_failing_tensors(analytic, numeric, tol):
    return sorted(name for name in analytic if gradcheck.relative_error(analytic[name], numeric[name])[0] >= tol)


passed = check("failing_tensors", failing_tensors, strict=False).passed
verdict = failing_tensors if passed else npformers_failing_tensors
attention_mutants = [m for m in mutants.MUTANTS if m.check == "op:attention"]
verdicts = []
analytic, numeric = gradients("attention")
print("no mutant: failing", verdict(analytic, numeric, 1e-6))
for number, attention_bug in enumerate(attention_mutants, 1):
    with attention_bug.applied():
        analytic, numeric = gradients("attention")
        report = gradcheck.check_op("attention")
    verdicts.append(verdict(analytic, numeric, 1e-6))
    print(f"mutant {number}: failing {verdicts[-1]}")
    assert verdicts[-1] == sorted(row.tensor for row in report.failures), "the checker's own verdict"
assert verdicts == [["q"], ["k"], ["k", "q", "v"], ["v"]]

# %% [markdown]
# Attention's backward pass computes $dV = P^\top dO$ on its own line, then $dP$, then $dS$ through
# the softmax, and from $dS$ both $dQ$ and $dK$. A bug on a line that one gradient alone goes
# through breaks that gradient alone: mutants 1, 2 and 4. A bug before the paths part breaks every
# gradient that comes after it: mutant 3 breaks all three, so the fault is in what all three use,
# the attention weights $P$.

# %%
for number, attention_bug in enumerate(attention_mutants, 1):
    print(f"mutant {number}: {attention_bug.name} ({attention_bug.bug})")

# %% [markdown]
# ## The whole catalogue
#
# `run_mutants` applies every mutant and runs the check that must catch it (and, for blocks and
# models, the fast check too). `npformer gradcheck --mutants` prints the same table.

# %%
catalogue = [m for m in mutants.MUTANTS if not (QUICK and m.check.startswith("model"))]
results = mutants.run_mutants(catalogue)
print(mutants.results_table(results))
assert all(result.caught for result in results)

# %%
worst = [max(row.max_rel_error for row in result.report.failures) for result in results]
viz.mutants_chart([result.mutant.name for result in results], worst,
                  path=viz.figures_dir() / "21_mutants.png")
escaped = [result.mutant.name for result, error in zip(results, worst) if error < 1e-2]
print(f"with the tolerance raised from 1e-6 to 1e-2, {len(escaped)} would escape: {escaped}")
print(f"smallest error a mutant causes: {min(worst):.1e}")

# %% [markdown]
# Most bugs are gross: a wrong term changes the gradient by a fraction of itself, and any tolerance
# below $0.1$ catches them. The ones printed above are not: forgetting $\epsilon$ in layer norm's
# backward changes the gradient only where the variance of a row is comparable to $\epsilon$. The
# op case includes a row of small variance on purpose. Without it:

# %%
forward, backward, inputs = gradcheck.layernorm_case(np.random.default_rng(0))
rng = np.random.default_rng(1)
inputs["x"] = 1.0 + 2.0 * rng.standard_normal(inputs["x"].shape)  # every row of variance about 4
with mutant("layer norm: eps forgotten in backward").applied():  # the mutant is now the active set's op
    ordinary = gradcheck.check_gradients(forward, ops.current().layernorm_backward, inputs, name="layernorm")
error = ordinary.results[0].max_rel_error
print(f"eps forgotten, rows of variance about 4: worst relative error {error:.1e}, "
      f"{'caught' if not ordinary.passed else 'NOT caught'} at 1e-6")
assert error < 1e-2

# %% [markdown]
# The error falls by two orders of magnitude, to the printed value: a checker at $10^{-2}$ would
# never see it, and even $10^{-6}$ sees it only just. That is why npformer checks in float64 with a tolerance of
# $10^{-6}$ rather than the $10^{-2}$ that float32 checks must settle for.
#
# ## Exercises
#
# 1. Write a mutant of your own: `gradcheck.mutants.Mutant(name, where, bug, target, attribute,
#    replacement, check)` where `replacement(original)` returns the buggy function. Make softmax's
#    backward use `dy - mean(dy)` instead of `dy - sum(dy * p)`. What does the report say?
# 2. Bug 4 was caught by the fast check. Would `gradcheck.check_op` on every op have caught it? Why
#    not?
# 3. Run `npformer gradcheck --model --fast --base` (the paper's base sizes, about 45 seconds). Why
#    does it switch the feed-forward activation to GELU? Try a finite difference through a ReLU whose
#    input is within $h$ of zero.
#
#    *Auto-graded:* `relu_difference_quotients(x, h)`, for inputs `x` of shape `(N,)` and a step `h`,
#    returns `(central, checker)`, both of shape `(N,)`: at each input, ReLU's central difference
#    $D(h)$ and the checker's estimate $(4 D(h) - D(2h)) / 3$ (the formula of the fast check above,
#    with $u$ the direction of one input). The grader tries inputs within $h$, within $2h$ and beyond
#    $2h$ of the kink, and 0 itself, for several steps $h$. *For the rubric:* why the base-size check
#    switches to GELU, and which of the two, the backward pass or the estimate, is wrong at such an input.

# %%
def relu_difference_quotients(x, h):
    """At each input of x (N,): ReLU's central difference D(h) and the checker's (4 D(h) - D(2h)) / 3."""
    ### BEGIN SOLUTION
    def central(step):
        return (np.maximum(x + step, 0) - np.maximum(x - step, 0)) / (2 * step)
    return central(h), (4 * central(h) - central(2 * h)) / 3
    ### END SOLUTION


# %%
print(check("relu_difference_quotients", relu_difference_quotients))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. The mutant's `replacement` takes the original and returns
#    `lambda dy, cache: cache["y"] * (dy - dy.mean(axis=cache["axis"], keepdims=True))`, with
#    `target=ops`, `attribute="softmax_backward"` and `check="op:softmax"`. The report fails `x` at
#    every entry with a relative error of order 1 (printed below). It is no constant factor: the
#    error is $p \odot (\sum_j dy_j p_j - \overline{dy})$, whose size changes from row to row, so the
#    note reads "wrong at every entry" and the fix is found by rereading the derivation.
# 2. No. The mutant replaces `Decoder.backward`, the loop that adds up the layers' memory gradients;
#    no op is changed, so every op's own check passes with the bug applied (printed below). An op
#    check sees one op alone; a mistake in how the blocks combine correct ops shows only in a check
#    through the composition, `check_module` on the decoder with `memory` as an input, or
#    `check_model`.
# 3. At base sizes there are about $2048 \times (6 \cdot 4 + 6 \cdot 4) \approx 10^5$ hidden ReLU
#    units, and some of them lie within a step $h$ of zero. The difference quotient across the kink
#    is a blend of the slopes 0 and 1, not the derivative: for an input $x$ with $|x| < h$,
#    $D(h) = (x + h) / 2h$, so ReLU's backward (slope 1) is right and the reference is wrong. GELU is
#    smooth, so the finite difference converges to its derivative everywhere. The cell below puts
#    one input at $0.3h$ ($h = 3 \times 10^{-4}$): $D(h) = 0.65$, the checker's $(4D(h) - D(2h))/3
#    = 0.675$, and `check_gradients` fails a correct backward pass. A full-marks answer says that
#    the kink breaks the finite difference, not the backward pass.

# %% tags=["instructor"]
def softmax_backward_with_mean(original):
    def backward(dy, cache):
        return cache["y"] * (dy - dy.mean(axis=cache["axis"], keepdims=True))  # mean(dy), not sum(dy * y)
    return backward


own_mutant = mutants.Mutant("softmax: mean(dy) instead of sum(dy y)", "ops.softmax_backward",
                            "y (dy - mean(dy))", ops, "softmax_backward", softmax_backward_with_mean, "op:softmax")
with own_mutant.applied():
    own_report = gradcheck.check_op("softmax")
print("answer 1:\n" + own_report.table())
assert not own_report.passed and own_report.failures[0].note == "wrong at every entry"
assert own_report.failures[0].max_rel_error > 0.1

# %% tags=["instructor"]
with mutant("decoder: memory gradient dropped in one layer").applied():
    op_checks = {name: gradcheck.check_op(name).passed for name in gradcheck.OP_CASES}
print(f"answer 2: with bug 4 applied, {sum(op_checks.values())} of {len(op_checks)} op checks pass")
assert all(op_checks.values())

# %% tags=["instructor"]
h = gradcheck.DEFAULT_EPS
x0 = 0.3 * h
plain = (max(x0 + h, 0) - max(x0 - h, 0)) / (2 * h)
fourth_order = (4 * plain - (max(x0 + 2 * h, 0) - max(x0 - 2 * h, 0)) / (4 * h)) / 3
relu_forward, relu_backward, relu_inputs = gradcheck.relu_case(np.random.default_rng(0))
relu_inputs["x"].flat[0] = x0  # one input within h of the kink; the backward pass is npformer's, right
near_kink = gradcheck.check_gradients(relu_forward, relu_backward, relu_inputs, name="relu")
print(f"answer 3: ReLU at x = 0.3 h, h = {h:g}: derivative 1, central difference {plain:.3f}, "
      f"fourth-order {fourth_order:.3f}; check of the right backward pass: {near_kink.table().splitlines()[2]}")
assert abs(plain - 0.65) < 1e-9 and abs(fourth_order - 0.675) < 1e-9 and not near_kink.passed
assert np.allclose(relu_difference_quotients(np.array([x0]), h), [[plain], [fourth_order]])
