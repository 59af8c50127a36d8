"""Check whole blocks and models: their input gradients and every parameter gradient.

``check_module`` runs a module's ``forward`` and hand-written ``backward`` and
compares the input gradients and ``module.grads()`` with finite differences,
replaying active dropout exactly. ``check_loss`` checks a model through the
cross-entropy of its logits; ``check_model`` does it for a tiny float64
Transformer (``TINY_MODEL``, built by ``model_case``), as the command
``npformer gradcheck --model`` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy

from .. import backend, nn, ops
from ..backend import xp
from ..models import Transformer, TransformerConfig
from ..models.checks import check_probability
from ..tokens import BOS_ID, EOS_ID, PAD_ID
from .arguments import (check_callable, check_fits, check_inputs, check_int, check_known, check_number,
                        check_type, received)
from .cases import padded_ids
from .engine import (DEFAULT_EPS, as_float64_inputs, as_tuple, check_rng, floating_names, numerical_gradient,
                     upstream_gradient)
from .report import DEFAULT_TOL, GradcheckReport, judge


def _dropout_generators(module: nn.Module) -> list:
    """The generators of the dropout layers that are active (training, p > 0)."""
    generators = {}
    for _, sub in module.named_modules():
        if isinstance(sub, nn.Dropout) and sub.training and sub.p > 0:
            if not hasattr(getattr(sub.rng, "bit_generator", None), "state"):
                raise TypeError(
                    "check_module: active dropout needs a generator whose state can be restored "
                    "(numpy.random.Generator); call module.eval() or use dropout=0"
                )
            generators[id(sub.rng)] = sub.rng
    return list(generators.values())


def _replaying_dropout(module: nn.Module, forward: Callable, args: list) -> Callable[[], Any]:
    """``forward(*args)`` as a function of nothing that drops the same units on every call.

    Each active dropout generator's state is saved now and restored before every call.
    """
    generators = _dropout_generators(module)
    snapshot = [generator.bit_generator.state for generator in generators]

    def output() -> Any:
        for generator, state in zip(generators, snapshot):
            generator.bit_generator.state = state
        return forward(*args)

    return output


def check_module(
    module: nn.Module,
    inputs: dict[str, Any],
    *,
    forward: Callable | None = None,
    backward: Callable | None = None,
    name: str | None = None,
    seed: int = 0,
    eps: float = DEFAULT_EPS,
    tol: float = DEFAULT_TOL,
    max_entries: int | None = None,
    directions: int | None = None,
) -> GradcheckReport:
    """Check a module's input gradients and every parameter gradient against finite differences.

    Args:
        module: built in float64 (``dtype=numpy.float64``).
        inputs: argument name -> value for ``forward``. Floating arrays are copied to
            float64 and their gradients checked; other values pass through.
        forward: ``forward(*inputs.values()) -> out``; default ``module.forward``.
        backward: ``backward(dout) -> input gradients`` (one per floating input: a
            tuple, one array, or None when there are none); default ``module.backward``.
            It must add the parameter gradients into ``module.grads()``.
        name: the module's name in the report.
        seed: seeds the upstream gradient and the choice of entries.
        eps, tol: as in ``check_gradients``.
        max_entries: check at most this many (random) entries of each tensor; None = all.
        directions: the fast check. Instead of one finite difference per entry, compare
            ``u . grad`` with the finite difference of the loss along ``u`` for this many
            random unit directions ``u`` per tensor: four forward passes per direction,
            whatever the tensor's size. A gradient wrong by a fraction ``f`` of its norm
            shifts ``u . grad`` by about ``f`` of its typical size, so the same tolerance
            applies; it cannot say which entry is wrong, only which tensor.

    Active dropout is allowed: each generator's state is restored before every
    forward call, so every call drops the same units.

    Checked before any work: ``module`` is an ``nn.Module`` with float64 parameters; ``inputs``
    a dict that ``forward`` takes in order, each name the parameter in its place; ``forward`` and
    ``backward`` functions (``backward`` taking ``dout``); ``name`` a str or None; ``seed`` an int
    >= 0; ``eps`` and ``tol`` numbers > 0; ``max_entries`` and ``directions`` ints >= 1 or None.
    """
    _check_module_arguments(module, inputs, forward, backward, name, seed, eps, tol, max_entries, directions)
    name = name or type(module).__name__
    inputs = as_float64_inputs(inputs)
    backward = backward or module.backward
    output = _replaying_dropout(module, forward or module.forward, list(inputs.values()))

    rng = check_rng(seed)
    dout = upstream_gradient(rng, output())
    module.zero_grad()
    input_grads = backward(xp.array(dout, copy=True))
    input_grads = () if input_grads is None else as_tuple(input_grads)
    param_grads = {key: xp.array(grad, copy=True) for key, grad in module.grads().items()}

    input_names = floating_names(inputs)
    if len(input_grads) != len(input_names):
        raise ValueError(
            f"check_module: backward returned {len(input_grads)} input gradient(s), "
            f"expected {len(input_names)} for {input_names}"
        )
    tensors = [(key, inputs[key], grad) for key, grad in zip(input_names, input_grads)]
    tensors += [(key, value, param_grads[key]) for key, value in module.params().items()]
    pairs = []
    for key, value, analytic in tensors:
        if directions is not None:
            along, numeric = _directional_derivatives(output, value, dout, analytic, rng, directions, eps)
            pairs.append((key, tuple(value.shape), along, numeric, ""))
            continue
        entries = None
        if max_entries is not None and value.size > max_entries:
            entries = numpy.sort(rng.choice(value.size, size=max_entries, replace=False))
        numeric = numerical_gradient(output, value, dout, eps, entries)
        note = "" if entries is None else f"{len(entries)} of {value.size} entries"
        pairs.append((key, tuple(value.shape), analytic, numeric, note))
    report = judge(name, pairs, tol)
    if directions is not None:
        report.method = f"{directions} random direction{'s' if directions > 1 else ''} per tensor"
    return report


def _check_module_arguments(module: Any, inputs: Any, forward: Any, backward: Any, name: Any, seed: Any, eps: Any,
                            tol: Any, max_entries: Any, directions: Any) -> None:
    """The checks ``check_module`` makes before any work (see its docstring)."""
    check_type("check_module", "module", module, nn.Module, "an npformer.nn.Module")
    for key, value in module.params().items():
        if value.dtype != numpy.float64:
            raise TypeError(f"check_module: module's parameters must be float64 (build the module with "
                            f"dtype=numpy.float64), got {key} of dtype {value.dtype}")
    check_inputs("check_module", "inputs", inputs)
    for argument, function in (("forward", forward), ("backward", backward)):
        if function is not None:
            check_callable("check_module", argument, function)
    check_fits("check_module", "inputs", forward or module.forward, list(inputs))
    check_fits("check_module", "backward", backward or module.backward, ["dout"], match_names=False)
    if name is not None:
        check_type("check_module", "name", name, str, "a str or None")
    check_int("check_module", "seed", seed)
    check_number("check_module", "eps", eps)
    check_number("check_module", "tol", tol)
    check_int("check_module", "max_entries", max_entries, low=1, optional=True)
    check_int("check_module", "directions", directions, low=1, optional=True)


def _directional_derivatives(output: Callable[[], Any], value: Any, dout: Any, analytic: Any,
                             rng: numpy.random.Generator, directions: int, eps: float) -> tuple[Any, Any]:
    """``u . analytic`` and the fourth-order finite difference of ``sum(output() * dout)`` along ``u``,
    for ``directions`` random unit vectors ``u`` shaped like ``value`` (perturbed in place, restored)."""
    original = xp.array(value, copy=True)
    along, numeric = numpy.zeros(directions), numpy.zeros(directions)
    for index in range(directions):
        direction = backend.asarray(rng.standard_normal(value.shape), dtype=value.dtype)
        direction /= float(xp.sqrt(xp.sum(direction * direction)))

        def moved(step: float) -> Any:
            value[...] = original + step * direction
            out = xp.array(output(), copy=True)
            value[...] = original
            return out

        def central(step: float) -> float:
            return float(xp.sum((moved(step) - moved(-step)) * dout)) / (2.0 * step)

        along[index] = float(xp.sum(analytic * direction))
        numeric[index] = (4.0 * central(eps) - central(2.0 * eps)) / 3.0
    return along, numeric


TINY_MODEL = dict(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                  max_len=16, dropout=0.1, label_smoothing=0.1)


def model_case(seed: int = 0, batch: int = 2, src_len: int = 5, tgt_len: int = 4, **config: Any):
    """A tiny float64 Transformer in training mode, with padded source and target batches.

    Returns ``(model, src_ids, tgt_in_ids, tgt_out_ids)``; ``config`` overrides ``TINY_MODEL``.
    The last target sequence is one token shorter (padded), so padding is exercised.

    Checked first: ``seed`` an int >= 0, the sizes ints >= 1, every key of ``config`` a field
    of ``TransformerConfig`` (whose own checks then judge the values).
    """
    check_int("model_case", "seed", seed)
    for size, value in (("batch", batch), ("src_len", src_len), ("tgt_len", tgt_len)):
        check_int("model_case", size, value, low=1)
    _check_config("model_case", config)
    options = {**TINY_MODEL, **config}
    model = Transformer(TransformerConfig(**options), seed=seed, dtype=numpy.float64)
    rng = numpy.random.default_rng(seed)
    src = padded_ids(rng, batch, src_len, options["src_vocab"], fully_padded_row=False)
    tgt = rng.integers(4, options["tgt_vocab"], size=(batch, tgt_len + 1))
    tgt[:, 0] = BOS_ID
    tgt[-1, -1] = PAD_ID
    tgt[-1, -2] = EOS_ID
    return model, backend.asarray(src), backend.asarray(tgt[:, :-1]), backend.asarray(tgt[:, 1:])


def _check_config(function: str, config: dict, sizes: tuple[str, ...] = ()) -> None:
    """Every key of ``config`` must be a field of ``TransformerConfig`` (or one of ``sizes``)."""
    known = [field.name for field in dataclasses.fields(TransformerConfig)] + list(sizes)
    for key in config:
        check_known(function, "each keyword of config", key, known, error=TypeError)


def check_loss(model: nn.Module, inputs: dict[str, Any], targets: Any, *, ignore_index: int | None = PAD_ID,
               label_smoothing: float = 0.0, name: str | None = None, seed: int = 0, tol: float = DEFAULT_TOL,
               max_entries: int | None = None, directions: int | None = None) -> GradcheckReport:
    """Check every parameter of ``model`` (and its floating inputs) through the loss of its logits.

    The scalar checked is ``ops.cross_entropy_forward(model.forward(*inputs.values()), targets,
    ignore_index, label_smoothing)``; its backward is ``model.backward(ops.cross_entropy_backward(...))``,
    which returns the gradients of the floating inputs (if any).

    Checked before any work: ``model`` is an ``nn.Module`` whose ``forward`` takes ``inputs`` in
    order, ``targets`` an integer array, ``ignore_index`` an int or None, ``label_smoothing`` in
    [0, 1); the rest as in ``check_module``.
    """
    check_type("check_loss", "model", model, nn.Module, "an npformer.nn.Module")
    check_inputs("check_loss", "inputs", inputs)
    check_fits("check_loss", "inputs", model.forward, list(inputs))
    if getattr(getattr(targets, "dtype", None), "kind", "") not in ("i", "u"):
        raise TypeError(f"check_loss: targets must be an integer array of class ids, got {received(targets)}")
    if ignore_index is not None:
        check_type("check_loss", "ignore_index", ignore_index, (int, numpy.integer), "an int or None")
    check_probability("check_loss", "label_smoothing", label_smoothing)
    last = {}

    def loss(*args: Any) -> Any:
        value, last["cache"] = ops.current().cross_entropy_forward(model.forward(*args), targets, ignore_index=ignore_index,
                                                         label_smoothing=label_smoothing)
        return value

    def backward(dloss: Any) -> Any:
        return model.backward(ops.current().cross_entropy_backward(dloss, last["cache"]))

    return check_module(model, inputs, forward=loss, backward=backward, name=name or type(model).__name__,
                        seed=seed, tol=tol, max_entries=max_entries, directions=directions)


def check_model(seed: int = 0, max_entries: int | None = None, tol: float = DEFAULT_TOL,
                directions: int | None = None, **config: Any) -> GradcheckReport:
    """Finite-difference check of every parameter of a tiny Transformer through its loss.

    ``config`` overrides ``TINY_MODEL`` (e.g. ``norm="pre"``, ``tie_embeddings=True``,
    ``activation="gelu"``, ``dropout=0.0``, or the paper's base sizes with the fast
    check, ``directions=1``; see ``check_module``). The model runs the active op set
    (``ops.using``); its packed layout (``forward(..., only_at=...)``) is shown equal to it by
    ``tests/test_fastpath.py``.

    Checked before any work: every key of ``config`` a field of
    ``TransformerConfig`` or a size of ``model_case``; the rest as in ``check_module``.
    """
    check_int("check_model", "max_entries", max_entries, low=1, optional=True)
    check_int("check_model", "directions", directions, low=1, optional=True)
    check_number("check_model", "tol", tol)
    _check_config("check_model", config, sizes=("batch", "src_len", "tgt_len"))
    model, src, tgt_in, tgt_out = model_case(seed, **config)
    return check_loss(model, {"src_ids": src, "tgt_in_ids": tgt_in}, tgt_out,
                      label_smoothing=model.config.label_smoothing, name="transformer", seed=seed, tol=tol,
                      max_entries=max_entries, directions=directions)
