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
from .arguments import (check_callable, check_fits, check_float64, check_inputs, check_int, check_number, check_shape,
                        check_type, received)
from .report import DEFAULT_TOL, GradcheckReport, TensorCheck, judge

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

    Checked first: ``output`` is a function of no arguments, ``x`` a writable float64 array
    (a view is perturbed where it lies, e.g. a column block of a fused weight), ``eps`` a number
    > 0, ``entries`` flat indices inside ``x``; and, at the first difference (the output's shape
    is known only then), that ``dout`` has the output's shape.
    """
    _check_numerical_gradient(output, x, eps, entries)

    def output_with(i: int, step: float) -> Any:
        index = numpy.unravel_index(i, x.shape)  # the i-th element in reading order
        original = x[index].copy()
        x[index] = original + step
        out = xp.array(output(), copy=True)  # copy: the output may alias x
        x[index] = original
        return out

    def central_difference(i: int, step: float) -> float:
        change = output_with(i, step) - output_with(i, -step)
        check_shape("numerical_gradient", "dout", dout, change.shape, "the shape of output()")
        return float(xp.sum(change * dout)) / (2.0 * step)

    grad = numpy.full(x.size, numpy.nan)
    for i in range(x.size) if entries is None else entries:
        grad[i] = (4.0 * central_difference(i, eps) - central_difference(i, 2.0 * eps)) / 3.0
    return grad.reshape(x.shape)


def _check_numerical_gradient(output: Any, x: Any, eps: Any, entries: Any) -> None:
    check_callable("numerical_gradient", "output", output)
    check_fits("numerical_gradient", "output", output, [])
    check_float64("numerical_gradient", "x", x)
    check_number("numerical_gradient", "eps", eps)
    if entries is None:
        return
    indices = numpy.asarray(entries)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise TypeError(f"numerical_gradient: entries must be a 1-D sequence of int flat indices, "
                        f"got {received(indices)}")
    if indices.size and not (indices.min() >= 0 and indices.max() < x.size):
        raise ValueError(f"numerical_gradient: entries must lie in [0, x.size = {x.size}), "
                         f"got values in [{indices.min()}, {indices.max()}]")


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

    Checked before any work: ``forward`` and ``backward`` are functions, ``forward`` takes the
    inputs in order (their number, and each name is the parameter in its place, unless
    ``forward`` takes ``*args``) and ``backward`` takes ``(dout, cache)``; ``inputs`` is a dict
    with a floating array; ``name`` a str, ``seed`` an int >= 0, ``eps`` and ``tol`` numbers > 0.
    Then, after the first forward call, that it returned ``(out, cache)`` and that ``dout`` has
    the shape of ``out``.
    """
    _check_gradients_arguments(forward, backward, inputs, name, seed, eps, tol)
    inputs = as_float64_inputs(inputs)
    wrt_names = floating_names(inputs)
    if not wrt_names:
        raise ValueError(f"check_gradients: inputs of {name!r} must hold a floating array to check, "
                         f"got {', '.join(f'{k}: {received(v)}' for k, v in inputs.items())}")
    report = GradcheckReport(tol=tol)

    args = list(inputs.values())
    out, cache = _out_and_cache(forward(*args))
    if dout is None:
        dout = upstream_gradient(check_rng(seed), out)
    else:
        dout = xp.asarray(dout, dtype=xp.float64)
        check_shape("check_gradients", "dout", dout, numpy.shape(out), f"the output shape of {name!r}")
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
    report.extend(judge(name, pairs, tol))
    return report


def _check_gradients_arguments(forward: Any, backward: Any, inputs: Any, name: Any, seed: Any, eps: Any,
                               tol: Any) -> None:
    """The checks ``check_gradients`` makes before any work (see its docstring)."""
    check_callable("check_gradients", "forward", forward)
    check_callable("check_gradients", "backward", backward)
    check_inputs("check_gradients", "inputs", inputs)
    check_fits("check_gradients", "inputs", forward, list(inputs))
    check_fits("check_gradients", "backward", backward, ["dout", "cache"], match_names=False)
    check_type("check_gradients", "name", name, str, "a str")
    check_int("check_gradients", "seed", seed)
    check_number("check_gradients", "eps", eps)
    check_number("check_gradients", "tol", tol)


def _out_and_cache(result: Any) -> tuple[Any, Any]:
    """A forward's ``(out, cache)``; a TypeError naming ``forward`` when it returned something else."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"check_gradients: forward must return a pair (out, cache), got {received(result)}")
    return result
