"""The mutants of the blocks and the model: bugs in how npformer's layers wire their backward passes.

A residual's identity path forgotten, pre-norm's final norm skipped, a tied embedding's gradient
overwritten, a decoder layer's memory gradient dropped, cross-attention's value path lost,
self-attention's k and v gradients swapped, heads merged without the transpose, the embedding scale forgotten.
``BLOCK_MUTANTS`` names them, each caught by a block's check (``"module:NAME"``) or the model's (``"model"``).
"""

from __future__ import annotations

from ... import nn, ops
from ...backend import xp
from ...models import Transformer
from ...nn import decoder as decoder_module
from ...nn import encoder as encoder_module
from ...nn import residual as residual_module
from .mutant import Mutant


def _residual_one_input_not_added(original):
    def backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
        if pre_norm:
            return norm_backward(sublayer_backward(dropout_backward(dout)))  # the identity path forgotten
        return sublayer_backward(dropout_backward(norm_backward(dout)))
    return backward


def _residual_not_added(original):
    def backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
        if pre_norm:
            d_input, d_memory = sublayer_backward(dropout_backward(dout))
            return norm_backward(d_input), d_memory  # the identity path forgotten
        d_sum = norm_backward(dout)
        d_input, d_memory = sublayer_backward(dropout_backward(d_sum))
        return d_input, d_memory
    return backward


def _final_norm_skipped(original):
    def backward(self, dout):
        saved, self.norm = self.norm, None  # pre-norm's final layer norm left out of backward
        try:
            return original(self, dout)
        finally:
            self.norm = saved
    return backward


def _tied_embedding_overwritten(original):
    def backward(self, dout):
        self.grad["W"][...] = ops.embedding_backward(dout, self._cache)  # = instead of +=
    return backward


def _decoder_drops_first_layer_memory(original):
    def backward(self, dout):
        d = dout if self.norm is None else self.norm.backward(dout)
        d_memory = 0
        for index, layer in reversed(list(enumerate(self.layers))):
            d, d_layer_memory = layer.backward(d)
            if index != 0:
                d_memory = d_memory + d_layer_memory  # layer 0's cross-attention never reaches the encoder
        return d, d_memory
    return backward


def _memory_value_path_dropped(original):
    def attend_heads_backward(self, dout):
        dq, dk, dv = original(self, dout)
        return dq, dk, xp.zeros_like(dv)  # the value path sends nothing back to the memory
    return attend_heads_backward


def _key_value_swapped(original):
    def attend_heads_backward(self, dout):
        dq, dk, dv = original(self, dout)
        return dq, dv, dk  # k and v gradients swapped
    return attend_heads_backward


def _heads_merged_in_wrong_order(original):
    def merge(self, parts):
        batch, heads, length, head_dim = parts[0].shape
        # no transpose: heads and time mixed
        return xp.concatenate([part.reshape(batch, length, heads * head_dim) for part in parts], axis=-1)
    return merge


def _embedding_scale_forgotten(original):
    def backward(self, d, table, dropout):
        table.backward(dropout.backward(d))  # forward multiplies by sqrt(d_model); backward forgets it
    return backward


BLOCK_MUTANTS: list[Mutant] = [
    Mutant("residual: identity path not added", "nn.residual (encoder)", "dx = the sub-layer path only",
           residual_module, "residual_backward", _residual_one_input_not_added, "module:encoder_layer"),
    Mutant("residual with memory: identity path not added", "nn.residual (decoder cross-attention)",
           "dx = the cross-attention path only", residual_module, "residual_backward_with_memory",
           _residual_not_added, "model"),
    Mutant("pre-norm: final layer norm skipped in backward", "nn.Encoder.backward", "the encoder's final "
           "norm is applied in forward but not in backward", encoder_module.Encoder, "backward",
           _final_norm_skipped, "model:pre"),
    Mutant("tied embeddings: gradient overwritten", "nn.Embedding.backward", "dW = ... instead of +=, "
           "losing the output projection's share", nn.Embedding, "backward", _tied_embedding_overwritten,
           "model:tied"),
    Mutant("decoder: memory gradient dropped in one layer", "nn.Decoder.backward", "layer 0's d_memory not "
           "added", decoder_module.Decoder, "backward", _decoder_drops_first_layer_memory, "model"),
    Mutant("cross-attention: value path missing from d_memory", "nn.MultiHeadAttention.backward",
           "d_memory only through the keys", nn.MultiHeadAttention, "attend_heads_backward", _memory_value_path_dropped,
           "module:cross_attention", "zero"),
    Mutant("self-attention: k and v gradients swapped", "nn.SelfAttention.backward", "the k projection "
           "gets dv and the v projection dk", nn.SelfAttention, "attend_heads_backward", _key_value_swapped,
           "module:self_attention"),
    Mutant("heads merged without the transpose", "nn.Padded.merge_heads", "(B, H, T, Dh) "
           "reshaped straight to (B, T, D)", nn.Padded, "merge_heads", _heads_merged_in_wrong_order,
           "module:self_attention"),
    Mutant("embeddings: sqrt(d_model) scale forgotten", "models.Transformer._embed_backward", "the "
           "embedding gradient is not multiplied by sqrt(d_model)", Transformer, "_embed_backward",
           _embedding_scale_forgotten, "model", "constant factor"),
]
