"""A Vision Transformer (Dosovitskiy et al., 2021): images as sequences of patches.

Data flow, with ``D = d_model`` and ``N`` patches::

    images (B, C, H, W) -> patches (B, N, C p^2) -> patch_embed (a Linear) -> (B, N, D)
    prepend the class token cls (1, 1, D) -> (B, N + 1, D) -> + pos (N + 1, D), learned
    -> encoder (pre-norm, no mask) -> the class token's output (B, D)
    -> head: fc1 -> GELU -> fc2 -> logits (B, n_classes)

The same encoder as the translator; an image becomes a sentence of patches. The class token is
a learned vector whose final state sums up the image. Parameter keys: ``cls_token``, ``pos``,
``patch_embed.{W,b}``, ``encoder.layers.{i}...``, ``encoder.norm.*``, ``head_fc1.{W,b}``,
``head_fc2.{W,b}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import ops
from ..backend import xp
from ..nn import Dropout, Encoder, Linear, Module, init
from .base import start_model
from .checks import check_config


@dataclass
class ViTConfig:
    image_size: int = 8
    patch: int = 2
    channels: int = 1
    n_classes: int = 4
    d_model: int = 32
    n_heads: int = 4
    d_ff: int = 64
    n_layers: int = 2
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_config("ViTConfig", self,
                     ("image_size", "patch", "channels", "n_classes", "d_model", "n_heads", "d_ff", "n_layers"))
        if self.image_size % self.patch:
            raise ValueError(f"ViTConfig: image_size must be a multiple of patch, got {self.image_size} "
                             f"and {self.patch}")

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch) ** 2


class VisionTransformer(Module):
    """``forward(images (B, C, H, W)) -> logits (B, n_classes)``."""

    def __init__(self, config: ViTConfig, seed: int = 0, dtype: Any = None) -> None:
        super().__init__()
        rng = start_model(self, config, seed, dtype)
        c = config
        self.add_param("cls_token", init.normal(rng, (1, 1, c.d_model), 0.02, self.dtype))
        self.add_param("pos", init.normal(rng, (c.n_patches + 1, c.d_model), 0.02, self.dtype))
        self.patch_embed = Linear(c.channels * c.patch**2, c.d_model, rng=rng, dtype=self.dtype)
        self.encoder = Encoder(c.n_layers, c.d_model, n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
                               dropout_rng=self.dropout_rng, pre_norm=True, activation="gelu",
                               rng=rng, dtype=self.dtype)
        self.head_fc1 = Linear(c.d_model, c.d_model, rng=rng, dtype=self.dtype)
        self.head_fc2 = Linear(c.d_model, c.n_classes, rng=rng, dtype=self.dtype)
        self.embed_dropout = Dropout(c.dropout, self.dropout_rng)

    def forward(self, images: Any) -> Any:
        c = self.config
        expected = (c.channels, c.image_size, c.image_size)
        if not isinstance(images, xp.ndarray) or images.ndim != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"VisionTransformer: images must have shape (B, C, H, W) = (B, {expected[0]}, "
                             f"{expected[1]}, {expected[2]}), got {tuple(getattr(images, 'shape', ()))}")
        patches, self._patch_cache = ops.current().patches_forward(images.astype(self.dtype, copy=False), c.patch)
        tokens = self.patch_embed.forward(patches)  # (B, N, D)
        cls = xp.broadcast_to(self.cls_token, (tokens.shape[0], 1, c.d_model))
        x = xp.concatenate([cls, tokens], axis=1) + self.pos
        hidden = self.encoder.forward(self.embed_dropout.forward(x), None)
        summary, self._gelu_cache = ops.current().gelu_forward(self.head_fc1.forward(hidden[:, 0]))
        return self.head_fc2.forward(summary)

    def backward(self, dlogits: Any) -> Any:
        """Adds every parameter's gradient; returns the gradient of the images."""
        d_summary = ops.current().gelu_backward(self.head_fc2.backward(dlogits), self._gelu_cache)
        d_hidden = xp.zeros((dlogits.shape[0], self.config.n_patches + 1, self.config.d_model), dtype=self.dtype)
        d_hidden[:, 0] = self.head_fc1.backward(d_summary)  # only the class token feeds the head
        d_x = self.embed_dropout.backward(self.encoder.backward(d_hidden))
        self.grad["pos"] += d_x.sum(axis=0)
        self.grad["cls_token"] += d_x[:, :1].sum(axis=0, keepdims=True)
        return ops.current().patches_backward(self.patch_embed.backward(d_x[:, 1:]), self._patch_cache)

    def attention_to_patches(self) -> Any:
        """The last layer's attention from the class token to each patch, averaged over heads:
        ``(B, H/p, W/p)`` (run ``forward`` first)."""
        weights = self.encoder.layers[-1].self_attn.attn_weights  # (B, heads, N + 1, N + 1)
        side = self.config.image_size // self.config.patch
        return weights[:, :, 0, 1:].mean(axis=1).reshape(-1, side, side)
