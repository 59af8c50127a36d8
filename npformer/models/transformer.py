"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Data flow, with ``D = d_model``::

    source ids (B, Ts) -> src_embed * sqrt(D) + PE -> dropout -> encoder -> memory (B, Ts, D)
    target ids (B, Tt) -> tgt_embed * sqrt(D) + PE -> dropout -> decoder(memory) -> out_proj
                                                                          -> logits (B, Tt, V_tgt)

Masks (True = may attend): encoder self-attention and decoder cross-attention
see every source key that is not ``<pad>``; decoder self-attention sees the
target keys that are not ``<pad>`` and not in the future.

``backward(dlogits)`` runs the same path in reverse and adds every parameter's
gradient into ``grads()``; the source side receives the gradient of
``memory`` gathered from every decoder layer. The loss is not part of the
model: ``ops.cross_entropy_forward(logits, tgt_out_ids, ignore_index=PAD_ID,
label_smoothing=config.label_smoothing)`` gives it, and its backward gives
``dlogits`` (``npformer.training.train_step`` does both).

The training step's fast path is a layout, not a second model: ``forward(src_ids, tgt_in_ids,
only_at=counted)`` runs the same blocks on the real tokens alone, packed side by side
(``nn/layout.py``), and projects only the ``counted`` positions onto the vocabulary, the largest
product of a step; it returns their logits ``(N, V_tgt)``, equal to the padded pass's
``logits[counted]``, and ``backward`` takes their gradient (``tests/test_fastpath.py``). With
dropout, the masks inside the layers are drawn over the packed shape, so they differ from the
padded pass's.

Token ids 0, 1, 2, 3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` in every
vocabulary (``npformer.tokens``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .. import ops
from ..backend import xp
from ..nn import PADDED, Decoder, DecoderCache, Dropout, Embedding, Encoder, Linear, Module, Packed, kv_buffers
from ..tokens import PAD_ID, SPECIAL_TOKENS
from .base import start_model
from .checks import (check_choice, check_config, check_only_at, check_probability, check_target_batch,
                     check_token_ids)

# The three kinds of attention in an encoder-decoder, one name each everywhere (``attention_maps``,
# ``npformer attention --kind``, the explorer, the figures), with the title every figure uses.
ATTENTION_KINDS = {
    "encoder": "Encoder self-attention: source token (row) -> source token (column)",
    "decoder": "Decoder self-attention (causal): position (row) -> earlier input token (column)",
    "cross": "Cross-attention: output token (row) -> source token (column)",
}


@dataclass
class TransformerConfig:
    """Sizes and options. The defaults are the paper's base model.

    ``norm``: "post" (``LayerNorm(x + Sublayer(x))``, the paper) or "pre"
    (``x + Sublayer(LayerNorm(x))`` plus a final LayerNorm in encoder and decoder).
    ``activation``: "relu" (the paper) or "gelu" (exact). ``tie_embeddings``: the
    output projection uses the target embedding table (transposed).
    ``share_embeddings``: source and target use one embedding table (a joint
    vocabulary, ``src_vocab == tgt_vocab``); its gradient sums both uses. With
    both options, one matrix serves all three roles (Press and Wolf, 2017).
    ``label_smoothing``: of the model's loss (the paper uses 0.1).
    """

    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_layers: int = 6
    max_len: int = 512
    dropout: float = 0.1
    norm: str = "post"
    activation: str = "relu"
    tie_embeddings: bool = False
    share_embeddings: bool = False
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        owner = "TransformerConfig"
        check_config(owner, self, ("src_vocab", "tgt_vocab", "d_model", "n_heads", "d_ff", "n_layers", "max_len"))
        for name in ("src_vocab", "tgt_vocab"):
            if getattr(self, name) < len(SPECIAL_TOKENS):
                raise ValueError(f"{owner}: {name} must be >= {len(SPECIAL_TOKENS)} "
                                 f"(the special tokens {SPECIAL_TOKENS}), got {getattr(self, name)}")
        check_choice(owner, "norm", self.norm, ("post", "pre"))
        check_choice(owner, "activation", self.activation, ("relu", "gelu"))
        check_probability(owner, "label_smoothing", self.label_smoothing)
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"{owner}: share_embeddings needs one joint vocabulary (src_vocab == tgt_vocab), "
                             f"got src_vocab={self.src_vocab}, tgt_vocab={self.tgt_vocab}")

    def to_dict(self) -> dict:
        return asdict(self)


def memory_layout(memory: Any, src_mask: Any) -> Any:
    """The layout of the encoder's output: padded when it is ``(B, Ts, D)`` like the source mask
    ``(B, 1, 1, Ts)``, else the source's real tokens packed, ``(1, Ns, D)``."""
    if tuple(memory.shape[:2]) == (src_mask.shape[0], src_mask.shape[-1]):
        return PADDED                               # (a packed batch of one unpadded sentence is the same)
    return Packed(src_mask[:, 0, 0, :])


class Transformer(Module):
    """Encoder-decoder Transformer. ``forward(src_ids, tgt_in_ids) -> logits (B, Tt, V_tgt)``."""

    def __init__(self, config: TransformerConfig, seed: int = 0, dtype: Any = None) -> None:
        super().__init__()
        rng = start_model(self, config, seed, dtype)

        c = config
        layer_options = dict(n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
                             dropout_rng=self.dropout_rng, pre_norm=c.norm == "pre",
                             activation=c.activation, rng=rng, dtype=self.dtype)
        self.src_embed = Embedding(c.src_vocab, c.d_model, rng=rng, dtype=self.dtype)
        self.tgt_embed = Embedding(c.tgt_vocab, c.d_model, rng=rng, dtype=self.dtype,
                                   shared_with=self.src_embed if c.share_embeddings else None)
        self.encoder = Encoder(c.n_layers, c.d_model, **layer_options)
        self.decoder = Decoder(c.n_layers, c.d_model, **layer_options)
        self.out_proj = Linear(c.d_model, c.tgt_vocab, rng=rng, dtype=self.dtype,
                               tied_to=self._target_table_owner() if c.tie_embeddings else None)
        self.src_dropout = Dropout(c.dropout, self.dropout_rng)
        self.tgt_dropout = Dropout(c.dropout, self.dropout_rng)
        self.positions = ops.current().positional_encoding(c.max_len, c.d_model, dtype=self.dtype)
        self.embed_scale = math.sqrt(c.d_model)
        self._source_layout = self._target_layout = PADDED      # of the last pass (``encode``, ``decode``)
        self._chosen = None                                     # the packed rows whose logits were asked for

    # -- embeddings -------------------------------------------------------------------------

    def _target_table_owner(self) -> Embedding:
        """The block that owns the target table: ``tgt_embed``, or ``src_embed`` when shared."""
        return self.src_embed if self.config.share_embeddings else self.tgt_embed

    def _embed(self, ids: Any, table: Embedding, dropout: Dropout, start: int = 0) -> Any:
        """``table(ids) * sqrt(D) + PE[start : start + T]``, then dropout."""
        x = table.forward(ids) * self.embed_scale
        x += self.positions[start:start + ids.shape[1]]
        return dropout.forward(x)

    def _embed_backward(self, d: Any, table: Embedding, dropout: Dropout) -> None:
        table.backward(dropout.backward(d) * self.embed_scale)

    # -- the full pass ----------------------------------------------------------------------

    def encode(self, src_ids: Any, packed: bool = False) -> tuple[Any, Any]:
        """``src_ids (B, Ts)`` -> ``memory (B, Ts, D)`` (``(1, Ns, D)`` ``packed``) and the source mask
        ``(B, 1, 1, Ts)``."""
        check_token_ids("Transformer", "src_ids", src_ids, self.config.max_len)
        src_mask = ops.current().padding_mask(src_ids, PAD_ID)
        self._source_layout = layout = Packed(src_ids != PAD_ID) if packed else PADDED
        x = layout.pack(self._embed(src_ids, self.src_embed, self.src_dropout))
        return self.encoder.forward(x, src_mask, layout), src_mask

    def decode(self, tgt_in_ids: Any, memory: Any, src_mask: Any, only_at: Any = None,
               source_layout: Any = None) -> Any:
        """``tgt_in_ids (B, Tt)`` and the encoder output -> logits ``(B, Tt, V_tgt)``; with ``only_at``, a
        boolean ``(B, Tt)``, the logits of those positions only, ``(N, V_tgt)``, in the packed layout.
        ``memory`` may be padded ``(B, Ts, D)`` or packed ``(1, Ns, D)``: ``source_layout`` says which
        (``forward`` passes the one ``encode`` made), else its shape does."""
        check_token_ids("Transformer", "tgt_in_ids", tgt_in_ids, self.config.max_len)
        check_target_batch(tgt_in_ids, src_mask.shape[0])
        op_set = ops.current()
        tgt_mask = op_set.padding_mask(tgt_in_ids, PAD_ID) & op_set.causal_mask(tgt_in_ids.shape[1])
        self._chosen = None
        layout = PADDED
        if only_at is not None:
            check_only_at(only_at, tgt_in_ids)
            layout = Packed((tgt_in_ids != PAD_ID) | only_at)          # a chosen <pad> is computed too
            self._chosen = layout.pack(only_at)[0]                     # (Nt,): the packed rows asked for
        self._target_layout = layout
        x = layout.pack(self._embed(tgt_in_ids, self.tgt_embed, self.tgt_dropout))
        if source_layout is None:
            source_layout = memory_layout(memory, src_mask)
        decoded = self.decoder.forward(x, memory, tgt_mask, src_mask, layout, source_layout)
        return self.out_proj.forward(decoded if self._chosen is None else decoded[0, self._chosen])

    def forward(self, src_ids: Any, tgt_in_ids: Any, only_at: Any = None) -> Any:
        """Logits ``(B, Tt, V_tgt)`` for every target position (teacher forcing); with ``only_at``, a
        boolean ``(B, Tt)``, the logits ``(N, V_tgt)`` of its N positions, in the packed layout."""
        memory, src_mask = self.encode(src_ids, packed=only_at is not None)
        return self.decode(tgt_in_ids, memory, src_mask, only_at, self._source_layout)

    def backward(self, dlogits: Any) -> None:
        """Add the gradient of every parameter for upstream ``dlogits``, shaped like the logits."""
        walk = getattr(ops.current(), "transformer_backward", None)  # a student's (lesson 11), if the set has one
        if walk is not None:
            self._student_backward(walk, dlogits)
            return
        d_src, d_tgt = self.backward_to_inputs(dlogits)
        self._embed_backward(d_tgt, self.tgt_embed, self.tgt_dropout)
        self._embed_backward(d_src, self.src_embed, self.src_dropout)

    def _every_row(self, d_decoded: Any) -> Any:
        """The decoder output's gradient at every row: a packed pass that projected only the chosen rows
        ``(N, D)`` gets zeros at the others, ``(1, Nt, D)``; a padded pass's is returned as it is."""
        if self._chosen is None:
            return d_decoded
        d_rows = xp.zeros((1, self._target_layout.count, d_decoded.shape[-1]), dtype=d_decoded.dtype)
        d_rows[0, self._chosen] = d_decoded
        return d_rows

    def _student_backward(self, walk: Any, dlogits: Any) -> None:
        """The whole backward pass as a student's ``transformer_backward`` composes it, from the model's
        own parts; a packed pass's rows are put back in place around them, so the student's function
        sees the padded layout's shapes only where it calls the dropout and the tables."""
        walk(dlogits, lambda d: self._every_row(self.out_proj.backward(d)), self.decoder.backward,
             self.encoder.backward, lambda d: self.src_dropout.backward(self._source_layout.unpack(d)),
             lambda d: self.tgt_dropout.backward(self._target_layout.unpack(d)),
             self.src_embed.backward, self.tgt_embed.backward, self.config.d_model)

    def backward_to_inputs(self, dlogits: Any) -> tuple[Any, Any]:
        """The backward pass down to the embedded inputs: add the gradients of every parameter
        above the embedding tables and return ``dx_src (B, Ts, D)`` and ``dx_tgt (B, Tt, D)``, the
        gradients of the dropout outputs of ``_embed`` (in eval mode: of ``E[ids] sqrt(D) + PE``;
        zeros at the positions a packed pass did not compute, their gradient in the padded pass).
        ``backward`` finishes them into the tables; saliency maps read them as they are."""
        d_decoded = self._every_row(self.out_proj.backward(dlogits))                 # (B, Tt, D) or (1, Nt, D)
        d_tgt, d_memory = self.decoder.backward(d_decoded)
        d_src = self.encoder.backward(d_memory)
        return self._source_layout.unpack(d_src), self._target_layout.unpack(d_tgt)

    # -- incremental decoding ---------------------------------------------------------------

    def start_decoding(self, src_ids: Any, max_len: int | None = None) -> DecoderCache:
        """Encode the source once and prepare the caches for ``decode_step``.

        The cross-attention keys and values of every decoder layer are computed
        here, once per source; the self-attention caches hold up to ``max_len``
        target positions (default: the model's ``max_len``).
        """
        max_len = max_len or self.config.max_len
        if max_len > self.config.max_len:
            raise ValueError(f"start_decoding: max_len must be <= {self.config.max_len}, got {max_len}")
        memory, src_mask = self.encode(src_ids)
        memory_keys, memory_values = [], []
        for layer in self.decoder.layers:
            keys, values = layer.cross_attn.project_keys_values(memory)
            memory_keys.append(keys)
            memory_values.append(values)
        c = self.config
        self_keys, self_values = kv_buffers(memory.shape[0], c.n_heads, max_len, c.d_model // c.n_heads,
                                            len(self.decoder.layers), self.dtype)
        return DecoderCache(memory_keys, memory_values, self_keys, self_values, src_mask)

    def decode_step(self, cache: DecoderCache, next_ids: Any) -> Any:
        """Feed one token per sequence, ``next_ids (B,)``; return the logits ``(B, V_tgt)``
        for the position after it. Use in eval mode (no dropout); there is no backward."""
        position = cache.length
        if position >= cache.self_keys[0].shape[2]:
            raise ValueError(f"decode_step: the cache is full ({position} positions)")
        ids = next_ids.reshape(-1, 1)
        x = self._embed(ids, self.tgt_embed, self.tgt_dropout, start=position)
        with ops.queries_from(position):   # the new query's position (for attention forms that read it)
            x = self.decoder.step(x, position, cache)
        cache.length += 1
        return self.out_proj.forward(x)[:, 0]

    # -- inspection -------------------------------------------------------------------------

    def attention_maps(self) -> dict[str, list]:
        """The last forward pass's attention weights, by kind (``ATTENTION_KINDS``: "encoder",
        "decoder", "cross"), one ``(B, H, Tq, Tk)`` per layer."""
        return {
            "encoder": [layer.self_attn.attn_weights for layer in self.encoder.layers],
            "decoder": [layer.self_attn.attn_weights for layer in self.decoder.layers],
            "cross": [layer.cross_attn.attn_weights for layer in self.decoder.layers],
        }

    def summary(self, batch: int = 1, src_len: int = 32, tgt_len: int = 32) -> str:
        """Per-module output shapes, parameter counts and FLOP estimates (``npformer.models.summary``)."""
        from .summary import summarize

        return summarize(self, batch, src_len, tgt_len)
