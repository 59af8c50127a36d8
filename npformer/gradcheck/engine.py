"""Check hand-written gradients against central finite differences, in float64.

For an op ``out, cache = forward(*inputs)`` and a random upstream gradient
``dout`` (never all ones: an all-ones ``dout`` hides mistakes, e.g. the
gradient of ``sum(softmax(x))`` is exactly zero), the scalar we differentiate
is ``L(inputs) = sum(out * dout)``. Its exact gradient is what
``backward(dout, cache)`` should return. For each input element ``x_i`` the
central difference with step ``h`` is::

    D(h) = sum((forward(x_i + h) - forward(x_i - h)) * dout) / (2 h)

Its error is ``O(h^2)`` from truncation plus about ``1e-16 * |out| / h`` from
rounding. We combine two of them by Richardson extrapolation, which cancels
the ``h^2`` term and leaves a fourth-order central difference::

    dL/dx_i ~= (4 D(h) - D(2h)) / 3,   h = 3e-4

Its truncation error is ``O(h^4)``, so the step can be larger and the rounding
noise smaller: the absolute error is near 1e-12, against near 1e-10 for
``D(1e-5)`` alone. (``h = 3e-4`` balances the two also for strongly curved
inputs, such as a layer-norm row of three nearly equal values.) That matters because the pass test is
relative: a true gradient entry of 1e-6 (common next to entries of 1; a
near-one-hot attention row gives them) must still agree to 1e-6. The
difference of outputs is taken before the sum, so outputs that do not depend
on ``x_i`` cancel exactly and add no noise.

The error of one tensor is its worst entry::

    rel_error = max_i |a_i - n_i| / max(|a_i| + |n_i|, 1e-12)

and an entry passes below ``tol = 1e-6``, or when ``|a_i - n_i|`` is at most
``1e-9`` of the largest gradient entry of the check, below which float64
finite differences cannot resolve anything. Only entries far smaller than
the rest need that: an entry of 1e-8 next to entries of 1 (a cancellation),
or attention's key bias, whose true gradient is exactly zero. The report
counts them in its note. A wrong gradient is off by a fraction of the
gradient itself and still fails.

Use it on any pair of functions, a student's own included::

    from npformer import gradcheck, ops
    report = gradcheck.check_gradients(
        ops.layernorm_forward, my_layernorm_backward,
        {"x": x, "gamma": gamma, "beta": beta}, name="layernorm")
    print(report)            # one row per tensor: shape, worst relative error, pass/fail

``check_all_ops()`` runs the check over every op of ``npformer.ops``; the
command ``npformer gradcheck`` prints that table and exits 1 on a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy

from .. import backend, nn, ops
from ..models import Transformer, TransformerConfig
from ..tokens import BOS_ID, EOS_ID, PAD_ID
from ..backend import xp

DEFAULT_EPS = 3e-4  # the step h of the fourth-order central difference (see above)
DEFAULT_TOL = 1e-6
_DENOMINATOR_FLOOR = 1e-12
RESOLUTION = 1e-9  # |a - n| below RESOLUTION * (largest gradient entry) is beyond finite differences


@dataclass
class TensorCheck:
    """The outcome for one input tensor of one op."""

    op: str
    tensor: str
    shape: tuple
    max_rel_error: float
    passed: bool
    worst_index: tuple | None = None
    note: str = ""


@dataclass(repr=False)
class GradcheckReport:
    """Every tensor checked, with a readable table (``str(report)``)."""

    results: list[TensorCheck] = field(default_factory=list)
    tol: float = DEFAULT_TOL

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(result.passed for result in self.results)

    @property
    def failures(self) -> list[TensorCheck]:
        return [result for result in self.results if not result.passed]

    def extend(self, other: "GradcheckReport") -> None:
        self.results.extend(other.results)

    def table(self) -> str:
        header = ("op", "tensor", "shape", "max rel error", "result")
        rows = [
            (
                r.op,
                r.tensor,
                str(r.shape),
                f"{r.max_rel_error:.2e}",
                ("pass" if r.passed else "FAIL") + (f" ({r.note})" if r.note else ""),
            )
            for r in self.results
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
        lines = []
        for row in [header, tuple("-" * w for w in widths) + ("------",), *rows]:
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            lines.append("  ".join(cells + [row[-1]]))
        n_failed = len(self.failures)
        verdict = "all passed" if self.passed else f"{n_failed} FAILED"
        lines.append(f"{len(self.results)} tensors checked, tolerance {self.tol:.0e}: {verdict}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__  # assertion messages and notebooks show the table


def relative_error(analytic: Any, numeric: Any) -> tuple[float, tuple | None]:
    """Worst elementwise ``|a - n| / max(|a| + |n|, 1e-12)`` and where it occurs.

    Entries where ``numeric`` is NaN were not computed and are skipped; a NaN in
    ``analytic`` counts as an infinite error.
    """
    analytic = backend.to_numpy(analytic).astype(numpy.float64)
    numeric = backend.to_numpy(numeric).astype(numpy.float64)
    checked = ~numpy.isnan(numeric)
    if not checked.any():
        return 0.0, None
    errors = numpy.abs(analytic - numeric) / numpy.maximum(
        numpy.abs(analytic) + numpy.abs(numeric), _DENOMINATOR_FLOOR
    )
    errors = numpy.where(numpy.isnan(errors), numpy.inf, errors)  # a NaN gradient never passes
    errors[~checked] = -1.0
    worst = int(numpy.argmax(errors))
    where = tuple(int(i) for i in numpy.unravel_index(worst, errors.shape))
    return float(errors.reshape(-1)[worst]), where


def numerical_gradient(
    output: Callable[[], Any], x: Any, dout: Any, eps: float = DEFAULT_EPS, entries: Any = None
) -> numpy.ndarray:
    """Fourth-order central difference of ``sum(output() * dout)`` with respect to ``x``.

    ``output()`` recomputes the output from the current value of ``x``, which is
    perturbed in place one element at a time and restored. The estimate is
    ``(4 D(h) - D(2h)) / 3`` with ``D(h)`` the plain central difference and
    ``h = eps``. ``entries`` (flat indices) limits the work to some elements;
    the others are left as NaN.
    """
    flat = x.reshape(-1)  # a view: check_gradients and check_module work on contiguous arrays

    def output_with(i: int, step: float) -> Any:
        original = flat[i].copy()
        flat[i] = original + step
        out = xp.array(output(), copy=True)  # copy: the output may alias x
        flat[i] = original
        return out

    def central_difference(i: int, step: float) -> float:
        change = output_with(i, step) - output_with(i, -step)
        return float(xp.sum(change * dout)) / (2.0 * step)

    grad = numpy.full(x.size, numpy.nan)
    for i in range(x.size) if entries is None else entries:
        grad[i] = (4.0 * central_difference(i, eps) - central_difference(i, 2.0 * eps)) / 3.0
    return grad.reshape(x.shape)


def _judge(op: str, pairs: list[tuple[str, tuple, Any, Any, str]], tol: float) -> GradcheckReport:
    """Report rows for ``(tensor, shape, analytic, numeric, note)`` pairs checked together.

    An entry passes when its relative error is below ``tol``, or when
    ``|a - n| <= RESOLUTION * G`` with ``G`` the largest numeric gradient entry of
    the whole check: below that, float64 finite differences cannot tell values
    apart. Only entries far smaller than the rest need it, such as an entry of
    1e-8 next to entries of 1 (a cancellation), or attention's key bias, whose
    true gradient is exactly zero (softmax ignores a shift shared by a whole row
    of scores). The note counts them. A wrong gradient is off by a fraction of
    the gradient itself, far above the resolution, and still fails.
    """
    hosts = [(backend.to_numpy(a).astype(numpy.float64), n) for _, _, a, n, _ in pairs]
    largest = max((float(numpy.nanmax(numpy.abs(n), initial=0.0)) for _, n in hosts), default=0.0)
    resolution = RESOLUTION * largest
    report = GradcheckReport(tol=tol)
    for (tensor, shape, analytic, numeric, note), (host_a, _) in zip(pairs, hosts):
        error, worst = relative_error(analytic, numeric)
        checked = ~numpy.isnan(numeric)
        difference = numpy.abs(host_a - numeric)
        relative = difference / numpy.maximum(numpy.abs(host_a) + numpy.abs(numeric), _DENOMINATOR_FLOOR)
        within_tol = relative < tol
        within_resolution = difference <= resolution
        passed = bool(numpy.all((within_tol | within_resolution)[checked]))
        unresolved = int(numpy.sum((within_resolution & ~within_tol)[checked]))
        if unresolved:
            note = ", ".join(filter(None, [note, f"{unresolved} entries within resolution {resolution:.0e}"]))
        report.results.append(TensorCheck(op, tensor, shape, error, passed, worst, note))
    return report


def _is_differentiable(value: Any) -> bool:
    return hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"


def check_gradients(
    forward: Callable,
    backward: Callable,
    inputs: dict[str, Any],
    *,
    name: str = "op",
    seed: int = 0,
    eps: float = DEFAULT_EPS,
    tol: float = DEFAULT_TOL,
) -> GradcheckReport:
    """Compare ``backward`` with finite differences of ``forward`` for each floating input.

    Args:
        forward: ``forward(*inputs.values()) -> (out, cache)``. Wrap extra arguments
            (a dropout probability, a fresh seeded generator) in a closure.
        backward: ``backward(dout, cache) -> grads``: one gradient per floating
            input, in order (a tuple, or one array when there is one).
        inputs: argument name -> value, in the order ``forward`` takes them.
            Floating arrays are copied to float64 and differentiated; anything
            else (token ids, masks, None) is passed through unchanged.
        name: the op's name in the report.
        seed: seeds the random upstream gradient.
        eps: finite-difference step.
        tol: pass threshold on the worst relative error.

    Returns:
        A ``GradcheckReport`` with one row per floating input.
    """
    inputs = {
        key: xp.array(value, dtype=xp.float64, copy=True) if _is_differentiable(value) else value
        for key, value in inputs.items()
    }
    wrt_names = [key for key, value in inputs.items() if _is_differentiable(value)]
    if not wrt_names:
        raise ValueError(f"check_gradients: inputs of {name!r} has no floating array to check")
    report = GradcheckReport(tol=tol)

    out, cache = forward(*inputs.values())
    rng = numpy.random.default_rng(seed)
    dout = backend.asarray(rng.standard_normal(numpy.shape(out)), dtype=xp.float64)
    grads = backward(xp.array(dout, copy=True), cache)
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)

    if len(grads) != len(wrt_names):
        note = f"backward returned {len(grads)} gradient(s), expected {len(wrt_names)}: {wrt_names}"
        for key in wrt_names:
            report.results.append(
                TensorCheck(name, key, tuple(inputs[key].shape), float("inf"), False, None, note)
            )
        return report

    pairs = []
    for key, analytic in zip(wrt_names, grads):
        shape = tuple(inputs[key].shape)
        if analytic is None or tuple(getattr(analytic, "shape", ())) != shape:
            got = None if analytic is None else tuple(getattr(analytic, "shape", ()))
            note = f"gradient has shape {got}, expected {shape}"
            report.results.append(TensorCheck(name, key, shape, float("inf"), False, None, note))
            continue
        args = list(inputs.values())
        numeric = numerical_gradient(lambda: forward(*args)[0], inputs[key], dout, eps)
        pairs.append((key, shape, analytic, numeric, ""))
    report.extend(_judge(name, pairs, tol))
    return report


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

    Active dropout is allowed: each generator's state is restored before every
    forward call, so every call drops the same units.
    """
    name = name or type(module).__name__
    for key, value in module.params().items():
        if value.dtype != numpy.float64:
            raise TypeError(
                f"check_module: parameters must be float64 (build the module with "
                f"dtype=numpy.float64), got {key} of dtype {value.dtype}"
            )
    inputs = {
        key: xp.array(value, dtype=xp.float64, copy=True) if _is_differentiable(value) else value
        for key, value in inputs.items()
    }
    forward = forward or module.forward
    backward = backward or module.backward
    args = list(inputs.values())
    generators = _dropout_generators(module)
    snapshot = [generator.bit_generator.state for generator in generators]

    def output() -> Any:
        for generator, state in zip(generators, snapshot):
            generator.bit_generator.state = state
        return forward(*args)

    rng = numpy.random.default_rng(seed)
    out = output()
    dout = backend.asarray(rng.standard_normal(numpy.shape(out)), dtype=xp.float64)
    module.zero_grad()
    input_grads = backward(xp.array(dout, copy=True))
    if input_grads is None:
        input_grads = ()
    elif not isinstance(input_grads, (tuple, list)):
        input_grads = (input_grads,)
    param_grads = {key: xp.array(grad, copy=True) for key, grad in module.grads().items()}

    input_names = [key for key, value in inputs.items() if _is_differentiable(value)]
    if len(input_grads) != len(input_names):
        raise ValueError(
            f"check_module: backward returned {len(input_grads)} input gradient(s), "
            f"expected {len(input_names)} for {input_names}"
        )
    tensors = [(key, inputs[key], grad) for key, grad in zip(input_names, input_grads)]
    tensors += [(key, value, param_grads[key]) for key, value in module.params().items()]
    pairs = []
    for key, value, analytic in tensors:
        entries = None
        if max_entries is not None and value.size > max_entries:
            entries = numpy.sort(rng.choice(value.size, size=max_entries, replace=False))
        numeric = numerical_gradient(output, value, dout, eps, entries)
        note = "" if entries is None else f"{len(entries)} of {value.size} entries"
        pairs.append((key, tuple(value.shape), analytic, numeric, note))
    report = _judge(name, pairs, tol)
    return report


TINY_MODEL = dict(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                  max_len=16, dropout=0.1, label_smoothing=0.1)


def model_case(seed: int = 0, batch: int = 2, src_len: int = 5, tgt_len: int = 4, **config: Any):
    """A tiny float64 Transformer in training mode, with padded source and target batches.

    Returns ``(model, src_ids, tgt_in_ids, tgt_out_ids)``; ``config`` overrides ``TINY_MODEL``.
    The last target sequence is one token shorter (padded), so padding is exercised.
    """
    options = {**TINY_MODEL, **config}
    model = Transformer(TransformerConfig(**options), seed=seed, dtype=numpy.float64)
    rng = numpy.random.default_rng(seed)
    src = _padded_ids(rng, batch, src_len, options["src_vocab"], fully_padded_row=False)
    tgt = rng.integers(4, options["tgt_vocab"], size=(batch, tgt_len + 1))
    tgt[:, 0] = BOS_ID
    tgt[-1, -1] = PAD_ID
    tgt[-1, -2] = EOS_ID
    return model, backend.asarray(src), backend.asarray(tgt[:, :-1]), backend.asarray(tgt[:, 1:])


def check_loss(model: nn.Module, inputs: dict[str, Any], targets: Any, *, ignore_index: int | None = PAD_ID,
               label_smoothing: float = 0.0, name: str | None = None, seed: int = 0, tol: float = DEFAULT_TOL,
               max_entries: int | None = None) -> GradcheckReport:
    """Check every parameter of ``model`` (and its floating inputs) through the loss of its logits.

    The scalar checked is ``ops.cross_entropy_forward(model.forward(*inputs.values()), targets,
    ignore_index, label_smoothing)``; its backward is ``model.backward(ops.cross_entropy_backward(...))``,
    which returns the gradients of the floating inputs (if any).
    """
    last = {}

    def loss(*args: Any) -> Any:
        value, last["cache"] = ops.cross_entropy_forward(model.forward(*args), targets, ignore_index=ignore_index,
                                                         label_smoothing=label_smoothing)
        return value

    def backward(dloss: Any) -> Any:
        return model.backward(ops.cross_entropy_backward(dloss, last["cache"]))

    return check_module(model, inputs, forward=loss, backward=backward, name=name or type(model).__name__,
                        seed=seed, tol=tol, max_entries=max_entries)


def check_model(seed: int = 0, max_entries: int | None = None, tol: float = DEFAULT_TOL,
                **config: Any) -> GradcheckReport:
    """Finite-difference check of every parameter of a tiny Transformer through its loss.

    ``config`` overrides ``TINY_MODEL`` (e.g. ``norm="pre"``, ``tie_embeddings=True``,
    ``activation="gelu"``, ``dropout=0.0``).
    """
    model, src, tgt_in, tgt_out = model_case(seed, **config)
    return check_loss(model, {"src_ids": src, "tgt_in_ids": tgt_in}, tgt_out,
                      label_smoothing=model.config.label_smoothing, name="transformer", seed=seed, tol=tol,
                      max_entries=max_entries)


# ---------------------------------------------------------------------------
# Every op of npformer.ops, with inputs that exercise it. Sizes are keyword
# arguments so that tests can draw them (hypothesis) and the command can use
# the defaults. Each builder returns (forward, backward, inputs).
# ---------------------------------------------------------------------------


def _away_from_zero(values: numpy.ndarray, margin: float = 0.05) -> numpy.ndarray:
    """Push values at least ``margin`` from 0, so no finite difference straddles ReLU's kink."""
    return values + numpy.where(values >= 0, margin, -margin)


def _padded_ids(rng: numpy.random.Generator, batch: int, length: int, vocab: int,
                fully_padded_row: bool) -> numpy.ndarray:
    """Token ids in ``[1, vocab)`` followed by padding (0); the last row all padding if asked."""
    lengths = rng.integers(1, length + 1, size=batch)
    ids = rng.integers(1, vocab, size=(batch, length))
    ids[numpy.arange(length)[None, :] >= lengths[:, None]] = 0
    if fully_padded_row:
        ids[-1] = 0
    return ids


def linear_case(rng, batch=2, length=3, d_in=4, d_out=5):
    inputs = {
        "x": rng.standard_normal((batch, length, d_in)),
        "W": rng.standard_normal((d_in, d_out)),
        "b": rng.standard_normal(d_out),
    }
    return ops.linear_forward, ops.linear_backward, inputs


def relu_case(rng, batch=2, length=3, width=5):
    inputs = {"x": _away_from_zero(rng.standard_normal((batch, length, width)))}
    return ops.relu_forward, ops.relu_backward, inputs


def gelu_case(rng, batch=2, length=3, width=5, approximate="none"):
    def forward(x):
        return ops.gelu_forward(x, approximate=approximate)

    inputs = {"x": 2.0 * rng.standard_normal((batch, length, width))}
    return forward, ops.gelu_backward, inputs


def softmax_case(rng, batch=2, length=3, width=5, axis=-1):
    def forward(x):
        return ops.softmax_forward(x, axis=axis)

    inputs = {"x": 2.0 * rng.standard_normal((batch, length, width))}
    return forward, ops.softmax_backward, inputs


def layernorm_case(rng, batch=2, length=3, d_model=6, eps=1e-5):
    def forward(x, gamma, beta):
        return ops.layernorm_forward(x, gamma, beta, eps=eps)

    inputs = {
        "x": 1.0 + 2.0 * rng.standard_normal((batch, length, d_model)),
        "gamma": 1.0 + 0.5 * rng.standard_normal(d_model),
        "beta": rng.standard_normal(d_model),
    }
    return forward, ops.layernorm_backward, inputs


def embedding_case(rng, batch=2, length=4, vocab=7, d_model=5):
    inputs = {
        "ids": rng.integers(0, vocab, size=(batch, length)),
        "W": rng.standard_normal((vocab, d_model)),
    }
    return ops.embedding_forward, ops.embedding_backward, inputs


def attention_case(rng, batch=2, heads=2, q_len=4, k_len=4, head_dim=3, causal=True,
                   fully_padded_row=True):
    """Self-attention shapes with key padding (and the look-ahead mask when ``q_len == k_len``)."""
    key_ids = _padded_ids(rng, batch, k_len, vocab=9, fully_padded_row=fully_padded_row)
    mask = ops.padding_mask(backend.asarray(key_ids))
    if causal and q_len == k_len:
        mask = mask & ops.causal_mask(q_len)

    def forward(q, k, v):
        return ops.attention_forward(q, k, v, mask)

    inputs = {
        "q": rng.standard_normal((batch, heads, q_len, head_dim)),
        "k": rng.standard_normal((batch, heads, k_len, head_dim)),
        "v": rng.standard_normal((batch, heads, k_len, head_dim)),
    }
    return forward, ops.attention_backward, inputs


def dropout_case(rng, batch=2, length=3, width=5, p=0.3, training=True, mask_seed=7):
    def forward(x):
        # A fresh generator with the same seed per call: every call drops the same elements.
        return ops.dropout_forward(x, p, backend.default_rng(mask_seed), training)

    inputs = {"x": rng.standard_normal((batch, length, width))}
    return forward, ops.dropout_backward, inputs


def cross_entropy_case(rng, batch=2, length=3, vocab=6, label_smoothing=0.1,
                       fully_padded_row=True):
    targets = _padded_ids(rng, batch, length, vocab, fully_padded_row=fully_padded_row)

    def forward(logits):
        return ops.cross_entropy_forward(
            logits, backend.asarray(targets), ignore_index=0, label_smoothing=label_smoothing
        )

    inputs = {"logits": 2.0 * rng.standard_normal((batch, length, vocab))}
    return forward, ops.cross_entropy_backward, inputs


def pooling_case(rng, batch=3, length=5, width=4, kind="mean", fully_padded_row=True):
    mask = backend.asarray(_padded_ids(rng, batch, length, 9, fully_padded_row) != 0)
    forward_op, backward_op = {
        "mean": (ops.masked_mean_pool_forward, ops.masked_mean_pool_backward),
        "max": (ops.masked_max_pool_forward, ops.masked_max_pool_backward),
    }[kind]

    def forward(x):
        return forward_op(x, mask)

    # distinct values, far apart: no two candidates for a maximum within a finite-difference step
    values = rng.permutation(batch * length * width).reshape(batch, length, width) * 0.1
    return forward, backward_op, {"x": values + 0.01 * rng.standard_normal(values.shape)}


def patches_case(rng, batch=2, channels=1, size=4, patch=2):
    def forward(images):
        return ops.patches_forward(images, patch)

    return forward, ops.patches_backward, {"images": rng.standard_normal((batch, channels, size, size))}


OP_CASES: dict[str, Callable] = {
    "linear": linear_case,
    "relu": relu_case,
    "gelu": gelu_case,
    "gelu_tanh": partial(gelu_case, approximate="tanh"),
    "softmax": softmax_case,
    "layernorm": layernorm_case,
    "embedding": embedding_case,
    "attention": attention_case,
    "cross_attention": partial(attention_case, q_len=3, k_len=5, causal=False),
    "dropout": dropout_case,
    "cross_entropy": cross_entropy_case,
    "masked_mean_pool": pooling_case,
    "masked_max_pool": partial(pooling_case, kind="max"),
    "patches": patches_case,
}


def _to_backend(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: backend.asarray(v) if isinstance(v, numpy.ndarray) else v for k, v in inputs.items()}


def check_op(name: str, seed: int = 0, tol: float = DEFAULT_TOL, **sizes: Any) -> GradcheckReport:
    """Check one op of ``OP_CASES`` by name; ``sizes`` override its default shapes."""
    if name not in OP_CASES:
        raise ValueError(f"check_op: name must be one of {sorted(OP_CASES)}, got {name!r}")
    forward, backward, inputs = OP_CASES[name](numpy.random.default_rng(seed), **sizes)
    return check_gradients(forward, backward, _to_backend(inputs), name=name, seed=seed, tol=tol)


def check_all_ops(seed: int = 0, names: list[str] | None = None,
                  tol: float = DEFAULT_TOL) -> GradcheckReport:
    """Check every op (or those named) and gather one report."""
    report = GradcheckReport(tol=tol)
    for name in names or list(OP_CASES):
        report.extend(check_op(name, seed=seed, tol=tol))
    return report


def check_exercise(name: str, student_backward: Callable, seed: int = 0,
                   tol: float = DEFAULT_TOL, **sizes: Any) -> GradcheckReport:
    """Check a student's own backward pass for the op ``name`` of ``OP_CASES``.

    Two rows per input tensor: the student's gradient against npformer's
    reference backward (``vs reference``), and against finite differences
    (``vs finite differences``). Example, in a lesson::

        def my_layernorm_backward(dy, cache): ...
        print(gradcheck.check_exercise("layernorm", my_layernorm_backward))
    """
    if name not in OP_CASES:
        raise ValueError(f"check_exercise: name must be one of {sorted(OP_CASES)}, got {name!r}")
    forward, reference_backward, inputs = OP_CASES[name](numpy.random.default_rng(seed), **sizes)
    inputs = _to_backend(inputs)
    report = check_gradients(forward, student_backward, inputs, name=f"{name} vs finite differences",
                             seed=seed, tol=tol)
    floating = {k: xp.array(v, dtype=xp.float64) for k, v in inputs.items() if _is_differentiable(v)}
    args = [floating.get(k, v) for k, v in inputs.items()]
    dout = backend.asarray(numpy.random.default_rng(seed).standard_normal(
        numpy.shape(forward(*args)[0])), dtype=xp.float64)
    as_tuple = lambda grads: grads if isinstance(grads, (tuple, list)) else (grads,)  # noqa: E731
    reference = as_tuple(reference_backward(xp.array(dout, copy=True), forward(*args)[1]))
    student = as_tuple(student_backward(xp.array(dout, copy=True), forward(*args)[1]))
    pairs = []
    for key, expected, got in zip(floating, reference, student):
        if got is None or tuple(got.shape) != tuple(expected.shape):
            report.results.append(TensorCheck(f"{name} vs reference", key, tuple(expected.shape),
                                              float("inf"), False, None, "wrong shape or missing"))
            continue
        pairs.append((key, tuple(expected.shape), got, backend.to_numpy(expected).astype(numpy.float64), ""))
    report.extend(_judge(f"{name} vs reference", pairs, tol))
    return report
