"""The checks the mutants face: ``run_check`` runs the one a mutant's ``check`` field names.

The op checks come from ``gradcheck.cases``; the blocks' are the small float64 ``MODULE_CASES``, the
model's ``check_model`` on the tiny Transformer (sampled, ``MODEL_ENTRIES`` per tensor); ``check_adam``
compares three Adam steps with the closed-form update.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy

from ... import backend, nn, ops, optim
from ...tokens import PAD_ID
from ..cases import check_op
from ..modules import check_model, check_module
from ..report import DEFAULT_TOL, GradcheckReport, judge


def _module_inputs(rng: numpy.random.Generator, batch: int, length: int, d_model: int) -> Any:
    return rng.standard_normal((batch, length, d_model))


def _padding(batch: int, length: int) -> Any:
    ids = numpy.ones((batch, length), dtype=numpy.int64)
    ids[-1, length // 2:] = PAD_ID  # the last sequence is half padding
    return backend.asarray(ids)


def _self_attention_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.SelfAttention(8, 2, rng=rng, dtype=numpy.float64)
    mask = ops.padding_mask(_padding(2, 4)) & ops.causal_mask(4)
    return module, {"x": _module_inputs(rng, 2, 4, 8), "mask": mask}


def _cross_attention_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.MultiHeadAttention(8, 2, rng=rng, dtype=numpy.float64)
    return module, {"query": _module_inputs(rng, 2, 3, 8), "memory": _module_inputs(rng, 2, 4, 8),
                    "mask": ops.padding_mask(_padding(2, 4))}


def _feedforward_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.FeedForward(6, 10, activation="gelu", rng=rng, dtype=numpy.float64)
    return module, {"x": _module_inputs(rng, 2, 3, 6)}


def _encoder_layer_case(seed: int, pre_norm: bool = False) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.EncoderLayer(8, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                             activation="gelu", rng=rng, dtype=numpy.float64)
    return module, {"x": _module_inputs(rng, 2, 4, 8), "mask": ops.padding_mask(_padding(2, 4))}


MODULE_CASES: dict[str, Callable[[int], tuple[nn.Module, dict]]] = {
    "self_attention": _self_attention_case,
    "cross_attention": _cross_attention_case,
    "feedforward": _feedforward_case,
    "encoder_layer": _encoder_layer_case,
    "encoder_layer_pre": lambda seed: _encoder_layer_case(seed, pre_norm=True),
}

_OP_VARIANTS = {"linear_square": ("linear", {"d_in": 4, "d_out": 4})}  # a transposed dW keeps its shape
_MODEL_OPTIONS = {"pre": {"norm": "pre"}, "tied": {"tie_embeddings": True}, "gelu": {"activation": "gelu"}}


def check_adam(seed: int = 0, steps: int = 3, tol: float = DEFAULT_TOL) -> GradcheckReport:
    """``steps`` updates of ``optim.Adam`` against the closed-form update with bias correction, in float64.

    The row compares the total change of the weights, so that the error is relative to the update.
    """
    rng = numpy.random.default_rng(seed)
    layer = nn.Linear(4, 3, rng=rng, dtype=numpy.float64, bias=False)
    adam = optim.Adam(layer, lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    start = backend.to_numpy(layer.W).copy()
    expected, m, v = start.copy(), numpy.zeros_like(start), numpy.zeros_like(start)
    for step in range(1, steps + 1):
        grad = rng.standard_normal(start.shape)
        layer.grad["W"][...] = backend.asarray(grad)
        adam.step()
        m = 0.9 * m + 0.1 * grad
        v = 0.98 * v + 0.02 * grad * grad
        expected -= 1e-2 * (m / (1 - 0.9**step)) / (numpy.sqrt(v / (1 - 0.98**step)) + 1e-9)
    change = backend.to_numpy(layer.W) - start
    return judge("adam", [(f"W change over {steps} steps", tuple(start.shape), change, expected - start, "")], tol)


MODEL_ENTRIES = 3  # entries per tensor in the model check of a mutant: all 88 tensors in about 2.5 s (8 named the
# same tensors and caught the same model mutants in three times the time)


def run_check(check: str, seed: int = 0, directions: int | None = None) -> GradcheckReport:
    """The check named by a mutant's ``check`` field (see the package's docstring).

    The model check samples ``MODEL_ENTRIES`` entries of every tensor (all of them would
    take 30 s per mutant); ``directions`` switches blocks and models to the fast check.
    """
    kind, _, option = check.partition(":")
    if kind == "op":
        name, sizes = _OP_VARIANTS.get(option, (option, {}))
        return check_op(name, seed=seed, **sizes)
    if kind == "module":
        module, inputs = MODULE_CASES[option](seed)
        return check_module(module, inputs, name=option, seed=seed, directions=directions)
    if kind == "model":
        entries = None if directions else MODEL_ENTRIES
        return check_model(seed=seed, directions=directions, max_entries=entries, **_MODEL_OPTIONS.get(option, {}))
    if kind == "optimizer":
        return check_adam(seed)
    raise ValueError(f"run_check: unknown check {check!r}")
