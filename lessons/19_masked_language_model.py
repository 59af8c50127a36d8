# %% [markdown]
# # Lesson 19 — A BERT-style masked language model: reading both ways
#
# Lesson 18's model reads left to right: word $t$ sees only itself and the words before it. BERT
# (Devlin et al., 2019) removes the causal mask, so every word sees the whole sentence, and trains
# by **masking**: hide some words and ask the model to fill them in.
#
# * 15% of the words are selected (never a special token: `<pad>`, `<bos>`, `<eos>`, `<unk>` or
#   `[MASK]`); of those, 80% become `[MASK]`, 10% a random word and 10% stay as they are (exercise 2
#   asks why);
# * the loss covers the selected positions only: the target is `<pad>`, ignored, everywhere else.
#
# In npformer the model is `models.LanguageModel` built with `LanguageModelConfig(..., causal=False)`:
# the same blocks as lesson 18, with one mask fewer.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from npformer import backend, viz
from npformer.course import EXERCISES, check
from npformer.data import detokenize, pad_rows, tokenize
from npformer.tasks.language_model import french_sentences, trim_padding
from npformer.tasks.masked_lm import fill_mask, mask_tokens, train_french_mlm
from npformer.tokens import BOS_ID, EOS_ID, MASK_ID

rng = np.random.default_rng(0)
ids = np.array([[1, 10, 11, 12, 13, 14, 15, 16, 2]])
inputs, targets = mask_tokens(np.repeat(ids, 4, axis=0), rng, vocab_size=40, rate=0.3)
print("inputs:\n", inputs, "\ntargets (0 = not asked):\n", targets)
assert np.all(inputs[targets == 0] == np.repeat(ids, 4, axis=0)[targets == 0]), "unselected tokens stay as they are"
assert np.all(targets[:, [0, -1]] == 0), "<bos> and <eos> are never selected"

# %% [markdown]
# ### Your turn
#
# `mask_tokens` draws its random numbers from `rng` as it goes. Write the rule with the draws handed
# in, so that it is deterministic and can be checked:
# `bert_masking(ids, select_draws, choice_draws, random_ids) -> (input_ids, targets)`, where `ids`,
# the two arrays of uniform draws in $[0, 1)$ and `random_ids` all have the shape `(B, T)`:
#
# * only words may be chosen: ids above `MASK_ID` (= 4), never `<pad>` (0), `<bos>` (1), `<eos>` (2),
#   `<unk>` (3) or `[MASK]` (4) itself;
# * the word at `(b, t)` is selected when `select_draws[b, t] < 0.15`;
# * a selected word becomes `MASK_ID` when `choice_draws[b, t] < 0.8`, `random_ids[b, t]` (a random
#   word, drawn for every position and used only here) when `0.8 <= choice_draws[b, t] < 0.9`, and
#   stays as it is otherwise;
# * `targets` holds the original word at every selected position and `<pad>` (0) everywhere else.
#
# Return new arrays; `ids` must not change. `mask_tokens` makes its selection and its `[MASK]`s in
# exactly this way from its first two `rng.random(ids.shape)` draws (it then draws only as many random
# words as it needs). The grader tries sentences with every special token and every select draw but
# two below 0.15, draws exactly on the thresholds 0.15, 0.8 and 0.9, a random word that happens to be
# the word itself, and a row of padding only.

# %%
def bert_masking(ids, select_draws, choice_draws, random_ids):
    """BERT's 15% / 80-10-10 masking from given draws: (the model's input ids, the targets)."""
    ### BEGIN SOLUTION
    selected = (ids > MASK_ID) & (select_draws < 0.15)
    input_ids = np.where(selected & (choice_draws < 0.8), MASK_ID, ids)
    random_word = selected & (choice_draws >= 0.8) & (choice_draws < 0.9)
    input_ids = np.where(random_word, random_ids, input_ids)
    targets = np.where(selected, ids, 0)  # <pad> = 0 wherever nothing is asked
    return input_ids, targets
    ### END SOLUTION


# %%
print(check("bert_masking", bert_masking))

# %% [markdown]
# The rule, measured with your function (npformer's, until yours passes) on 100,000 words: ids 10 to
# 39 are all words, so 15% of them should be selected, and 80%, 10% and 10% of those become `[MASK]`, a
# random word, or stay.

# %%
passed = check("bert_masking", bert_masking, strict=False).passed
masking = bert_masking if passed else EXERCISES["bert_masking"].reference
words = rng.integers(10, 40, size=(2000, 50))
masked_inputs, masked_targets = masking(words, rng.random(words.shape), rng.random(words.shape),
                                        rng.integers(MASK_ID + 1, 40, size=words.shape))
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
STEPS, PAIRS = (250, 4000) if QUICK else (2000, 12000)
SIZE = {"d_ff": 128} if QUICK else {}  # the quick run's feed-forward layers are half as wide
result = train_french_mlm(None, steps=STEPS, max_pairs=PAIRS, **SIZE)
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
# French articles and the adjectives `petit`, `grand` and `beau` come *before* the noun and agree
# with it: `le chat` but `la pomme`, `les petits chats` but `les petites pommes`. To fill the mask in
# `[MASK] chat mange.` or `les [MASK] pommes sont rouges.` the model must read the noun on its
# **right**, which a left-to-right model cannot see.
#
# A probe isolates that one word. In every held-out sentence, wherever an article (`le`/`la`,
# `un`/`une`) or one of these adjectives stands right before a noun, we mask it and read at the mask
# how much the model prefers the feminine form to the masculine one, by their log-odds, the
# difference of their logits $z$ (the softmax's normaliser cancels):
#
# $$\log P(\text{petites}) - \log P(\text{petits}) = z_{\text{petites}} - z_{\text{petits}}$$
#
# Then we replace the noun, and nothing else, by each noun of the other gender in the same number
# (`pommes` by `chats`, `chiens`, ...) and read the log-odds again. The **shift** is the mean
# log-odds with the feminine nouns minus the mean with the masculine ones: positive when the noun
# on the right moves the prediction the right way. The sentences compared differ in that one word,
# which comes after the mask, so a left-to-right model's shift is exactly zero (the instructor's
# edition checks it). Nouns that start with a vowel are left out: before them `le` and `la` become
# `l'`, and `beau` becomes `bel`.

# %%
FORMS = [("le", "la"), ("un", "une"), ("petit", "petite"), ("grand", "grande"), ("beau", "belle"),
         ("petits", "petites"), ("grands", "grandes"), ("beaux", "belles")]  # (masculine, feminine)
KINDS = ["article", "singular adjective", "plural adjective"]
MASCULINE_NOUNS = ["chat", "chien", "livre", "garçon", "cheval"]
FEMININE_NOUNS = ["table", "pomme", "fleur", "voiture", "femme", "fille", "maison"]
PLURAL = {noun: "chevaux" if noun == "cheval" else noun + "s" for noun in MASCULINE_NOUNS + FEMININE_NOUNS}
OTHER_GENDER = {}  # noun -> (whether it is feminine, the nouns of the other gender in the same number)
for noun in MASCULINE_NOUNS + FEMININE_NOUNS:
    others = MASCULINE_NOUNS if noun in FEMININE_NOUNS else FEMININE_NOUNS
    OTHER_GENDER[noun] = (noun in FEMININE_NOUNS, others)
    OTHER_GENDER[PLURAL[noun]] = (noun in FEMININE_NOUNS, [PLURAL[other] for other in others])


def kind_of(word):
    """'article', 'singular adjective' or 'plural adjective', for a word of FORMS."""
    if word in ("le", "la", "un", "une"):
        return "article"
    return "plural adjective" if word.endswith(("s", "x")) else "singular adjective"


def right_context_shifts(language_model, words, sentences):
    """Every article or adjective of FORMS right before a noun in `sentences`, masked: a list of
    (form pair, kind, masked sentence, shift), the shift being log P(feminine) - log P(masculine) at
    the mask with the feminine nouns after it minus the same with the masculine nouns."""
    cases, rows, pair_of_row = [], [], []
    for sentence in sentences:
        tokens = tokenize(sentence, "fr")
        for t, (word, noun) in enumerate(zip(tokens, tokens[1:])):
            pair = next((p for p in FORMS if word in p), None)
            if pair is None or noun not in OTHER_GENDER:
                continue
            masked = tokens[:t] + ["[MASK]"] + tokens[t + 1:]
            feminine, others = OTHER_GENDER[noun]
            cases.append((pair, kind_of(word), detokenize(masked, "fr"), feminine, len(rows), len(others)))
            for right in [noun] + others:  # the sentence as it is, then with each noun of the other gender
                rows.append([BOS_ID] + words.encode(masked[:t + 1] + [right] + masked[t + 2:]) + [EOS_ID])
                pair_of_row.append(pair)
    ids = pad_rows(rows)  # one forward pass per 512 rows rather than one per sentence
    mask_at = (ids == MASK_ID).argmax(1)
    masculine_ids = np.array([words.index[m] for m, _ in pair_of_row])
    feminine_ids = np.array([words.index[f] for _, f in pair_of_row])
    log_odds = np.empty(len(ids))
    language_model.eval()
    for start in range(0, len(ids), 512):
        chunk = slice(start, start + 512)
        logits = backend.to_numpy(language_model.forward(backend.asarray(trim_padding(ids[chunk]))))
        at_mask = logits[np.arange(len(logits)), mask_at[chunk]]  # (rows, vocabulary): the logits at the mask
        log_odds[chunk] = (at_mask[np.arange(len(logits)), feminine_ids[chunk]]
                           - at_mask[np.arange(len(logits)), masculine_ids[chunk]])
    results = []
    for pair, kind, text, feminine, first, count in cases:
        as_is, swapped = log_odds[first], log_odds[first + 1:first + 1 + count].mean()
        results.append((pair, kind, text, as_is - swapped if feminine else swapped - as_is))
    return results


_, valid_sentences, _ = french_sentences(None, PAIRS, 0, None)  # the sentences the model was not trained on
probe = right_context_shifts(model, vocab, valid_sentences)
shifts = np.array([shift for *_, shift in probe])
kinds = np.array([kind for _, kind, _, _ in probe])
print(f"{len(probe)} masked words in {len(valid_sentences)} held-out sentences, e.g. "
      f"'{probe[0][2]}': shift {probe[0][3]:+.2f} nats")
summary = {}
for kind in KINDS + ["all"]:
    chosen = shifts[kinds == kind] if kind != "all" else shifts
    summary[kind] = (len(chosen), chosen.mean(), (chosen > 0).mean())
    print(f"{kind:>18s}: {len(chosen):3d} cases, mean shift {chosen.mean():+.2f} nats, "
          f"the right way (> 0) in {(chosen > 0).mean():.0%}")

figure, axis = plt.subplots(figsize=(9, 4.2), constrained_layout=True)
colours = {"article": "tab:blue", "singular adjective": "tab:orange", "plural adjective": "tab:green"}
jitter = np.random.default_rng(0)
for row, pair in enumerate(FORMS):
    values = np.array([shift for p, _, _, shift in probe if p == pair])
    axis.scatter(values, row + jitter.uniform(-0.25, 0.25, len(values)), s=9, alpha=0.5,
                 color=colours[kind_of(pair[0])], label=kind_of(pair[0]))
    axis.plot([values.mean()] * 2, [row - 0.35, row + 0.35], color="black", lw=2)
    axis.annotate(f"{np.mean(values > 0):.0%} > 0 (n={len(values)})", (1.01, row), xycoords=("axes fraction", "data"),
                  va="center", fontsize=8)
axis.axvline(0, color="grey", ls="--", lw=1)
axis.set_yticks(range(len(FORMS)), [f"{m} / {f}" for m, f in FORMS])
axis.invert_yaxis()
handles, labels = axis.get_legend_handles_labels()
unique = dict(zip(labels, handles))
axis.legend(unique.values(), unique.keys(), loc="lower right", fontsize=8)
axis.set_xlabel("shift (nats): log P(feminine) - log P(masculine) at the mask,\nfeminine noun after it minus masculine noun "
                "(0 for a left-to-right model)")
axis.set_title(f"Only the noun to the right of the mask changes ({STEPS:,} training steps; black: mean)")
figure.savefig(viz.figures_dir() / "19_right_context.png", dpi=110)

assert len(probe) > 300 and np.all(np.isfinite(shifts))
assert summary["article"][2] > 0.95 and summary["article"][1] > 0.5, "the noun decides the article in nearly every sentence"
assert summary["singular adjective"][2] > 0.9 and summary["singular adjective"][1] > 0.1, \
    "the noun moves the singular adjective the right way in nearly every sentence"
if QUICK:  # 250 steps: the plural adjectives have not learned it yet
    assert abs(summary["plural adjective"][1]) < 0.1 and summary["plural adjective"][2] < 0.8, \
        "after 250 steps the plural adjectives barely move"
else:  # 2,000 steps: every kind, in nearly every sentence
    assert all(summary[kind][2] > 0.95 and summary[kind][1] > 0.5 for kind in KINDS), \
        "after 2,000 steps the noun on the right moves every kind of word the right way"

# %% [markdown]
# How to read it: each dot is one masked word in one held-out sentence, placed at its shift; a dot
# right of the dashed line means that the noun after the mask moved the prediction towards the form
# that agrees with it. The printed table gives, for each kind of word, the mean shift and how often
# it is positive. The quick run (`NPFORMER_QUICK=1`, 250 steps of a model with feed-forward layers
# half as wide) and the full run (2,000 steps) do not show the same thing, and each prints its own
# numbers:
#
# * **Articles** learn it first. In both runs the noun moves every article the right way: by about
#   1 nat on average in the quick run, about 9 nats in the full run.
# * **Singular adjectives** (`petit`/`petite`, ...) come next: the right way in nearly every
#   sentence in both runs, by about a fifth of a nat in the quick run, by several nats in the full run.
# * **Plural adjectives** (`petits`/`petites`, ... after `les`, which is the same for both genders,
#   so that the noun is the only word around them that tells) come last. In the quick run they do
#   not show the effect yet: a mean shift of a few hundredths of a nat, positive in only about seven
#   sentences out of ten. In the full run they move the right way in every sentence, by about one
#   nat: the effect is there, but still much smaller than for the other words.
#
# So the bidirectional model does use the word after the mask, and a left-to-right model could not:
# for it every shift is exactly zero. Its masked-token accuracy, printed above, is far above chance
# but far from perfect; training longer is exercise 1's starting point.
#
# ## Exercises
#
# 1. Train for 3,000 steps (`train_french_mlm(None, steps=3000, max_pairs=12000)`), then run the
#    probe again with the new model and vocabulary on the held-out sentences of those 12,000 pairs,
#    `right_context_shifts(result["model"], result["vocab"], french_sentences(None, 12000, 0, None)[1])`:
#    do the plural adjectives catch up? Then give a left-to-right model the same masking task.
#    `train_french_mlm` always builds its model with `causal=False`, so build one yourself,
#    `models.LanguageModel(models.LanguageModelConfig(vocab=len(vocab), max_len=32))` (causal by
#    default), and train it with `npformer.training.fit(model, next_batch, steps)`, where
#    `next_batch(step)` returns `mask_tokens(...)` of a batch of sentences encoded with
#    `npformer.tasks.language_model.encode_sentences`, as `train_french_mlm` does (read
#    `npformer/tasks/masked_lm.py`). Check that every shift of its probe is zero. Then compare the
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
#
#    *Auto-graded:* `unk_rule(ids, is_english)`, for encoded sentences `ids` of shape `(B, T)` (each
#    row `<bos>`, the sentence's words, `<eos>`, then `<pad>`) and booleans `is_english` of shape
#    `(B,)`, returns `(english_share, french_share, balanced_accuracy)`. A sentence's share is the
#    fraction of its words that are `<unk>` (`UNK_ID`); `<bos>`, `<eos>` and `<pad>` are not words of
#    the sentence. `english_share` is the mean of the English sentences' shares, `french_share` that of
#    the French ones, and `balanced_accuracy` is the accuracy of the rule "English when more than half
#    of its words are `<unk>`", taken on each language apart and averaged, so that both languages
#    weigh the same however many sentences each has. The grader tries padded rows, sentences exactly
#    half `<unk>`, and more sentences of one language than of the other. Run it on the test sentences
#    of both languages, encoded with the masked model's vocabulary. *For the rubric:* the classifier
#    on the pooled states, its accuracy, and what the rule's accuracy says about it.

# %%
from npformer.tokens import PAD_ID, UNK_ID  # noqa: E402


def unk_rule(ids, is_english):
    """(mean <unk> share of the English sentences, of the French ones, the rule's balanced accuracy)."""
    ### BEGIN SOLUTION
    english = np.asarray(is_english, dtype=bool)
    words = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)  # the sentence's own tokens
    unknown = ids == UNK_ID
    share = unknown.sum(axis=1) / words.sum(axis=1)
    said_english = share > 0.5
    right_on_english = said_english[english].mean()
    right_on_french = (~said_english[~english]).mean()
    balanced = (right_on_english + right_on_french) / 2
    return share[english].mean(), share[~english].mean(), balanced
    ### END SOLUTION


# %%
print(check("unk_rule", unk_rule))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. (The causal model's part is run below, at 100 steps, 60 in the quick run.) With 3,000 steps
#    the masked-token accuracy rises (about 54%) and every shift grows: articles by about 10 nats,
#    and the plural adjectives, which hardly moved in the quick run (250 steps) and moved by about one
#    nat after 2,000 steps, now move by several nats (about 7.6 on average), the right way in every sentence, as do
#    all the other words: the model has learned that a prenominal word agrees with the noun on its
#    right. A left-to-right model cannot do this: at the mask it sees only the words before it, and
#    the probe changes a word after it, so every shift is exactly zero (checked below), and it can
#    only guess a masked word from the words before it. Its masked-token accuracy is therefore lower
#    than that of the bidirectional model trained the same way on the same sentences, and the gap is
#    wider after longer training, once the bidirectional model has learned to use the right-hand
#    side. Full marks: the longer training's probe (mean shifts and shares by kind of word), the zero
#    shifts of the causal model, and both accuracies measured on the same held-out sentences with
#    the same masking.
# 2. A fine-tuned model, or any model used on real text, never sees `[MASK]` in its input. Always using
#    `[MASK]` would create a mismatch between pre-training and use, and would let the model learn that
#    only `[MASK]` positions need predicting, so its representation of a visible word would not need
#    to say anything about that word. Keeping 10% unchanged makes every visible word a possible target,
#    so the model must keep a good representation of each; replacing 10% by a random word means no
#    visible word can be trusted blindly, so the model checks every word against its context. The
#    random words corrupt only $1.5\%$ of the real tokens ($15\% \times 10\%$), too few to hurt.
# 3. (Printed below.) The masked model's vocabulary holds French words only, so an English sentence
#    becomes mostly `<unk>` (with the punctuation and the rare word spelled alike in both languages).
#    The pooled states of English sentences are therefore nearly those of a run of `<unk>`, and the
#    classifier can tell the languages apart without anything the masked model learned: a rule on
#    the share of `<unk>` alone is right on nearly every sentence (printed below). A high accuracy
#    then measures vocabulary membership, not the quality of the features. A full answer reports the
#    accuracy, names this shortcut, and compares with such a baseline or with the features of an
#    untrained model.

# %% tags=["instructor"]
from npformer import models  # noqa: E402
from npformer.tasks.language_model import encode_sentences  # noqa: E402
from npformer.tasks.masked_lm import masked_accuracy  # noqa: E402
from npformer.tokens import PAD_ID  # noqa: E402
from npformer.training import fit  # noqa: E402

compare_steps, mlm_pairs = (60 if QUICK else 100), PAIRS  # the lesson's model has more steps: train a short one
short_mlm = train_french_mlm(None, steps=compare_steps, max_pairs=mlm_pairs, **SIZE)
bidirectional, mlm_vocab = short_mlm["model"], short_mlm["vocab"]
train_sentences, held_out, _ = french_sentences(None, mlm_pairs, 0, None)
train_ids = encode_sentences(train_sentences, mlm_vocab, 32)
valid_ids = encode_sentences(held_out, mlm_vocab, 32)
causal = models.LanguageModel(models.LanguageModelConfig(vocab=len(mlm_vocab), max_len=32, **SIZE), seed=0)
assert causal.config.causal
masking_rng = np.random.default_rng(0)


def next_batch(step):
    batch = trim_padding(train_ids[masking_rng.integers(0, len(train_ids), size=64)])
    inputs, targets = mask_tokens(batch, masking_rng, len(mlm_vocab))
    if not (targets != PAD_ID).any():
        return None
    return backend.asarray(inputs), backend.asarray(targets)


fit(causal, next_batch, compare_steps, ignore_index=PAD_ID)
causal_shifts = np.array([shift for *_, shift in right_context_shifts(causal, mlm_vocab, held_out)])
assert np.allclose(causal_shifts, 0, atol=1e-5), "a left-to-right model cannot see the noun after the mask"
causal_accuracy = masked_accuracy(causal, valid_ids, np.random.default_rng(1))
bidirectional_accuracy = masked_accuracy(bidirectional, valid_ids, np.random.default_rng(1))
print(f"answer 1: causal model's probe, largest shift in absolute value {np.abs(causal_shifts).max():.1e} nats "
      f"over {len(causal_shifts)} cases (all zero)")
print(f"answer 1: masked-token accuracy after {compare_steps} steps, same held-out sentences and masks: "
      f"bidirectional {bidirectional_accuracy:.1%}, left to right {causal_accuracy:.1%}")
assert bidirectional_accuracy > causal_accuracy, "the right-hand context must help"

# %% tags=["instructor"]
from npformer.data import toy_corpus, tokenize  # noqa: E402
from npformer.tokens import UNK_ID  # noqa: E402

unk_share = {}
for side, language in ((0, "en"), (1, "fr")):
    encoded = [vocab.encode(tokenize(pair[side], language)) for pair in toy_corpus().test]
    unk_share[language] = [np.mean(np.array(sentence) == UNK_ID) for sentence in encoded]
rule_right = np.mean(np.array(unk_share["en"]) > 0.5) / 2 + np.mean(np.array(unk_share["fr"]) <= 0.5) / 2
test_ids = pad_rows([[BOS_ID] + vocab.encode(tokenize(pair[side], language)) + [EOS_ID]
                     for side, language in ((0, "en"), (1, "fr")) for pair in toy_corpus().test])
english_share, french_share, rule_accuracy = unk_rule(test_ids, np.arange(len(test_ids)) < len(toy_corpus().test))
assert abs(rule_accuracy - rule_right) < 1e-12 and abs(english_share - np.mean(unk_share["en"])) < 1e-12
print(f"answer 3: share of <unk> in the masked model's vocabulary: English sentences "
      f"{np.mean(unk_share['en']):.0%}, French sentences {np.mean(unk_share['fr']):.0%}; the rule "
      f"'English when more than half the tokens are <unk>' is right on {rule_right:.1%} of the test sentences")
assert rule_right > 0.95
