# %% [markdown]
# # Lesson 10 — The decoder layer: causal self-attention and cross-attention
#
# A decoder layer has three sub-layers, each with its residual connection and norm:
#
# 1. **masked self-attention** over the target so far (causal and padding mask);
# 2. **cross-attention**: queries from the decoder, keys and values from the encoder's output
#    (`memory`), with the source padding mask;
# 3. the feed-forward network.

# %%
import inspect

import numpy as np

from npformer import gradcheck, nn, ops, viz

rng = np.random.default_rng(0)
print(inspect.getsource(nn.DecoderLayer.forward))
print(inspect.getsource(nn.DecoderLayer.backward))

# %% [markdown]
# Every decoder layer reads the same `memory`, so the encoder's output receives the **sum** of
# the cross-attention gradients of all decoder layers. The layer returns `(dx, d_memory)`, and
# `Decoder.backward` adds them up.

# %%
layer = nn.DecoderLayer(6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=False,
                        activation="relu", rng=rng, dtype=np.float64)
self_mask = ops.causal_mask(4)
memory_mask = ops.padding_mask(np.array([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]]))
report = gradcheck.check_module(
    layer, {"x": rng.standard_normal((2, 4, 6)), "memory": rng.standard_normal((2, 5, 6))},
    forward=lambda x, memory: layer.forward(x, memory, self_mask, memory_mask))
print(report.table().splitlines()[-1])
assert report.passed

# %% [markdown]
# ## Causality, tested
#
# Changing the target after position `t` must not change the output at positions `<= t`:

# %%
x = rng.standard_normal((1, 6, 6))
memory = rng.standard_normal((1, 5, 6))
out = layer.forward(x, memory, ops.causal_mask(6), None)
changed = x.copy()
changed[:, 3:] = rng.standard_normal((1, 3, 6))
out_changed = layer.forward(changed, memory, ops.causal_mask(6), None)
print("positions 0-2 unchanged:", np.array_equal(out[:, :3], out_changed[:, :3]),
      "| positions 3-5 changed:", not np.allclose(out[:, 3:], out_changed[:, 3:]))
layer.forward(x, memory, ops.causal_mask(6), None)
figure = viz.attention_heatmaps([layer.self_attn.attn_weights[0]], [f"t{i}" for i in range(6)],
                                [f"t{i}" for i in range(6)], title="Causal self-attention: nothing above the diagonal",
                                path=viz.figures_dir() / "10_causal_self_attention.png")

# %% [markdown]
# ## Exercises
#
# 1. Why does cross-attention need no causal mask?
# 2. What would go wrong at translation time if training used no causal mask?
# 3. Count a decoder layer's parameters and compare with an encoder layer's.
