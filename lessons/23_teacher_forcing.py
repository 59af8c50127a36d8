# %% [markdown]
# # Lesson 23 — Teacher forcing and the shifted decoder input
#
# A decoder writes a translation one token at a time: token $t$ is chosen from the source $x$ and
# the tokens before it. Training could do the same, feeding the model its own guesses, but then one
# sentence of $n$ tokens would take $n$ forward passes, and an early mistake would spoil every
# later position. **Teacher forcing** feeds the decoder the *reference* prefix instead, and trains
# every position at once, in one forward pass. With $y_1 \dots y_n$ the reference tokens, the
# decoder's input $u$ (`tgt_in` in the code) and its targets $z$ (`tgt_out`) are the same sequence,
# shifted by one:
#
# $$u = \langle\mathrm{bos}\rangle\, y_1 \dots y_n, \qquad z = y_1 \dots y_n\, \langle\mathrm{eos}\rangle$$
#
# and the loss is the mean over the $n + 1$ positions $t = 0 \dots n$ of
#
# $$-\log p\left(z_t \mid u_0 \dots u_t,\; x\right)$$
#
# The causal mask of lesson 10 lets position $t$ see $u_0 \dots u_t$, which is
# $\langle\mathrm{bos}\rangle\, y_1 \dots y_t$: everything before the token it must predict,
# $z_t = y_{t+1}$, and not that token. This lesson looks at the shift in npformer's own batches, has
# you write it, then breaks it twice, on purpose: once by leaving the shift out, once by leaving out
# the end token.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import Transformer, TransformerConfig, backend, metrics, ops, viz
from npformer.course import check
from npformer.data import (Batch, Vocab, detokenize, encode_pairs, make_batches, pad_batch, pad_rows, tokenize,
                           toy_corpus)
from npformer.tasks.translation.decoding import greedy_decode
from npformer.tokens import BOS_ID, EOS_ID, PAD_ID
from npformer.tasks.translation import evaluate_loss
from npformer.training import fit

QUICK = os.environ.get("NPFORMER_QUICK") == "1"
splits = toy_corpus(n_train=2000, n_valid=100, n_test=50) if QUICK else toy_corpus()
src_vocab = Vocab.build(tokenize(english, "en") for english, _ in splits.train)
tgt_vocab = Vocab.build(tokenize(french, "fr") for _, french in splits.train)
MAX_LEN = 32  # positions the model holds, and the longest translation decoding may write
examples = encode_pairs(splits.train, src_vocab, tgt_vocab, MAX_LEN)
print(splits.counts(), f"vocabularies: {len(src_vocab)} English, {len(tgt_vocab)} French tokens")
print("one example, as ids:", examples[0])

# %% [markdown]
# ## The shift in a real batch
#
# `data.encode_pairs` turns each sentence pair into two id lists: the source, and the target with
# `<bos>` (id $1$) in front and `<eos>` (id $2$) at the end. `data.make_batches` groups examples
# of similar length into batches of at most `token_budget` padded positions, and `data.pad_batch`
# pads each batch and cuts the padded target rows twice:
#
# ```python
# tgt = pad_rows([tgt_ids for _, tgt_ids in examples])   # <bos> y1 .. yn <eos> <pad> ...
# Batch(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:])
# ```
#
# That is the whole shift: drop the last column for the input, the first for the targets. The
# translator's trainer (`npformer/tasks/translation/trainer.py`) then calls
# `train_step(model, (batch.src, batch.tgt_in), batch.tgt_out, ...)`. Here is a real batch, made
# with a small budget so that it holds only a few sentences, printed as tokens:

# %%
def show(batch, row):
    """One row of a batch: the source, then tgt_in over tgt_out, position by position."""
    source = " ".join(src_vocab.tokens[i] for i in batch.src[row] if i != PAD_ID)
    tgt_in = [tgt_vocab.tokens[i] for i in batch.tgt_in[row]]
    tgt_out = [tgt_vocab.tokens[i] for i in batch.tgt_out[row]]
    widths = [max(len(a), len(b), len(str(t))) for t, (a, b) in enumerate(zip(tgt_in, tgt_out))]
    print(f"row {row}: {source}")
    for label, cells in [("position", range(len(widths))), ("tgt_in", tgt_in), ("tgt_out", tgt_out)]:
        print(f"  {label:9s}" + " ".join(f"{cell!s:{width}s}" for cell, width in zip(cells, widths)))


batches = make_batches(examples, token_budget=40, rng=np.random.default_rng(0))
target_lengths = [sorted(set((b.tgt_out != PAD_ID).sum(axis=1).tolist())) for b in batches]
batch = next(b for b, lengths in zip(batches, target_lengths) if len(lengths) > 1)  # rows of different lengths
print(f"{len(batches)} batches; this one: src {batch.src.shape}, tgt_in {batch.tgt_in.shape}, "
      f"tgt_out {batch.tgt_out.shape}")
for row in range(len(batch.src)):
    show(batch, row)

# %% [markdown]
# Read each column top to bottom: the token the decoder is given at position $t$, and the token it
# must predict there, which is the input of position $t + 1$. The checks below hold for every batch
# of the epoch, not just the one printed:

# %%
for b in batches:
    assert (b.tgt_in[:, 0] == BOS_ID).all(), "every decoder input starts with <bos>"
    assert (b.tgt_in[:, 1:] == b.tgt_out[:, :-1]).all(), "the input at t + 1 is the target at t"
    assert ((b.tgt_out == EOS_ID).sum(axis=1) == 1).all(), "one <eos> per target row"
    last = (b.tgt_out != PAD_ID).sum(axis=1) - 1
    assert (b.tgt_out[np.arange(len(b.tgt_out)), last] == EOS_ID).all(), "<eos> is the last real target"
    assert BOS_ID not in b.tgt_out, "<bos> is never a target"
longest = batch.tgt_out.shape[1]
short = [row for row in range(len(batch.src)) if (batch.tgt_out[row] != PAD_ID).sum() < longest]
print(f"checked {len(batches)} batches; rows of the printed one shorter than its longest: {short}")

# %% [markdown]
# In a shorter row, `<eos>` also appears in `tgt_in`: the position after the sentence is given
# `<eos>` and asked to predict `<pad>`. That costs nothing: `train_step` passes
# `ignore_index=PAD_ID` to the loss, so a `<pad>` target adds nothing to the loss and gets no
# gradient (lesson 3), and the other positions cannot see it, since it comes after them.
#
# ### Your turn
#
# Write `shift_right(tgt_ids)`: the shift of `pad_batch`, for target rows that hold no `<bos>` yet.
# `tgt_ids` is a `(B, T)` integer array; each row is the targets $y_1 \dots y_n\, \langle\mathrm{eos}\rangle$
# followed by `<pad>` (id 0) up to $T$ positions. Return `(tgt_in, tgt_out)`, both `(B, T)`:
# `tgt_out` is `tgt_ids` as it is, and `tgt_in` is each row with `<bos>` (id 1, `BOS_ID`) put in
# front and its last column dropped. Nothing else moves: the padding stays where it is, so a shorter
# row's `tgt_in` holds its `<eos>` (as in the batch above), the `<eos>` of a row that fills all $T$
# positions is the column that falls off, and a row of padding only becomes `<bos>` followed by
# padding. The shift is the same for every row, whatever its length: it moves whole columns. The
# grader compares the ids exactly, on a batch whose rows have different lengths (one
# of them full), a single target `<eos>` ($T = 1$), repeated ids and a row of padding only;
# `pad_batch` is unavailable while your function runs.

# %%
def shift_right(tgt_ids):
    """Targets y1 .. yn <eos> <pad> ..., (B, T) -> (tgt_in, tgt_out): <bos> in front, the last column dropped."""
    ### BEGIN SOLUTION
    bos = np.full((tgt_ids.shape[0], 1), BOS_ID, dtype=tgt_ids.dtype)
    return np.concatenate([bos, tgt_ids[:, :-1]], axis=1), tgt_ids
    ### END SOLUTION


# %%
print(check("shift_right", shift_right))

# %% [markdown]
# The decoder needs only the targets, then: `tgt_in` follows from `tgt_out`. The models below are
# fed the decoder input your `shift_right` makes from each batch's `tgt_out`, once it passes (until
# then, the `tgt_in` that `pad_batch` made). Either way it must be the same array, in every batch of
# the epoch:

# %%
passed = check("shift_right", shift_right, strict=False).passed  # yours, when it passes


def decoder_input(b):
    """The decoder's input for batch b: your shift_right of its targets, or the tgt_in of pad_batch."""
    return shift_right(b.tgt_out)[0] if passed else b.tgt_in


assert all(np.array_equal(decoder_input(b), b.tgt_in) for b in batches)
print(f"decoder inputs made by {'your shift_right' if passed else 'pad_batch (shift_right not passed yet)'}: "
      f"equal to pad_batch's tgt_in in all {len(batches)} batches")

# %% [markdown]
# ## Three models, three ways of feeding the decoder
#
# We train the same small Transformer three times, from the same initial weights, on the same
# batches in the same order, with `training.fit` (AdamW, warm-up and cosine decay, `train_step` at
# every step). Only what reaches the decoder changes:
#
# | model | decoder input | targets |
# | --- | --- | --- |
# | shifted | `tgt_in`, $\langle\mathrm{bos}\rangle\, y_1 \dots y_n$ | `tgt_out`, $y_1 \dots y_n\, \langle\mathrm{eos}\rangle$ |
# | not shifted | `tgt_out` | `tgt_out` |
# | no end token | $\langle\mathrm{bos}\rangle\, y_1 \dots y_{n-1}$ | $y_1 \dots y_n$ |
#
# Without the shift, position $t$ is given $y_t$ and asked for $y_t$: the causal mask hides the
# future, but the token to predict is not in the future any more; it is the input itself. The
# third model keeps the shift but is built from examples whose `<eos>` was cut off, through the
# same `make_batches`.

# %%
STEPS = 15 if QUICK else 500
config = TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=32, n_heads=4, d_ff=128, n_layers=1,
                           max_len=MAX_LEN, dropout=0.0)
without_eos = [(src_ids, tgt_ids[:-1]) for src_ids, tgt_ids in examples]  # <bos> y1 .. yn


def train(data, shifted=True):
    """A fresh model (seed 0) trained for STEPS steps on batches of `data` (seed 0)."""
    model = Transformer(config, seed=0)
    rng, queue = np.random.default_rng(0), []

    def next_batch(step):
        if not queue:  # a new epoch: new length-bucketed, shuffled batches
            queue.extend(make_batches(data, token_budget=512, rng=rng))
        b = queue.pop()
        src, tgt_in, tgt_out = (backend.asarray(ids) for ids in (b.src, decoder_input(b), b.tgt_out))
        return ((src, tgt_in if shifted else tgt_out), tgt_out)

    losses = fit(model, next_batch, STEPS, lr=3e-3)
    return model, losses


models, losses = {}, {}
for name, data, shifted in [("shifted", examples, True), ("not shifted", examples, False),
                            ("no end token", without_eos, True)]:
    models[name], losses[name] = train(data, shifted)
    print(f"{name:13s} training loss: first step {losses[name][0]:.3f}, "
          f"mean of the last 20 steps {np.mean(losses[name][-20:]):.3f}")

# %% [markdown]
# ## Without the shift: a low loss and a useless model
#
# The model that was not shifted reaches a training loss far below the shifted one (printed
# above; the figure below draws both curves). It has not learned French better; it has learned to copy. Two
# measurements on the validation split make that plain: how often its most probable token at
# position $t$ is simply its own input at $t$, and its loss when it is asked the real question,
# with the shifted input (`evaluate_loss` uses `tgt_in`, as decoding does).

# %%
valid = encode_pairs(splits.valid, src_vocab, tgt_vocab, MAX_LEN)
valid_batches = make_batches(valid, token_budget=512)
unshifted_batches = [Batch(b.src, b.tgt_out, b.tgt_out) for b in valid_batches]  # input = targets


def copy_rate(model):
    """How often the most probable token equals the decoder's input at the same position."""
    copies = real = 0
    with model.evaluating():
        for b in valid_batches:
            logits = model.forward(backend.asarray(b.src), backend.asarray(b.tgt_out))
            predicted = backend.to_numpy(logits.argmax(axis=-1))
            mask = b.tgt_out != PAD_ID
            copies += int((predicted[mask] == b.tgt_out[mask]).sum())
            real += int(mask.sum())
    return copies / real


report = {}
for name in ["shifted", "not shifted"]:
    own_loss, _ = evaluate_loss(models[name], valid_batches if name == "shifted" else unshifted_batches)
    shifted_loss, accuracy = evaluate_loss(models[name], valid_batches)
    report[name] = dict(own=own_loss, shifted=shifted_loss, accuracy=accuracy, copies=copy_rate(models[name]))
    print(f"{name:12s} validation loss as trained {own_loss:6.3f} | with the shifted input {shifted_loss:6.3f}, "
          f"token accuracy {accuracy:6.1%} | predicts its own input token at {report[name]['copies']:6.1%} "
          f"of positions")

# %% [markdown]
# At decoding time there is no reference to copy. Greedy search (lesson 14) starts from `<bos>` and
# feeds each chosen token back in: the shifted model was trained for exactly that, the other model
# never was.

# %%
test = splits.test[: 20 if QUICK else 100]
test_src = backend.asarray(pad_batch(encode_pairs(test, src_vocab, tgt_vocab, MAX_LEN)).src)
outputs = {name: greedy_decode(model, test_src, MAX_LEN) for name, model in models.items()}


def french(ids):
    return detokenize([tgt_vocab.tokens[i] for i in ids], "fr")


references = [reference for _, reference in test]
bleu = {name: metrics.bleu([french(ids) for ids in outputs[name]], references) for name in outputs}
for row, (english, reference) in enumerate(test[:2]):
    print(f"{english}\n  reference      {reference}")
    for name in ["shifted", "not shifted"]:
        print(f"  {name:14s} {french(outputs[name][row])}")
print(f"greedy BLEU on {len(test)} test sentences: shifted {bleu['shifted']:.1f}, "
      f"not shifted {bleu['not shifted']:.1f}")
repeats = np.mean([len(set(ids)) <= 1 for ids in outputs["not shifted"]])
print(f"outputs of the model that was not shifted that repeat one token (or are empty): {repeats:.0%}")

# %%
figure, axis = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
steps = np.arange(1, STEPS + 1)
for name, color in [("shifted", "tab:blue"), ("not shifted", "tab:red")]:
    axis.plot(steps, losses[name], color=color,
              label=f"{name}: last loss {losses[name][-1]:.3f}, greedy test BLEU {bleu[name]:.1f}")
axis.set(xlabel="training step", ylabel="training loss (cross-entropy, nats per token)", yscale="log",
         title="Teacher forcing with and without the shifted decoder input")
axis.grid(True, which="both", alpha=0.3)
axis.legend()
figure.savefig(viz.figures_dir() / "23_shift.png", dpi=110)

# %%
if not QUICK:  # 15 quick steps teach neither model anything; the full run's claims:
    assert report["not shifted"]["own"] < 0.25 * report["shifted"]["own"], "without the shift the loss collapses"
    assert report["not shifted"]["copies"] > 0.95, "the model that was not shifted copies its input"
    assert report["not shifted"]["shifted"] > 2 * report["shifted"]["shifted"], "and fails the real question"
    assert bleu["shifted"] > 20 and bleu["not shifted"] < 2, "only the shifted model translates"

# %% [markdown]
# Its training loss was low because the question was trivial: the answer sat at the very position
# being asked about. Asked the real question, with the shifted input, its loss is the second
# number in its row, above the shifted model's, and its greedy output is the garbage printed above.
# A loss that falls too fast, too far, is worth suspecting: check what each position can see.
#
# ## Without the end token: decoding never stops
#
# The third model kept the shift, so it did learn to translate. But its targets never held
# `<eos>`, so it never learned to say that a sentence is over. Greedy search stops a sentence at
# `<eos>`, or at `max_len` tokens when it never comes. Here are the lengths of the translations
# each model writes, with `max_len` $= 32$:

# %%
lengths = {name: np.array([len(ids) for ids in outputs[name]]) for name in ["shifted", "no end token"]}
for name, values in lengths.items():
    print(f"{name:13s} translation lengths: min {values.min()}, median {np.median(values):.0f}, "
          f"max {values.max()}; {np.mean(values == MAX_LEN):.0%} stopped only at max_len = {MAX_LEN}")
reference_ids = [tgt_ids[1:-1] for _, tgt_ids in encode_pairs(test, src_vocab, tgt_vocab, MAX_LEN)]
print(f"reference lengths: min {min(map(len, reference_ids))}, max {max(map(len, reference_ids))}")
starts_right = [ids[: len(reference)] == reference for ids, reference in zip(outputs["no end token"], reference_ids)]
print(f"outputs of the model without <eos> that begin with the whole reference: {np.mean(starts_right):.0%}")
row = starts_right.index(True) if any(starts_right) else 0
print(f"\n{test[row][0]}\n  shifted       {french(outputs['shifted'][row])}\n"
      f"  no end token  {french(outputs['no end token'][row])}")

# %% [markdown]
# The translation itself is often right, as the share printed above shows; what comes after it is
# the model going on because nothing told it to stop. How sure is each model that the sentence is
# over once the full reference has been written? Feed $\langle\mathrm{bos}\rangle\, y_1 \dots y_n$
# and read the probability of `<eos>` at the last position:

# %%
def eos_probability(model):
    """Mean p(<eos>) after the whole reference, over the test sentences."""
    rows = encode_pairs(test, src_vocab, tgt_vocab, MAX_LEN)
    src = pad_rows([src_ids for src_ids, _ in rows])
    tgt_in = pad_rows([tgt_ids[:-1] for _, tgt_ids in rows])  # <bos> y1 .. yn: the whole reference
    with model.evaluating():
        logits = model.forward(backend.asarray(src), backend.asarray(tgt_in))
    probabilities = backend.to_numpy(ops.softmax_forward(logits)[0])
    last = (tgt_in != PAD_ID).sum(axis=1) - 1
    return float(probabilities[np.arange(len(rows)), last, EOS_ID].mean())


end = {name: eos_probability(models[name]) for name in ["shifted", "no end token"]}
print(f"p(<eos>) after the whole reference: shifted {end['shifted']:.3f}, no end token {end['no end token']:.1e}")
if not QUICK:
    assert (lengths["no end token"] == MAX_LEN).all(), "without <eos> in the targets, decoding runs to max_len"
    assert (lengths["shifted"] < MAX_LEN).all(), "with it, every translation stops by itself"
    assert np.mean(starts_right) > 0.5, "the model without <eos> still translates"
    assert end["no end token"] < 1e-3 < 0.5 < end["shifted"]

# %% [markdown]
# A model learns to give a token high probability only where that token was a target. `<eos>`
# never was, so the loss pushed its probability down everywhere, and the search cannot find it.
# The same would happen if `<eos>` were in the data but the last target position were cut off, by
# a truncation or an off-by-one in the padding: decoding would run to `max_len` for every sentence,
# which is both wrong and the slowest possible output.
#
# ## Exercises
#
# 1. **Exposure bias.** Teacher forcing always shows the decoder the reference prefix; at decoding
#    time it sees its own. Force a wrong first word into the shifted model (feed
#    `model.decode_step` a `<bos>` and then, say, `la` where the reference starts with `le`), then
#    let greedy search go on. Does it recover a grammatical sentence? Does it agree with the wrong
#    article?
# 2. The model trained without `<eos>` did learn to translate. Cut its outputs with a rule of your
#    own (at the first `.` or `?`, or at a length proportional to the source) and compare its
#    greedy BLEU with the shifted model's. What does your rule get wrong for a sentence with
#    several punctuation marks?
# 3. Shift the wrong way: train with `tgt_out` as the input and `tgt_in` as the targets. What does
#    position $t$ see, and what must it predict? Predict the training loss before you run it.
#
#    *Auto-graded:* `answer_offsets(decoder_input, targets)`, for a decoder given `decoder_input` and
#    asked for `targets`, both `(B, T)` arrays of ids. For each position $t$ whose target is not
#    `<pad>`: how many positions back the nearest input that the causal mask lets position $t$ see
#    (positions $0 \dots t$) holds its target token, 0 when its own input does; -1 when none of them
#    does, and -1 where the target is `<pad>`. Return the `(B, T)` integers. Call it on the shifted
#    pairs, on unshifted ones and the wrong way round. The grader tries those three, targets two
#    positions ahead, and repeated words. *For the rubric:* what position $t$ sees and must predict
#    the wrong way round, and the training loss you predict before running it.

# %%
def answer_offsets(decoder_input, targets):
    """(B, T): how far back position t sees its own target among its inputs 0..t; -1 if nowhere, or <pad>."""
    ### BEGIN SOLUTION
    offsets = np.full(targets.shape, -1)
    for row in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            if targets[row, t] == PAD_ID:
                continue  # nothing is asked here
            seen_backwards = decoder_input[row, t::-1]  # positions t, t - 1, ..., 0
            matches = np.flatnonzero(seen_backwards == targets[row, t])
            if matches.size:
                offsets[row, t] = matches[0]
    return offsets
    ### END SOLUTION


# %%
print(check("answer_offsets", answer_offsets))

# %% [markdown]
# 4. Why does the decoder need `<bos>` at all? Which position would predict $y_1$ without it, and
#    from what?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. Teacher forcing never showed the model a wrong prefix, so it trusts the one it is given. In
#    the full run, with the wrong article forced, greedy search mostly agrees with it: it writes a
#    noun of that article's gender, so the sentence is fluent French and a wrong translation (a
#    feminine noun after a forced `la`); now and then it keeps the source's noun and the agreement breaks. Only a
#    minority of outputs go on exactly as before (four cases and the share are printed below). A
#    full-marks answer forces the token through `decode_step`, shows the continuations, and names
#    the cause: at training time every prefix was the reference, so errors were never recovered from.
# 2. Cutting the outputs of the model without `<eos>` at the first `.` or `?` gives back nearly all
#    of the shifted model's BLEU in the full run (both printed below, with the uncut score): the
#    translation was there, only the stop was missing. The rule fails on any sentence with a mark
#    before its end: an abbreviation (`M. Dupont`), a number (`3.5`), a quotation, or two sentences
#    in one pair are cut at the first mark and lose the rest; a sentence ending in `!` is never cut.
#    A length rule fails the other way, on sentences whose length ratio is unusual.
# 3. With $u = $ `tgt_out` $= y_1 \dots y_n\,\langle\mathrm{eos}\rangle$ and $z = $ `tgt_in`
#    $= \langle\mathrm{bos}\rangle\, y_1 \dots y_n$, position $t$ sees $y_1 \dots y_{t+1}$ and must
#    predict $z_t = y_t$ (and `<bos>`, always, at $t = 0$). The answer is its input one position
#    back, which the causal mask allows, so it is a copying task like the unshifted one: predict a
#    training loss near 0, far below the shifted model's and a little above the unshifted one's
#    (copying from the previous position takes an attention head; copying one's own input needs
#    only the residual path). The cell below trains it with the lesson's settings and prints the
#    four losses; the full run asserts that it ends below half the shifted model's.
# 4. The decoder must be given something at the position that predicts $y_1$, and that input must
#    not be a target word. `<bos>` is that placeholder: position 0 reads `<bos>` and its position
#    code, so it predicts $y_1$ from the source alone, through cross-attention. Without it the input
#    would start with $y_1$ itself: no position would predict $y_1$ (training never teaches the first
#    word), and decoding would have no first input to start from. Full marks: position 0, from the
#    source only; the second point (decoding needs a start token) is the bonus.

# %% tags=["instructor"]
def forced_greedy(model, src_row, first):
    """Greedy decoding of one source, `src_row (1, Ts)`, with the first output token forced to `first`."""
    with model.evaluating():
        cache = model.start_decoding(src_row, max_len=MAX_LEN)
        model.decode_step(cache, backend.asarray(np.array([BOS_ID])))  # its own choice is overruled
        token, written = first, [first]
        for _ in range(MAX_LEN - 1):
            token = int(backend.to_numpy(model.decode_step(cache, backend.asarray(np.array([token]))).argmax(axis=-1))[0])
            if token == EOS_ID:
                break
            written.append(token)
    return written


swap = {tgt_vocab.index["le"]: tgt_vocab.index["la"], tgt_vocab.index["la"]: tgt_vocab.index["le"]}
forced_rows = [row for row, (_, reference) in enumerate(test) if tokenize(reference, "fr")[0] in ("le", "la")]
same_rest = []
for row in forced_rows:
    free = outputs["shifted"][row]
    first = swap[tgt_vocab.index[tokenize(test[row][1], "fr")[0]]]
    forced = forced_greedy(models["shifted"], test_src[row:row + 1], first)
    same_rest.append(forced[1:] == free[1:])
    if len(same_rest) <= 4:
        print(f"answer 1: {test[row][0]}\n  reference {test[row][1]}\n  free      {french(free)}\n  forced    {french(forced)}")
print(f"answer 1: {len(forced_rows)} test sentences whose reference starts with le or la; with the other article "
      f"forced, the rest of the greedy output is unchanged for {np.mean(same_rest):.0%} of them")
if not QUICK:
    assert np.mean(same_rest) < 0.5, "mostly, the forced article changes what follows"

# %% tags=["instructor"]
marks = {tgt_vocab.index[mark] for mark in (".", "?")}


def cut_at_mark(ids):
    """`ids` up to and including the first '.' or '?' (all of them when there is none)."""
    return next((ids[: at + 1] for at, token in enumerate(ids) if token in marks), ids)


cut_bleu = metrics.bleu([french(cut_at_mark(ids)) for ids in outputs["no end token"]], references)
print(f"answer 2: greedy BLEU on {len(test)} test sentences: no end token {bleu['no end token']:.1f} as decoded, "
      f"{cut_bleu:.1f} cut at the first '.' or '?'; shifted {bleu['shifted']:.1f}")
if not QUICK:
    assert cut_bleu > bleu["no end token"] + 10

# %% tags=["instructor"]
def train_wrong_way():
    """As `train(examples)`, with the decoder given tgt_out and asked for tgt_in."""
    model = Transformer(config, seed=0)
    rng, queue = np.random.default_rng(0), []

    def next_batch(step):
        if not queue:
            queue.extend(make_batches(examples, token_budget=512, rng=rng))
        b = queue.pop()
        src, tgt_in, tgt_out = (backend.asarray(ids) for ids in (b.src, b.tgt_in, b.tgt_out))
        return ((src, tgt_out), tgt_in)

    return fit(model, next_batch, STEPS, lr=3e-3)


wrong_way = train_wrong_way()
print(f"answer 3: mean training loss of the last 20 steps: wrong way {np.mean(wrong_way[-20:]):.3f}, "
      + ", ".join(f"{name} {np.mean(values[-20:]):.3f}" for name, values in losses.items()))
assert all((b.tgt_in[:, 1:] == b.tgt_out[:, :-1]).all() for b in batches)  # target t of the wrong way = input t - 1
wrong_offsets = np.concatenate([answer_offsets(b.tgt_out, b.tgt_in)[b.tgt_in != PAD_ID] for b in batches])
print(f"answer 3: the wrong way round, {np.mean(wrong_offsets == 1):.0%} of the asked positions see their target one "
      f"position back, {np.mean(wrong_offsets == 0):.0%} in their own input (a repeated word), "
      f"{np.mean(wrong_offsets == -1):.0%} nowhere (<bos>, at position 0)")
if not QUICK:
    assert np.mean(wrong_way[-20:]) < 0.5 * np.mean(losses["shifted"][-20:])
