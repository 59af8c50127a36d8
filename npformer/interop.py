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

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any, Mapping, NamedTuple

import numpy

from . import backend, ops
from .models import Transformer, TransformerConfig
from .nn import Embedding, LayerNorm, Linear, Module
from .tokens import PAD_ID

__all__ = ["ParameterPair", "parameter_map", "to_torch_layout", "from_torch_layout", "to_torch",
           "from_torch", "load_torch_state", "grads_from_torch", "torch_classes", "torch_state_arrays"]

# (npformer block, its parameter name) -> (PyTorch parameter name, transposed?)
_RENAMES = {
    (Linear, "W"): ("weight", True),
    (Linear, "b"): ("bias", False),
    (Embedding, "W"): ("weight", False),
    (LayerNorm, "gamma"): ("weight", False),
    (LayerNorm, "beta"): ("bias", False),
}
_TIED_KEY, _TIED_SOURCE = "out_proj.weight", "tgt_embed.weight"
_SHARED_KEY, _SHARED_SOURCE = "tgt_embed.weight", "src_embed.weight"


class ParameterPair(NamedTuple):
    """One parameter in both frameworks: ``torch[torch_key] = npformer[npformer_key]`` (``.T`` when
    ``transposed``)."""

    npformer_key: str
    torch_key: str
    transposed: bool


# -- the mapping: NumPy only ---------------------------------------------------------------------


def parameter_map(model: Module) -> list[ParameterPair]:
    """Every parameter of ``model`` with its PyTorch name and whether its layout is transposed.

    Works for any npformer model built from ``Linear``, ``Embedding`` and ``LayerNorm``
    parameters; the order is that of ``model.params()``.
    """
    if not isinstance(model, Module):
        raise TypeError(f"parameter_map: model must be an npformer Module, got {type(model).__name__}")
    pairs = []
    for path, module in model.named_modules():
        for name in module._param_names:
            rule = next((rename for (kind, param), rename in _RENAMES.items()
                         if isinstance(module, kind) and param == name), None)
            key = f"{path}.{name}" if path else name
            if rule is None:
                raise ValueError(f"parameter_map: no PyTorch name for {key!r} "
                                 f"(a parameter of {type(module).__name__})")
            torch_name, transposed = rule
            pairs.append(ParameterPair(key, f"{path}.{torch_name}" if path else torch_name, transposed))
    return pairs


def _aliases(model: Module) -> dict[str, str]:
    """PyTorch keys that name the same tensor as another key: ``{alias: source}``. Shared
    embeddings make ``tgt_embed.weight`` the source table; tying makes ``out_proj.weight`` the
    target table (in that order, so that with both, all three are one tensor)."""
    config = getattr(model, "config", None)
    aliases = {}
    if getattr(config, "share_embeddings", False):
        aliases[_SHARED_KEY] = _SHARED_SOURCE
    if getattr(config, "tie_embeddings", False):
        aliases[_TIED_KEY] = _TIED_SOURCE
    return aliases


def to_torch_layout(model: Module, arrays: Mapping[str, Any] | None = None) -> dict[str, numpy.ndarray]:
    """npformer-named host arrays -> PyTorch-named arrays in PyTorch's layouts.

    ``arrays``: keyed like ``model.params()`` (default ``model.state_dict()``; ``model.grads()``
    converts gradients the same way). A ``Linear``'s ``W (d_in, d_out)`` becomes ``weight
    (d_out, d_in)``. With tied embeddings ``out_proj.weight`` is ``tgt_embed.weight`` again, as in
    PyTorch's ``state_dict()``. Each array is a copy.
    """
    arrays = model.state_dict() if arrays is None else arrays
    pairs = parameter_map(model)
    missing = sorted({pair.npformer_key for pair in pairs} - set(arrays))
    if missing:
        raise KeyError(f"to_torch_layout: arrays lack the parameters {missing}")
    out = {}
    for pair in pairs:
        value = backend.to_numpy(arrays[pair.npformer_key])
        out[pair.torch_key] = numpy.array(value.T if pair.transposed else value, order="C")  # a copy
    for alias, source in _aliases(model).items():
        out[alias] = out[source]
    return out


def from_torch_layout(model: Module, torch_arrays: Mapping[str, Any]) -> dict[str, numpy.ndarray]:
    """PyTorch-named arrays -> npformer-named arrays in npformer's layouts (the inverse of
    ``to_torch_layout``), ready for ``model.load_state_dict``.

    Every PyTorch key must be there and no other, except that a tied model's ``out_proj.weight``
    may be present (it must then equal ``tgt_embed.weight``). Raises ``KeyError`` naming the keys.
    """
    pairs = parameter_map(model)
    expected = {pair.torch_key for pair in pairs}
    aliases = _aliases(model)
    missing = sorted(expected - set(torch_arrays))
    unexpected = sorted(set(torch_arrays) - expected - set(aliases))
    if missing or unexpected:
        parts = ([f"missing keys {missing}"] if missing else []) + \
                ([f"unexpected keys {unexpected}"] if unexpected else [])
        raise KeyError(f"from_torch_layout: the PyTorch arrays do not fit this model: {'; '.join(parts)}")
    for alias, source in aliases.items():
        if alias in torch_arrays and source in torch_arrays and not numpy.array_equal(
                numpy.asarray(torch_arrays[alias]), numpy.asarray(torch_arrays[source])):
            raise ValueError(f"from_torch_layout: the model ties its embeddings, but {alias} "
                             f"differs from {source}")
    out = {}
    for pair in pairs:
        value = numpy.asarray(torch_arrays[pair.torch_key])
        out[pair.npformer_key] = numpy.array(value.T if pair.transposed else value, order="C")
    return out


# -- PyTorch: imported only here -----------------------------------------------------------------


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise ImportError("npformer.interop needs PyTorch, which npformer does not install: "
                          "pip install torch") from error
    return torch


def _torch_dtype(torch: Any, dtype: Any) -> Any:
    """A NumPy dtype (or a torch dtype) -> the torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return torch.from_numpy(numpy.zeros(0, dtype=numpy.dtype(dtype))).dtype


def _host_array(tensor: Any) -> numpy.ndarray:
    """A tensor's values as a host NumPy array (float16/32/64 keep their dtype)."""
    tensor = tensor.detach().cpu()
    try:
        return tensor.numpy()
    except TypeError as error:  # bfloat16 and friends have no NumPy dtype
        raise TypeError(f"npformer.interop: cannot read a {tensor.dtype} tensor; convert the PyTorch "
                        f"model to float32 or float64 first") from error


@functools.lru_cache(maxsize=None)
def torch_classes() -> Any:
    """The PyTorch twin's module classes (built once, on the first call, after importing torch).

    ``TorchTransformer(config)`` is the whole network; the blocks mirror npformer's:
    ``TorchAttention`` (``q``, ``k``, ``v``, ``o``), ``TorchFeedForward`` (``fc1``, ``fc2``),
    ``TorchEncoderLayer`` (``self_attn``, ``norm1``, ``ffn``, ``norm2``), ``TorchDecoderLayer``
    (``self_attn``, ``norm1``, ``cross_attn``, ``norm2``, ``ffn``, ``norm3``), ``TorchEncoder`` and
    ``TorchDecoder`` (``layers``, plus ``norm`` when pre-norm).
    """
    torch = _import_torch()
    nn, functional = torch.nn, torch.nn.functional

    def residual(x: Any, sublayer: Any, norm: Any, dropout: Any, pre_norm: bool) -> Any:
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

    return SimpleNamespace(TorchTransformer=TorchTransformer, TorchEncoder=TorchEncoder,
                           TorchDecoder=TorchDecoder, TorchEncoderLayer=TorchEncoderLayer,
                           TorchDecoderLayer=TorchDecoderLayer, TorchAttention=TorchAttention,
                           TorchFeedForward=TorchFeedForward)


def _check_transformer(function: str, model: Any) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"{function}: model must be an npformer Transformer, got {type(model).__name__}")


def to_torch(model: Transformer, dtype: Any = None, device: Any = None) -> Any:
    """A PyTorch twin of ``model`` (a ``torch.nn.Module``) holding copies of its weights.

    ``dtype``: a NumPy or torch float dtype (default: the model's); ``device``: where the twin
    lives (default: the CPU). The twin is in the same mode as ``model`` (``train`` or ``eval``);
    its ``config`` is ``model.config``.
    """
    _check_transformer("to_torch", model)
    torch = _import_torch()
    twin = torch_classes().TorchTransformer(model.config)
    twin = twin.to(dtype=_torch_dtype(torch, model.dtype if dtype is None else dtype), device=device)
    state = {key: torch.from_numpy(value) for key, value in to_torch_layout(model).items()}
    twin.load_state_dict(state)  # strict: every key, every shape; cast to the twin's dtype
    return twin.train(model.training)


def torch_state_arrays(torch_model: Any) -> dict[str, numpy.ndarray]:
    """``torch_model.state_dict()`` as host NumPy arrays (a plain dict of tensors also works)."""
    state = torch_model if isinstance(torch_model, Mapping) else torch_model.state_dict()
    return {key: _host_array(value).copy() for key, value in state.items()}


def load_torch_state(model: Transformer, torch_model: Any) -> Transformer:
    """Copy the weights of ``torch_model`` (a twin, or its ``state_dict()``) into ``model``, in
    place, cast to ``model.dtype``; returns ``model``. Nothing changes unless every key and shape fits."""
    _check_transformer("load_torch_state", model)
    _import_torch()
    arrays = from_torch_layout(model, torch_state_arrays(torch_model))
    model.load_state_dict({key: value.astype(model.dtype, copy=False) for key, value in arrays.items()})
    return model


def from_torch(torch_model: Any, config: TransformerConfig | None = None, dtype: Any = None) -> Transformer:
    """An npformer ``Transformer`` with the weights of ``torch_model``.

    ``config``: the model's ``TransformerConfig`` (default: ``torch_model.config``, which every
    twin made by ``to_torch`` has). ``dtype``: default the PyTorch weights' dtype (float32 or
    float64). The new model is in the same mode as ``torch_model``.
    """
    torch = _import_torch()
    config = config if config is not None else getattr(torch_model, "config", None)
    if not isinstance(config, TransformerConfig):
        raise TypeError("from_torch: config must be the TransformerConfig of the model "
                        f"(torch_model has none), got {type(config).__name__}")
    if dtype is None:
        state = torch_model if isinstance(torch_model, Mapping) else torch_model.state_dict()
        weights_dtype = next(iter(state.values())).dtype
        dtype = {torch.float32: numpy.float32, torch.float64: numpy.float64}.get(weights_dtype)
        if dtype is None:
            raise TypeError(f"from_torch: the PyTorch weights are {weights_dtype}; pass dtype=numpy.float32 "
                            f"or numpy.float64")
    model = load_torch_state(Transformer(config, dtype=dtype), torch_model)
    return model.train(bool(getattr(torch_model, "training", True)))


def grads_from_torch(torch_model: Any, model: Transformer) -> dict[str, numpy.ndarray]:
    """The gradients PyTorch's autograd left in ``torch_model``'s parameters, with ``model``'s keys
    and layouts (comparable with ``model.grads()``); a parameter without ``.grad`` gives zeros.

    A tied weight's gradient holds both uses, the embedding's and the output projection's, in
    both frameworks.
    """
    _check_transformer("grads_from_torch", model)
    torch = _import_torch()
    grads = {name: (parameter.grad if parameter.grad is not None else torch.zeros_like(parameter))
             for name, parameter in torch_model.named_parameters()}  # a tied weight appears once
    return from_torch_layout(model, torch_state_arrays(grads))
