# %% [markdown]
# # Lesson 5 — Positional encodings, sinusoidal or learned
#
# Attention treats its input as a *set*: permute the tokens and the outputs permute with them.
# Word order must therefore be added to the input. The paper adds a fixed table
# (section 3.5). For position $p$ and column pair $i$ ($0 \le 2i < d_{\text{model}}$):
#
# $$PE_{p,\,2i} = \sin\left(p\,\omega_i\right), \qquad PE_{p,\,2i+1} = \cos\left(p\,\omega_i\right),
# \qquad \omega_i = \frac{1}{10000^{2i/d_{\text{model}}}}$$
#
# Sines go in the even columns and cosines in the odd ones, each pair sharing one frequency
# $\omega_i$; the wavelengths $2\pi/\omega_i$ grow geometrically from $2\pi$ to almost
# $10000 \cdot 2\pi$. (Putting the cosine in only one column, instead of in every odd one, is a
# real bug of a popular tutorial; lesson 22's bug zoo shows what it does to the table.)

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, nn, ops, viz
from npformer.course import check

rng = np.random.default_rng(0)

# %% [markdown]
# ### Your turn
#
# Write `positional_encoding(max_len, d_model)`, returning the float64 table of shape
# `(max_len, d_model)`. Build the positions $p = 0, 1, \dots$, `max_len - 1` as a column
# `(max_len, 1)` and the even column indices $2i = 0, 2, 4, \dots$ as a row; their product with
# the frequencies $\omega_i = 10000^{-2i/d_{\text{model}}}$ gives the angles $p\,\omega_i$,
# one column per pair. Write $\sin$ of the angles into the columns `0::2` and $\cos$ into the
# columns `1::2`. Note that the exponent uses the *even* column index $2i$ of the pair, and that
# the sine and the cosine of a pair share it. The grader tries $d_{\text{model}} = 8$, a single
# position with $d_{\text{model}} = 2$, 50 positions with $d_{\text{model}} = 6$, and an odd
# $d_{\text{model}} = 5$, whose last pair has only its sine column.

# %%
def positional_encoding(max_len, d_model):
    """The (max_len, d_model) sinusoid table: even columns sin(p w_i), odd columns cos(p w_i)."""
    ### BEGIN SOLUTION
    positions = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    pair_index = np.arange(0, d_model, 2, dtype=np.float64)  # the "2i" of each pair
    angles = positions / 10000.0 ** (pair_index / d_model)  # (max_len, ceil(d_model / 2))
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table
    ### END SOLUTION


# %%
print(check("positional_encoding", positional_encoding))

# %% [markdown]
# npformer's `ops.positional_encoding` computes the same table (in float64, then cast to the
# dtype asked for). Below, 64 positions of a 128-wide model, drawn:

# %%
table = ops.positional_encoding(64, 128, dtype=np.float64)
print(table.shape, "PE[0] even columns:", table[0, :6:2], "odd:", table[0, 1:6:2])
assert np.all(table[0, 0::2] == 0) and np.all(table[0, 1::2] == 1), "position 0: sin 0 = 0 and cos 0 = 1"
figure = viz.positional_encoding_figure(64, 128, path=viz.figures_dir() / "05_positional_encoding.png")

# %% tags=["instructor"]
# The table against the formula, column by column: the body of the exercise's solution, so it stays
# out of the student edition.
positions, pairs = np.arange(64)[:, None], np.arange(0, 128, 2)[None, :]
angles = positions / 10000 ** (pairs / 128)
assert np.abs(table[:, 0::2] - np.sin(angles)).max() < 1e-12, "even columns must be sin(p / 10000^(2i/d))"
assert np.abs(table[:, 1::2] - np.cos(angles)).max() < 1e-12, "odd columns must be cos(p / 10000^(2i/d))"

# %% [markdown]
# ## Why sinusoids
#
# For each frequency $\omega$, the pair $(\sin \omega p, \cos \omega p)$ at position $p + k$ is a
# *rotation* of the pair at $p$ by the angle $\omega k$, the same rotation for every $p$. A linear
# map can therefore express "$k$ positions back", which is what attention needs. The dot product
# between two positions' encodings depends only on their distance:

# %%
similarity = table @ table.T
figure, axis = plt.subplots(figsize=(5.5, 4.6), constrained_layout=True)
image = axis.imshow(similarity, cmap="viridis")
axis.set(title="PE[p] · PE[q]: a function of |p - q| only", xlabel="position q", ylabel="position p")
figure.colorbar(image, ax=axis)
figure.savefig(viz.figures_dir() / "05_position_similarity.png", dpi=110)
print("PE[10]·PE[13] =", round(float(table[10] @ table[13]), 6), " PE[40]·PE[43] =", round(float(table[40] @ table[43]), 6))
for k in range(-63, 64):  # every diagonal of the similarity matrix is constant
    diagonal = np.diagonal(similarity, offset=k)
    assert np.ptp(diagonal) < 1e-9, f"PE[p]·PE[p+{k}] must not depend on p"
assert np.allclose(similarity, similarity.T), "PE[p]·PE[q] depends on |p - q| only"
for position, k in ((3, 5), (20, 7)):  # the rotation property: PE[p + k] is PE[p] rotated by the angle w k
    w = 1 / 10000 ** (np.arange(0, 128, 2) / 128)
    sin_p, cos_p = table[position, 0::2], table[position, 1::2]
    assert np.allclose(table[position + k, 0::2], sin_p * np.cos(w * k) + cos_p * np.sin(w * k)), \
        "PE[p + k] must be a rotation of PE[p]"
    assert np.allclose(table[position + k, 1::2], cos_p * np.cos(w * k) - sin_p * np.sin(w * k)), \
        "PE[p + k] must be a rotation of PE[p]"

# %% [markdown]
# ## Token embeddings: a lookup and its backward
#
# The table is added to the *token embeddings*. A token enters the model as an integer id; the
# embedding table $W$, of shape `(V, D)`, holds one learned row per word of the vocabulary, and
# the forward pass is a lookup, `out = W[ids]`, of shape `(B, T, D)`:
#
# $$\text{out}_{b,t} = W_{\text{ids}_{b,t}}.$$
#
# A lookup is a matrix product in disguise. Let $O$ be the *one-hot* array of the ids, of shape
# `(B, T, V)`: $O_{b,t,v} = 1$ where $\text{ids}_{b,t} = v$, and $0$ elsewhere. Each row $O_{b,t}$ has a
# single $1$, so the product picks one row of $W$:
#
# $$\text{out}_{b,t,d} = \sum_v O_{b,t,v}\, W_{v,d}, \qquad \text{out} = O\, W.$$
#
# ### Step 1: the one-hot form
#
# Write `embedding_one_hot(ids, W)` for `ids` of shape `(B, T)` (integers in $[0, V)$) and `W` of
# shape `(V, D)`: return $O$, a float array of shape `(B, T, V)` (`W` is needed only for $V$). Check
# it on your own before the grader does: `O @ W` must equal `W[ids]`. The grader tries ids that
# repeat, a single token, and one id repeated five times.

# %%
def embedding_one_hot(ids, W):
    """O (B, T, V): 1 where ids[b, t] = v, else 0, so that O @ W = W[ids]."""
    ### BEGIN SOLUTION
    return (ids[..., None] == np.arange(W.shape[0])).astype(float)
    ### END SOLUTION


# %%
print(check("embedding_one_hot", embedding_one_hot))

# %% [markdown]
# ### Step 2: the gradient of the table
#
# With $\text{out} = O\, W$, the embedding is lesson 2's linear layer with $O$ as its input and no
# bias. $O$ is made from integers and has no gradient, so only $\partial L / \partial W$ is asked for.
# Before you write it, answer from the sum above: which entries of `out` does $W_{v,d}$ appear in?
# Then, which rows of `dW` does one row of `dout` reach? What does row $v$ of `dW` hold when the id
# $v$ appears at two positions of the batch, and when it appears at none?
#
# Write `embedding_backward(ids, W, dout)` for `ids` of shape `(B, T)`, `W` of shape `(V, D)` and
# `dout` of shape `(B, T, D)`; return `dW`, of the shape of `W`. You may use your one-hot step, but
# in the translator $V$ is in the tens of thousands and $O$ holds $B \cdot T \cdot V$ numbers, almost all
# zero: find a way that never builds it. Test the NumPy you reach for against your one-hot form on
# a tiny example with a repeated id before trusting it: some of NumPy's ways of writing through an
# index array do not agree with the product when an index repeats. The check below grades your
# one-hot step again, on the same cases, and once yours passes it shows npformer's compact form.

# %% [markdown]
# **Your variant.** Graded with variants, each student derives their own form of this lesson's
# backward passes: the same steps, with one change a textbook could have made (a temperature,
# another scale). The cell below prints yours, from the `npformer_variants.json` your instructor gave
# you (keep it beside your lessons); without one, you derive the lesson's own form. `check` grades
# against the same file, and a finite-difference answer fails: it is timed.

# %%
from npformer.course import show_variants

print(show_variants("05"))


# %%
def embedding_backward(ids, W, dout):
    """dW (V, D) of out = W[ids]."""
    ### BEGIN SOLUTION
    d_model = W.shape[1]
    dW = np.zeros_like(W)
    np.add.at(dW, ids.reshape(-1), dout.reshape(-1, d_model))
    return dW
    ### END SOLUTION


# %%
print(check("embedding_backward", embedding_backward, steps=(embedding_one_hot,)))

# %% [markdown] tags=["instructor"]
# ### The derivation (instructor edition)
#
# $W_{v,d}$ appears in $\text{out}_{b,t,d}$ for every position with $\text{ids}_{b,t} = v$, with
# coefficient $1$. The chain rule sums over those positions, so row $v$ of the gradient is
#
# $$\frac{\partial L}{\partial W_v} = \sum_{(b,t)\,:\ \text{ids}_{b,t} = v}
# \frac{\partial L}{\partial\, \text{out}_{b,t}}, \qquad\text{that is}\qquad dW = O^\top \texttt{dout}$$
#
# (lesson 2's $X^\top dY$, with $O$ flattened to rows). A token that occurs $k$ times in the batch
# receives the *sum* of its $k$ upstream rows, and a token that does not occur gets a row of zeros.
# The forward pass gathers rows; the backward pass scatters them back and adds them up (a
# *scatter-add*, `np.add.at`), without building $O$.
#
# **The classic mistake** is the assignment. It gives the right answer whenever no id repeats,
# which is why a test with distinct ids does not catch it. The grader's cases repeat ids, and it
# recognises the pattern of the error:

# %% tags=["instructor"]
def embedding_backward_overwriting(ids, W, dout):
    dW = np.zeros_like(W)
    dW[ids.reshape(-1)] = dout.reshape(-1, W.shape[1])  # a repeated id: only one write survives
    return dW


mistake = check("embedding_backward", embedding_backward_overwriting, strict=False)
print(mistake)
assert not mistake.passed, "overwriting instead of adding must fail on repeated ids"
assert any("occur more than once" in row.hint for row in mistake.rows if not row.passed), \
    "the hint must say which rows are wrong"
demo_rng = np.random.default_rng(5)  # not the lesson's rng: the student edition draws the same numbers
ids_demo, W_demo = np.array([[1, 3, 3, 0]]), demo_rng.standard_normal((5, 2))
dout_demo = demo_rng.standard_normal((1, 4, 2))
by_one_hot = embedding_one_hot(ids_demo, W_demo).reshape(-1, 5).T @ dout_demo.reshape(-1, 2)
assert np.allclose(by_one_hot, embedding_backward(ids_demo, W_demo, dout_demo)), "O^T dout is the scatter-add"

# %% [markdown] tags=["instructor"]
# npformer's `ops.embedding_backward` does the same scatter-add, faster than `np.add.at` (it sorts
# the ids so that equal ids form runs, then sums each run with one `np.add.reduceat`).

# %% [markdown]
# npformer's `ops.embedding_backward` passes the finite-difference check:

# %%
library = gradcheck.check_op("embedding")
print(library)
assert library.passed

# %% [markdown]
# ## Learned positions
#
# The alternative to the sinusoids is a learned table $W_{\text{pos}}$ of shape `(max_len, D)`,
# used like an embedding whose ids are the positions: $x_{b,p} = E_{\text{ids}_{b,p}} + W_{\text{pos},\,p}$.
# It is learned like the embedding table, it can adapt to the data, and BERT and GPT use it
# (npformer's `nn.LearnedPositions`, in the classifier and the language model). But it knows
# nothing about positions beyond `max_len`, and each row is learned separately. The paper found
# the two about equal on translation. npformer's translator uses the sinusoids, which add no
# parameters and no gradient; its classifier, language models and Vision Transformer (lessons
# 17-20) learn their positions.
#
# The token embeddings are multiplied by $\sqrt{d_{\text{model}}}$ before the table is added.
# npformer draws an embedding table from $\mathcal N(0, 1/d_{\text{model}})$, so at initialisation
# the scaled entries have a standard deviation near $1$; the entries of the sinusoid table have a
# root mean square of exactly $1/\sqrt 2$, since $\sin^2 + \cos^2 = 1$ for each pair:

# %%
d_model = 128
embedding = nn.Embedding(1000, d_model, rng=rng, dtype=np.float64)
scaled_std = float(np.std(embedding.W * np.sqrt(d_model)))
table_rms = float(np.sqrt(np.mean(table**2)))
print(f"std of sqrt(d_model) * W: {scaled_std:.3f}; root mean square of the sinusoid table: {table_rms:.3f}")
assert abs(scaled_std - 1) < 0.05, "the scaled embeddings must have a standard deviation near 1"
assert abs(table_rms - 1 / np.sqrt(2)) < 1e-12, "every pair of the table has sin^2 + cos^2 = 1"

# %% [markdown]
# ## Where the gradient of "embedding + positions" goes
#
# The translator's first layer reads, at each position $t$ of each sentence $b$ (then dropout),
#
# $$x_{b,t} = \sqrt{d_{\text{model}}}\; W_{\text{ids}_{b,t}} + PE_t .$$
#
# On the way back, the gradient $\partial L / \partial x$, of shape `(B, T, D)`, that the first layer
# sends reaches this sum. A small translator shows which of its terms hold parameters: the only
# parameters at the input are the two embedding tables, and the sinusoid table is a plain array, not a
# parameter.

# %%
from npformer.models import Transformer, TransformerConfig  # noqa: E402

tiny = Transformer(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                                     max_len=10, dropout=0.0), dtype=np.float64)
input_parameters = [name for name in tiny.grads() if "embed" in name or "pos" in name]
print("parameters at the input:", input_parameters, f"(of {len(tiny.grads())})")
print("the sinusoid table:", type(tiny.positions).__name__, tiny.positions.shape)
assert input_parameters == ["src_embed.W", "tgt_embed.W"], "no parameter holds the sinusoid table"
assert not any(value is tiny.positions for value in tiny.params().values())

# %% [markdown]
# ### Your turn: the input with learned positions
#
# Take a learned table instead of the sinusoids, and a batch that starts at position `start` (a chunk
# of a longer text, or the next token of a generation step, as lesson 14 decodes):
#
# $$x_{b,t} = \sqrt{D}\; W_{\text{ids}_{b,t}} + W_{\text{pos},\ \text{start} + t}, \qquad t = 0, \dots, T - 1,$$
#
# with `ids` of shape `(B, T)`, $W$ of shape `(V, D)` and $W_\text{pos}$ of shape `(max_len, D)`, and
# `start + T <= max_len`. Before you write the gradients of both tables, answer from the equation:
#
# * $x$ is a sum of two terms. What part of $\partial L / \partial x_{b,t}$ does each term receive?
# * Which entries of $x$ does the entry $W_{v,d}$ appear in, and with which coefficient?
# * Which positions read row $p$ of $W_\text{pos}$: in how many sentences, and which rows does no
#   position of the batch read?
#
# Write `embedding_positions_backward(ids, W, W_pos, start, dout)`, with `dout` of shape `(B, T, D)`;
# return `(dW, dW_pos)`, shaped like `W` and `W_pos`. It is graded in the lesson's own form for every
# student (if your variants file changes the embedding, this exercise still takes the lookup $W[\text{ids}]$),
# against finite differences too, on repeated ids, a batch that starts at position 3, and a single new
# token at the last position of the table.


# %%
def embedding_positions_backward(ids, W, W_pos, start, dout):
    """(dW (V, D), dW_pos (max_len, D)) of x[b, t] = sqrt(D) W[ids[b, t]] + W_pos[start + t]."""
    ### BEGIN SOLUTION
    batch, length = ids.shape
    d_model = W.shape[1]
    scaled = np.sqrt(d_model) * dout  # the token term's share, back through the scale
    dW = np.zeros_like(W)
    np.add.at(dW, ids.reshape(-1), scaled.reshape(-1, d_model))  # a repeated id adds up
    dW_pos = np.zeros_like(W_pos)
    dW_pos[start:start + length] = dout.sum(axis=0)  # every sentence reads the same rows
    return dW, dW_pos
    ### END SOLUTION


# %%
print(check("embedding_positions_backward", embedding_positions_backward))

# %% [markdown] tags=["instructor"]
# ### Where it goes (instructor edition)
#
# The derivative of a sum with respect to each of its terms is $1$: each term receives the whole of
# $\partial L / \partial x$. The sinusoid term is a fixed function of the positions, with no parameter
# and nothing before it that needs a gradient, so its share stops there: npformer never computes it.
# The token term's share goes on, back through the scale $\sqrt{D}$ and then through the lookup, into
# the embedding's backward pass ($dW = \sqrt{D}\, O^\top \texttt{dout}$). A learned table's share goes
# on too, into the same kind of backward pass with the positions as ids: position $t$ of *every*
# sentence reads row $\text{start} + t$, so that row receives the sum over the batch,
# $dW_{\text{pos},\,\text{start}+t} = \sum_b \texttt{dout}_{b,t}$, and the rows outside
# $[\text{start}, \text{start} + T)$ receive nothing.

# %% [markdown]
# ## Exercises
#
# 1. Prove the rotation property checked above: from the angle-addition formulas, write the pair
#    $(PE_{p+k,\,2i},\ PE_{p+k,\,2i+1})$ as a $2 \times 2$ matrix times the pair at $p$, and show
#    that the matrix depends on $k$ but not on $p$. Then derive a closed form for
#    $PE_p \cdot PE_{p+k}$ that shows it depends on $k$ only.
# 2. Plot $PE_p \cdot PE_{p+k}$ against $k$ for $k = 0, \dots, 200$ with $d_{\text{model}} = 128$
#    (use your `positional_encoding`). Does it decrease monotonically with the distance $k$? Where is
#    its first local minimum, and how does that change with $d_{\text{model}} = 32$ and $512$?
#
#    **Auto-graded part:** write `first_local_minimum(d_model, max_k)`, returning the first local
#    minimum as an int: the smallest $k$ in $1, \dots, \text{max\_k} - 1$ whose product is below the
#    product at $k - 1$ and not above the one at $k + 1$ (the grader tries other widths, and
#    `max_k` up to 400). The plot, the answer on monotonicity and the direction of the change stay for
#    the rubric.


# %%
def first_local_minimum(d_model, max_k):
    """The first k in 1 .. max_k - 1 where PE_0 . PE_k is a local minimum (below k - 1, not above k + 1)."""
    ### BEGIN SOLUTION
    encodings = positional_encoding(max_k + 1, d_model)
    products = encodings @ encodings[0]  # PE_0 . PE_k = PE_p . PE_{p+k} for every p
    for k in range(1, max_k):
        if products[k] < products[k - 1] and products[k] <= products[k + 1]:
            return k
    raise ValueError(f"no local minimum for k < {max_k}")
    ### END SOLUTION


# %%
print(check("first_local_minimum", first_local_minimum))

# %% [markdown]
# 3. Replace the sinusoids by a learned table (`nn.LearnedPositions(max_len, D, rng=...)`) in a copy
#    of `Transformer._embed` and `Transformer._embed_backward`; the table's gradient is the `dW_pos` of
#    your `embedding_positions_backward`, with `start = 0`. For a batch of $B$ sentences padded to
#    length $T$, how many upstream rows are added into row $p$ of $W_{\text{pos}}$, and which rows get
#    no gradient at all? What does that mean for sentences longer than any seen in training?
#
#    **Auto-graded part:** write `position_gradient_counts(ids, max_len)` for `ids` of shape `(B, T)`
#    (`0` marks `<pad>`, which nothing reads, so npformer sends back a zero row there): return an int
#    array of shape `(max_len,)`, the number of real tokens' upstream rows added into each row of
#    $W_\text{pos}$. The copy of the model and the answer on longer sentences stay for the rubric.


# %%
def position_gradient_counts(ids, max_len):
    """(max_len,) int: how many real (not <pad>) tokens' upstream rows reach each row of W_pos."""
    ### BEGIN SOLUTION
    counts = np.zeros(max_len, dtype=int)
    counts[: ids.shape[1]] = (ids != 0).sum(axis=0)  # position p of every sentence reads row p
    return counts
    ### END SOLUTION


# %%
print(check("position_gradient_counts", position_gradient_counts))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. With $\theta = p\,\omega_i$ and $\phi = k\,\omega_i$, the angle-addition formulas give
#    $\sin(\theta + \phi) = \sin\theta\cos\phi + \cos\theta\sin\phi$ and
#    $\cos(\theta + \phi) = \cos\theta\cos\phi - \sin\theta\sin\phi$, that is
#    $$\begin{pmatrix} PE_{p+k,\,2i} \\ PE_{p+k,\,2i+1} \end{pmatrix}
#    = \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i \end{pmatrix}
#    \begin{pmatrix} PE_{p,\,2i} \\ PE_{p,\,2i+1} \end{pmatrix},$$
#    a rotation by the angle $k\omega_i$ that depends on $k$ (and the pair) but not on $p$. Summing the pairs,
#    $PE_p \cdot PE_{p+k} = \sum_i \bigl(\sin\theta \sin(\theta + \phi) + \cos\theta\cos(\theta + \phi)\bigr)
#    = \sum_i \cos(k\,\omega_i)$, by $\cos(a - b) = \cos a \cos b + \sin a \sin b$: a function of $k$ only
#    (and even in $k$, hence of $|p - q|$). Checked below against the lesson's printed products.
# 2. No. The product is $\sum_i \cos(k\omega_i)$: from $d_{\text{model}}/2$ at $k = 0$ it falls,
#    but with ripples of period $2\pi$ from the fastest pair ($\omega_0 = 1$), so after a first
#    local minimum it rises and falls again about every $2\pi \approx 6$ positions on a slowly
#    falling trend. The first local minimum moves to larger $k$ as $d_{\text{model}}$ grows
#    (positions printed below, and drawn): the smooth trend of the sum scales with the number of
#    pairs and its slope fades like $1/k$, while the ripple of the fastest pair keeps its size, so a
#    wider model needs a larger $k$ before a ripple can turn the curve upward (roughly in
#    proportion to $d_{\text{model}}$). Full marks: the plot, "not monotonic", the three
#    positions, and the direction of the change; the explanation is a bonus.
# 3. The position ids are $0, \dots, T-1$ in every sentence, so row $p < T$ of $W_{\text{pos}}$
#    receives $B$ upstream rows, one per sentence; those of sentences that are padding at $p$ are
#    zero (nothing reads a padded position: it is masked as a key, and the loss ignores it), so in
#    effect row $p$ sums over the sentences longer than $p$. Rows $p \ge T$ get no gradient at all.
#    Over a training run, rows beyond the longest training sentence are never updated and keep
#    their random initialisation: a longer sentence at test time gets untrained position vectors
#    (and past `max_len` there is no row at all), whereas the sinusoids are defined for every $p$.
#    Reference code below: a subclass of `Transformer` with two `nn.LearnedPositions` tables.

# %% tags=["instructor"]
distance = 3
closed_form = np.cos(distance / 10000 ** (np.arange(0, 128, 2) / 128)).sum()
print(f"answer 1: sum_i cos(3 w_i) = {closed_form:.6f}; PE[10]·PE[13] = {table[10] @ table[13]:.6f}")
assert abs(closed_form - table[10] @ table[13]) < 1e-9 and abs(closed_form - table[40] @ table[43]) < 1e-9

# %% tags=["instructor"]
figure, axis = plt.subplots(figsize=(7, 4), constrained_layout=True)
first_minimum = {}
for width in (32, 128, 512):
    encodings = positional_encoding(201, width)
    products = encodings[0] @ encodings.T  # PE_0 . PE_k = PE_p . PE_{p+k} for every p
    minima = [k for k in range(1, 200) if products[k] < products[k - 1] and products[k] <= products[k + 1]]
    first_minimum[width] = minima[0]
    axis.plot(np.arange(201), products, label=f"d_model = {width}")
    print(f"answer 2: d_model = {width}: monotonic: {bool(np.all(np.diff(products) < 0))}; "
          f"first local minimum at k = {minima[0]}, the next ones at {minima[1:4]}")
    assert len(minima) > 1, "the product is not monotonic in k"
axis.set(xlabel="distance k", ylabel="PE_p · PE_{p+k}", title="Answer 2 (instructor)")
axis.legend()
assert first_minimum[32] < first_minimum[128] < first_minimum[512]

# %% tags=["instructor"]
class TransformerWithLearnedPositions(Transformer):
    """The translator with a learned position table per side instead of the sinusoids."""

    def __init__(self, config, seed=0, dtype=None):
        super().__init__(config, seed, dtype)
        position_rng = np.random.default_rng(seed + 1)
        size = (config.max_len, config.d_model)
        self.src_positions = nn.LearnedPositions(*size, rng=position_rng, dtype=self.dtype)
        self.tgt_positions = nn.LearnedPositions(*size, rng=position_rng, dtype=self.dtype)

    def _positions_of(self, table):
        return self.src_positions if table is self.src_embed else self.tgt_positions

    def _embed(self, ids, table, dropout, start=0):
        x = table.forward(ids) * self.embed_scale
        x = x + self._positions_of(table).forward(ids.shape[0], ids.shape[1], start)
        return dropout.forward(x)

    def _embed_backward(self, d, table, dropout):
        d = dropout.backward(d)
        self._positions_of(table).backward(d)
        table.backward(d * self.embed_scale)


small = TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=8, n_heads=2, d_ff=16, n_layers=2, max_len=10,
                          dropout=0.0)
learned = TransformerWithLearnedPositions(small, dtype=np.float64)
source = np.array([[5, 6, 7, 8, 9, 0], [4, 5, 6, 7, 0, 0], [9, 8, 0, 0, 0, 0]])  # B = 3, T = 6; position 5: <pad>
target_in = np.array([[1, 5, 6, 7], [1, 4, 0, 0], [1, 9, 8, 0]])
target_out = np.array([[5, 6, 7, 2], [4, 2, 0, 0], [9, 8, 2, 0]])
loss, loss_cache = ops.cross_entropy_forward(learned.forward(source, target_in), target_out, ignore_index=0)
learned.zero_grad()
d_source, d_target = learned.backward_to_inputs(ops.cross_entropy_backward(1.0, loss_cache))
learned._embed_backward(d_source, learned.src_embed, learned.src_dropout)
d_positions = learned.grads()["src_positions.W"]
position_ids = np.broadcast_to(np.arange(source.shape[1]), source.shape)
print("answer 3: largest |gradient| of each row of the source position table (T = 6, max_len = 10):",
      np.abs(d_positions).max(axis=1).round(4))
assert np.abs(d_positions - embedding_backward(position_ids, learned.src_positions.W, d_source)).max() < 1e-12
assert np.all(d_source[source == 0] == 0), "padded positions send back zero rows"
assert np.all(d_positions[5:] == 0) and np.all(np.abs(d_positions[:5]).max(axis=1) > 0)
d_embed_yours, d_positions_yours = embedding_positions_backward(source, learned.src_embed.W,
                                                                learned.src_positions.W, 0, d_source)
assert np.abs(d_embed_yours - learned.grads()["src_embed.W"]).max() < 1e-12
counts = position_gradient_counts(source, small.max_len)
print("answer 3: real tokens' rows added into each row of the table:", counts)
assert np.abs(d_positions_yours - d_positions).max() < 1e-12
assert np.array_equal(counts > 0, np.abs(d_positions).max(axis=1) > 0)
