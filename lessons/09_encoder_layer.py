# %% [markdown]
# # Lesson 9 — The encoder layer: residual connections and layer norm, post-norm vs pre-norm
#
# An encoder layer is two sub-layers, self-attention and a position-wise feed-forward network
# (`fc2(relu(fc1(x)))`, width `d_ff`), each wrapped in a residual connection and a layer norm.
# The paper puts the norm *after* the residual sum (**post-norm**):
#
# `x = LayerNorm(x + Dropout(Sublayer(x)))`
#
# Most later models put it *before* the sub-layer (**pre-norm**), with one final LayerNorm at
# the end of the stack:
#
# `x = x + Dropout(Sublayer(LayerNorm(x)))`

# %%
import inspect

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, nn, ops, viz
from npformer.nn import residual

rng = np.random.default_rng(0)
print(inspect.getsource(residual.residual_forward))
print(inspect.getsource(residual.residual_backward))

# %% [markdown]
# The backward pass follows the two arrows out of `x`. The identity path passes the gradient
# straight through; the sub-layer path goes back through dropout and the sub-layer (and the
# norm); the two are added. The whole layer's backward pass is the forward pass in reverse.
# The finite-difference check below builds the layer with GELU rather than ReLU: among the many
# hidden units of the feed-forward network, one whose input lies within the step `h` of ReLU's kink
# at 0 makes the finite difference straddle the kink (lesson 2), and the check fails for that
# reason alone. The backward code is the same for both activations apart from that one op.

# %%
print(inspect.getsource(nn.EncoderLayer.backward))
for pre_norm in (False, True):
    layer = nn.EncoderLayer(6, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                            activation="gelu", rng=rng, dtype=np.float64)
    mask = ops.padding_mask(np.array([[5, 6, 7, 0], [5, 6, 7, 8]]))
    report = gradcheck.check_module(layer, {"x": rng.standard_normal((2, 4, 6))},
                                    forward=lambda x: layer.forward(x, mask))
    print(f"pre_norm={pre_norm}:", report.table().splitlines()[-1])
    assert report.passed, f"the encoder layer (pre_norm={pre_norm}) must pass the finite-difference check"

# %% [markdown]
# ## How the gradient travels down the stack
#
# In pre-norm, the identity path from the output to the first layer never passes through a norm:
# the gradient arrives untouched and every layer adds its own contribution on top. In post-norm,
# each layer's norm rescales the gradient on its way down. Compare the gradient reaching each
# layer's input in a 12-layer stack at initialisation, for the same random upstream gradient:

# %%
def gradient_norms(pre_norm, n_layers=12, d_model=32):
    encoder = nn.Encoder(n_layers, d_model, n_heads=4, d_ff=64, dropout=0.0, dropout_rng=None,
                         pre_norm=pre_norm, activation="relu", rng=np.random.default_rng(1))
    x = np.random.default_rng(2).standard_normal((8, 10, d_model)).astype(np.float32)
    out = encoder.forward(x, None)
    upstream = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    upstream /= np.linalg.norm(upstream)
    d = encoder.norm.backward(upstream) if encoder.norm else upstream
    norms = []
    for layer in reversed(encoder.layers):
        d = layer.backward(d)
        norms.append(float(np.linalg.norm(d)))
    return norms[::-1]


norms = {pre_norm: np.array(gradient_norms(pre_norm)) for pre_norm in (False, True)}
figure, axis = plt.subplots(figsize=(7, 4), constrained_layout=True)
for pre_norm, label in ((False, "post-norm (paper)"), (True, "pre-norm")):
    axis.semilogy(range(12), norms[pre_norm], "o-", label=label)
    print(f"{label:18s}", " ".join(f"{value:.2f}" for value in norms[pre_norm]))
axis.set(xlabel="layer (0 = first)", ylabel="|dL/d input of layer|",
         title="Gradient reaching each layer of a 12-layer encoder at initialisation")
axis.legend()
axis.grid(True, alpha=0.3)
figure.savefig(viz.figures_dir() / "09_post_vs_pre_norm.png", dpi=110)
assert np.all(np.diff(norms[True]) < 0), "pre-norm: the gradient must grow toward the first layer"
lowest = int(np.argmin(norms[False]))
assert 0 < lowest < 11 and norms[False][lowest] < 0.5 * min(norms[False][0], norms[False][-1]), \
    "post-norm: the gradient must sag through the middle of the stack"

# %% [markdown]
# Pre-norm's gradient *grows* toward the first layer (each residual branch adds to it); post-norm's
# is rescaled by every norm and sags through the middle. Deep post-norm models are therefore
# sensitive to the learning rate early in training, which is one reason the paper needs a warm-up
# (lesson 12), and why most later models use pre-norm.

# %% [markdown]
# ## Exercises
#
# 1. Write `residual_backward` for a "sandwich" layout, `x + Norm2(Sublayer(Norm1(x)))`.
# 2. Why does pre-norm need a final LayerNorm on the encoder's output?
# 3. Count an encoder layer's parameters: `4(D^2 + D) + 2 D d_ff + d_ff + D + 4 D`.
