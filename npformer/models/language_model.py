"""A decoder-only language model (GPT-style): the encoder layer under a causal mask.

Data flow, with ``D = d_model``::

    ids (B, T) -> tok_embed + pos_embed (learned) -> dropout -> N blocks (causal self-attention
    + feed-forward, pre-norm) -> final LayerNorm -> head -> logits (B, T, V)

Position ``t`` predicts token ``t + 1``. A block is exactly ``EncoderLayer``: what makes it a
*decoder* is the causal mask, not different code. There is no cross-attention, because there is
no source. Parameter keys: ``tok_embed.W``, ``pos_embed.W``, ``blocks.layers.{i}...``,
``blocks.norm.*``, ``head.W``, ``head.b``.

``generate`` samples one token at a time with temperature and top-k from a seeded generator,
reusing each block's cached keys and values (``EncoderLayer.step``).

With ``causal=False`` the same stack attends in both directions: a BERT-style masked language
model (Devlin et al., 2019), trained to fill in hidden tokens (``npformer.mlm``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy

from .. import backend, ops
from ..nn import Dropout, Embedding, Encoder, LearnedPositions, Linear, Module, kv_buffers
from ..tokens import PAD_ID
from .base import start_model
from .checks import check_config, check_token_ids
from .sampling import check_sampling, sample_tokens


@dataclass
class LanguageModelConfig:
    vocab: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2
    max_len: int = 64
    dropout: float = 0.1
    causal: bool = True  # False: a BERT-style masked language model (attends both ways)

    def __post_init__(self) -> None:
        check_config("LanguageModelConfig", self, ("vocab", "d_model", "n_heads", "d_ff", "n_layers", "max_len"))

    def to_dict(self) -> dict:
        return asdict(self)


class LanguageModel(Module):
    """``forward(ids (B, T)) -> logits (B, T, V)``; ``generate(prompt_ids, ...)`` samples."""

    def __init__(self, config: LanguageModelConfig, seed: int = 0, dtype: Any = None) -> None:
        super().__init__()
        rng = start_model(self, config, seed, dtype)
        c = config
        self.tok_embed = Embedding(c.vocab, c.d_model, rng=rng, dtype=self.dtype)
        self.pos_embed = LearnedPositions(c.max_len, c.d_model, rng=rng, dtype=self.dtype)
        self.blocks = Encoder(c.n_layers, c.d_model, n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
                              dropout_rng=self.dropout_rng, pre_norm=True, activation="gelu",
                              rng=rng, dtype=self.dtype)
        self.head = Linear(c.d_model, c.vocab, rng=rng, dtype=self.dtype)
        self.embed_dropout = Dropout(c.dropout, self.dropout_rng)

    def _embed(self, ids: Any, start: int = 0) -> Any:
        positions = self.pos_embed.forward(*ids.shape, start=start)
        return self.embed_dropout.forward(self.tok_embed.forward(ids) + positions)

    def forward(self, ids: Any) -> Any:
        """Next-token logits for every position: ``(B, T, V)``."""
        check_token_ids("LanguageModel", "ids", ids, self.config.max_len)
        mask = ops.current().padding_mask(ids, PAD_ID)
        if self.config.causal:
            mask = mask & ops.current().causal_mask(ids.shape[1])
        return self.head.forward(self.blocks.forward(self._embed(ids), mask))

    def backward(self, dlogits: Any) -> None:
        d_x = self.embed_dropout.backward(self.blocks.backward(self.head.backward(dlogits)))
        self.tok_embed.backward(d_x)
        self.pos_embed.backward(d_x)

    def generate(self, prompt_ids: list[int], max_new_tokens: int, rng: Any, temperature: float = 1.0,
                 top_k: int | None = None, stop_id: int | None = None) -> list[int]:
        """Sample a continuation of ``prompt_ids`` one token at a time, on a KV cache.

        Each step feeds one token through every block (``EncoderLayer.step``), reusing the keys and
        values of earlier positions. The next token is drawn from ``softmax(logits / temperature)``
        restricted to the ``top_k`` most probable tokens (all when None), using ``rng``.
        """
        if not self.config.causal:
            raise ValueError("LanguageModel.generate: a masked (causal=False) model cannot generate left to right")
        check_sampling("LanguageModel.generate", prompt_ids, temperature, top_k)
        c = self.config
        total = min(len(prompt_ids) + max_new_tokens, c.max_len)
        keys, values = kv_buffers(1, c.n_heads, total, c.d_model // c.n_heads, len(self.blocks.layers), self.dtype)

        def step(token: int, position: int) -> Any:
            x = self._embed(backend.asarray(numpy.array([[token]])), start=position)
            with ops.queries_from(position):   # the new query's position (for attention forms that read it)
                for layer, key_buffer, value_buffer in zip(self.blocks.layers, keys, values):
                    x = layer.step(x, position, key_buffer, value_buffer)
            return self.head.forward(self.blocks.norm.forward(x))[0, 0]

        with self.evaluating():
            return sample_tokens(step, prompt_ids, total, rng, temperature, top_k, stop_id)
