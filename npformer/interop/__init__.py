"""From npformer to PyTorch and back: a ``Transformer``'s weights in ``torch.nn`` layers.

``to_torch(model)`` builds a PyTorch twin of an npformer ``Transformer`` from ``torch.nn.Linear``,
``torch.nn.Embedding`` and ``torch.nn.LayerNorm``, laid out module for module like npformer's
(post-norm or pre-norm, ReLU or GELU, tied embeddings or not), and copies the weights in.
``from_torch(torch_model)`` builds an npformer ``Transformer`` from such a twin, and
``load_torch_state(model, torch_model)`` copies a twin's weights into an existing model.

The twin's parameters have npformer's names, with PyTorch's words for the last part::

    npformer                           shape         PyTorch                               shape
    src_embed.W                        (V_src, D)    src_embed.weight                      (V_src, D)
    encoder.layers.0.self_attn.q.W     (D, D)        encoder.layers.0.self_attn.q.weight   (D, D), transposed
    encoder.layers.0.self_attn.q.b     (D,)          encoder.layers.0.self_attn.q.bias     (D,)
    encoder.layers.0.ffn.fc1.W         (D, D_ff)     encoder.layers.0.ffn.fc1.weight       (D_ff, D)
    encoder.layers.0.norm1.gamma       (D,)          encoder.layers.0.norm1.weight         (D,)
    encoder.layers.0.norm1.beta        (D,)          encoder.layers.0.norm1.bias           (D,)
    out_proj.W                         (D, V_tgt)    out_proj.weight                       (V_tgt, D)

The one change of layout is the ``Linear`` weight: npformer computes ``y = x @ W + b`` with
``W (d_in, d_out)``, PyTorch ``y = x @ weight.T + bias`` with ``weight (d_out, d_in)``, so
``weight = W.T``. An embedding table is ``(V, D)`` in both. With tied embeddings npformer's
``out_proj`` owns only ``b`` and multiplies by ``tgt_embed.W.T``; the twin's ``out_proj.weight``
is the very tensor ``tgt_embed.weight`` (PyTorch's tying), already ``(V, D)``, so tying needs no
transpose at all.

The twin computes what npformer computes, in the same order, so in float64 its logits and its
autograd gradients equal npformer's forward and hand-written backward to round-off::

    x = Embedding(ids) * sqrt(D) + PE[:T]          (the sinusoids of npformer.ops, as a buffer)
    post-norm: x = LayerNorm(x + Dropout(Sublayer(x)));  pre-norm: x = x + Dropout(Sublayer(LayerNorm(x)))
    attention: softmax(q k^T / sqrt(Dh), masked) v  per head, True in the mask = may attend;
               a query with every key masked gets zero weights (npformer's rule), never NaN

Only dropout differs: each framework draws its own masks, so compare the two in eval mode or with
``dropout=0``.

The key and layout mapping itself, ``parameter_map``, ``to_torch_layout`` and
``from_torch_layout``, needs only NumPy. PyTorch is never a dependency of npformer: the functions
that need it import it when called and say ``pip install torch`` when it is missing.
"""

from .bridge import from_torch, grads_from_torch, load_torch_state, to_torch, torch_classes, torch_state_arrays
from .layout import ParameterPair, from_torch_layout, parameter_map, to_torch_layout

__all__ = ["ParameterPair", "parameter_map", "to_torch_layout", "from_torch_layout", "to_torch",
           "from_torch", "load_torch_state", "grads_from_torch", "torch_classes", "torch_state_arrays"]
