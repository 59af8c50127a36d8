# %% [markdown]
# # Lesson 11 — The full Transformer: parameter and FLOP counts
#
# Everything together: embeddings scaled by $\sqrt{d_\text{model}}$ plus positional encodings,
# $N$ encoder layers, $N$ decoder layers, and a final linear layer to the target vocabulary.
# `model.summary()` lists every module with its output shape, parameter count and FLOPs; below,
# the paper's base model with 37,000-token vocabularies.

# %%
import matplotlib.pyplot as plt
import numpy as np

from npformer import models, nn, viz
from npformer.course import check

base = models.Transformer(models.TransformerConfig(src_vocab=37000, tgt_vocab=37000))
print(base.summary(batch=64, src_len=24, tgt_len=24))

# %% [markdown]
# ## Counting by hand
#
# Write $D = d_\text{model}$, $F = d_\text{ff}$, $N$ for the number of layers in each stack, and
# $V_s$, $V_t$ for the two vocabulary sizes. Every linear layer in npformer has a bias, so a
# linear map from $m$ to $n$ features holds $mn + n$ numbers. Piece by piece:
#
# * **attention block**: four $D \times D$ projections (query, key, value, output), each with a
#   bias: $4(D^2 + D)$. The number of heads does not appear: the heads split the $D$ columns of
#   each projection, they do not add any.
# * **feed-forward block**: $D \to F \to D$, that is $(DF + F) + (FD + D) = 2DF + F + D$.
# * **layer norm**: a scale $\gamma$ and a shift $\beta$ of $D$ numbers each, $2D$.
# * **encoder layer**: self-attention, feed-forward and two layer norms.
# * **decoder layer**: self-attention, cross-attention, feed-forward and three layer norms.
# * **embeddings**: one table per language, $V_s D + V_t D$. The positional encodings are fixed
#   sinusoids, not parameters.
# * **output layer**: $D \to V_t$, $D V_t + V_t$.
#
# Where the norm sits matters for the count. npformer's default is the paper's **post-norm**
# layer, $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$, whose stacks end with the last
# layer's norm: `Encoder` and `Decoder` add a final layer norm (`encoder.norm`, `decoder.norm`)
# only for `TransformerConfig(norm="pre")`. So the post-norm model has no final layer norm:
#
# $$P = N\big[(4(D^2 + D) + 2DF + F + D + 2 \cdot 2D) + (2 \cdot 4(D^2 + D) + 2DF + F + D + 3 \cdot 2D)\big]
# + (V_s + V_t)D + (D V_t + V_t)$$
#
# ### Your turn
#
# Write `transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers)`: the number of
# parameters of npformer's post-norm Transformer whose output layer has its own weights (untied),
# biases included, as a Python `int`. Count it from the pieces above. The next cell checks it
# against `models.Transformer(...).num_params()` on three sizes, down to one layer and
# four-token vocabularies (the special tokens only).

# %%
def transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    """Parameters of the post-norm, untied encoder-decoder Transformer, biases included."""
    ### BEGIN SOLUTION
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    layer_norm = 2 * d_model
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    embeddings = (src_vocab + tgt_vocab) * d_model
    output_layer = d_model * tgt_vocab + tgt_vocab
    return n_layers * (encoder_layer + decoder_layer) + embeddings + output_layer
    ### END SOLUTION


# %%
print(check("transformer_parameters", transformer_parameters))

# %% [markdown] tags=["instructor"]
# **A common slip** is to give the post-norm stacks the final layer norm that pre-norm models
# have, $2D$ more in each stack. The grader catches it:

# %% tags=["instructor"]
def transformer_parameters_with_final_norms(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    model = models.Transformer(models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1,
                                                        d_ff=d_ff, n_layers=n_layers, max_len=8))
    return model.num_params() + 2 * (2 * d_model)


mistake = check("transformer_parameters", transformer_parameters_with_final_norms, strict=False)
print(mistake)
assert not mistake.passed

# %% [markdown] tags=["instructor"]
# The answer is one number, so the grader's hint can only say by which factor it is off. The
# difference says more: $4D$ too many in every case, the two final norms' $\gamma$ and $\beta$.

# %% tags=["instructor"]
for src_vocab, tgt_vocab, d_model, d_ff, n_layers in ((100, 120, 16, 32, 2), (4, 4, 4, 4, 1)):
    config = models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1, d_ff=d_ff,
                                      n_layers=n_layers, max_len=8)
    extra = (transformer_parameters_with_final_norms(src_vocab, tgt_vocab, d_model, d_ff, n_layers)
             - models.Transformer(config).num_params())
    print(f"D = {d_model}: {extra} too many")
    assert extra == 4 * d_model

# %% [markdown]
# ## The base model, piece by piece
#
# The same pieces with the base model's sizes, $D = 512$, $F = 2048$, $N = 6$ and
# $V_s = V_t = 37{,}000$, each counted from the module that holds it:

# %%
D, F, N, V = 512, 2048, 6, 37000
attention, feed_forward, layer_norm = 4 * (D * D + D), 2 * D * F + F + D, 2 * D
encoder_by_hand = attention + feed_forward + 2 * layer_norm
decoder_by_hand = 2 * attention + feed_forward + 3 * layer_norm
layers_by_hand = N * (encoder_by_hand + decoder_by_hand)
encoder_layer, decoder_layer = base.encoder.layers[0], base.decoder.layers[0]
pieces = [  # (piece, formula, by hand, counted by npformer)
    ("attention block", "4 (D^2 + D)", attention, encoder_layer.self_attn.num_params()),
    ("feed-forward block", "2 D F + F + D", feed_forward, encoder_layer.ffn.num_params()),
    ("layer norm", "2 D", layer_norm, encoder_layer.norm1.num_params()),
    ("encoder layer", "attention + FFN + 2 norms", encoder_by_hand, encoder_layer.num_params()),
    ("decoder layer", "2 attentions + FFN + 3 norms", decoder_by_hand, decoder_layer.num_params()),
    ("6 + 6 layers", "N (encoder + decoder layer)", layers_by_hand,
     base.encoder.num_params() + base.decoder.num_params()),
    ("embeddings", "2 x 37,000 x 512", 2 * V * D, base.src_embed.num_params() + base.tgt_embed.num_params()),
    ("output layer", "512 x 37,000 + 37,000", D * V + V, base.out_proj.num_params()),
    ("total", "", layers_by_hand + 2 * V * D + D * V + V, base.num_params()),
]
print(f"{'piece':20s} {'formula':30s} {'by hand':>12s} {'npformer':>12s}")
for name, formula, by_hand, counted in pieces:
    print(f"{name:20s} {formula:30s} {by_hand:12,d} {counted:12,d}")
    assert by_hand == counted, f"{name}: the count by hand must be npformer's"
assert base.num_params() == 101_007_496

# %% [markdown]
# The paper reports 65M parameters for its base model. It shares one token table among the source
# embedding, the target embedding and the output layer. The biases are already in the layers' count
# above (all 44,138,496 of it), so sharing leaves the layers, one $37{,}000 \times 512$ table and the
# output layer's bias:

# %%
layers = base.encoder.num_params() + base.decoder.num_params()
shared = layers + V * D + V
print(f"layers {layers:,} + one shared table {V * D:,} + output bias {V:,} = {shared:,}")
# The vocabulary size that would give 65M with the same sharing:
print(f"a shared vocabulary of {(65e6 - layers) / (D + 1):,.0f} tokens would give 65.0M")

# %% [markdown]
# That is 63.1M, not 65M. The paper does not give its breakdown, so the count above cannot say
# where the rest comes from; a larger shared vocabulary, for one, would account for it (printed above).
#
# npformer's `TransformerConfig(..., tie_embeddings=True)` ties less: the output layer uses the **target** embedding's
# table (transposed), and the source keeps its own, so it saves exactly one $37{,}000 \times 512$ table:

# %%
tied = models.Transformer(models.TransformerConfig(37000, 37000, tie_embeddings=True))
print(f"tied output layer: {tied.num_params():,} = {base.num_params():,} - {V * D:,}")
assert tied.num_params() == base.num_params() - V * D

# %% [markdown]
# ## A Keras encoder block, for comparison
#
# Counts from other libraries differ by conventions, not by mistakes. Take a Keras encoder block
# with embedding size 32, a feed-forward layer of 32 and 2 heads. Keras's
# `MultiHeadAttention(num_heads=2, key_dim=32)` gives **each head** a 32-dimensional key, so its
# query, key and value projections map $32 \to 2 \times 32 = 64$ features, and its output
# projection maps $64 \to 32$. The paper (and npformer) give each head
# $d_\text{head} = d_\text{model} / h = 16$ dimensions, so every projection is $32 \times 32$.
# The cell counts both, piece by piece:

# %%
keras_pieces = {"query, key, value: 3 x (32 x 64 + 64)": 3 * (32 * 64 + 64),
                "output projection: 64 x 32 + 32": 64 * 32 + 32,
                "feed-forward 32 -> 32 -> 32: 2 x (32 x 32 + 32)": 2 * (32 * 32 + 32),
                "two layer norms: 2 x 2 x 32": 2 * 2 * 32}
for piece, count in keras_pieces.items():
    print(f"  {piece:50s} {count:6,d}")
keras_style = sum(keras_pieces.values())
layer = nn.EncoderLayer(32, n_heads=2, d_ff=32, dropout=0.0, dropout_rng=None, pre_norm=False,
                        activation="relu", rng=np.random.default_rng(0))
print(f"Keras key_dim=32 per head: {keras_style:,}   npformer (16 per head): {layer.num_params():,}")
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
# ## Counting at scale
#
# Counts found in course notes built on Keras are easy to take on trust. Here are three claims
# of that kind, about a bigger block with $d = 768$ and $H = 10$ heads, to check rather than
# believe: the block has 28,342,272 parameters, a 12-block model has 340,107,264, and the block's
# compute is "proportional to $B^2 N^2 H$" for a batch of $B$ sequences of $N$ tokens. This
# section checks each claim with npformer's own modules.
#
# **The two counts come from full-width heads.** They are the Keras block above, scaled up:
# `MultiHeadAttention(num_heads=10, key_dim=768)` gives each of the $H = 10$ heads a
# 768-dimensional query, key and value, so the three projections map $d \to H d = 7{,}680$
# features and the output projection maps $7{,}680 \to d$. The claims do not give the
# feed-forward width $F$, but its count fixes it: whatever attention and the two layer norms do
# not hold is the feed-forward block's $2dF + F + d$. The cell builds the attention projections
# from `nn.Linear`, solves for $F$, and counts the whole block:

# %%
d, claimed_heads = 768, 10
claimed_block, claimed_model = 28_342_272, 340_107_264
rng = np.random.default_rng(0)
full_width = [nn.Linear(d, claimed_heads * d, rng=rng) for _ in ("query", "key", "value")]
full_width.append(nn.Linear(claimed_heads * d, d, rng=rng))  # the output projection, 7,680 -> 768
full_width_attention = sum(projection.num_params() for projection in full_width)
two_norms = 2 * nn.LayerNorm(d).num_params()
implied_d_ff = (claimed_block - full_width_attention - two_norms - d) / (2 * d + 1)
print(f"attention with full-width heads: {full_width_attention:,} parameters; "
      f"the rest of 28,342,272 implies d_ff = {implied_d_ff:g}")
d_ff = int(implied_d_ff)
assert d_ff == implied_d_ff == 3072
keras_block = full_width_attention + nn.FeedForward(d, d_ff, rng=rng).num_params() + two_norms
print(f"full-width block: {keras_block:,} parameters; 12 blocks: {12 * keras_block:,}")
assert keras_block == claimed_block and 12 * keras_block == claimed_model

# %% [markdown]
# So both numbers are right, for full-width heads and $F = 3{,}072$; the 340,107,264 "in all" is
# the 12 blocks alone, without embeddings or an output layer. They are not the paper's
# Transformer. **With the paper's heads**, $D_h = d / H$, each projection is $d \times d$ whatever
# $H$ is, and the count has no $H$ in it. Then $H$ must divide $d$, and 10 does not divide 768
# ($D_h$ would be 76.8): npformer refuses it. With $H = 12$ ($D_h = 64$) and the same $F$ the block
# is a BERT-base layer (Devlin et al., 2019; its table writes L = 12, H = 768, A = 12, where $H$ is
# the width and $A$ the number of heads). The cell builds npformer's `nn.EncoderLayer` with 10, 12
# and 8 heads:

# %%
def encoder_block(n_heads):
    return nn.EncoderLayer(d, n_heads=n_heads, d_ff=d_ff, dropout=0.0, dropout_rng=None, pre_norm=False,
                           activation="relu", rng=rng)


try:
    encoder_block(10)
except ValueError as error:
    print(f"H = 10: {error}")
bert_block, eight_heads = encoder_block(12), encoder_block(8)
print(f"H = 12 (D_h = 64): {bert_block.num_params():,} per block, 12 blocks {12 * bert_block.num_params():,}")
print(f"H = 8  (D_h = 96): {eight_heads.num_params():,} per block")
assert bert_block.num_params() == eight_heads.num_params() == 7_087_872
assert 12 * bert_block.num_params() == 85_054_464
paper_attention = bert_block.self_attn.num_params()
print(f"attention: {full_width_attention:,} full-width against {paper_attention:,}, "
      f"{full_width_attention / paper_attention:.3f} times as many (H = {claimed_heads}, biases aside)")
# BERT-base adds word (30,522), position (512) and segment (2) tables with a layer norm, and a pooler:
bert_embeddings = (30522 + 512 + 2) * d + 2 * d
bert_pooler = d * d + d
bert_base = 12 * bert_block.num_params() + bert_embeddings + bert_pooler
print(f"12 blocks + embeddings {bert_embeddings:,} + pooler {bert_pooler:,} = {bert_base:,}")
assert abs(bert_base / 1e6 - 110) < 1, "BERT's paper reports 110M parameters for BERT-base"

# %% [markdown]
# The 85,054,464 of the 12 blocks is BERT-base without its embeddings; with them and the pooler
# the count is the 110M (printed: 109.5M) that the BERT paper reports.
#
# ## Where the compute goes
#
# Counting $2mnk$ for each $(m, k) \times (k, n)$ product, as `model.summary()` does, one block's
# forward pass over $B$ sequences of $N$ tokens costs
#
# * the projections $Q, K, V$ and the output: $4 \cdot 2\,(BN)\, d\, (H D_h)$;
# * the scores $Q K^\top$ and the weighted sum of the values, per head: $2 \cdot 2\, B H N^2 D_h$;
# * the feed-forward block: $2 \cdot 2\,(BN)\, d\, F$.
#
# Every term has exactly one factor $B$: the sequences of a batch never meet, so twice the
# sequences cost twice the work, not four times. With the paper's heads $H D_h = d$, so $H$
# cancels and the $N^2$ terms are $4 B N^2 d$, proportional to $B N^2 d$. Only with full-width
# heads, $H D_h = H d$, does the number of heads multiply the compute (the projections' too).
# `block_flops` counts the three groups; the cell checks it against `models.summary_rows` for
# the base model's first encoder layer, then prints it for two batch sizes and three kinds of heads.

# %%
def block_flops(batch, length, d_model, n_heads, head_dim, d_ff):
    """Forward FLOPs (2mnk per product) of one encoder block, in three groups."""
    width = n_heads * head_dim  # Q, K and V map d_model to this many features
    return {"feed-forward": 2 * (2 * batch * length * d_model * d_ff),
            "projections": 4 * (2 * batch * length * d_model * width),
            "N^2 terms": 2 * (2 * batch * n_heads * length * length * head_dim)}


library = {row.name: row.forward_flops for row in models.summary_rows(base, batch=64, src_len=24, tgt_len=24)}
ours = block_flops(64, 24, D, base.config.n_heads, D // base.config.n_heads, F)
assert ours["feed-forward"] == library["encoder.layers.0.ffn"]
assert ours["projections"] + ours["N^2 terms"] == library["encoder.layers.0.self_attn"]

length = 512
heads = {"paper, H = 12, D_h = 64": (12, 64), "paper, H = 8, D_h = 96": (8, 96),
         "full width, H = 10, D_h = 768": (10, 768)}
print(f"N = {length}, GFLOP per block   {'B':>3s} {'N^2 terms':>10s} {'projections':>12s} "
      f"{'feed-forward':>13s} {'total':>8s}")
flops = {}
for name, (n_heads, head_dim) in heads.items():
    for batch in (8, 16):
        flops[name, batch] = block_flops(batch, length, d, n_heads, head_dim, d_ff)
        counts = flops[name, batch]
        print(f"  {name:30s} {batch:3d} {counts['N^2 terms'] / 1e9:10.1f} {counts['projections'] / 1e9:12.1f} "
              f"{counts['feed-forward'] / 1e9:13.1f} {sum(counts.values()) / 1e9:8.1f}")
for name in heads:
    print(f"  {name}: B = 16 over B = 8: "
          + ", ".join(f"{group} x{flops[name, 16][group] / flops[name, 8][group]:g}" for group in ours))
    assert all(flops[name, 16][group] == 2 * flops[name, 8][group] for group in ours)
paper = flops["paper, H = 12, D_h = 64", 8]
assert paper == flops["paper, H = 8, D_h = 96", 8] and paper["N^2 terms"] == 4 * 8 * length ** 2 * d
wide = flops["full width, H = 10, D_h = 768", 8]
print(f"full-width N^2 terms over the paper's: x{wide['N^2 terms'] / paper['N^2 terms']:g}")
assert wide["N^2 terms"] == claimed_heads * paper["N^2 terms"]

# %% [markdown]
# Doubling $B$ doubles every group (printed: x2, never x4), and with the paper's heads 12 heads
# cost exactly what 8 do. The claimed $B^2$ is wrong for both kinds of heads; its $H$ holds only
# for full-width heads, where the $N^2$ terms are 10 times the paper's. Corrected: with the
# paper's heads, attention's $N^2$ terms are proportional to $B N^2 d$.
#
# What does grow with $H$ for the paper's heads is memory: each attention keeps its weights,
# $B \times H \times N \times N$ numbers, for the backward pass.

# %%
x = np.random.default_rng(1).standard_normal((2, 32, d)).astype(np.float32)
for block in (bert_block, eight_heads):
    block.eval().forward(x, None)
    print(f"H = {block.self_attn.n_heads:2d}: attention weights {block.self_attn.attn_weights.shape}, "
          f"{block.self_attn.attn_weights.size:,} numbers")
assert bert_block.self_attn.attn_weights.size == 12 / 8 * eight_heads.self_attn.attn_weights.size

# %% [markdown]
# **Which part dominates depends on $N$.** Per token, the projections cost $8d^2$ and the
# feed-forward $4dF$ (with $F = 4d$, twice the projections), both independent of $N$, while the
# $N^2$ terms cost $4Nd$, growing with the length. For the BERT-base block at a short length,
# $N = 32$, and a long one, $N = 2048$:

# %%
def shares(length):
    counts = block_flops(1, length, d, 12, 64, d_ff)
    return {group: count / sum(counts.values()) for group, count in counts.items()}


for length in (32, 2048):
    print(f"N = {length:4d}: " + ", ".join(f"{group} {share:.1%}" for group, share in shares(length).items()))
short, long = shares(32), shares(2048)
assert short["N^2 terms"] < 0.01 and short["feed-forward"] > 0.6
assert 0.25 < long["N^2 terms"] < 0.4 and long["feed-forward"] == max(long.values())
# The lengths at which the N^2 terms catch up: 4 N d = 8 d^2 (projections) and 4 N d = 4 d F (feed-forward)
catch_up = {("projections",): 2 * d, ("feed-forward",): d_ff, ("projections", "feed-forward"): 2 * d + d_ff}
for others, length in catch_up.items():
    counts = block_flops(1, length, d, 12, 64, d_ff)
    assert counts["N^2 terms"] == sum(counts[group] for group in others)
    print(f"the N^2 terms equal the {' and the '.join(others)} at N = {length:,}")

# %% [markdown]
# At 32 tokens the $N^2$ terms are under 1% of the block's work and the feed-forward is about two
# thirds of it; the "quadratic" part of attention is negligible. At 2048 tokens they are about a
# third, and the feed-forward is still the largest piece; they pass it at $N = F = 3{,}072$ and
# all the linear layers together at $N = 2d + F = 4{,}608$ (printed above). The figure draws the
# shares over $N$ (left) and the FLOPs per sequence (right: the linear groups grow like $N$, the
# $N^2$ terms like $N^2$).

# %%
lengths = np.unique(np.geomspace(16, 16384, 80).astype(int))
groups = ["feed-forward", "projections", "N^2 terms"]
colors = {"feed-forward": "tab:blue", "projections": "tab:orange", "N^2 terms": "tab:red"}
labels = {"feed-forward": "feed-forward (4NdF per sequence)", "projections": "Q, K, V, O projections (8Nd² per sequence)",
          "N^2 terms": "scores and weighted sum (4N²d per sequence)"}
per_length = [block_flops(1, int(n), d, 12, 64, d_ff) for n in lengths]
figure, (share_axis, flop_axis) = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
share_axis.stackplot(lengths, [[100 * c[g] / sum(c.values()) for c in per_length] for g in groups],
                     colors=[colors[g] for g in groups], labels=[labels[g] for g in groups], alpha=0.8)
for length in (32, 2048):
    share_axis.axvline(length, color="black", linestyle="--", linewidth=1)
    note = f"N = {length}:\nscores and\nweighted sum\n{shares(length)['N^2 terms']:.1%} of the FLOPs"
    share_axis.text(length * 1.08, 96, note, va="top", fontsize=9,
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
share_axis.set(xscale="log", xlim=(lengths[0], lengths[-1]), ylim=(0, 100), xlabel="sequence length N (tokens)",
               ylabel="share of the block's forward FLOPs (%)",
               title="Where a BERT-base block's compute goes (d = 768, H = 12, d_ff = 3072)")
share_axis.legend(loc="lower left", fontsize=9)
for group in groups:
    flop_axis.plot(lengths, [c[group] / 1e9 for c in per_length], color=colors[group], label=labels[group])
flop_axis.set(xscale="log", yscale="log", xlabel="sequence length N (tokens)",
              ylabel="forward GFLOP per sequence (B = 1)", title="Linear in N against quadratic in N")
flop_axis.grid(True, which="both", alpha=0.3)
flop_axis.legend(fontsize=9)
figure.savefig(viz.figures_dir() / "11_compute.png", dpi=110)

# %% [markdown]
# ## The whole model's backward pass
#
# Lessons 9 and 10 walked back through a layer's blocks and through the decoder. The model's forward
# pass, from the two embedding tables to the logits, is
#
# $$x_{\text{src}} = \operatorname{Drop}_{\text{src}}\!\left(\sqrt{D}\, E_{\text{src}}[\text{src}] + PE\right),\quad
# M = \operatorname{Encoder}(x_{\text{src}}),\quad
# x_{\text{tgt}} = \operatorname{Drop}_{\text{tgt}}\!\left(\sqrt{D}\, E_{\text{tgt}}[\text{tgt}] + PE\right),$$
#
# $$h = \operatorname{Decoder}(x_{\text{tgt}}, M),\qquad \text{logits} = h\, W_{\text{out}} + b_{\text{out}}.$$
#
# ### Your turn
#
# Write `transformer_backward(dlogits, out_proj_backward, decoder_backward, encoder_backward,
# src_dropout_backward, tgt_dropout_backward, src_table_backward, tgt_table_backward, d_model)`. Each
# `*_backward` argument is a part's backward pass, a function of the gradient at its output:
# `out_proj_backward(g)` returns the gradient at $h$; `decoder_backward(g)` returns a pair, the
# gradients at $x_{\text{tgt}}$ and at $M$; `encoder_backward(g)` the gradient at $x_{\text{src}}$; each
# dropout's the gradient at its input; each table's, given the gradient at the looked-up rows
# $E[\text{ids}]$ `(B, T, D)`, returns the table's gradient `(V, D)`. Return `(dW_src, dW_tgt)`.
# Which part must run before which, where does the encoder's upstream gradient come from, and what
# reaches a table from the sum $\sqrt{D}\, E[\text{ids}] + PE$? The grader hands you random linear maps
# as the parts, so every part called with the wrong gradient shows. In `npformer train --ops`, your
# function runs the real model's parts (`Transformer.backward`).

# %%
def transformer_backward(dlogits, out_proj_backward, decoder_backward, encoder_backward, src_dropout_backward,
                         tgt_dropout_backward, src_table_backward, tgt_table_backward, d_model):
    """(dW_src, dW_tgt): the whole model's backward pass, from the logits to the two embedding tables."""
    ### BEGIN SOLUTION
    d_hidden = out_proj_backward(dlogits)                   # (B, Tt, D): the decoder's output
    d_target, d_memory = decoder_backward(d_hidden)         # the decoder reads the memory: its share comes back
    d_source = encoder_backward(d_memory)                   # the memory is the encoder's output
    scale = np.sqrt(d_model)                                # x = Drop(sqrt(D) E[ids] + PE); PE has no parameter
    dW_src = src_table_backward(src_dropout_backward(d_source) * scale)
    dW_tgt = tgt_table_backward(tgt_dropout_backward(d_target) * scale)
    return dW_src, dW_tgt
    ### END SOLUTION


# %%
print(check("transformer_backward", transformer_backward))

# %% [markdown] tags=["instructor"]
# ### The order (instructor edition)
#
# The decoder runs last in the forward pass, so it is undone first, after the output projection; it
# returns the memory's gradient, summed over every layer's cross-attention (lesson 10), and that is the
# encoder's upstream gradient: the source side's embedding gets its gradient only through the memory.
# On each side the gradient goes back through the dropout mask, then the factor $\sqrt{D}$; the
# positional table is a constant, and a sum sends its whole upstream gradient to each term. With tied
# embeddings the output projection's backward adds into the target table too: the model's parts
# handle that sum themselves.

# %% [markdown]
# ## Exercises
#
# 1. Which share of the base model's forward FLOPs for $T = 24$ goes to the output layer? For
#    $T = 512$? (`base.summary(batch=64, src_len=512, tgt_len=512)` prints the FLOPs of each module.)
# 2. Add the FLOPs of the softmaxes and layer norms (a few per element). Are they negligible?
# 3. How many parameters does the "big" model have ($D = 1024$, $F = 4096$, $h = 16$, same
#    vocabularies)? Use your `transformer_parameters`, then check with `models.Transformer(...).num_params()`.
# 4. At which vocabulary size (the same for both languages, untied) do the embeddings and the output
#    layer hold as many parameters as the 12 layers of the base model? Solve it by hand, then check
#    the two sides with your `transformer_parameters`. Auto-graded: `break_even_vocabulary(d_model,
#    d_ff, n_layers)`, the smallest vocabulary size $V$ (an int) whose embeddings and output layer
#    hold at least as many parameters as the `n_layers` encoder and decoder layers.

# %%
def break_even_vocabulary(d_model, d_ff, n_layers):
    """The smallest V (both languages, untied) at which the embeddings and the output layer hold at least
    as many parameters as the layers: an int."""
    ### BEGIN SOLUTION
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    layer_norm = 2 * d_model
    layers = n_layers * (3 * attention + 2 * feed_forward + 5 * layer_norm)
    per_entry = 2 * d_model + d_model + 1      # a row of each embedding, a column and a bias of the output layer
    return -(-layers // per_entry)             # the ceiling: V * per_entry >= layers
    ### END SOLUTION


# %%
print(check("break_even_vocabulary", break_even_vocabulary))

# %% [markdown]
# 5. At which length $N$ do the $N^2$ terms of the claims' full-width block ($H = 10$,
#    $D_h = 768$, $F = 3{,}072$) cost as much as its feed-forward block (it need not be a whole
#    number)? Work it out from the terms above, then check with `block_flops` on the two whole
#    lengths around it. Why is it so much shorter than for the BERT-base block? Auto-graded:
#    `crossing_length(d_model, n_heads, head_dim, d_ff)`, that length as a float, for any block.
#    The "why" stays for the rubric.

# %%
def crossing_length(d_model, n_heads, head_dim, d_ff):
    """The length N at which one encoder block's N^2 terms take as many FLOPs as its feed-forward block."""
    ### BEGIN SOLUTION
    squared_per_n2 = 2 * (2 * n_heads * head_dim)   # Q K^T and P V: 2 N N D_h FLOPs each, per head
    feed_forward_per_n = 2 * (2 * d_model * d_ff)   # fc1 and fc2: 2 N d F FLOPs each
    return feed_forward_per_n / squared_per_n2
    ### END SOLUTION


# %%
print(check("crossing_length", crossing_length))

# %% [markdown] tags=["instructor"]
# ### Answers (instructor edition)
#
# 1. The output layer costs $2\,(B T)\, D\, V_t$, linear in $T$ like every linear layer of the
#    stacks, so its share moves only through the attentions' $T^2$ terms: it falls a little from
#    $T = 24$ to $T = 512$ but stays a large part of the forward pass (both shares printed below).
#    At 512 tokens the $T^2$ terms are still smaller than the linear layers' work ($T < F$), which
#    is why it does not fall further. Full marks: both shares from `summary_rows` (or `summary()`),
#    and the reason the share hardly moves.
# 2. Count a few FLOPs per element: a softmax about 5 (maximum, subtraction, exponential, sum,
#    division) on each of the $B H T_q T_k$ scores of every attention, and on the $B T V_t$ logits
#    in the loss; a layer norm about 8 (mean, subtraction, square, mean, square root, division,
#    scale, shift) on each of its $B T D$ inputs. Each is $O(1)$ per element where the products
#    beside them are $O(D_h)$, $O(D)$ or $O(F)$ per element, so together they are well under 1% of
#    the FLOPs at both lengths (printed below). Full marks: the element counts, the comparison with
#    the products' per-element cost, and the conclusion; a good answer adds that these operations
#    are limited by memory traffic rather than arithmetic, so their share of the *time* is larger
#    than their share of the FLOPs.
# 3. $P = N(8D^2 + 2DF + F + 15D + 4D^2 + 2DF + F + 9D) + 2VD + DV + V$ with $D = 1024$, $F = 4096$,
#    $N = 6$, $V = 37{,}000$: about 290M untied (the exact count, from `transformer_parameters` and
#    from the layers of a real model, is printed below). The heads do not enter. With the paper's sharing (one table,
#    the output layer's bias) it comes to about 214M, close to the 213M the paper reports for its
#    big model (printed below).
# 4. The embeddings and the output layer hold $2VD + (DV + V) = V(3D + 1)$. The 12 layers of the
#    base model hold $44{,}138{,}496$ (the table above), so
#    $V = 44{,}138{,}496 / 1537 \approx 28{,}717.3$: vocabularies of 28,717 tokens hold slightly
#    fewer parameters than the layers, and 28,718 slightly more. The check (below) evaluates both
#    sides with `transformer_parameters`: the vocabulary side with `n_layers=0`, the layers' side as
#    the difference between 6 layers and 0; `break_even_vocabulary` (graded by `check`) returns 28,718.
# 5. $N^2$ terms $4 B H N^2 D_h$ against the feed-forward block's $4 B N d F$: equal at
#    $N = dF / (H D_h) = 768 \cdot 3072 / (10 \cdot 768) = F / H = 307.2$. `block_flops` (below)
#    puts the $N^2$ terms under the feed-forward block at $N = 307$ and over it at $N = 308$. For
#    the BERT-base block $H D_h = d$ and the crossing is at $N = F = 3{,}072$; full-width heads make
#    the $N^2$ terms $H = 10$ times larger, so the crossing comes 10 times sooner.

# %% tags=["instructor"]
def output_layer_share(length):
    rows = models.summary_rows(base, batch=64, src_len=length, tgt_len=length)
    return next(row.forward_flops for row in rows if row.name.startswith("out_proj")) / sum(
        row.forward_flops for row in rows)


output_shares = {length: output_layer_share(length) for length in (24, 512)}
print("answer 1: the output layer's share of the forward FLOPs: "
      + ", ".join(f"T = {length}: {share:.1%}" for length, share in output_shares.items()))
assert output_shares[512] < output_shares[24] and output_shares[512] > 0.2


# %% tags=["instructor"]
def elementwise_share(length, softmax_flops=5, norm_flops=8, batch=64):
    c = base.config
    scores = c.n_layers * batch * c.n_heads * 3 * length**2  # encoder self, decoder self and cross: Ts = Tt
    norms = c.n_layers * 5 * batch * length * c.d_model      # 2 norms per encoder layer, 3 per decoder layer
    logits = batch * length * c.tgt_vocab                    # the softmax of the loss
    products = sum(row.forward_flops for row in models.summary_rows(base, batch, length, length))
    return {"attention softmaxes": softmax_flops * scores / products, "layer norms": norm_flops * norms / products,
            "output softmax": softmax_flops * logits / products}


for length in (24, 512):
    answer_shares = elementwise_share(length)
    print(f"answer 2: T = {length}: " + ", ".join(f"{name} {share:.2%}" for name, share in answer_shares.items())
          + f" of the products' FLOPs; together {sum(answer_shares.values()):.2%}")
    assert sum(answer_shares.values()) < 0.01

# %% tags=["instructor"]
by_formula = transformer_parameters(37000, 37000, 1024, 4096, 6)
# The layers' count does not depend on V: one layer of each kind, built with tiny vocabularies, six times.
one_of_each = models.Transformer(models.TransformerConfig(4, 4, d_model=1024, n_heads=16, d_ff=4096, n_layers=1),
                                 dtype=np.float16)
big_layers = 6 * (one_of_each.encoder.num_params() + one_of_each.decoder.num_params())
untied = big_layers + 2 * 37000 * 1024 + (1024 * 37000 + 37000)
shared = big_layers + 37000 * 1024 + 37000
print(f"answer 3: big model, untied: transformer_parameters {by_formula:,}, from the layers of a model {untied:,}; "
      f"shared as in the paper: {shared:,}")
assert by_formula == untied and abs(by_formula / 1e6 - 290) < 1
assert abs(shared / 1e6 - 213) < 2, "the paper reports 213M for its big model"
del one_of_each

# %% tags=["instructor"]
for vocab in (28717, 28718):
    vocabulary_side = transformer_parameters(vocab, vocab, D, F, 0)
    layers_side = transformer_parameters(vocab, vocab, D, F, N) - vocabulary_side
    print(f"answer 4: V = {vocab:,}: embeddings and output layer {vocabulary_side:,}, 12 layers {layers_side:,}")
    assert layers_side == layers == 44_138_496
    assert (vocabulary_side < layers_side) == (vocab == 28717)
assert break_even_vocabulary(512, 2048, 6) == 28718

# %% tags=["instructor"]
crossing = d * d_ff / (claimed_heads * d)
print(f"answer 5: the full-width N^2 terms equal the feed-forward block at N = {crossing:g}")
for length in (307, 308):
    counts = block_flops(1, length, d, claimed_heads, d, d_ff)
    print(f"answer 5: N = {length}: N^2 terms {counts['N^2 terms'] / 1e9:.3f} GFLOP, "
          f"feed-forward {counts['feed-forward'] / 1e9:.3f} GFLOP")
    assert (counts["N^2 terms"] < counts["feed-forward"]) == (length == 307)
assert crossing == d_ff / claimed_heads == 307.2
assert np.isclose(crossing_length(d, claimed_heads, d, d_ff), crossing)
