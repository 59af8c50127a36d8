"""The bridge to PyTorch: build the twin, copy weights both ways, read autograd's gradients.

PyTorch is imported only when one of these functions is called, with a one-line hint when it is
missing; the twin's classes live in ``interop.twin``.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any, Mapping

import numpy

from ..models import Transformer, TransformerConfig
from .layout import from_torch_layout, to_torch_layout


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
    """The PyTorch twin's module classes (``interop.twin``, imported on the first call, after torch):
    ``TorchTransformer(config)`` is the whole network; ``TorchEncoder``, ``TorchDecoder``,
    ``TorchEncoderLayer``, ``TorchDecoderLayer``, ``TorchAttention`` and ``TorchFeedForward`` its blocks."""
    _import_torch()
    from . import twin

    return SimpleNamespace(TorchTransformer=twin.TorchTransformer, TorchEncoder=twin.TorchEncoder,
                           TorchDecoder=twin.TorchDecoder, TorchEncoderLayer=twin.TorchEncoderLayer,
                           TorchDecoderLayer=twin.TorchDecoderLayer, TorchAttention=twin.TorchAttention,
                           TorchFeedForward=twin.TorchFeedForward)


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
