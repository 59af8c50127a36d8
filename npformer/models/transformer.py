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

Token ids 0, 1, 2, 3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` in every
vocabulary (``npformer.tokens``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .. import ops
from ..backend import xp
from ..nn import Decoder, DecoderCache, Dropout, Embedding, Encoder, Linear, Module, Packing, kv_buffers
from ..tokens import PAD_ID, SPECIAL_TOKENS
from .base import start_model
from .checks import check_choice, check_config, check_probability, check_token_ids

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
        self.positions = ops.positional_encoding(c.max_len, c.d_model, dtype=self.dtype)
        self.embed_scale = math.sqrt(c.d_model)
        self._packing_cache = None  # the packings of the last forward_positions; None after forward

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

    def encode(self, src_ids: Any, packing: Packing | None = None) -> tuple[Any, Any]:
        """``src_ids (B, Ts)`` -> ``memory (B, Ts, D)`` and the source mask ``(B, 1, 1, Ts)``.
        With ``packing`` (of the source's real tokens), ``memory`` is packed: ``(1, Ns, D)``."""
        check_token_ids("Transformer", "src_ids", src_ids, self.config.max_len)
        src_mask = ops.padding_mask(src_ids, PAD_ID)
        x = self._embed(src_ids, self.src_embed, self.src_dropout)
        return self.encoder.forward(x if packing is None else packing.pack(x), src_mask, packing), src_mask

    def decode(self, tgt_in_ids: Any, memory: Any, src_mask: Any) -> Any:
        """``tgt_in_ids (B, Tt)`` and the encoder output -> logits ``(B, Tt, V_tgt)``."""
        return self.out_proj.forward(self._decode_hidden(tgt_in_ids, memory, src_mask))

    def _decode_hidden(self, tgt_in_ids: Any, memory: Any, src_mask: Any, packing: Packing | None = None,
                       memory_packing: Packing | None = None) -> Any:
        """The decoder's output ``(B, Tt, D)`` (packed: ``(1, Nt, D)``), before the projection to the
        vocabulary."""
        check_token_ids("Transformer", "tgt_in_ids", tgt_in_ids, self.config.max_len)
        batch = memory.shape[0] if memory_packing is None else memory_packing.shape[0]
        if tgt_in_ids.shape[0] != batch:
            raise ValueError(f"Transformer: tgt_in_ids must have batch size {batch} "
                             f"(from the source), got {tgt_in_ids.shape[0]}")
        tgt_mask = ops.padding_mask(tgt_in_ids, PAD_ID) & ops.causal_mask(tgt_in_ids.shape[1])
        x = self._embed(tgt_in_ids, self.tgt_embed, self.tgt_dropout)
        x = x if packing is None else packing.pack(x)
        return self.decoder.forward(x, memory, tgt_mask, src_mask, packing, memory_packing)

    def forward(self, src_ids: Any, tgt_in_ids: Any) -> Any:
        """Logits ``(B, Tt, V_tgt)`` for every target position (teacher forcing)."""
        self._packing_cache = None
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_in_ids, memory, src_mask)

    def forward_positions(self, src_ids: Any, tgt_in_ids: Any, positions: Any) -> Any:
        """The fast form of ``forward``: the logits of the chosen target positions only, ``(N, V_tgt)``,
        equal to ``forward(src_ids, tgt_in_ids)[positions]`` for a boolean ``positions (B, Tt)``
        with N True entries (e.g. ``targets != PAD_ID``; ``train_step(..., only_counted_targets=True)``).

        It does no work that the loss would throw away:

        * every position-wise layer (the projections, the feed-forward networks, layer norm,
          dropout, the residual additions) runs on the real tokens alone, packed side by side
          (``nn.Packing``) right after the embedding; attention unpacks them into the padded
          layout around its scores;
        * only the chosen positions are projected onto the vocabulary, the largest product of a step.

        Padded positions never reach a real one, so the logits and, after ``backward``, every
        gradient are those of the padded ``forward`` up to rounding (``tests/test_packing.py``).
        With dropout, the masks inside the layers are drawn over the packed shape, so they differ
        from the padded pass's. The embedding (``_embed``, which a subclass may change) runs on
        the padded ids, and its gradient comes back unpacked, zero at the padding.
        ``backward(dlogits (N, V_tgt))`` follows it, as it follows ``forward``.
        """
        check_token_ids("Transformer", "src_ids", src_ids, self.config.max_len)
        check_token_ids("Transformer", "tgt_in_ids", tgt_in_ids, self.config.max_len)
        if getattr(positions, "dtype", None) != bool or tuple(positions.shape) != tuple(tgt_in_ids.shape):
            raise ValueError(f"Transformer: positions must be a boolean array shaped like tgt_in_ids "
                             f"{tuple(tgt_in_ids.shape)}, got {getattr(positions, 'dtype', type(positions).__name__)} "
                             f"{tuple(getattr(positions, 'shape', ()))}")
        src_packing = Packing(src_ids != PAD_ID)
        tgt_packing = Packing((tgt_in_ids != PAD_ID) | positions)   # a chosen <pad> input is computed too
        memory, src_mask = self.encode(src_ids, src_packing)                                 # (1, Ns, D)
        decoded = self._decode_hidden(tgt_in_ids, memory, src_mask, tgt_packing, src_packing)  # (1, Nt, D)
        chosen = tgt_packing.pack(positions)[0]                     # (Nt,): which packed rows are asked for
        self._packing_cache = (src_packing, tgt_packing, chosen)
        return self.out_proj.forward(decoded[0, chosen])            # (N, V_tgt)

    def backward(self, dlogits: Any) -> None:
        """Add the gradient of every parameter for upstream ``dlogits``: ``(B, Tt, V_tgt)`` after
        ``forward``, ``(N, V_tgt)`` after ``forward_positions``."""
        d_src, d_tgt = self.backward_to_inputs(dlogits)
        self._embed_backward(d_tgt, self.tgt_embed, self.tgt_dropout)
        self._embed_backward(d_src, self.src_embed, self.src_dropout)

    def backward_to_inputs(self, dlogits: Any) -> tuple[Any, Any]:
        """The backward pass down to the embedded inputs: add the gradients of every parameter
        above the embedding tables and return ``dx_src (B, Ts, D)`` and ``dx_tgt (B, Tt, D)``, the
        gradients of the dropout outputs of ``_embed`` (in eval mode: of ``E[ids] sqrt(D) + PE``).
        ``backward`` finishes them into the tables; saliency maps read them as they are.
        ``dlogits``: as for ``backward``. After ``forward_positions`` the padded positions, which
        were not computed, get zeros (their gradient in the padded pass)."""
        d_src, d_tgt = self._backward_below_embeddings(dlogits)
        if self._packing_cache is None:
            return d_src, d_tgt
        src_packing, tgt_packing, _ = self._packing_cache
        return src_packing.unpack(d_src), tgt_packing.unpack(d_tgt)

    def _backward_below_embeddings(self, dlogits: Any) -> tuple[Any, Any]:
        """From ``dlogits`` down to the gradients of the two embedded inputs, padded or packed as
        the last forward pass was."""
        d_decoded = self.out_proj.backward(dlogits)
        if self._packing_cache is not None:        # (N, D) of the chosen rows -> (1, Nt, D), zero elsewhere
            _, tgt_packing, chosen = self._packing_cache
            d_rows = xp.zeros((1, tgt_packing.count, d_decoded.shape[-1]), dtype=d_decoded.dtype)
            d_rows[0, chosen] = d_decoded
            d_decoded = d_rows
        d_tgt, d_memory = self.decoder.backward(d_decoded)
        return self.encoder.backward(d_memory), d_tgt

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
