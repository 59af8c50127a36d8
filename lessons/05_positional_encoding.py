# %% [markdown]
# # Lesson 5 — Positional encodings, sinusoidal or learned
#
# Attention treats its input as a *set*: permute the tokens and the outputs permute with them.
# Word order must therefore be added to the input. The paper adds a fixed table
# (section 3.5):
#
# `PE[p, 2i] = sin(p / 10000^(2i/d))`,  `PE[p, 2i+1] = cos(p / 10000^(2i/d))`
#
# Sines go in the even columns and cosines in the odd ones, each pair sharing one frequency.
# (A well-known tutorial puts the cosine in only one column; `tests/test_ops_properties.py`
# checks every column against the formula.)

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import ops, viz

table = ops.positional_encoding(64, 128, dtype=np.float64)
print(table.shape, "PE[0] even columns:", table[0, :6:2], "odd:", table[0, 1:6:2])
positions, pairs = np.arange(64)[:, None], np.arange(0, 128, 2)[None, :]
angles = positions / 10000 ** (pairs / 128)
assert np.abs(table[:, 0::2] - np.sin(angles)).max() < 1e-12, "even columns must be sin(p / 10000^(2i/d))"
assert np.abs(table[:, 1::2] - np.cos(angles)).max() < 1e-12, "odd columns must be cos(p / 10000^(2i/d))"
figure = viz.positional_encoding_figure(64, 128, path=viz.figures_dir() / "05_positional_encoding.png")

# %% [markdown]
# ## Why sinusoids
#
# For each frequency `w`, the pair `(sin(wp), cos(wp))` at position `p + k` is a *rotation* of the
# pair at `p` by the angle `wk`, the same rotation for every `p`. A linear map can therefore
# express "k positions back", which is what attention needs. The dot product between two
# positions' encodings depends only on their distance:

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
# ## Learned positions
#
# The alternative is a learned table, `W_pos (max_len, D)`, used like an embedding:
# `x = E[token] + W_pos[p]`. It has a gradient (an embedding backward), it can adapt to the data,
# and BERT and GPT use it. But it knows nothing about positions beyond `max_len`, and each row
# is learned separately. The paper found the two about equal on translation. npformer uses the
# sinusoids, which add no parameters and no gradient.
#
# The token embeddings are multiplied by `sqrt(d_model)` before the table is added, which puts
# both on the same scale.
#
# ## Exercises
#
# 1. Prove the rotation property: write `PE[p + k]` pairs as a 2x2 rotation of `PE[p]` pairs.
# 2. Plot `PE[p] · PE[q]` as a function of `p - q`. Is it symmetric? Monotone?
# 3. Replace the table by a learned one (`nn.Embedding(max_len, D)`) in a copy of
#    `Transformer._embed`, and write the backward pass for it.
