# %% [markdown]
# # Lesson 17 — The same layers, another model: an encoder-only classifier
#
# A translator needs an encoder *and* a decoder. A classifier needs only the encoder: read the
# sentence, summarise it into one vector, and map that vector to a class. BERT-style models do
# exactly this. We reuse `nn.Encoder` unchanged and add three pieces:
#
# 1. **Learned positions.** A table `pos_embed.W` of shape `(max_len, D)` added to the token
#    embeddings, instead of lesson 5's sinusoids. Its backward pass is an embedding backward with
#    the position ids $0, 1, \dots, T-1$.
# 2. **Masked pooling.** One vector per sentence: the mean of the encoder outputs $h_{b,t}$ over the
#    real tokens, so padding must not count. With $m_{b,t} = 1$ at a real token and $0$ at padding,
#    and $n_b = \sum_t m_{b,t}$ real tokens in sentence $b$:
#
#    $$s_b = \sum_t m_{b,t}\, h_{b,t}, \qquad \text{out}_b = \frac{s_b}{\max(n_b, 1)}$$
#
#    (a sentence of padding only has $s_b = 0$ and pools to zeros). Or the feature-wise maximum over
#    the real tokens. You derive the backward pass of both below.
# 3. **A linear head** and softmax cross-entropy, as in lesson 3.

# %%
import os
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, gradcheck, models, ops, viz
from npformer.course import check
from npformer.data import find_pairs_file
from npformer.tasks.language_id import predict, train_language_id

print(gradcheck.check_op("masked_mean_pool"))
print(gradcheck.check_op("masked_max_pool"))

# %% [markdown]
# ### Your turn
#
# Write the two backward passes, with `x` of shape `(B, T, D)` (the $h$ above), `mask` a boolean array
# `(B, T)` (True at a real token, False at padding) and `dout` of shape `(B, D)`, the gradient of the
# pooled vectors. Each returns `dx`, shaped like `x`, and each is derived in one step first.
#
# The grader compares each answer with npformer's and with finite differences, on a batch with a
# padded tail, a full sentence and a sentence of padding only (its padding holding the largest values of
# `x`, so the mask must matter), on a single token, and on a sentence with one real token.
#
# ### The mean, step 1: the sum
#
# The forward pass is two stages: $x \to s \to \text{out}$. Hold $s$ as the only input of the second
# stage: what is $\partial L / \partial s_b$, given `dout` $= \partial L / \partial \text{out}$? Write
# `masked_mean_pool_d_sum(x, mask, dout)`, returning it with shape `(B, D)`. What does a sentence of
# padding only get?

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("17"))


# %%
def masked_mean_pool_d_sum(x, mask, dout):
    """dL/ds for out[b] = s[b] / max(n[b], 1), s[b] = sum_t mask[b, t] x[b, t]: shape (B, D)."""
    ### BEGIN SOLUTION
    counts = np.maximum(mask.sum(axis=1), 1)  # n, and 1 for a sentence of padding only (its mask is all 0)
    return dout / counts[:, None]
    ### END SOLUTION


# %%
print(check("masked_mean_pool_d_sum", masked_mean_pool_d_sum))

# %% [markdown]
# ### The mean, step 2: back to `x`
#
# Now the first stage, $s_b = \sum_t m_{b,t}\, x_{b,t}$: which entries of `x` does $s_b$ read, and with
# what coefficient? Write `masked_mean_pool_backward(x, mask, dout)`. You may call your step. The check
# grades the step again and shows npformer's compact form once yours passes.

# %%
def masked_mean_pool_backward(x, mask, dout):
    """dx of out[b] = sum_t mask[b, t] x[b, t] / max(n[b], 1), shaped like x (B, T, D)."""
    ### BEGIN SOLUTION
    return mask[:, :, None] * masked_mean_pool_d_sum(x, mask, dout)[:, None, :]
    ### END SOLUTION


# %%
print(check("masked_mean_pool_backward", masked_mean_pool_backward, steps=(masked_mean_pool_d_sum,)))

# %% [markdown]
# ### The maximum, step 1: its local derivative
#
# The pooled vector is $\text{out}_{b,d} = \max_{t:\, m_{b,t} = 1} x_{b,t,d}$, each feature's maximum
# over the real positions; a sentence of padding only pools to zeros, whatever `x` holds there. Each
# column $(b, d)$ pools on its own, so its derivative is one number per entry of `x`:
#
# $$J_{b,t,d} = \frac{\partial\, \text{out}_{b,d}}{\partial x_{b,t,d}}$$
#
# Write `masked_max_pool_jacobian(x, mask)`, returning $J$ with the shape of `x`. Nudge one entry
# $x_{b,t,d}$ by a small $h$: when does $\text{out}_{b,d}$ move, and by how much? Decide three cases
# before you write code: a padded position; a sentence of padding only; and a tie, two real positions
# holding the same maximum. For a tie, npformer's forward takes the value at the first of them, so
# treat $\text{out}_{b,d}$ as that entry. The grader's last public case has ties.

# %%
def masked_max_pool_jacobian(x, mask):
    """J[b, t, d] = d out[b, d] / d x[b, t, d] for out[b, d] = max over the real t of x[b, t, d]: (B, T, D)."""
    ### BEGIN SOLUTION
    position = np.where(mask[:, :, None], x, -np.inf).argmax(axis=1)  # (B, D): the first real maximum
    jacobian = (np.arange(x.shape[1])[None, :, None] == position[:, None, :]).astype(np.float64)
    return jacobian * mask.any(axis=1)[:, None, None]  # a sentence of padding only: nothing moves out
    ### END SOLUTION


# %%
print(check("masked_max_pool_jacobian", masked_max_pool_jacobian))

# %% [markdown]
# ### The maximum, step 2: the backward pass
#
# With $J$, write `masked_max_pool_backward(x, mask, dout)` (chain rule: each $\text{out}_{b,d}$ depends
# on column $(b, d)$ of `x` only). The grader's `x` has no ties here. You may call your step.

# %%
def masked_max_pool_backward(x, mask, dout):
    """dx of out[b, d] = max over the real t of x[b, t, d] (0 for a sentence of padding only), shaped like x."""
    ### BEGIN SOLUTION
    return masked_max_pool_jacobian(x, mask) * dout[:, None, :]
    ### END SOLUTION


# %%
print(check("masked_max_pool_backward", masked_max_pool_backward, steps=(masked_max_pool_jacobian,)))

# %% [markdown] tags=["instructor"]
# ### The compact forms (instructor edition)
#
# The mean: $\partial L / \partial s_b = dout_b / \max(n_b, 1)$, and $s_b$ reads $x_{b,t}$ with
# coefficient $m_{b,t}$, so
#
# $$\frac{\partial L}{\partial x_{b,t}} = \frac{m_{b,t}}{\max(n_b, 1)}\, \frac{\partial L}{\partial \text{out}_b}:$$
#
# `dout` spread evenly over the real positions, nothing at padding. The maximum: only the position
# $t^*$ where the maximum sits moves it to first order, so $J$ is 1 at $t^*$ (the first of a tie) and 0
# elsewhere, padding and empty sentences included; `dx` is $J$ times `dout`, which is
# `np.put_along_axis` of `dout` at the argmax of `np.where(mask, x, -inf)`.

# %% [markdown]
# ### The head, end to end
#
# Your pool is one piece of the classifier's head. The rest is a linear layer (lesson 2) and the
# cross-entropy of its logits (lesson 3), averaged over the $B$ sentences, every label a real class
# (class 0 included: no label is ignored here):
#
# $$\text{pooled} = \operatorname{pool}(x, m), \qquad z = \text{pooled}\, W + b, \qquad
# L = \frac{1}{B} \sum_b -\log \operatorname{softmax}(z_b)_{y_b}$$
#
# with `x` of shape `(B, T, D)`, `mask` `(B, T)`, `W` `(D, C)`, `b` `(C,)` and `labels` $y$ `(B,)`, integers in
# $[0, C)$; pool is the masked mean above (your variant's, if you have one). Write
# `classifier_head_backward(x, mask, W, b, labels, dloss)`, returning `(dx, dW, db)`, shaped like `x`,
# `W` and `b`, for the upstream gradient `dloss` $= \partial(\text{final loss}) / \partial L$, a number.
# Recompute what the backward pass needs from the forward, then walk the chain back one piece at a
# time: each piece's gradient is one you derived, but its inputs here are the outputs of the piece
# before it, and this loss is a mean over sentences, not over tokens. You may call your
# `masked_mean_pool_backward` and lesson 3's functions if you copy them here. The grader's `x`
# holds large values at padding.

# %%
def classifier_head_backward(x, mask, W, b, labels, dloss):
    """(dx (B, T, D), dW (D, C), db (C,)) of the mean cross-entropy of pool(x, mask) @ W + b."""
    ### BEGIN SOLUTION
    counts = np.maximum(mask.sum(axis=1, keepdims=True), 1)
    pooled = (x * mask[:, :, None]).sum(axis=1) / counts                # (B, D): the forward, again
    logits = pooled @ W + b                                              # (B, C)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    d_logits = probs - np.eye(W.shape[1])[labels]                        # back through the loss
    d_logits *= dloss / len(labels)                                      # its mean over the B sentences
    dW, db = pooled.T @ d_logits, d_logits.sum(axis=0)                   # back through the linear layer
    dx = masked_mean_pool_backward(x, mask, d_logits @ W.T)              # back through the pool
    return dx, dW, db
    ### END SOLUTION


# %%
print(check("classifier_head_backward", classifier_head_backward))

# %% [markdown]
# The whole classifier, every parameter, against finite differences through its loss (a fully padded
# sentence included). `gradcheck.check_loss` checks `ops.cross_entropy_forward(model.forward(ids), labels)`
# with its backward `model.backward(ops.cross_entropy_backward(1.0, cache))`. Every label is a real class
# here, class 0 included, so no target is ignored (`ignore_index=None`). The quick run
# (`NPFORMER_QUICK=1`) checks each parameter tensor along two random directions (`directions=2`: the
# finite difference of the loss along a random unit vector against the gradient's component along
# it) instead of entry by entry.
#
# The classifier calls its pooling as ops (`ops.masked_mean_pool_forward` and `_backward`, or the max
# pair), so `ops.using` can put yours in: `pooling_ops` below keeps `x` and the mask in the forward's
# cache and hands them, with the upstream gradient, to your function. Each of your functions that
# passes its check is used, for both classifiers here and for the training below; one that does not
# leaves npformer's op in place.

# %%
def pooling_ops(kind, backward_fn):
    """The op pair `masked_<kind>_pool_forward` / `_backward` with `backward_fn(x, mask, dout)` as the backward."""
    forward = getattr(ops.pooling, f"masked_{kind}_pool_forward")

    def pool_forward(x, mask):
        return forward(x, mask)[0], {"x": x, "mask": mask}

    def pool_backward(dout, cache):
        x, mask = backend.to_numpy(cache["x"]), backend.to_numpy(cache["mask"])
        dx = backward_fn(x, mask, backend.to_numpy(dout))
        return backend.asarray(np.asarray(dx, dtype=x.dtype))  # in the model's dtype

    return {f"masked_{kind}_pool_forward": pool_forward, f"masked_{kind}_pool_backward": pool_backward}


QUICK = os.environ.get("NPFORMER_QUICK") == "1"
yours = {}
passed = check("masked_mean_pool_backward", masked_mean_pool_backward, strict=False).passed
yours.update(pooling_ops("mean", masked_mean_pool_backward) if passed else {})
passed = check("masked_max_pool_backward", masked_max_pool_backward, strict=False).passed
yours.update(pooling_ops("max", masked_max_pool_backward) if passed else {})

config = models.ClassifierConfig(12, 3, d_model=6, n_heads=2, d_ff=8, n_layers=2, max_len=8, dropout=0.1)
ids, labels = np.array([[5, 6, 7, 0], [8, 9, 4, 5], [0, 0, 0, 0]]), np.array([0, 2, 1])
with ops.using(yours, name="yours"):
    print({name: source for name, source in ops.active().items() if "pool" in name})
    for pooling in ("mean", "max"):
        tiny = models.EncoderClassifier(replace(config, pooling=pooling), seed=1, dtype=np.float64)
        report = gradcheck.check_loss(tiny, {"ids": ids}, labels, ignore_index=None, name=f"classifier, {pooling} pooling",
                                      directions=2 if QUICK else None)
        print(f"{pooling} pooling:", report.table().splitlines()[-1])
        assert report.passed

# %% [markdown]
# ## A real task: English or French?
#
# The labelled sentences come from translation pairs: the English side is class 0, the French side
# class 1, and both sides of a pair stay in the same split. The full run uses real Tatoeba sentences
# when you have the file: run `npformer data tatoeba` once (with internet) in the folder you run the
# lessons in, which puts it in `data/fra-eng/fra.txt` (or set `NPFORMER_FRA_ENG` to a `fra.txt` kept
# elsewhere). Without it, and in the quick run (`NPFORMER_QUICK=1`), the lesson uses the embedded
# corpus and says so.

# %%
data = None if QUICK else find_pairs_file("fra-eng")
if data is None and not QUICK:
    print("no Tatoeba file (npformer data tatoeba, or NPFORMER_FRA_ENG): using the embedded corpus instead")
with ops.using(yours, name="yours"):  # mean pooling: your backward pass when it passed its check
    result = train_language_id(data, steps=60 if QUICK else 400, max_pairs=2000 if QUICK else 30000)
print(f"{result['source']}: held-out accuracy {result['test_accuracy']:.2%} on {result['test_sentences']:,} "
      f"sentences, {result['parameters']:,} parameters, {result['seconds']:.0f} s")
print(predict(result["model"], result["vocab"], ["Where is the station?", "Où est la gare ?", "Tom est là."],
              lowercase=result["lowercase"]))
assert result["test_accuracy"] > 0.75, "two balanced classes: accuracy must be well above chance (50%)"

# %%
figure, axis = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
axis.plot(result["losses"], alpha=0.5, label="training loss per batch")
window = 20
if len(result["losses"]) > window:
    smooth = np.convolve(result["losses"], np.ones(window) / window, mode="valid")
    axis.plot(np.arange(window - 1, len(result["losses"])), smooth, label=f"mean of {window}")
axis.set(xlabel="step", ylabel="cross-entropy", yscale="log",
         title=f"English or French? {result['source']}\n{result['test_accuracy']:.1%} held-out accuracy "
               f"on {result['test_sentences']:,} sentences")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "17_language_id.png", dpi=110)

# %% [markdown]
# The pieces differ from the translator only in how they are connected: no decoder, no causal
# mask, one output per sentence. (Data credit for the Tatoeba sentences: Tatoeba Project
# (tatoeba.org), CC-BY 2.0 FR, via manythings.org/anki.)
#
# ## Exercises
#
# 1. Train with `pooling="max"` (`train_language_id(..., pooling="max")`) and compare the accuracy,
#    on the Tatoeba sentences. Which sentences does each get wrong? The held-out sentences are
#    `labelled(sentence_splits(data, max_pairs)[0].test)` (from `npformer.data` and
#    `npformer.tasks.language_id`, with the same `data` and `max_pairs`), and `predict` labels them.
# 2. Replace the learned positions by lesson 5's sinusoids: subclass `models.EncoderClassifier` and,
#    after its `__init__`, set `self.pos_embed` to a module (`npformer.nn.Module`) whose
#    `forward(batch, length)` returns rows of `ops.positional_encoding(max_len, D)` broadcast to
#    `(batch, length, D)` and whose `backward` does nothing. `train_language_id` builds its own
#    model, so train yours with `npformer.training.fit` on the same data (copy its few lines from
#    `npformer/tasks/language_id.py`). Does the accuracy change?
# 3. Define another label on the Tatoeba French side, such as sentences with formal `vous` against
#    sentences with familiar `tu`, and train on it in the same way. Is it harder or easier than
#    English or French, and why? What would the model have to learn if you replaced `tu` and `vous`
#    by `<unk>` in its input?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (Printed below, trained on the lesson's own data: the embedded corpus, or, in a full run, the
#    Tatoeba file that `npformer data tatoeba` put in `data/fra-eng/`.) On the embedded corpus both
#    poolings are as good as perfect, so there are no errors to compare: the question needs the
#    Tatoeba sentences. Rubric for them: both accuracies are high and close; a full answer reports
#    both, lists the misclassified sentences of each and says what they share (very short
#    sentences, sentences made of names, numbers or words spelled alike in both languages, rare
#    words that became `<unk>`). Mean pooling
#    weighs every word, so one telltale word is diluted in a long sentence; max pooling keeps each
#    feature's strongest word, so a single word decides, for better (a short sentence with one clue)
#    or worse (an English sentence with a French name). One pooling is not better in general.
# 2. (Reference code and result below.) The positions become a module without parameters whose
#    `backward` does nothing, which is exactly right: nothing in it is learned (the gradient check
#    below passes). The accuracy does not change noticeably: telling English from French depends on
#    which words a sentence contains, hardly on their order, so the kind of positions barely matters
#    here. A full answer says so, and may test a model with no positions at all to confirm it.
# 3. Rubric (Tatoeba only; the embedded corpus has no `tu`). The label must be defined first: French
#    sentences with `vous` (and `votre`, `vos`) against those with `tu` (`te`, `t'`, `toi`, `ton`, `ta`,
#    `tes`), dropping sentences with both or neither; and `vous` is also the plural of `tu`, so the
#    label is "vous or tu", not truly "formal or familiar". As defined, it is easy, even easier than the
#    language: a handful of words decides it, and one attentive head finds them; the data are fewer
#    and may be unbalanced (report the majority class's share). With `tu` and `vous` replaced by
#    `<unk>` the model must learn the agreement they cause: verb endings (`avez`, `êtes`, `-ez` against
#    `as`, `es`, `-s`), possessives (`votre` against `ton`), reflexive and object pronouns. Sentences
#    without such a trace become guesses, so the accuracy falls, and the fall measures how much the
#    model relied on the pronoun itself.

# %% tags=["instructor"]
from npformer.data import sentence_splits  # noqa: E402
from npformer.tasks.language_id import labelled  # noqa: E402

steps, max_pairs = (60, 2000) if QUICK else (400, 30000)
max_result = train_language_id(data, steps=steps, max_pairs=max_pairs, pooling="max")
held_out = labelled(sentence_splits(data, max_pairs)[0].test)
print(f"answer 1: held-out accuracy, mean pooling {result['test_accuracy']:.2%}, "
      f"max pooling {max_result['test_accuracy']:.2%}")
for name, trained in (("mean", result), ("max", max_result)):
    said = predict(trained["model"], trained["vocab"], [text for text, _ in held_out], lowercase=trained["lowercase"])
    wrong = [text for (text, label), guess in zip(held_out, said) if guess != ("English", "French")[label]]
    assert len(wrong) == round((1 - trained["test_accuracy"]) * len(held_out)), "the same held-out sentences"
    print(f"answer 1: {name} pooling gets {len(wrong)} wrong" + (": " + " | ".join(wrong[:8]) if wrong else ""))

# %% tags=["instructor"]
from npformer import backend, nn, ops  # noqa: E402
from npformer.data import Vocab, tokenize  # noqa: E402
from npformer.tasks.language_id import accuracy, encode  # noqa: E402
from npformer.tokens import PAD_ID  # noqa: E402
from npformer.training import fit  # noqa: E402


class SinusoidalPositions(nn.Module):
    """Lesson 5's sinusoids in place of the learned table: no parameters, so nothing to learn."""

    def __init__(self, max_len, d_model, dtype):
        super().__init__()
        self.table = ops.positional_encoding(max_len, d_model, dtype=dtype)

    def forward(self, batch, length, start=0):
        return backend.xp.broadcast_to(self.table[start:start + length], (batch, length, self.table.shape[1]))

    def backward(self, d_x):
        pass


class SinusoidalClassifier(models.EncoderClassifier):
    def __init__(self, config, seed=0, dtype=None):
        super().__init__(config, seed, dtype)
        self.pos_embed = SinusoidalPositions(config.max_len, config.d_model, self.dtype)


sinusoid_check = gradcheck.check_loss(SinusoidalClassifier(config, seed=1, dtype=np.float64), {"ids": ids}, labels,
                                      ignore_index=None, name="sinusoidal classifier", directions=2 if QUICK else None)
assert sinusoid_check.passed

# The few lines of train_language_id, with the new model:
splits, _ = sentence_splits(data, max_pairs)
train_examples, test_examples = labelled(splits.train), labelled(splits.test)
vocab = Vocab.build((tokenize(text, "en") for text, _ in train_examples), min_freq=2 if data else 1)
sinusoidal = SinusoidalClassifier(models.ClassifierConfig(vocab=len(vocab), n_classes=2, max_len=32), seed=0)
train_ids, train_labels = encode(train_examples, vocab, 32)
test_ids, test_labels = encode(test_examples, vocab, 32)
batch_rng = np.random.default_rng(0)


def next_batch(step):
    rows = batch_rng.integers(0, len(train_ids), size=64)
    batch_ids = train_ids[rows]
    batch_ids = batch_ids[:, : max(1, int((batch_ids != PAD_ID).sum(1).max()))]
    return backend.asarray(batch_ids), backend.asarray(train_labels[rows])


fit(sinusoidal, next_batch, steps, ignore_index=None, lr=1e-3, betas=(0.9, 0.999))
sinusoidal_accuracy = accuracy(sinusoidal, test_ids, test_labels)
print(f"answer 2: held-out accuracy with sinusoids {sinusoidal_accuracy:.2%}, with learned positions "
      f"{result['test_accuracy']:.2%} ({sinusoidal.num_params():,} parameters instead of {result['parameters']:,})")
assert abs(sinusoidal_accuracy - result["test_accuracy"]) < 0.05, "the kind of positions barely matters here"
