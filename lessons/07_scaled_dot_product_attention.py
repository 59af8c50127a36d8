# %% [markdown]
# # Lesson 7 — Scaled dot-product attention: first principles, forward, backward, heatmap
#
# Attention lets every word of a sentence look at every other word and take what it needs from
# them. This lesson builds it twice. First from the word vectors alone, with no parameters at all,
# to see what the idea can and cannot do, and why it replaced the recurrent networks that came
# before it. Then as the paper writes it, with queries, keys and values, whose forward and
# backward passes you write yourself.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)
first_principles_rng = np.random.default_rng(7)  # the first part's own, so `rng` draws as it always did

# %% [markdown]
# ## Attention from first principles
#
# ### Attention without parameters
#
# Take a sentence of $T$ words, word $i$ a vector $x_i \in \mathbb{R}^D$ (row $i$ of a $T \times D$
# matrix $X$). To give each word some context, replace it by a weighted average of all the words of
# the sentence, with large weights on the words that it resembles. The dot product $x_i \cdot x_j$
# measures the resemblance, and a softmax over $j$ (lesson 3) turns the scores into positive
# weights that sum to 1:
#
# $$s_{ij} = \frac{x_i \cdot x_j}{\sqrt{D}}, \qquad a_{ij} = \frac{e^{s_{ij}}}{\sum_{l=1}^{T} e^{s_{il}}},
# \qquad y_i = \sum_{j=1}^{T} a_{ij}\, x_j$$
#
# or, for the whole sentence, $Y = \operatorname{softmax}\left(X X^\top / \sqrt{D}\right) X$, with the
# softmax along each row. The division by $\sqrt{D}$ keeps the scores of unrelated words near unit
# size (the section "Why divide by $\sqrt{D_h}$?" below says why that matters). Nothing here is
# learned.
#
# Five words with $D = 8$: random vectors, except that "kitten" is "cat" plus a little noise, so
# that the two are similar. Every vector is scaled to the same length, $\lVert x_i \rVert = \sqrt{D}$
# (entries of about unit size).

# %%
sentence = ["the", "cat", "chased", "a", "kitten"]
CAT, CHASED, KITTEN = 1, 2, 4
embedding_dim = 8
x = first_principles_rng.standard_normal((len(sentence), embedding_dim))
x[KITTEN] = x[CAT] + 0.35 * first_principles_rng.standard_normal(embedding_dim)  # "kitten" resembles "cat"
x *= np.sqrt(embedding_dim) / np.linalg.norm(x, axis=1, keepdims=True)  # every word of length sqrt(D)

scores = x @ x.T / np.sqrt(embedding_dim)  # (T, T): s_ij = x_i . x_j / sqrt(D)
weights = np.exp(scores - scores.max(axis=1, keepdims=True))  # lesson 3's stable softmax, row by row
weights /= weights.sum(axis=1, keepdims=True)
y = weights @ x  # (T, D): each new vector is the weighted average of all five


def print_weights(weights, rows, columns):
    """One line per word that looks (a row), one column per word looked at."""
    print("looks at:  " + "".join(f"{word:>8}" for word in columns))
    for word, row in zip(rows, weights):
        print(f"{word:>9}  " + "".join(f"{weight:8.2f}" for weight in row))


def cosine(a, b):
    return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))


print_weights(weights, sentence, sentence)
print(f'cosine of "cat" and "kitten": {cosine(x[CAT], x[KITTEN]):.3f} before, {cosine(y[CAT], y[KITTEN]):.3f} after')
assert np.allclose(weights.sum(axis=1), 1), "the weights of each word must sum to 1"
for word, other in ((CAT, KITTEN), (KITTEN, CAT)):
    assert np.argsort(weights[word])[-2] == other, "cat and kitten must give each other their second weight"
assert cosine(y[CAT], y[KITTEN]) > cosine(x[CAT], x[KITTEN]), "attention must pull cat and kitten together"

# %% [markdown]
# **What it can do.** "cat" and "kitten" give each other the largest weight that they do not keep
# for themselves, so each new vector is pulled toward the other, and the two become more alike
# (the cosines above). That is context: a word's new vector carries something of the words that it
# resembles, from anywhere in the sentence.
#
# **What it cannot do.**
#
# - *Every word looks at itself more than at any other word.* The vectors all have the same
#   length, so the Cauchy-Schwarz inequality gives $x_i \cdot x_j \le \lVert x_i \rVert\,
#   \lVert x_j \rVert = \lVert x_i \rVert^2 = x_i \cdot x_i$, with equality only when $x_j = x_i$:
#   the largest score of every row is on the diagonal, here $s_{ii} = \sqrt{D}$ (the other scores
#   are printed below).
# - *The question is the answer.* The scores $X X^\top$ are symmetric: how strongly "chased"
#   looks for "cat" is exactly how strongly "cat" looks for "chased", and both are fixed by the
#   embeddings. A verb cannot look for its subject unless the two vectors already resemble each
#   other, and nothing can be learned, since there are no parameters.
# - *Order is invisible.* Shuffle the words and the new vectors come out shuffled the same way:
#   $y_i$ does not depend on where the words sit. (This one the next step does not fix either;
#   lesson 5's positional encodings, added to the word vectors, do.)

# %%
off_diagonal = scores[~np.eye(len(sentence), dtype=bool)]
print(f"scores: {np.sqrt(embedding_dim):.2f} on the diagonal, from {off_diagonal.min():.2f} to "
      f"{off_diagonal.max():.2f} off it (the largest: cat and kitten)")
print("weight that each word keeps for itself:", ", ".join(
    f"{word} {weight:.2f}" for word, weight in zip(sentence, np.diag(weights))))
print(f'"chased" gives itself {weights[CHASED, CHASED]:.2f} and "cat" {weights[CHASED, CAT]:.2f}')
assert np.allclose(np.diag(scores), np.sqrt(embedding_dim)) and off_diagonal.max() < np.sqrt(embedding_dim)
assert off_diagonal.max() == scores[CAT, KITTEN], "the largest score off the diagonal must be cat and kitten's"
assert np.all(weights.argmax(axis=1) == np.arange(len(sentence))), "each word's largest weight must be on itself"
assert np.allclose(scores, scores.T), "the scores of attention without parameters must be symmetric"
shuffle = np.array([3, 0, 4, 2, 1])
shuffled_scores = x[shuffle] @ x[shuffle].T / np.sqrt(embedding_dim)
shuffled_weights = np.exp(shuffled_scores) / np.exp(shuffled_scores).sum(axis=1, keepdims=True)
assert np.allclose(shuffled_weights @ x[shuffle], y[shuffle]), "shuffled words must give shuffled outputs"

# %% [markdown]
# ### The next step: queries, keys and values
#
# Give each word three roles, each a learned linear map of its vector: a **query**
# $q_i = x_i W_q$ (what word $i$ looks for), a **key** $k_j = x_j W_k$ (what word $j$ is found by)
# and a **value** $v_j = x_j W_v$ (what word $j$ hands over when it is found). The score becomes
#
# $$s_{ij} = \frac{q_i \cdot k_j}{\sqrt{D}} = \frac{x_i\, W_q W_k^\top\, x_j^\top}{\sqrt{D}}$$
#
# a learned comparison $W_q W_k^\top$ that need not be symmetric and need not favour the diagonal;
# $W_v$ chooses what is averaged. With $W_q = W_k = W_v = I$ it is the attention above. Below,
# $W_k = W_v = I$, and a hand-picked $W_q$ stands in for a learned one (lesson 13 learns them by
# gradient descent): the rank-one $W_q = 3\, x_{\text{chased}}^\top x_{\text{cat}} /
# \lVert x_{\text{chased}} \rVert^2$ maps "chased" to $3\, x_{\text{cat}}$, so that "chased" now asks
# "where is something like a cat?".

# %%
def self_attention(x, w_q, w_k, w_v):
    """softmax(Q K^T / sqrt(D)) V for one sentence x of shape (T, D); returns it, (T, D), and the (T, T) weights."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T / np.sqrt(x.shape[1])
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ v, weights


identity = np.eye(embedding_dim)
w_q = 3.0 * np.outer(x[CHASED], x[CAT]) / (x[CHASED] @ x[CHASED])
_, weights_with_a_query = self_attention(x, w_q, identity, identity)
print_weights(np.stack([weights[CHASED], weights_with_a_query[CHASED]]),
              ["no W", "with W_q"], sentence)
assert np.allclose(self_attention(x, identity, identity, identity)[1], weights), "W = I must give the attention above"
assert weights_with_a_query[CHASED].argmax() == CAT, '"chased" must now look mostly at "cat"'
assert weights_with_a_query[CHASED, CHASED] < 0.05, '"chased" must no longer look at itself'

# %% [markdown]
# "chased" now puts its largest weight on "cat" and most of the rest on "kitten", the word that
# resembles "cat", and almost nothing on itself. Learned projections are what let a word look for
# something other than itself, and they are the step from here to the paper's attention below.
#
# ### Why attention replaces a recurrent network
#
# Before the Transformer, the usual sequence model was recurrent: a hidden state reads the words
# one at a time,
#
# $$h_t = \tanh\left(h_{t-1} W + x_t U\right), \qquad h_0 = 0, \qquad t = 1, \dots, T$$
#
# **Sequential steps.** $h_t$ needs $h_{t-1}$, so the $T$ steps run one after another, and what
# word 1 contributes reaches word $T$ only through $T - 1$ further nonlinear steps. Self-attention
# connects every pair of words in one step and computes all $T$ outputs at once, with a few matrix
# products (Vaswani et al., section 4 and Table 1: $O(n)$ sequential operations and maximum path
# length for a recurrent layer, $O(1)$ for self-attention, where $n$ is our $T$). The price is the
# $T \times T$ matrix of weights.
#
# **Gradients.** By the chain rule, the gradient of the last state with respect to the first word
# is a product of $T - 1$ Jacobians, one per step:
#
# $$\frac{\partial h_T}{\partial x_1} = \frac{\partial h_T}{\partial h_{T-1}} \cdots
# \frac{\partial h_2}{\partial h_1}\, \frac{\partial h_1}{\partial x_1}, \qquad
# \frac{\partial h_t}{\partial h_{t-1}} = \operatorname{diag}\left(1 - h_t^2\right) W^\top, \qquad
# \frac{\partial h_1}{\partial x_1} = \operatorname{diag}\left(1 - h_1^2\right) U^\top$$
#
# Below, $W$ is orthogonal, the kindest choice: $W^\top$ keeps every vector's length, so no factor
# can lengthen a vector, and each shortens it by the slopes $1 - h_t^2 < 1$ of the $\tanh$. In one
# attention layer, word $T$'s output $y_T = \sum_j a_{Tj}\, x_j W_v$ depends on $x_1$ in one step:
#
# $$\frac{\partial y_T}{\partial x_1} = a_{T1}\, W_v^\top + (\text{a term through the score } s_{T1})$$
#
# whatever $T$ is. Its size is set by how much weight word $T$ puts on word 1, not by how far apart
# they are.
#
# The measurement: sentences of $T$ words, "cat" first, "chased" last, and $T - 2$ filler words
# between them, random vectors of length $\sqrt{D}$ with nothing in common with "cat" (their
# component along it removed). The recurrent network has $H = 16$ hidden units, a random orthogonal
# $W$ and a random $U$ with entries of variance $1/D$; its Jacobian is the product above,
# checked against finite differences. The attention layer is the one above ("chased" looks for
# "cat"), and, for comparison, the same layer with $W_q = 0$: every score is 0 and every weight
# $1/T$, the most evenly spread attention there is. For attention the Jacobian is measured by
# central differences (nudge $x_1$, see how far $y_T$ moves). The size of a Jacobian is its largest
# singular value: the most that a nudge of $x_1$ by a unit vector can move the output.

# %%
hidden_dim, longest = 16, 40
w_recurrent = np.linalg.qr(first_principles_rng.standard_normal((hidden_dim, hidden_dim)))[0]  # orthogonal
u_input = first_principles_rng.standard_normal((embedding_dim, hidden_dim)) / np.sqrt(embedding_dim)
fillers = first_principles_rng.standard_normal((longest - 2, embedding_dim))
fillers -= np.outer(fillers @ x[CAT], x[CAT]) / (x[CAT] @ x[CAT])  # nothing in common with "cat"
fillers *= np.sqrt(embedding_dim) / np.linalg.norm(fillers, axis=1, keepdims=True)


def cat_fillers_chased(length):
    """(length, D): "cat", length - 2 filler words, "chased"."""
    return np.concatenate([x[[CAT]], fillers[:length - 2], x[[CHASED]]])


def rnn_states(words):
    """(T, H): h_t = tanh(h_{t-1} W + x_t U) from h_0 = 0, one word after another."""
    state, states = np.zeros(hidden_dim), []
    for word in words:
        state = np.tanh(state @ w_recurrent + word @ u_input)
        states.append(state)
    return np.array(states)


def rnn_jacobian_last_by_first(words):
    """(H, D): d h_T / d x_1 = diag(1 - h_T^2) W^T ... diag(1 - h_1^2) U^T, the product of T - 1 steps."""
    states = rnn_states(words)
    jacobian = np.diag(1 - states[-1] ** 2)
    for state in states[-2::-1]:  # h_{T-1}, ..., h_1
        jacobian = jacobian @ w_recurrent.T @ np.diag(1 - state ** 2)
    return jacobian @ u_input.T


def jacobian_by_nudging(last_output, words, step=1e-6):
    """(output size, D): d last_output(words) / d words[0], by central differences."""
    columns = []
    for d in range(words.shape[1]):
        nudge = np.zeros_like(words)
        nudge[0, d] = step
        columns.append((last_output(words + nudge) - last_output(words - nudge)) / (2 * step))
    return np.stack(columns, axis=1)


finite_differences = jacobian_by_nudging(lambda words: rnn_states(words)[-1], cat_fillers_chased(5))
worst = np.abs(rnn_jacobian_last_by_first(cat_fillers_chased(5)) - finite_differences).max()
print(f"recurrent Jacobian against finite differences, T = 5: worst difference {worst:.1e}")
assert worst < 1e-8, "the recurrent network's Jacobian must match finite differences"

lengths = np.arange(2, longest + 1)
no_query = np.zeros((embedding_dim, embedding_dim))
gradient_sizes = {"recurrent": [], "attention": [], "attention, equal weights": []}
for length in lengths:
    words = cat_fillers_chased(length)
    gradient_sizes["recurrent"].append(np.linalg.norm(rnn_jacobian_last_by_first(words), 2))
    for name, query in (("attention", w_q), ("attention, equal weights", no_query)):
        jacobian = jacobian_by_nudging(lambda words: self_attention(words, query, identity, identity)[0][-1], words)
        gradient_sizes[name].append(np.linalg.norm(jacobian, 2))
gradient_sizes = {name: np.array(sizes) for name, sizes in gradient_sizes.items()}
weight_on_cat = {length: self_attention(cat_fillers_chased(length), w_q, identity, identity)[1][-1, 0]
                 for length in lengths}

print("sequential steps from word 1 to word T      size of d(last output) / d(first word)")
print("    T   recurrent   attention                  recurrent   attention   equal weights"
      "   (chased's weight on cat)")
for length in (5, 10, 20, 40):
    at = length - 2
    print(f"{length:5d} {length - 1:11d} {1:11d} {gradient_sizes['recurrent'][at]:26.1e}"
          f" {gradient_sizes['attention'][at]:11.3f} {gradient_sizes['attention, equal weights'][at]:15.3f}"
          f" {weight_on_cat[length]:26.3f}")
per_step = (gradient_sizes["recurrent"][40 - 2] / gradient_sizes["recurrent"][20 - 2]) ** (1 / 20)
print(f"from T = 20 to T = 40 the recurrent gradient shrinks by a factor {per_step:.2f} per extra word")

at_5, at_40 = 5 - 2, 40 - 2
assert gradient_sizes["recurrent"][at_40] < 1e-4 * gradient_sizes["recurrent"][at_5], \
    "the recurrent gradient must shrink by orders of magnitude from T = 5 to T = 40"
assert gradient_sizes["attention"][at_40] > 0.9 * gradient_sizes["attention"][at_5], \
    "the attention gradient must not shrink with T"
assert np.allclose(gradient_sizes["attention, equal weights"], 1 / lengths, rtol=1e-6), \
    "with equal weights the attention gradient must be exactly 1 / T"
assert gradient_sizes["recurrent"][at_40] < 1e-3 * gradient_sizes["attention, equal weights"][at_40], \
    "at T = 40 even evenly spread attention must pass a far larger gradient than the recurrent network"

figure, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
axes[0].plot(lengths, lengths - 1, color="tab:red", label="recurrent network: $T - 1$")
axes[0].plot(lengths, np.ones_like(lengths), color="tab:blue", label="self-attention: 1")
axes[0].set(title="Path from word 1 to word $T$", xlabel="sentence length $T$ (words)",
            ylabel="sequential nonlinear steps")
axes[1].semilogy(lengths, gradient_sizes["recurrent"], color="tab:red", label="recurrent network (tanh)")
axes[1].semilogy(lengths, gradient_sizes["attention"], color="tab:blue",
                 label='attention: "chased" looks for "cat"')
axes[1].semilogy(lengths, gradient_sizes["attention, equal weights"], color="tab:blue", linestyle="--",
                 label="attention, equal weights: $1/T$")
axes[1].set(title="Gradient of the last output with respect to the first word", xlabel="sentence length $T$ (words)",
            ylabel="largest singular value of $\\partial y_T / \\partial x_1$")
for axis in axes:
    axis.legend()
    axis.grid(alpha=0.3)
figure.savefig(viz.figures_dir() / "07_rnn_against_attention.png", dpi=110)

# %% [markdown]
# In the recurrent network the gradient from the last output back to the first word falls by
# orders of magnitude as the sentence grows (the table and the right panel): after a few dozen
# words, the first word can hardly change the last state, and gradient descent gets almost no
# signal to learn a link between them. In
# the attention layer it stays near 1 at every length, because "chased" reaches "cat" in one step
# and keeps almost all its weight on it. Even the most evenly spread attention only divides by
# $T$, since the weight is shared among $T$ words; no product of $T - 1$ factors appears. Gated
# recurrent networks (LSTM, GRU) were designed to slow the decay, but they still take $T$ steps one
# after another, which attention does not.
#
# ## Scaled dot-product attention, as in the paper
#
# Stack the queries, keys and values of a sentence as the rows of $Q$, $K$ and $V$:
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{D_h}}\right) V$$
#
# (Vaswani et al., eq. 1). Each query is compared with every key; the scores become weights that
# sum to 1; the output is the weighted average of the values. $D_h$ is the size of a query (a
# head's share of the model's width, lesson 8); from here on, $Q$, $K$ and $V$ are given and the
# projections that make them wait for lesson 8.

# %% [markdown]
# ## Why divide by $\sqrt{D_h}$?
#
# If the entries of $q$ and $k$ are independent with zero mean and unit variance, then
# $q \cdot k = \sum_{d=1}^{D_h} q_d k_d$ is a sum of $D_h$ products of variance 1, and has variance
# $D_h$. Without the scale, a large $D_h$ gives huge scores, a softmax that is almost one-hot, and
# vanishing gradients.

# %%
for head_dim in (4, 64, 512):
    q, k = rng.standard_normal((1000, head_dim)), rng.standard_normal((1000, head_dim))
    raw_std, scaled_std = np.std((q * k).sum(1)), np.std((q * k).sum(1) / np.sqrt(head_dim))
    print(f"Dh={head_dim:4d}: std of q·k = {raw_std:6.2f}, after / sqrt(Dh) = {scaled_std:.2f}")
    assert abs(raw_std / np.sqrt(head_dim) - 1) < 0.15, "q·k must have a standard deviation near sqrt(Dh)"
    assert abs(scaled_std - 1) < 0.15, "after the scale, the scores must have a standard deviation near 1"

# %% [markdown]
# ## Forward pass, with a mask
#
# For one sentence and one head, $Q$ is $T_q \times D_h$, $K$ is $T_k \times D_h$ and $V$ is
# $T_k \times D_h$. With $s = 1/\sqrt{D_h}$:
#
# $$S = s\, Q K^\top, \qquad P_{ij} = \frac{e^{S_{ij}}}{\sum_l e^{S_{il}}}, \qquad O = P V$$
#
# The mask (lesson 6) is True where query $i$ may attend to key $j$. A masked score is set to
# $-\infty$ before the softmax, so $P_{ij} = e^{-\infty} / \dots = 0$ exactly. As in lesson 3, the
# softmax subtracts each row's maximum first, which does not change $P$ and keeps $e^{S}$ from
# overflowing. One row needs care: a query whose keys are **all** masked has a maximum of
# $-\infty$, and $-\infty - (-\infty)$ is NaN. Such a query (a sentence of padding only) must get
# all-zero weights, hence an all-zero output.
#
# ### Your turn
#
# Write `attention(q, k, v, mask)` for `q` of shape `(B, H, Tq, Dh)`, `k` and `v` of shape
# `(B, H, Tk, Dh)`, and `mask` either None (no mask) or a boolean array that broadcasts to
# `(B, H, Tq, Tk)` (such as `(Tq, Tk)` or `(B, 1, 1, Tk)`). Return `out`, of shape `(B, H, Tq, Dh)`:
#
# 1. `scores = q @ k.swapaxes(-1, -2) / np.sqrt(Dh)`, shape `(B, H, Tq, Tk)` (`@` multiplies the
#    last two axes and batches over the others);
# 2. where the mask is False, replace the score by `-np.inf` (`np.where` broadcasts the mask);
# 3. subtract each row's maximum over the keys, but use $0$ where that maximum is $-\infty$;
# 4. exponentiate, and divide by each row's sum, except where the sum is $0$ (divide by 1 there,
#    so the row stays all zeros);
# 5. return `weights @ v`.
#
# The grader tries a causal mask, one query against a padded key, a query whose keys are all
# masked, and no mask at all.

# %%
def attention(q, k, v, mask):
    """softmax(q k^T / sqrt(Dh), masked) @ v, with all-zero weights for a fully masked query."""
    ### BEGIN SOLUTION
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # a fully masked row: -inf - (-inf) is NaN
    weights = np.exp(scores - row_max)
    row_sum = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(row_sum > 0, row_sum, 1.0)  # a fully masked row stays all zeros
    return weights @ v
    ### END SOLUTION


# %%
print(check("attention", attention))

# %% [markdown] tags=["instructor"]
# **The classic mistake** is the textbook softmax with the mask but without the guard for a fully
# masked query. The cases without such a query pass; the fully masked one turns into NaN (as does
# an unseen case whose random mask happens to mask a whole row):

# %% tags=["instructor"]
def attention_without_guard(q, k, v, mask):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):  # -inf - (-inf) = NaN, without a warning
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


mistake = check("attention", attention_without_guard, strict=False)
print(mistake)
failed_cases = {row.case for row in mistake.rows if not row.passed}
assert any("fully masked" in case for case in failed_cases), "the fully masked query must fail"
assert all("fully masked" in case or case.startswith("unseen:") for case in failed_cases), \
    "only the fully masked query may fail"

# %% [markdown]
# ## Backward pass, one step at a time
#
# For one sentence and one head, the upstream gradient $dO = \partial L / \partial O$ is given, and
# the other gradients are written the same way ($dP = \partial L / \partial P$...). The forward pass is
# a chain, $Q, K \to S = s\,QK^\top \to P = \operatorname{softmax}(S) \to O = PV$, and the backward
# pass walks it from the end. Each step below takes the inputs of `attention` and `dout`, recomputes
# what it needs, and is graded on its own; the last one puts them together.
#
# ### Step 1: through $O = PV$, to $V$
#
# $O_{id} = \sum_j P_{ij} V_{jd}$: the same product as the linear layer of lesson 2. Which entries of
# $O$ does $V_{jd}$ reach, and with which weights? Write `attention_dv(q, k, v, mask, dout)`, returning
# $dV$ in the shape of `v`. Think of cross-attention ($T_q \ne T_k$): the shape tells you whether a
# transpose is needed.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("07"))


# %%
def attention_weights(q, k, mask):
    """The weights P of attention(q, k, v, mask), zero rows for fully masked queries (lesson 7's steps 1-4):
    of your variant's attention, if you have one (the steps below need your P)."""
    ### BEGIN SOLUTION
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0))
    row_sum = weights.sum(axis=-1, keepdims=True)
    return weights / np.where(row_sum > 0, row_sum, 1.0)
    ### END SOLUTION


def attention_dv(q, k, v, mask, dout):
    """dL/dv, shaped like v."""
    ### BEGIN SOLUTION
    return attention_weights(q, k, mask).swapaxes(-1, -2) @ dout
    ### END SOLUTION


# %%
print(check("attention_dv", attention_dv))

# %% [markdown]
# ### Step 2: through $O = PV$, to the weights
#
# Now hold $V$ fixed: how does $O$ change with $P_{ij}$? Write
# `attention_d_weights(q, k, v, mask, dout)`, returning $dP$ of shape `(B, H, Tq, Tk)`, one entry per
# weight.

# %%
def attention_d_weights(q, k, v, mask, dout):
    """dL/dP, one entry per attention weight: (B, H, Tq, Tk)."""
    ### BEGIN SOLUTION
    return dout @ v.swapaxes(-1, -2)
    ### END SOLUTION


# %%
print(check("attention_d_weights", attention_d_weights))

# %% [markdown]
# ### Step 3: through the softmax, to the scores
#
# Each row of $P$ is the softmax of the same row of $S$: lesson 3's Jacobian and its simplification
# apply row by row. What happens at a masked score (its weight is $0$), and at a fully masked query?
# Write `attention_d_scores(q, k, v, mask, dout)`, returning $dS$ of shape `(B, H, Tq, Tk)`.

# %%
def attention_d_scores(q, k, v, mask, dout):
    """dL/dS, one entry per score: (B, H, Tq, Tk)."""
    ### BEGIN SOLUTION
    weights = attention_weights(q, k, mask)
    d_weights = attention_d_weights(q, k, v, mask, dout)
    return weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
    ### END SOLUTION


# %%
print(check("attention_d_scores", attention_d_scores))

# %% [markdown]
# ### Step 4: through $S = s\,QK^\top$, to $Q$ and $K$
#
# $S_{ij} = s \sum_d Q_{id} K_{jd}$ with $s = 1/\sqrt{D_h}$. Both $Q$ and $K$ enter it, each through
# its rows. Write `attention_backward(q, k, v, mask, dout)` with the inputs of `attention` and `dout`
# of shape `(B, H, Tq, Dh)`: return `(dq, dk, dv)`, shaped like `q`, `k` and `v`. Every product is
# one batched `@` over the batch and head axes. You may call your steps. The check grades them
# again and names the first wrong one; it compares with npformer and with finite differences of the
# forward, on the four cases of `attention`, and once yours passes it shows npformer's form.

# %%
def attention_backward(q, k, v, mask, dout):
    """Gradients (dq, dk, dv) of attention(q, k, v, mask)."""
    ### BEGIN SOLUTION
    scale = 1.0 / np.sqrt(q.shape[-1])
    d_scores = attention_d_scores(q, k, v, mask, dout)
    dq = scale * d_scores @ k
    dk = scale * d_scores.swapaxes(-1, -2) @ q
    return dq, dk, attention_dv(q, k, v, mask, dout)
    ### END SOLUTION


# %%
print(check("attention_backward", attention_backward, steps=(attention_dv, attention_d_weights, attention_d_scores)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# Again for one sentence and one head, with $dO = \partial L / \partial O$ given and the same
# notation for the other gradients ($dP = \partial L / \partial P$, and so on).
#
# **Through $O = P V$.** From $O_{id} = \sum_j P_{ij} V_{jd}$, as for the linear layer of lesson 2:
#
# $$dV_{jd} = \sum_i P_{ij}\, dO_{id} \;\Rightarrow\; dV = P^\top dO, \qquad
# dP_{ij} = \sum_d dO_{id}\, V_{jd} \;\Rightarrow\; dP = dO\, V^\top$$
#
# **Through the softmax**, one row at a time. From lesson 3,
# $\partial P_{ij} / \partial S_{il} = P_{ij} (\delta_{jl} - P_{il})$, so
#
# $$dS_{il} = \sum_j dP_{ij}\, P_{ij} (\delta_{jl} - P_{il})
# = P_{il}\left(dP_{il} - \sum_j dP_{ij} P_{ij}\right), \qquad
# dS = P \odot \left(dP - \operatorname{rowsum}(dP \odot P)\right)$$
#
# where $\operatorname{rowsum}$ keeps the key axis (size 1) so that it broadcasts.
#
# **Through $S = s\, Q K^\top$.** From $S_{ij} = s \sum_d Q_{id} K_{jd}$:
#
# $$dQ_{id} = s \sum_j dS_{ij} K_{jd} \;\Rightarrow\; dQ = s\, dS\, K, \qquad
# dK_{jd} = s \sum_i dS_{ij} Q_{id} \;\Rightarrow\; dK = s\, dS^\top Q$$
#
# **The mask.** A masked score is replaced by the constant $-\infty$, so it has no gradient; the
# formula gives that by itself, since $P_{ij} = 0$ makes $dS_{ij} = 0$. No gradient flows to a
# masked key through its scores, and $dV_j = \sum_i P_{ij}\, dO_i$ is zero for a key that every
# query masks. A fully masked query has a row of zeros in $P$, hence in $dS$: its $dQ$ row is zero,
# and it adds nothing to $dK$ and $dV$.

# %% [markdown]
# npformer's `ops.attention_forward` and `ops.attention_backward` are these two functions (the
# forward keeps the weights in a cache, so the backward does not recompute them). They pass the
# finite-difference check, for self-attention and for cross-attention ($T_q \ne T_k$), and no
# gradient reaches a masked key:

# %%
for report in (gradcheck.check_op("attention", batch=2, heads=3, q_len=4, k_len=4, head_dim=5),
               gradcheck.check_op("cross_attention")):
    print(report)
    assert report.passed, "attention_backward must pass the finite-difference check"

q, k, v = rng.standard_normal((3, 1, 2, 4, 5))
key_mask = np.array([True, True, False, True])  # key 2 is masked for every query
out, cache = ops.attention_forward(q, k, v, key_mask)
dq, dk, dv = ops.attention_backward(rng.standard_normal(out.shape), cache)
print("largest |dk| and |dv| of the masked key:", np.abs(dk[..., 2, :]).max(), np.abs(dv[..., 2, :]).max())
assert np.all(dk[..., 2, :] == 0) and np.all(dv[..., 2, :] == 0), "no gradient may flow to a masked key"

# %% [markdown]
# ## A heatmap
#
# A hand-made example, not a trained model: queries and keys are one-hot "word identities" scaled
# by 4, and each query is set to look for one other word. The words are only labels for the rows
# and columns; lesson 15 draws what a trained translator's heads do.

# %%
words = ["the", "black", "cat", "sat", "."]
keys = np.eye(5)[[0, 1, 2, 3, 4]] * 4.0
queries = np.eye(5)[[2, 1, 0, 4, 3]] * 4.0  # each query looks for another word
values = rng.standard_normal((5, 8))
out, cache = ops.attention_forward(queries[None, None], keys[None, None], values[None, None])
viz.attention_heatmaps([cache["weights"][0]], ["q:cat", "q:black", "q:the", "q:.", "q:sat"], words,
                       title="Hand-made: each query finds its key", path=viz.figures_dir() / "07_attention.png")
print(cache["weights"][0, 0].round(2))
assert np.allclose(cache["weights"][0, 0].sum(-1), 1), "the weights of each query must sum to 1"
assert list(cache["weights"][0, 0].argmax(-1)) == [2, 1, 0, 4, 3], "each query must find the key it looks for"

# %% [markdown]
# ## Exercises
#
# 1. Show that scaling $Q$ by $s$ before the product, $S = (sQ) K^\top$, gives the same gradients
#    $dQ$ and $dK$. Which order is cheaper, and why? Auto-graded: the costs, as
#    `scaling_multiplications(query_length, key_length, head_dim)`, the multiplications one head
#    spends scaling $Q$ and those it spends scaling the scores, a pair of integers. The proof and
#    the "why" stay for the rubric.

# %%
def scaling_multiplications(query_length, key_length, head_dim):
    """(multiplications to scale Q, multiplications to scale the scores S), for one head."""
    ### BEGIN SOLUTION
    scale_q = query_length * head_dim          # Q holds (Tq, Dh) numbers
    scale_scores = query_length * key_length   # S holds (Tq, Tk) numbers
    return scale_q, scale_scores
    ### END SOLUTION


# %%
print(check("scaling_multiplications", scaling_multiplications))

# %% [markdown]
# 2. A query whose scores are all equal (for example $q = 0$): what is its output? Is its gradient
#    $dQ$ zero? Derive it from the formulas above, then check with your `attention_backward`.
#    Auto-graded: `flat_query(keys, values, dout, scale)` for one head and the query $q = 0$, with
#    `keys` of shape `(Tk, Dh)`, `values` `(Tk, Dv)`, the upstream gradient `dout` of its output
#    `(Dv,)` and the scale $s$ of the scores $s\,q \cdot k_j$, returns the query's output `(Dv,)` and
#    its gradient $dq$ `(Dh,)`, from your derivation (NumPy only). Whether $dQ$ is zero, and why,
#    stays for the rubric.

# %%
def flat_query(keys, values, dout, scale):
    """(output (Dv,), dq (Dh,)) of the query q = 0 over keys (Tk, Dh) and values (Tk, Dv); dout: (Dv,)."""
    ### BEGIN SOLUTION
    key_count = len(keys)
    weights = np.full(key_count, 1 / key_count)               # every score is 0: uniform weights
    output = weights @ values                                  # (Dv,): the mean of the values
    d_weights = values @ dout                                  # (Tk,): dP_j = dout . v_j
    d_scores = weights * (d_weights - weights @ d_weights)     # the softmax's Jacobian at uniform weights
    dq = scale * d_scores @ keys                               # (Dh,): through S_j = s q . k_j
    return output, dq
    ### END SOLUTION


# %%
print(check("flat_query", flat_query))

# %% [markdown]
# 3. Memory: for $B = 64$, $H = 8$, $T = 512$, how big is $P$ in float32? Why does that matter?
#    Auto-graded: `attention_weights_bytes(batch, heads, length, itemsize)`, the bytes of $P$ for
#    self-attention over `length` tokens with numbers of `itemsize` bytes (4 for float32). Why it
#    matters stays for the rubric.

# %%
def attention_weights_bytes(batch, heads, length, itemsize):
    """The bytes of the attention weights P of one self-attention: an int."""
    ### BEGIN SOLUTION
    return batch * heads * length * length * itemsize
    ### END SOLUTION


# %%
print(check("attention_weights_bytes", attention_weights_bytes))

# %% [markdown]
# 4. Attention without parameters in higher dimensions: repeat it on random vectors of length
#    $\sqrt{D}$ for $D = 64$ and $D = 512$. How much weight does each word keep for itself? Why does
#    attention without parameters come closer to copying each word unchanged as $D$ grows?
# 5. Replace the recurrent network's orthogonal $W$ by $3W$. Does the gradient from the last output
#    to the first word still shrink as $T$ grows? Look at the slopes $1 - h_t^2$ along the way:
#    what happens to them, and why?

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. With $\tilde Q = sQ$ and $S = \tilde Q K^\top$, the softmax part is unchanged, so $dS$ is the
#    same. Then $d\tilde Q = dS\,K$ and $dQ = s\,d\tilde Q = s\,dS\,K$ (the chain rule through the
#    scaling), and $dK = dS^\top \tilde Q = s\,dS^\top Q$: the same two formulas. Scaling $Q$ costs
#    $T_q D_h$ multiplications per head, scaling $S$ costs $T_q T_k$; with $D_h < T_k$ (for example
#    $D_h = 64$ against $T_k = 512$) scaling $Q$ is cheaper, and in a full model the scale can even
#    be folded into $W_q$ for free (the two counts: `scaling_multiplications`, graded by `check`).
#    Full marks: the chain-rule step and the two sizes compared.
# 2. All scores equal give $P_{ij} = 1/T_k$ (over the keys it may see), so the output is the plain
#    mean of the values, $\bar v$. The gradient is not zero in general: $dP_{ij} = dO_i \cdot v_j$,
#    so $dS_{ij} = \frac{1}{T_k}\, dO_i \cdot (v_j - \bar v)$ and
#    $dQ_i = \frac{s}{T_k} \sum_j \bigl(dO_i \cdot (v_j - \bar v)\bigr) k_j$, which vanishes only in
#    special cases (all values equal, all keys equal, or $dO_i$ orthogonal to every $v_j - \bar v$):
#    a small change of $q$ moves weight between the keys, which changes the output unless the
#    values are all equal. Full marks: the mean of the values, "not zero", and the formula for
#    $dQ_i$ (its code: `flat_query`, graded by `check`). Checked below.
# 3. $P$ has $B H T^2 = 64 \cdot 8 \cdot 512^2 = 134{,}217{,}728$ entries: $536{,}870{,}912$ bytes,
#    $512$ MiB in float32, for one attention sublayer. It must be kept for the backward pass, and
#    the base model has 18 attention sublayers (6 encoder self-attentions, 6 decoder
#    self-attentions, 6 cross-attentions), so about 9 GiB of weights alone, and the backward pass
#    makes $dP$ and $dS$ of the same size. It grows like $T^2$: doubling the length quadruples it.
#    This is why long sequences run out of memory, and why fused kernels (FlashAttention) never
#    store $P$ but recompute it in blocks. Full marks: the number (`attention_weights_bytes`, graded
#    by `check`) and the quadratic growth.
# 4. For random vectors of length $\sqrt D$, $s_{ii} = \sqrt D$ while $s_{ij} = \sqrt D \cos\theta_{ij}$
#    with $\cos\theta_{ij}$ of order $1/\sqrt D$ (random directions are nearly orthogonal), so the
#    other scores stay of unit size. The weight on itself is then about
#    $1 / \bigl(1 + (T - 1)\, e^{1/2} e^{-\sqrt D}\bigr)$, which tends to $1$ exponentially in
#    $\sqrt D$: each word keeps almost all of its weight, and $y_i \approx x_i$ (printed below for
#    $D = 8, 64, 512$, with five random words as in the lesson's sentence; the estimate uses
#    $\mathbb{E}\,e^{s_{ij}} = e^{1/2}$ for a standard normal score).
# 5. No. With $3W$ each step multiplies the gradient by $\operatorname{diag}(1 - h_t^2)\, 3W^\top$:
#    the pre-activations triple, so many units saturate ($|h_t|$ near 1) and their slopes
#    $1 - h_t^2$ fall toward $0$, but the units that stay unsaturated now pass the gradient on with a
#    gain near $3$. In the lesson's network the gain wins: the gradient no longer shrinks with $T$,
#    it grows, unevenly (printed below, with the slopes). The lesson to draw: a product of $T - 1$
#    Jacobians either vanishes or explodes, depending on a balance that no single $W$ keeps at
#    1 for every input, and saturation is what stops $3W$ from exploding faster. Full marks: the
#    measured trend, the slopes (smaller, many near $0$) and the reason (saturation against gain).

# %% tags=["instructor"]
answer_rng = np.random.default_rng(8)
flat_q = answer_rng.standard_normal((1, 1, 3, 4))
flat_q[..., 1, :] = 0  # query 1: every score 0
flat_k, flat_v = answer_rng.standard_normal((2, 1, 1, 5, 4))
flat_dout = answer_rng.standard_normal((1, 1, 3, 4))
flat_out = attention(flat_q, flat_k, flat_v, None)
flat_dq = attention_backward(flat_q, flat_k, flat_v, None, flat_dout)[0]
mean_value = flat_v[0, 0].mean(axis=0)
predicted_dq = 0.5 / 5 * ((flat_dout[0, 0, 1] @ (flat_v[0, 0] - mean_value).T) @ flat_k[0, 0])  # s = 1/sqrt(4)
print(f"answer 2: output of the flat query minus the mean value: {np.abs(flat_out[0, 0, 1] - mean_value).max():.1e}; "
      f"|dq| of the flat query: {np.linalg.norm(flat_dq[0, 0, 1]):.3f}; against the formula: "
      f"{np.abs(flat_dq[0, 0, 1] - predicted_dq).max():.1e}")
assert np.allclose(flat_out[0, 0, 1], mean_value) and np.linalg.norm(flat_dq[0, 0, 1]) > 0.01
assert np.allclose(flat_dq[0, 0, 1], predicted_dq)

# %% tags=["instructor"]
word_count = len(sentence)
for width in (8, 64, 512):
    kept = []
    for trial in range(100):
        random_words = answer_rng.standard_normal((word_count, width))
        random_words *= np.sqrt(width) / np.linalg.norm(random_words, axis=1, keepdims=True)
        _, random_weights = self_attention(random_words, np.eye(width), np.eye(width), np.eye(width))
        kept.append(np.diag(random_weights).mean())
    estimate = 1 / (1 + (word_count - 1) * np.exp(0.5 - np.sqrt(width)))
    print(f"answer 4: D = {width:3d}: weight each word keeps for itself {np.mean(kept):.6f}, 1 minus it "
          f"{1 - np.mean(kept):.1e} (the estimate 1 / (1 + (T - 1) e^(1/2 - sqrt(D))) leaves {1 - estimate:.1e})")
    if width >= 64:
        assert np.mean(kept) > 0.99
assert np.mean(kept) > 1 - 1e-6

# %% tags=["instructor"]
def rnn_states_with(words, w):
    state, states = np.zeros(hidden_dim), []
    for word in words:
        state = np.tanh(state @ w + word @ u_input)
        states.append(state)
    return np.array(states)


def rnn_jacobian_with(words, w):
    states = rnn_states_with(words, w)
    jacobian = np.diag(1 - states[-1] ** 2)
    for state in states[-2::-1]:
        jacobian = jacobian @ w.T @ np.diag(1 - state ** 2)
    return jacobian @ u_input.T


answer_sizes = {}
for factor in (1, 3):
    scaled_w = factor * w_recurrent
    answer_sizes[factor] = {length: np.linalg.norm(rnn_jacobian_with(cat_fillers_chased(length), scaled_w), 2)
                            for length in (5, 10, 20, 40)}
    slopes = 1 - rnn_states_with(cat_fillers_chased(40), scaled_w) ** 2
    print(f"answer 5: {factor}W: gradient size at T = 5, 10, 20, 40: "
          + ", ".join(f"{size:.1e}" for size in answer_sizes[factor].values())
          + f"; slopes 1 - h^2 over T = 40: median {np.median(slopes):.2f}, below 0.01: {np.mean(slopes < 0.01):.0%}")
assert np.allclose(list(answer_sizes[1].values()), gradient_sizes["recurrent"][[3, 8, 18, 38]])
assert answer_sizes[3][40] > answer_sizes[3][5], "with 3W the gradient no longer shrinks with T"
