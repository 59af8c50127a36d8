"""A LLaMA-style decoder-only language model: the 2023 block on the 2017 idea.

Data flow, with ``D = d_model``::

    ids (B, T) -> tok_embed -> N ModernBlocks (RMSNorm, rotary grouped-query causal self-attention,
    RMSNorm, SwiGLU; pre-norm) -> final RMSNorm -> logits = h @ tok_embed.W^T  (B, T, V)

What differs from ``LanguageModel`` (lesson 18), part by part:

* no position table: positions enter as rotations of the queries and keys (``ops.rope``);
* ``RMSNorm`` in place of ``LayerNorm`` (no mean, no shift);
* ``SwiGLU`` in place of the GELU network, ``3 D F`` weights without biases;
* ``n_kv_heads`` key/value heads shared by ``n_heads`` query heads (grouped-query attention);
* the output projection is the embedding table itself (tied, Press and Wolf, 2017), no bias;
* no biases anywhere and no dropout.

``generate`` samples on a KV cache of ``n_kv_heads`` heads per layer, each new position's query and
key rotated by that position. Parameter keys: ``tok_embed.W``, ``blocks.{i}.norm1.gamma``,
``blocks.{i}.attn.{q,k,v,o}.W``, ``blocks.{i}.norm2.gamma``, ``blocks.{i}.ffn.{gate,up,down}.W``,
``norm.gamma``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy

from .. import backend, ops
from ..nn import Embedding, Linear, ModernBlock, Module, ModuleList, RMSNorm, check_grouped_heads, kv_buffers
from ..tokens import PAD_ID
from .base import start_model
from .checks import check_config, check_token_ids
from .sampling import check_sampling, sample_tokens


@dataclass
class ModernLanguageModelConfig:
    vocab: int
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 176
    n_layers: int = 2
    max_len: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        owner = "ModernLanguageModelConfig"
        check_config(owner, self, ("vocab", "d_model", "n_heads", "n_kv_heads", "d_ff", "n_layers", "max_len"))
        check_grouped_heads(owner, self.d_model, self.n_heads, self.n_kv_heads)
        if not self.rope_base > 1 or not self.eps > 0:
            raise ValueError(f"{owner}: rope_base must be > 1 and eps > 0, got {self.rope_base} and {self.eps}")

    def to_dict(self) -> dict:
        return asdict(self)


class ModernLanguageModel(Module):
    """``forward(ids (B, T)) -> logits (B, T, V)``; ``generate(prompt_ids, ...)`` samples."""

    def __init__(self, config: ModernLanguageModelConfig, seed: int = 0, dtype: Any = None) -> None:
        super().__init__()
        rng = start_model(self, config, seed, dtype)
        c = config
        self.tok_embed = Embedding(c.vocab, c.d_model, rng=rng, dtype=self.dtype)
        self.blocks = ModuleList([
            ModernBlock(c.d_model, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, d_ff=c.d_ff,
                        rope_base=c.rope_base, eps=c.eps, rng=rng, dtype=self.dtype)
            for _ in range(c.n_layers)])
        self.norm = RMSNorm(c.d_model, c.eps, dtype=self.dtype)
        self.head = Linear(c.d_model, c.vocab, rng=rng, dtype=self.dtype, bias=False, tied_to=self.tok_embed)

    def forward(self, ids: Any) -> Any:
        """Next-token logits for every position: ``(B, T, V)``."""
        check_token_ids("ModernLanguageModel", "ids", ids, self.config.max_len)
        op_set = ops.current()
        mask = op_set.padding_mask(ids, PAD_ID) & op_set.causal_mask(ids.shape[1])
        x = self.tok_embed.forward(ids)                   # (B, T, D)
        for block in self.blocks:
            x = block.forward(x, mask)                    # (B, T, D)
        return self.head.forward(self.norm.forward(x))    # (B, T, V)

    def backward(self, dlogits: Any) -> None:
        d = self.norm.backward(self.head.backward(dlogits))
        for block in reversed(self.blocks):
            d = block.backward(d)
        self.tok_embed.backward(d)

    def kv_cache(self, length: int, batch: int = 1) -> tuple[list, list]:
        """Empty key and value buffers for ``length`` positions: per layer ``(batch, Hkv, length, Dh)``."""
        c = self.config
        return kv_buffers(batch, c.n_kv_heads, length, c.d_model // c.n_heads, c.n_layers, self.dtype)

    def step(self, token: int, position: int, keys: list, values: list) -> Any:
        """The next-token logits ``(V,)`` after ``token`` at ``position``, on the caches ``keys``/``values``."""
        x = self.tok_embed.forward(backend.asarray(numpy.array([[token]])))   # (1, 1, D)
        for block, key_buffer, value_buffer in zip(self.blocks, keys, values):
            x = block.step(x, position, key_buffer, value_buffer)
        return self.head.forward(self.norm.forward(x))[0, 0]

    def generate(self, prompt_ids: list[int], max_new_tokens: int, rng: Any, temperature: float = 1.0,
                 top_k: int | None = None, stop_id: int | None = None) -> list[int]:
        """Sample a continuation of ``prompt_ids`` one token at a time, on a KV cache (``step``);
        the next token is drawn from ``softmax(logits / temperature)`` among the ``top_k`` most
        probable (all when None), using ``rng``."""
        check_sampling("ModernLanguageModel.generate", prompt_ids, temperature, top_k)
        total = min(len(prompt_ids) + max_new_tokens, self.config.max_len)
        keys, values = self.kv_cache(total)
        with self.evaluating():
            return sample_tokens(lambda token, position: self.step(token, position, keys, values),
                                 prompt_ids, total, rng, temperature, top_k, stop_id)
