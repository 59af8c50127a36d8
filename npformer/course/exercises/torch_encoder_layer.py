"""Lesson 25: a whole npformer encoder layer's parameters as ``torch.nn.TransformerEncoderLayer`` keeps them.

    to_torch_encoder_layer   the twelve arrays of one post-norm encoder layer (npformer's keys, its layouts)
                             renamed, transposed and stacked into PyTorch's own layer's state dict

The reference reads npformer's own map (``interop.parameter_map``: which arrays are transposed) for every
``Linear`` and ``LayerNorm``, and stacks the attention's q, k, v as ``torch.nn.MultiheadAttention``
does; ``tests/test_interop.py`` loads its output into PyTorch's layer and compares the two layers'
outputs. The student's function returns a dict; ``convert`` turns it into the arrays in
``TORCH_NAMES``' order, and refuses a dict without one of them in one sentence.
"""

from __future__ import annotations

import numpy

from ... import interop, nn
from ..hints import Hint, explains
from .base import Case, Exercise, WrongSolution, normal, size

# torch.nn.TransformerEncoderLayer's parameters, in its state dict's order
TORCH_NAMES = ("self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
               "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
               "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")
# the npformer block each of PyTorch's names (but the stacked in_proj) comes from
_FROM = {"self_attn.out_proj": "self_attn.o", "linear1": "ffn.fc1", "linear2": "ffn.fc2", "norm1": "norm1",
         "norm2": "norm2"}


def _layer(d_model, d_ff):
    return nn.EncoderLayer(d_model, n_heads=1, d_ff=d_ff, activation="relu", rng=numpy.random.default_rng(0),
                           dtype=numpy.float64, dropout=0.0, dropout_rng=numpy.random.default_rng(0),
                           pre_norm=False)


def _to_torch_encoder_layer(params):
    """PyTorch's layer's arrays, from npformer's map of each block (and the q, k, v stacked)."""
    d_model, d_ff = params["ffn.fc1.W"].shape
    layer = _layer(d_model, d_ff)
    torch_arrays = interop.to_torch_layout(layer, params)
    converted = {"self_attn.in_proj_weight": numpy.concatenate(
                     [torch_arrays[f"self_attn.{name}.weight"] for name in "qkv"]),
                 "self_attn.in_proj_bias": numpy.concatenate([torch_arrays[f"self_attn.{name}.bias"] for name in "qkv"])}
    for torch_block, npformer_block in _FROM.items():
        for kind in ("weight", "bias"):
            converted[f"{torch_block}.{kind}"] = torch_arrays[f"{npformer_block}.{kind}"]
    return converted


def _as_arrays(result, inputs):
    """The student's dict as the arrays of ``TORCH_NAMES``, in that order."""
    if not isinstance(result, dict):
        raise TypeError(f"returned {type(result).__name__}, not a dict of PyTorch's names to arrays")
    missing = [name for name in TORCH_NAMES if name not in result]
    if missing:
        raise TypeError(f"the dict has no {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}: "
                        f"torch.nn.TransformerEncoderLayer's state dict holds {len(TORCH_NAMES)} names")
    return tuple(numpy.asarray(result[name], dtype=numpy.float64) for name in TORCH_NAMES)


def _params(rng, d_model, d_ff):
    """Random arrays under an npformer encoder layer's own keys and shapes (``EncoderLayer.params()``)."""
    return {"params": {key: normal(rng, *value.shape) for key, value in _layer(d_model, d_ff).params().items()}}


def _cases(rng):
    return [Case("D=4, d_ff=8", _params(rng, 4, 8)), Case("D=1, d_ff=2: one feature", _params(rng, 1, 2)),
            Case("D=6, d_ff=5: d_ff below D", _params(rng, 6, 5))]


def _unseen(rng):
    d_model, d_ff = size(rng, 2, 7), size(rng, 2, 9)
    return [Case(f"D={d_model}, d_ff={d_ff}", _params(rng, d_model, d_ff))]


def _layout_hint(got, expected, inputs, output):
    """A weight in npformer's layout, or the q, k, v stacked along the wrong axis."""
    if output.endswith("bias") or output.startswith("norm") or got.ndim != 2:
        return ""
    if output == "self_attn.in_proj_weight":
        if got.shape != expected.shape:
            return Hint(f"shape {got.shape}, not (3D, D) = {expected.shape}: the three projections are stacked so "
                        "that x @ in_proj_weight.T gives q, then k, then v along the features",
                        "np.concatenate([Wq.T, Wk.T, Wv.T], axis=0)")
        width = expected.shape[1]
        blocks = [expected[index * width:(index + 1) * width].T for index in range(3)]
        if width > 1 and explains(numpy.concatenate(blocks), got):
            return Hint("each of the three (D, D) blocks equals PyTorch's transposed: a torch Linear keeps one row "
                        "per output feature", "each block is W.T: npformer's W is (d_in, d_out)")
        return ""
    if got.shape == expected.shape[::-1] and got.shape[0] != got.shape[1]:
        return Hint(f"{output} has shape {got.shape}, PyTorch's has {expected.shape}: a torch Linear keeps one row "
                    "per output feature", "weight = W.T: npformer's W is (d_in, d_out)")
    if got.shape[0] == got.shape[1] and got.shape[0] > 1 and explains(expected.T, got):
        return Hint(f"{output} equals PyTorch's transposed: right only where the matrix is symmetric",
                    "weight = W.T: npformer's W is (d_in, d_out), a torch Linear's weight (d_out, d_in)")
    return ""


def _written_map(params, transpose=True, stack_axis=0, linears=("ffn.fc1", "ffn.fc2"), leave_out=()):
    """The map as a student writes it, with NumPy alone (the worker refuses npformer), and its mistakes."""
    def weight(key):
        return params[key].T if transpose else params[key]
    projections = ("self_attn.q", "self_attn.k", "self_attn.v")
    converted = {"self_attn.in_proj_weight": numpy.concatenate([weight(f"{name}.W") for name in projections],
                                                               axis=stack_axis),
                 "self_attn.in_proj_bias": numpy.concatenate([params[f"{name}.b"] for name in projections])}
    for torch_linear, ours in zip(("self_attn.out_proj", "linear1", "linear2"), ("self_attn.o", *linears)):
        converted[f"{torch_linear}.weight"], converted[f"{torch_linear}.bias"] = weight(f"{ours}.W"), params[f"{ours}.b"]
    for norm in ("norm1", "norm2"):
        converted[f"{norm}.weight"], converted[f"{norm}.bias"] = params[f"{norm}.gamma"], params[f"{norm}.beta"]
    return {name: value for name, value in converted.items() if name not in leave_out}


EXERCISES = [
    Exercise("to_torch_encoder_layer", "to_torch_encoder_layer(params) -> dict: torch.nn.TransformerEncoderLayer's "
             "state dict (PyTorch's 12 names -> arrays) of one post-norm npformer encoder layer", "25",
             _to_torch_encoder_layer, _cases, TORCH_NAMES, hints=(_layout_hint,), convert=_as_arrays,
             unseen=_unseen),
]

WRONG_SOLUTIONS = [
    WrongSolution("to_torch_encoder_layer", "npformer's W kept, not transposed",
                  lambda params: _written_map(params, transpose=False), "one row per output feature"),
    WrongSolution("to_torch_encoder_layer", "q, k, v side by side (D, 3D)",
                  lambda params: _written_map(params, stack_axis=1), "not (3D, D)"),
    WrongSolution("to_torch_encoder_layer", "linear1 and linear2 swapped",
                  lambda params: _written_map(params, linears=("ffn.fc2", "ffn.fc1"))),
    WrongSolution("to_torch_encoder_layer", "a name left out",
                  lambda params: _written_map(params, leave_out=("norm2.bias",)), "the dict has no norm2.bias"),
]
