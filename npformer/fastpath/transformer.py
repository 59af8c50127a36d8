"""The training step's fast path: a core ``Transformer``'s forward and backward with no work on padding.

``PackedTransformer(model).forward(src_ids, tgt_in_ids, positions)`` gives the logits of the
chosen target positions only, ``(N, V_tgt)``, equal to ``model.forward(src_ids, tgt_in_ids)[positions]``
for a boolean ``positions (B, Tt)`` with N True entries (``targets != PAD_ID`` in a training step).
It does no work that the loss would throw away:

* every position-wise layer (the projections, the feed-forward networks, layer norm, dropout,
  the residual additions) runs on the real tokens alone, packed side by side (``packing``) right
  after the embedding; attention unpacks them into the padded layout around its scores
  (``attention``), with its input projections fused (``fused``);
* only the chosen positions are projected onto the vocabulary, the largest product of a step.

It runs the model's own blocks, embedding (``model._embed``, which a subclass may change),
norms, dropouts, feed-forward networks and residual functions, in the order of
``nn/encoder.py`` and ``nn/decoder.py``; only attention's layout differs. Padded positions never
reach a real one, so the logits and, after ``backward``, every gradient are those of the padded
``forward`` up to rounding (``tests/test_fastpath.py``). With dropout, the masks inside the layers
are drawn over the packed shape, so they differ from the padded pass's.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import ops
from ..backend import xp
from ..models import Transformer
from ..models.checks import check_target_batch, check_token_ids
from ..nn.residual import residual_backward, residual_backward_with_memory, residual_forward
from ..tokens import PAD_ID
from .attention import PackedCrossAttention, PackedSelfAttention
from .packing import Packing


def _check_positions(positions: Any, tgt_in_ids: Any) -> None:
    if getattr(positions, "dtype", None) != bool or tuple(positions.shape) != tuple(tgt_in_ids.shape):
        raise ValueError(f"PackedTransformer: positions must be a boolean array shaped like tgt_in_ids "
                         f"{tuple(tgt_in_ids.shape)}, got {getattr(positions, 'dtype', type(positions).__name__)} "
                         f"{tuple(getattr(positions, 'shape', ()))}")


class PackedTransformer:
    """The fast path of one ``Transformer`` (or subclass): ``forward(src_ids, tgt_in_ids, positions)
    -> (N, V_tgt)``, ``backward(dlogits (N, V_tgt))`` into ``model.grads()``."""

    def __init__(self, model: Transformer) -> None:
        if not isinstance(model, Transformer):
            raise TypeError(f"PackedTransformer: model must be an npformer Transformer, got {type(model).__name__}")
        self.model = model

    def forward(self, src_ids: Any, tgt_in_ids: Any, positions: Any) -> Any:
        model = self.model
        check_token_ids("Transformer", "src_ids", src_ids, model.config.max_len)
        check_token_ids("Transformer", "tgt_in_ids", tgt_in_ids, model.config.max_len)
        _check_positions(positions, tgt_in_ids)
        check_target_batch(tgt_in_ids, src_ids.shape[0])
        op_set = ops.current()
        self.src_packing = src_packing = Packing(src_ids != PAD_ID)
        self.tgt_packing = tgt_packing = Packing((tgt_in_ids != PAD_ID) | positions)  # a chosen <pad> too
        src_mask = op_set.padding_mask(src_ids, PAD_ID)                                   # (B, 1, 1, Ts)
        tgt_mask = op_set.padding_mask(tgt_in_ids, PAD_ID) & op_set.causal_mask(tgt_in_ids.shape[1])
        self.encoder_attention = [PackedSelfAttention(layer.self_attn, src_packing) for layer in model.encoder.layers]
        self.decoder_attention = [(PackedSelfAttention(layer.self_attn, tgt_packing),
                                   PackedCrossAttention(layer.cross_attn, tgt_packing, src_packing))
                                  for layer in model.decoder.layers]

        x = src_packing.pack(model._embed(src_ids, model.src_embed, model.src_dropout))   # (1, Ns, D)
        for layer, attention in zip(model.encoder.layers, self.encoder_attention):
            x = residual_forward(x, lambda h: attention.forward(h, src_mask),
                                 layer.norm1, layer.drop1, layer.pre_norm)
            x = residual_forward(x, layer.ffn.forward, layer.norm2, layer.drop2, layer.pre_norm)
        memory = x if model.encoder.norm is None else model.encoder.norm.forward(x)

        y = tgt_packing.pack(model._embed(tgt_in_ids, model.tgt_embed, model.tgt_dropout))  # (1, Nt, D)
        for layer, (self_attention, cross_attention) in zip(model.decoder.layers, self.decoder_attention):
            y = residual_forward(y, lambda h: self_attention.forward(h, tgt_mask),
                                 layer.norm1, layer.drop1, layer.pre_norm)
            y = residual_forward(y, lambda h: cross_attention.forward(h, memory, src_mask),
                                 layer.norm2, layer.drop2, layer.pre_norm)
            y = residual_forward(y, layer.ffn.forward, layer.norm3, layer.drop3, layer.pre_norm)
        decoded = y if model.decoder.norm is None else model.decoder.norm.forward(y)       # (1, Nt, D)
        self.chosen = tgt_packing.pack(positions)[0]               # (Nt,): which packed rows are asked for
        return model.out_proj.forward(decoded[0, self.chosen])     # (N, V_tgt)

    def backward(self, dlogits: Any) -> None:
        """Add the gradient of every parameter for upstream ``dlogits (N, V_tgt)``."""
        model = self.model
        d_src, d_tgt = self.backward_to_inputs(dlogits)
        model._embed_backward(d_tgt, model.tgt_embed, model.tgt_dropout)
        model._embed_backward(d_src, model.src_embed, model.src_dropout)

    def backward_to_inputs(self, dlogits: Any) -> tuple[Any, Any]:
        """Like ``Transformer.backward_to_inputs``: every parameter above the embedding tables, and
        the gradients of the embedded inputs, padded ``(B, Ts, D)`` and ``(B, Tt, D)`` with zeros at
        the positions that were not computed (their gradient in the padded pass)."""
        model = self.model
        d_chosen = model.out_proj.backward(dlogits)                                       # (N, D)
        d_y = xp.zeros((1, self.tgt_packing.count, d_chosen.shape[-1]), dtype=d_chosen.dtype)
        d_y[0, self.chosen] = d_chosen                                                    # (1, Nt, D)
        d_y = d_y if model.decoder.norm is None else model.decoder.norm.backward(d_y)
        layer_backwards = [functools.partial(_decoder_layer_backward, layer, *attention)
                           for layer, attention in zip(model.decoder.layers, self.decoder_attention)]
        d_y, d_memory = ops.current().stack_backward_with_memory(d_y, layer_backwards)
        d_x = d_memory if model.encoder.norm is None else model.encoder.norm.backward(d_memory)
        for layer, attention in reversed(list(zip(model.encoder.layers, self.encoder_attention))):
            d_x = residual_backward(d_x, layer.ffn.backward, layer.norm2, layer.drop2, layer.pre_norm)
            d_x = residual_backward(d_x, attention.backward, layer.norm1, layer.drop1, layer.pre_norm)
        return self.src_packing.unpack(d_x), self.tgt_packing.unpack(d_y)


def _decoder_layer_backward(layer: Any, self_attention: PackedSelfAttention, cross_attention: PackedCrossAttention,
                            dout: Any) -> tuple[Any, Any]:
    """``DecoderLayer.backward`` with the packed attentions: ``(dx, d_memory)``."""
    d = residual_backward(dout, layer.ffn.backward, layer.norm3, layer.drop3, layer.pre_norm)
    d, d_memory = residual_backward_with_memory(d, cross_attention.backward, layer.norm2, layer.drop2, layer.pre_norm)
    d = residual_backward(d, self_attention.backward, layer.norm1, layer.drop1, layer.pre_norm)
    return d, d_memory
