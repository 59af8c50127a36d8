# %% [markdown]
# # Lesson 19 — A BERT-style masked language model: reading both ways
#
# Lesson 18's model reads left to right: word $t$ sees only itself and the words before it. BERT
# (Devlin et al., 2019) removes the causal mask, so every word sees the whole sentence, and trains
# by **masking**: hide some words and ask the model to fill them in.
#
# * 15% of the real tokens are selected; of those, 80% become `[MASK]`, 10% a random word and 10%
#   stay as they are (exercise 2 asks why);
# * the loss covers the selected positions only: the target is `<pad>`, ignored, everywhere else.
#
# In npformer the model is `models.LanguageModel` built with `LanguageModelConfig(..., causal=False)`:
# the same blocks as lesson 18, with one mask fewer.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, viz
from npformer.tasks.masked_lm import fill_mask, mask_tokens, train_french_mlm
from npformer.tokens import BOS_ID, EOS_ID, MASK_ID

rng = np.random.default_rng(0)
ids = np.array([[1, 10, 11, 12, 13, 14, 15, 16, 2]])
inputs, targets = mask_tokens(np.repeat(ids, 4, axis=0), rng, vocab_size=40, rate=0.3)
print("inputs:\n", inputs, "\ntargets (0 = not asked):\n", targets)
assert np.all(inputs[targets == 0] == np.repeat(ids, 4, axis=0)[targets == 0]), "unselected tokens stay as they are"
assert np.all(targets[:, [0, -1]] == 0), "<bos> and <eos> are never selected"

# The 15% / 80-10-10 rule, measured on many words (ids 10 to 39 are all real words):
words = rng.integers(10, 40, size=(2000, 50))
masked_inputs, masked_targets = mask_tokens(words, rng, vocab_size=40)
selected = masked_targets != 0
shares = {"selected": selected.mean(), "[MASK]": (masked_inputs[selected] == MASK_ID).mean(),
          "random word": (masked_inputs[selected] != words[selected]).mean() - (masked_inputs[selected] == MASK_ID).mean(),
          "unchanged": (masked_inputs[selected] == words[selected]).mean()}
print(", ".join(f"{name} {share:.1%}" for name, share in shares.items()))
assert abs(shares["selected"] - 0.15) < 0.01 and abs(shares["[MASK]"] - 0.8) < 0.02, "15% selected, 80% of them [MASK]"
assert abs(shares["random word"] - 0.1) < 0.02 and abs(shares["unchanged"] - 0.1) < 0.02, \
    "10% become a random word and 10% stay (a random word may happen to be the same word)"

# %% [markdown]
# ## Training on French

# %%
QUICK = os.environ.get("NPFORMER_QUICK") == "1"
result = train_french_mlm(None, steps=100 if QUICK else 1000, max_pairs=4000 if QUICK else 12000)
model, vocab = result["model"], result["vocab"]
print(f"masked-token accuracy {result['valid_masked_accuracy']:.1%} on held-out sentences "
      f"({result['parameters']:,} parameters, {result['seconds']:.0f} s); "
      f"guessing uniformly would get {1 / len(vocab):.1%}")
assert result["valid_masked_accuracy"] > 0.2, "masked-token accuracy must be far above chance, even in the quick run"
for sentence in ["le [MASK] chien mange.", "les chats [MASK] sont petits."]:
    print(f"{sentence:32s} -> {fill_mask(model, vocab, sentence)}")

# %% [markdown]
# ## The right-hand context
#
# In French, `petit`, `grand` and `beau` come *before* the noun, and agree with it. In
# `les [MASK] maisons` the hidden adjective must be feminine plural (`petites`) because of the
# word to its **right**; with `chats` it must be masculine (`petits`). A left-to-right model could
# not know. We compare the two forms at the masked position by their log-odds, the difference of
# their logits $z$ (the softmax's normaliser cancels):
#
# $$\log P(\text{petites}) - \log P(\text{petits}) = z_{\text{petites}} - z_{\text{petits}}$$

# %%
FEMININE_NOUNS = {"maisons", "voitures", "fleurs"}


def log_odds(noun, feminine="petites", masculine="petits"):
    """log P(feminine form) - log P(masculine form) at the mask in `les [MASK] <noun> sont noir(e)s .`.

    The predicate agrees with the noun (`noires` after a feminine noun), so nothing to the right of
    the mask contradicts the noun's gender.
    """
    colour = "noires" if noun in FEMININE_NOUNS else "noirs"
    sentence = np.array([[BOS_ID] + vocab.encode(["les", "[MASK]", noun, "sont", colour, "."]) + [EOS_ID]])
    model.eval()
    logits = backend.to_numpy(model.forward(backend.asarray(sentence)))[0, 2]
    return float(logits[vocab.index[feminine]] - logits[vocab.index[masculine]])


pairs = [("petites", "petits"), ("grandes", "grands"), ("belles", "beaux")]
nouns = ["maisons", "voitures", "fleurs", "chats", "chiens", "livres"]
table = np.array([[log_odds(noun, f, m) for noun in nouns] for f, m in pairs])
figure, axis = plt.subplots(figsize=(9, 3.6), constrained_layout=True)
image = axis.imshow(table, cmap="RdBu_r", vmin=-np.abs(table).max(), vmax=np.abs(table).max())
axis.set_xticks(range(len(nouns)), [f"les _ {n}" for n in nouns], rotation=20)
axis.set_yticks(range(len(pairs)), [f"{f} vs {m}" for f, m in pairs])
axis.set_title("log P(feminine) - log P(masculine) at the mask\n(feminine nouns: the first three columns)")
figure.colorbar(image, ax=axis, label="nats (red: feminine preferred)")
figure.savefig(viz.figures_dir() / "19_right_context.png", dpi=110)
print(np.round(table, 2))
assert table.shape == (3, 6) and np.all(np.isfinite(table))
shift = float(table[:, :3].mean() - table[:, 3:].mean())
print(f"feminine nouns on the right raise the feminine form by {shift:+.2f} nats on average")
row_shifts = table[:, :3].mean(1) - table[:, 3:].mean(1)
print("the same shift, row by row:", ", ".join(f"{f} {value:+.2f}" for (f, _), value in zip(pairs, row_shifts)))
assert np.abs(row_shifts).max() < 1, "after this short training the effect of the right-hand noun is a fraction of a nat"
if not QUICK:  # the quick run's 100 steps leave the average shift at about zero; the full run's is positive
    assert shift > 0, "feminine nouns on the right must raise the feminine form on average"

# %% [markdown]
# How to read it: each row has its own overall preference (the model may favour `grandes` or
# `beaux` whatever follows), so compare the columns **within** a row. The only difference between
# two columns is the noun to the right of the mask, so any difference between them comes from
# right-hand context, which a left-to-right model cannot see: for it the table would be constant
# along every row. The printed shift averages the feminine-noun columns against the masculine ones.
#
# After this short training on the embedded corpus the effect is small and uneven (see the
# printed shifts, overall and row by row): a fraction of a nat at most, and not the same in every
# row. The model has not yet learned prenominal agreement well, and its masked-token accuracy,
# printed above, is far above chance but far from perfect. Training longer, or on more varied
# sentences, is exercise 1's starting point.
#
# ## Exercises
#
# 1. Train for 3,000 steps (`train_french_mlm(None, steps=3000, max_pairs=12000)`, then rebuild the
#    table with the new `model` and `vocab`): does the shift grow? Then give a left-to-right model
#    the same masking task. `train_french_mlm` always builds its model with `causal=False`, so build
#    one yourself, `models.LanguageModel(models.LanguageModelConfig(vocab=len(vocab), max_len=32))`
#    (causal by default), and train it with `npformer.training.fit(model, next_batch, steps)`, where
#    `next_batch(step)` returns `mask_tokens(...)` of a batch of sentences encoded with
#    `npformer.tasks.language_model.encode_sentences`, as `train_french_mlm` does (read
#    `npformer/tasks/masked_lm.py`). Check that every row of its table is constant. Then compare the
#    two models' masked-token accuracy on the same held-out sentences (`masked_accuracy` in the same
#    module): how much does the right-hand context bring?
# 2. Why does BERT replace 10% of the selected words by random words and leave 10% unchanged,
#    instead of always using `[MASK]`? (Think of what a fine-tuned model's inputs contain.)
# 3. Use the masked model's pooled hidden states (lesson 17) as features for the language-id task:
#    for token ids `ids` of shape `(B, T)`, the input of the blocks is
#    `x = model.tok_embed.forward(ids) + model.pos_embed.forward(*ids.shape)`, the hidden states are
#    `hidden = model.blocks.forward(x, ops.padding_mask(ids))`,
#    `ops.masked_mean_pool_forward(hidden, ids != PAD_ID)` pools them, and a linear head with softmax
#    cross-entropy (lessons 2 and 3) learns the label. The masked model knows French words only:
#    what do English sentences become in its vocabulary, and what does that say about the accuracy
#    you get?
