"""Check hand-written gradients against central finite differences, in float64.

For an op ``out, cache = forward(*inputs)`` and a random upstream gradient
``dout`` (never all ones: the gradient of ``sum(softmax(x))`` is exactly zero,
so with an all-ones ``dout`` a softmax backward that returns zeros is exactly
right, and the check cannot tell it from a correct one), the scalar we differentiate
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

How the two gradients are compared (the worst relative error of each tensor,
the pass rule, the table) is in ``report.py``.

Use it on any pair of functions, a student's own included::

    from npformer import gradcheck, ops
    report = gradcheck.check_gradients(
        ops.layernorm_forward, my_layernorm_backward,
        {"x": x, "gamma": gamma, "beta": beta}, name="layernorm")
    print(report)            # one row per tensor: shape, worst relative error, pass/fail
"""

from __future__ import annotations

from typing import Any, Callable

import numpy

from .. import backend
from ..backend import xp
from .report import DEFAULT_TOL, GradcheckReport, TensorCheck, _judge

DEFAULT_EPS = 3e-4  # the step h of the fourth-order central difference (see above)


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
    flat = x.reshape(-1)  # a view: the checks pass contiguous float64 copies (as_float64_inputs)

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


# -- what every check does first: float64 copies, a random upstream gradient, a tuple of grads ---


def _is_differentiable(value: Any) -> bool:
    return hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"


def floating_names(inputs: dict[str, Any]) -> list[str]:
    """The names of the floating inputs: those whose gradients are checked, in order."""
    return [key for key, value in inputs.items() if _is_differentiable(value)]


def as_float64_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Floating arrays copied to float64 (the checks perturb the copies); other values unchanged."""
    return {
        key: xp.array(value, dtype=xp.float64, copy=True) if _is_differentiable(value) else value
        for key, value in inputs.items()
    }


def check_rng(seed: int) -> numpy.random.Generator:
    """The generator of a check's upstream gradient (and sampled entries), from ``seed``.

    A stream of its own, never ``default_rng(seed)`` itself: inputs are usually drawn
    from ``default_rng(seed)``, and a ``dout`` equal to the input ``x`` makes the
    linear layer's ``x^T dout`` symmetric, which hides a transposed weight gradient.
    """
    return numpy.random.default_rng([seed, 0x6A7D])


def upstream_gradient(rng: numpy.random.Generator, out: Any) -> Any:
    """A random float64 ``dout`` shaped like ``out`` (never all ones, which tests too little)."""
    return backend.asarray(rng.standard_normal(numpy.shape(out)), dtype=xp.float64)


def as_tuple(grads: Any) -> tuple:
    """A backward's gradients as a tuple: one array (or None) becomes a tuple of one."""
    return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)


def check_gradients(
    forward: Callable,
    backward: Callable,
    inputs: dict[str, Any],
    *,
    name: str = "op",
    seed: int = 0,
    eps: float = DEFAULT_EPS,
    tol: float = DEFAULT_TOL,
    dout: Any = None,
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
        dout: the upstream gradient to use instead of a random one (shaped like the
            output). All ones hides mistakes: see the module's docstring.

    Returns:
        A ``GradcheckReport`` with one row per floating input.
    """
    inputs = as_float64_inputs(inputs)
    wrt_names = floating_names(inputs)
    if not wrt_names:
        raise ValueError(f"check_gradients: inputs of {name!r} has no floating array to check")
    report = GradcheckReport(tol=tol)

    args = list(inputs.values())
    out, cache = forward(*args)
    if dout is None:
        dout = upstream_gradient(check_rng(seed), out)
    else:
        dout = xp.asarray(dout, dtype=xp.float64)
        if tuple(dout.shape) != tuple(numpy.shape(out)):
            raise ValueError(f"check_gradients: dout of {name!r} must have the output's shape "
                             f"{tuple(numpy.shape(out))}, got {tuple(dout.shape)}")
    grads = as_tuple(backward(xp.array(dout, copy=True), cache))

    if len(grads) != len(wrt_names):
        note = f"backward returned {len(grads)} gradient(s), expected {len(wrt_names)}: {wrt_names}"
        report.results += [TensorCheck.failed(name, key, tuple(inputs[key].shape), note) for key in wrt_names]
        return report

    pairs = []
    for key, analytic in zip(wrt_names, grads):
        shape = tuple(inputs[key].shape)
        if analytic is None or tuple(getattr(analytic, "shape", ())) != shape:
            got = None if analytic is None else tuple(getattr(analytic, "shape", ()))
            report.results.append(TensorCheck.failed(name, key, shape, f"gradient has shape {got}, expected {shape}"))
            continue
        numeric = numerical_gradient(lambda: forward(*args)[0], inputs[key], dout, eps)
        pairs.append((key, shape, analytic, numeric, ""))
    report.extend(_judge(name, pairs, tol))
    return report
