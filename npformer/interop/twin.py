"""PyTorch's twin of npformer's ``Transformer``: the same network in ``torch.nn`` layers.

Imported only when a bridge function needs it (``interop.to_torch`` and friends), so that
``import npformer`` never imports PyTorch. The modules mirror npformer's, name for name:
``TorchAttention`` (``q``, ``k``, ``v``, ``o``), ``TorchFeedForward`` (``fc1``, ``fc2``),
``TorchEncoderLayer`` (``self_attn``, ``norm1``, ``ffn``, ``norm2``), ``TorchDecoderLayer``
(``self_attn``, ``norm1``, ``cross_attn``, ``norm2``, ``ffn``, ``norm3``), ``TorchEncoder`` and
``TorchDecoder`` (``layers``, plus ``norm`` when pre-norm), and ``TorchTransformer``, the whole network.
"""

from __future__ import annotations

import math
from typing import Any

import numpy
import torch
from torch import nn
from torch.nn import functional

from .. import backend, ops
from ..models import TransformerConfig
from ..tokens import PAD_ID


def residual(x: Any, sublayer: Any, norm: Any, dropout: Any, pre_norm: bool) -> Any:
    """Post-norm ``norm(x + dropout(sublayer(x)))`` or pre-norm ``x + dropout(sublayer(norm(x)))``."""
    if pre_norm:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))

class TorchAttention(nn.Module):
    """``query (B, Tq, D)`` over ``memory (B, Tk, D)``; ``mask`` broadcastable to
    ``(B, H, Tq, Tk)``, True = may attend."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def split_heads(self, x: Any) -> Any:
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, query: Any, memory: Any, mask: Any) -> Any:
        q, k, v = self.split_heads(self.q(query)), self.split_heads(self.k(memory)), self.split_heads(self.v(memory))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        has_key = mask.any(dim=-1, keepdim=True)  # False only for a query whose keys are all masked
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~has_key, 0.0)
        weights = torch.softmax(scores, dim=-1) * has_key  # such a query: zeros, as in npformer
        context = (weights @ v).transpose(1, 2)
        return self.o(context.reshape(query.shape[0], query.shape[1], -1))

class TorchFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str) -> None:
        super().__init__()
        self.activation = activation
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: Any) -> Any:
        hidden = self.fc1(x)
        hidden = torch.relu(hidden) if self.activation == "relu" else functional.gelu(hidden)  # exact GELU
        return self.fc2(hidden)

class TorchEncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.pre_norm = c.norm == "pre"
        self.self_attn = TorchAttention(c.d_model, c.n_heads)
        self.norm1 = nn.LayerNorm(c.d_model, eps=1e-5)
        self.ffn = TorchFeedForward(c.d_model, c.d_ff, c.activation)
        self.norm2 = nn.LayerNorm(c.d_model, eps=1e-5)
        self.drop1, self.drop2 = nn.Dropout(c.dropout), nn.Dropout(c.dropout)

    def forward(self, x: Any, mask: Any) -> Any:
        x = residual(x, lambda h: self.self_attn(h, h, mask), self.norm1, self.drop1, self.pre_norm)
        return residual(x, self.ffn, self.norm2, self.drop2, self.pre_norm)

class TorchDecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.pre_norm = c.norm == "pre"
        self.self_attn = TorchAttention(c.d_model, c.n_heads)
        self.norm1 = nn.LayerNorm(c.d_model, eps=1e-5)
        self.cross_attn = TorchAttention(c.d_model, c.n_heads)
        self.norm2 = nn.LayerNorm(c.d_model, eps=1e-5)
        self.ffn = TorchFeedForward(c.d_model, c.d_ff, c.activation)
        self.norm3 = nn.LayerNorm(c.d_model, eps=1e-5)
        self.drop1, self.drop2, self.drop3 = (nn.Dropout(c.dropout) for _ in range(3))

    def forward(self, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
        x = residual(x, lambda h: self.self_attn(h, h, self_mask), self.norm1, self.drop1, self.pre_norm)
        x = residual(x, lambda h: self.cross_attn(h, memory, memory_mask), self.norm2, self.drop2,
                     self.pre_norm)
        return residual(x, self.ffn, self.norm3, self.drop3, self.pre_norm)

class TorchEncoder(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TorchEncoderLayer(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model, eps=1e-5) if c.norm == "pre" else None

    def forward(self, x: Any, mask: Any) -> Any:
        for layer in self.layers:
            x = layer(x, mask)
        return x if self.norm is None else self.norm(x)

class TorchDecoder(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TorchDecoderLayer(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model, eps=1e-5) if c.norm == "pre" else None

    def forward(self, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)
        return x if self.norm is None else self.norm(x)

class TorchTransformer(nn.Module):
    """npformer's ``Transformer`` in ``torch.nn`` layers: ``forward(src_ids, tgt_in_ids) -> logits
    (B, Tt, V_tgt)``, with the masks built inside from ``<pad>``, as npformer does. ``config`` is
    the ``TransformerConfig``."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab, c.d_model)
        self.encoder = TorchEncoder(c)
        self.decoder = TorchDecoder(c)
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab)
        if c.tie_embeddings:
            self.out_proj.weight = self.tgt_embed.weight  # one tensor, (V_tgt, D) in both roles
        self.src_dropout, self.tgt_dropout = nn.Dropout(c.dropout), nn.Dropout(c.dropout)
        # npformer's table, computed in float64 (then cast with the module); not a parameter
        table = backend.to_numpy(ops.positional_encoding(c.max_len, c.d_model, dtype=numpy.float64))
        self.register_buffer("positions", torch.from_numpy(numpy.array(table)), persistent=False)
        self.embed_scale = math.sqrt(c.d_model)

    def _embed(self, ids: Any, table: Any, dropout: Any, name: str) -> Any:
        if ids.dim() != 2 or ids.shape[1] > self.config.max_len:
            raise ValueError(f"TorchTransformer: {name} must have shape (B, T) with T <= "
                             f"{self.config.max_len}, got {tuple(ids.shape)}")
        return dropout(table(ids) * self.embed_scale + self.positions[: ids.shape[1]])

    def encode(self, src_ids: Any) -> tuple[Any, Any]:
        """``src_ids (B, Ts)`` -> ``memory (B, Ts, D)`` and the source mask ``(B, 1, 1, Ts)``."""
        src_mask = (src_ids != PAD_ID)[:, None, None, :]
        return self.encoder(self._embed(src_ids, self.src_embed, self.src_dropout, "src_ids"), src_mask), src_mask

    def decode(self, tgt_in_ids: Any, memory: Any, src_mask: Any) -> Any:
        length = tgt_in_ids.shape[1]
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=tgt_in_ids.device))
        tgt_mask = (tgt_in_ids != PAD_ID)[:, None, None, :] & causal
        x = self._embed(tgt_in_ids, self.tgt_embed, self.tgt_dropout, "tgt_in_ids")
        return self.out_proj(self.decoder(x, memory, tgt_mask, src_mask))

    def forward(self, src_ids: Any, tgt_in_ids: Any) -> Any:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_in_ids, memory, src_mask)
