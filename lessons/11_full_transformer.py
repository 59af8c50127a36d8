# %% [markdown]
# # Lesson 11 — The full Transformer: parameter and FLOP counts
#
# Everything together: embeddings scaled by `sqrt(d_model)` plus positional encodings,
# `N` encoder layers, `N` decoder layers, and a final linear layer to the target vocabulary.
# `model.summary()` lists every module with its output shape, parameter count and FLOPs.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import models, nn, viz

base = models.Transformer(models.TransformerConfig(src_vocab=37000, tgt_vocab=37000))
print(base.summary(batch=64, src_len=24, tgt_len=24))

# %% [markdown]
# ## By hand
#
# With `D = 512`, `F = 2048`, `N = 6`:
#
# | piece | formula | count |
# | --- | --- | --- |
# | attention block | `4 (D^2 + D)` | 1,050,624 |
# | feed-forward block | `2 D F + F + D` | 2,099,712 |
# | layer norm | `2 D` | 1,024 |
# | encoder layer | attention + FFN + 2 norms | 3,152,384 |
# | decoder layer | 2 attentions + FFN + 3 norms | 4,204,032 |
# | 6 + 6 layers | | 44,138,496 |
# | embeddings | `37,000 x 512` each | 18,944,000 x 2 |
# | output layer | `512 x 37,000 + 37,000` | 18,981,000 |
# | total | | 101,007,496 |
#
# The paper reports 65M because it shares one 37,000-token table among the source embedding, the
# target embedding and the output layer: 44.1M + 18.9M = 63.1M (plus biases).

# %%
assert base.num_params() == 101_007_496
tied = models.Transformer(models.TransformerConfig(37000, 37000, tie_embeddings=True))
print(f"tied output layer: {tied.num_params():,}")

# %% [markdown]
# ## The spreadsheet's Keras block
#
# The course chapter's spreadsheet counts a Keras encoder block with embedding size 32, a dense
# layer of 32 and 2 heads, and gets **10,656** parameters. Keras's `MultiHeadAttention(num_heads=2,
# key_dim=32)` gives **each head** a 32-dimensional key, so its query, key and value projections
# map 32 -> 2 x 32 = 64:
#
# * Q, K, V: `3 x (32 x 64 + 64)` = 6,336; output: `64 x 32 + 32` = 2,080; attention 8,416
# * dense 32 -> 32 -> 32: `2 x (32 x 32 + 32)` = 2,112; two layer norms: 128
# * total 10,656
#
# The paper (and npformer) use `Dh = d_model / h = 16`, so every projection is 32 x 32:

# %%
keras_style = 3 * (32 * 64 + 64) + (64 * 32 + 32) + 2 * (32 * 32 + 32) + 2 * 64
layer = nn.EncoderLayer(32, n_heads=2, d_ff=32, dropout=0.0, dropout_rng=None, pre_norm=False,
                        activation="relu", rng=np.random.default_rng(0))
print(f"Keras key_dim=32 per head: {keras_style:,}   npformer (Dh = 16): {layer.num_params():,}")
assert keras_style == 10_656 and layer.num_params() == 4 * (32 * 32 + 32) + 2 * (32 * 32 + 32) + 2 * 64

# %%
rows = [("embeddings", base.src_embed.num_params() + base.tgt_embed.num_params()),
        ("encoder", base.encoder.num_params()), ("decoder", base.decoder.num_params()),
        ("output layer", base.out_proj.num_params())]
figure, axis = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
axis.barh([r[0] for r in rows], [r[1] / 1e6 for r in rows], color="tab:blue")
axis.set(xlabel="million parameters", title="Base Transformer, 37k vocabularies, untied")
for index, (_, count) in enumerate(rows):
    axis.text(count / 1e6 + 0.3, index, f"{count / 1e6:.1f}M", va="center")
axis.invert_yaxis()
figure.savefig(viz.figures_dir() / "11_parameters.png", dpi=110)

# %% [markdown]
# ## Exercises
#
# 1. Which share of the base model's forward FLOPs for `T = 24` goes to the output layer? For `T = 512`?
# 2. Add the FLOPs of the softmaxes and layer norms (a few per element). Are they negligible?
# 3. How many parameters does the "big" model have (`D = 1024`, `F = 4096`, `H = 16`)?
