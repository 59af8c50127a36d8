"""The bugs of the blocks: entries 5-7 of the zoo, each buggy, fixed and its symptom.

5 cross-attention queries from the raw decoder input, 6 a feed-forward block without its activation,
7 layer norm with the unbiased std and beta initialised to ones. The first two run npformer's own
layers (``DecoderLayer``, ``FeedForward``) in float64.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ... import ops
from ...nn import DecoderLayer, FeedForward


# == blocks =======================================================================================

# -- 5. cross-attention queries from the raw decoder input ----------------------------------------

def decoder_layer_buggy(layer: DecoderLayer, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
    """A post-norm decoder layer (no dropout) on ``x (B, Tt, D)`` and ``memory (B, Ts, D)``."""
    h = layer.norm1.forward(x + layer.self_attn.forward(x, self_mask))
    h = layer.norm2.forward(h + layer.cross_attn.forward(x, memory, memory_mask))   # queries: x
    return layer.norm3.forward(h + layer.ffn.forward(h))


def decoder_layer_fixed(layer: DecoderLayer, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
    h = layer.norm1.forward(x + layer.self_attn.forward(x, self_mask))
    h = layer.norm2.forward(h + layer.cross_attn.forward(h, memory, memory_mask))   # queries: h
    return layer.norm3.forward(h + layer.ffn.forward(h))


def context_blind_cross_attention(decoder_layer: Callable) -> float:
    """Change target token 0 only. The share of the later target positions whose cross-attention
    weights stay exactly the same: positions that choose where to look in the source without
    reading the target words before them. 0 when right (the self-attention output carries them)."""
    rng = np.random.default_rng(0)
    layer = DecoderLayer(16, n_heads=2, d_ff=32, dropout=0.0, dropout_rng=rng, pre_norm=False,
                         activation="relu", rng=rng, dtype=np.float64)
    x, memory = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 6, 16))
    changed = x.copy()
    changed[:, 0] = rng.standard_normal((2, 16))
    weights = []
    for target in (x, changed):
        decoder_layer(layer, target, memory, ops.causal_mask(5), None)
        weights.append(layer.cross_attn.attn_weights[:, :, 1:].copy())           # (B, H, Tt - 1, Ts)
    unchanged = np.abs(weights[0] - weights[1]).max(axis=(1, 3)) < 1e-12          # (B, Tt - 1)
    return unchanged.mean()


# -- 6. a feed-forward block without its activation ----------------------------------------------

def feed_forward_buggy(ffn: FeedForward, x: Any) -> Any:
    return ffn.fc2.forward(ffn.fc1.forward(x))                                  # two linears in a row


def feed_forward_fixed(ffn: FeedForward, x: Any) -> Any:
    return ffn.fc2.forward(ops.relu_forward(ffn.fc1.forward(x))[0])             # ReLU between them


def explained_by_one_matrix(feed_forward: Callable) -> float:
    """R^2 of the best single affine map ``x @ A + c`` fitted to the block's outputs (least squares
    on 200 inputs): the share of the output's variance one matrix explains. 1 when the block is a
    single matrix in disguise."""
    rng = np.random.default_rng(0)
    ffn = FeedForward(8, 32, rng=rng, dtype=np.float64)
    x = rng.standard_normal((200, 8))
    y = feed_forward(ffn, x)
    inputs = np.hstack([x, np.ones((200, 1))])
    residual = y - inputs @ np.linalg.lstsq(inputs, y, rcond=None)[0]
    return 1.0 - (residual ** 2).sum() / ((y - y.mean(axis=0)) ** 2).sum()


# -- 7. layer norm with the unbiased std and beta initialised to ones -----------------------------

def layer_norm_buggy(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The tutorial's layer norm over the last axis, at initialisation."""
    gamma, beta = np.ones(x.shape[-1]), np.ones(x.shape[-1])         # beta initialised to ones
    std = x.std(axis=-1, ddof=1, keepdims=True)                      # torch's x.std(): unbiased
    return gamma * (x - x.mean(axis=-1, keepdims=True)) / (std + eps) + beta


def layer_norm_fixed(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    gamma, beta = np.ones(x.shape[-1]), np.zeros(x.shape[-1])        # beta starts at zero
    variance = x.var(axis=-1, keepdims=True)                         # biased, as nn.LayerNorm
    return gamma * (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(variance + eps) + beta


def not_normalised(layer_norm: Callable) -> float:
    """Rows of 8 with their own means and scales: ``max |row mean| + max |row variance - 1|`` of
    the output. At initialisation layer norm gives every row mean 0 and variance 1: near 0 when right."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-5, 5, (100, 1)) + rng.uniform(1, 5, (100, 1)) * rng.standard_normal((100, 8))
    y = layer_norm(x)
    return np.abs(y.mean(axis=-1)).max() + np.abs(y.var(axis=-1) - 1).max()
