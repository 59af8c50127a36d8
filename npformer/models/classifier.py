"""An encoder-only classifier: the Transformer's encoder, pooled, then a linear head.

Data flow, with ``D = d_model``::

    ids (B, T) -> tok_embed + pos_embed (learned positions) -> dropout -> encoder -> h (B, T, D)
    h -> masked mean (or max) over the real tokens -> (B, D) -> head -> logits (B, n_classes)

The same layers as the translator, put together differently: no decoder, no
causal mask, one output per sequence. Positions are a learned table
``pos_embed.W (max_len, D)`` (BERT's choice) rather than the sinusoids; its
gradient is an embedding backward with the position ids. Parameter keys:
``tok_embed.W``, ``pos_embed.W``, ``encoder.layers.{i}...``, ``encoder.norm.*`` (pre-norm),
``head.W``, ``head.b``. The loss is the cross-entropy over the batch
(``ops.cross_entropy_forward(logits, labels, ignore_index=None)``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import ops
from ..nn import Dropout, Embedding, Encoder, LearnedPositions, Linear, Module
from ..tokens import PAD_ID
from .base import start_model
from .checks import check_choice, check_config, check_token_ids



@dataclass
class ClassifierConfig:
    vocab: int
    n_classes: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 2
    max_len: int = 64
    dropout: float = 0.1
    pooling: str = "mean"
    norm: str = "pre"
    activation: str = "gelu"

    def __post_init__(self) -> None:
        owner = "ClassifierConfig"
        check_config(owner, self, ("vocab", "n_classes", "d_model", "n_heads", "d_ff", "n_layers", "max_len"))
        if self.n_classes < 2:
            raise ValueError(f"{owner}: n_classes must be >= 2, got {self.n_classes}")
        check_choice(owner, "pooling", self.pooling, tuple(ops.POOLINGS))
        check_choice(owner, "norm", self.norm, ("post", "pre"))
        check_choice(owner, "activation", self.activation, ("relu", "gelu"))

    def to_dict(self) -> dict:
        return asdict(self)


class EncoderClassifier(Module):
    """``forward(ids (B, T)) -> logits (B, n_classes)``; ``backward(dlogits)`` fills ``grads()``."""

    def __init__(self, config: ClassifierConfig, seed: int = 0, dtype: Any = None) -> None:
        super().__init__()
        rng = start_model(self, config, seed, dtype)
        c = config
        self.tok_embed = Embedding(c.vocab, c.d_model, rng=rng, dtype=self.dtype)
        self.pos_embed = LearnedPositions(c.max_len, c.d_model, rng=rng, dtype=self.dtype)
        self.encoder = Encoder(c.n_layers, c.d_model, n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
                               dropout_rng=self.dropout_rng, pre_norm=c.norm == "pre",
                               activation=c.activation, rng=rng, dtype=self.dtype)
        self.head = Linear(c.d_model, c.n_classes, rng=rng, dtype=self.dtype)
        self.embed_dropout = Dropout(c.dropout, self.dropout_rng)

    def forward(self, ids: Any) -> Any:
        """``ids (B, T)`` -> logits ``(B, n_classes)``."""
        check_token_ids("EncoderClassifier", "ids", ids, self.config.max_len)
        x = self.tok_embed.forward(ids) + self.pos_embed.forward(*ids.shape)
        hidden = self.encoder.forward(self.embed_dropout.forward(x), ops.current().padding_mask(ids, PAD_ID))
        pool_forward, _ = ops.current().pair(ops.POOLINGS[self.config.pooling])   # the active set's
        pooled, self._pool_cache = pool_forward(hidden, ids != PAD_ID)
        return self.head.forward(pooled)

    def backward(self, dlogits: Any) -> None:
        _, pool_backward = ops.current().pair(ops.POOLINGS[self.config.pooling])
        d_hidden = pool_backward(self.head.backward(dlogits), self._pool_cache)
        d_x = self.embed_dropout.backward(self.encoder.backward(d_hidden))
        self.tok_embed.backward(d_x)
        self.pos_embed.backward(d_x)
