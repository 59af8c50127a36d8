"""The weight layout map between npformer and PyTorch, in NumPy alone (no PyTorch needed).

``parameter_map(model)`` pairs every npformer key with the twin's key and says whether the array is
transposed (a ``Linear`` weight: npformer's ``W (d_in, d_out)`` is PyTorch's ``weight.T``);
``to_torch_layout`` and ``from_torch_layout`` move a whole set of arrays across.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import numpy

from .. import backend
from ..nn import Embedding, LayerNorm, Linear, Module


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
