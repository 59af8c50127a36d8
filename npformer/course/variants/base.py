"""What a variant is, and how its answers come from its forward pass alone.

A ``Variant`` of a derivation is a change a textbook could have made (a temperature, an unbiased
variance, another scale): its ``statement`` in the lesson's notation and its ``forward``, written
with NumPy as the statement reads. Nothing else: no backward pass is written for it anywhere, so
none can leak. The grader gets every answer of a variant from its forward:

- a backward pass: the gradient of ``sum(forward(inputs) * dout)`` with respect to each input, by
  fourth-order central differences in float64 (``gradcheck.numerical_gradient``), taken at two steps:
  an entry where they disagree (next to a kink) is not graded;
- a step of a derivation (``dL/dvar`` of layer norm, ``dL/dS`` of attention): the same for one
  intermediate value. The forward marks each intermediate the derivation names with
  ``node(name, value)``; to differentiate with respect to ``var``, the grader runs the forward
  with ``var`` held in an array of its own, perturbs that array one entry at a time and lets
  everything after it be recomputed, which is exactly what backpropagation's ``dL/dvar`` means
  (the paths through later values included, none through earlier ones);
- a Jacobian (the softmax's, lesson 3): one row per output entry, each by the same differences.

A ``Family`` is the derivation the variants belong to (layer norm): the exercises they change
(its steps and its final backward pass, drawn together, so the steps of one student agree with
their final exercise), the node each step differentiates, and the variants.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy

from ...gradcheck.engine import DEFAULT_EPS, numerical_gradient
from ..exercises.base import Exercise
from . import timed

STEP = DEFAULT_EPS             # the differences' step h (gradcheck's), checked against h / 2
AGREEMENT = 1e-7               # of the largest entry: how close the two must be for an entry to be graded

TEXTBOOK_FORM = "textbook"  # the variant name of the lesson's own form


def keep(name: str, value: numpy.ndarray) -> numpy.ndarray:
    """The ``node`` of an ordinary forward pass: every intermediate value is what it computes."""
    return value


class Held:
    """A ``node`` that holds one intermediate value (``name``) in an array of its own: the first
    forward pass stores what it computed, later passes use the array (perturbed in place by the
    finite differences) and recompute only what comes after it."""

    def __init__(self, name: str):
        self.name = name
        self.value: numpy.ndarray | None = None

    def __call__(self, name: str, value: numpy.ndarray) -> numpy.ndarray:
        if name != self.name:
            return value
        if self.value is None:
            self.value = numpy.array(value, dtype=numpy.float64)
        return self.value


@dataclass(frozen=True)
class Variant:
    """One form of a derivation: ``name`` (``"unbiased"``), ``statement`` (what changes, in the lesson's
    notation), ``forward(*inputs, node=keep)`` (the forward pass as the statement writes it);
    ``forwards``: another forward for an exercise of the family that takes other inputs (SiLU's step
    of the SwiGLU unit), by exercise name."""

    name: str
    statement: str
    forward: Callable
    forwards: dict = field(default_factory=dict)

    def forward_of(self, exercise: str) -> Callable:
        return self.forwards.get(exercise, self.forward)


@dataclass(frozen=True)
class Family:
    """A derivation and its variants. ``exercises``: the graded exercises the variants change, the
    final backward pass last; ``nodes``: for each step, the intermediate it differentiates (an input's
    name for a gradient with respect to that input, ``"jacobian"`` for the Jacobian of a one-vector
    forward; a tuple of names for a step that returns several, in order); ``practice``: steps whose answer no variant changes (``dL/dP = dout v^T`` whatever the
    scores are), checked but worth no points when a class is graded with variants; ``drawn_with``: a
    family whose variant this one takes, variant for variant (the same names)."""

    name: str
    exercises: tuple[str, ...]
    variants: tuple[Variant, ...]
    nodes: dict = field(default_factory=dict)
    practice: tuple[str, ...] = ()
    drawn_with: str = ""  # another family whose draw this one shares (multi-head attention: attention's)

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        known = ", ".join(variant.name for variant in self.variants)
        raise ValueError(f"{self.name} has no variant {name!r} (its variants: {TEXTBOOK_FORM}, {known})")


def _upstream(inputs: dict, forward: Callable) -> tuple[dict, numpy.ndarray]:
    """A backward exercise's inputs split into the forward's inputs and the upstream gradient. A step
    without one (a local derivative, ``d out[b, d] / d x[b, t, d]`` of a forward that maps each column on
    its own) takes ones: the gradient of ``sum(forward(inputs))``."""
    forward_inputs = {key: value for key, value in inputs.items() if key not in ("dout", "dloss")}
    upstream = inputs.get("dout", inputs.get("dloss"))
    if upstream is None:
        upstream = numpy.ones(numpy.shape(forward(*forward_inputs.values())))
    return forward_inputs, numpy.asarray(upstream, dtype=numpy.float64)


def _as_float64(inputs: dict, names) -> dict:
    return {key: numpy.array(value, dtype=numpy.float64) if key in names else value for key, value in inputs.items()}


def _differences(output: Callable, x: numpy.ndarray, dout: numpy.ndarray, trusted: bool) -> numpy.ndarray:
    """Fourth-order differences of ``sum(output() * dout)`` with respect to ``x``: at every entry, or, on
    a timed case, at ``timed.SAMPLED`` entries no student can know (``timed.sampled_entries``).
    ``trusted``: also at half the step, and an entry where the two disagree (an input within a step of
    a kink, ReLU's 0 or a maximum's tie, where the derivative is one-sided) is NaN: the grader cannot
    know its answer there, so it is not graded."""
    entries = timed.sampled_entries(x.size) if timed.in_timed_case() and x.size > timed.SAMPLED else None
    coarse = numerical_gradient(output, x, dout, eps=STEP, entries=entries)
    if not trusted:
        return coarse
    fine = numerical_gradient(output, x, dout, eps=STEP / 2, entries=entries)
    scale = float(numpy.nanmax(numpy.abs(fine), initial=0.0)) or 1.0
    return numpy.where(numpy.abs(coarse - fine) <= AGREEMENT * scale, coarse, numpy.nan)


def input_gradients(forward: Callable, inputs: dict, wrt: tuple[str, ...], trusted: bool = True) -> tuple:
    """The gradient of ``sum(forward(inputs) * dout)`` with respect to each input named in ``wrt``
    (``_differences``: sampled on a timed case; where untrusted, NaN)."""
    forward_inputs, dout = _upstream(inputs, forward)
    arrays = _as_float64(forward_inputs, wrt)
    return tuple(_differences(lambda: numpy.asarray(forward(*arrays.values())), arrays[name], dout, trusted)
                 for name in wrt)


def node_gradient(forward: Callable, inputs: dict, node: str) -> numpy.ndarray:
    """``dL/d node``: the gradient of ``sum(forward(inputs) * dout)`` with respect to the intermediate
    value ``node``, everything after it recomputed (see the module's docstring)."""
    forward_inputs, dout = _upstream(inputs, forward)
    if node in forward_inputs:
        return input_gradients(forward, inputs, (node,))[0]
    held = Held(node)
    forward(*forward_inputs.values(), node=held)
    if held.value is None:
        raise ValueError(f"the forward pass has no node {node!r}")
    return _differences(lambda: numpy.asarray(forward(*forward_inputs.values(), node=held)), held.value, dout, True)


def jacobian(forward: Callable, x: numpy.ndarray) -> numpy.ndarray:
    """``J[i, j] = d forward(x)_i / d x_j`` for one vector ``x``, row by row."""
    x = numpy.array(x, dtype=numpy.float64)
    size = numpy.asarray(forward(x)).size
    return numpy.stack([numerical_gradient(lambda: numpy.asarray(forward(x)), x, numpy.eye(size)[row])
                        for row in range(size)])


def _answers(family: Family, exercise: Exercise, variant: Variant) -> Callable:
    """The reference of ``exercise`` under ``variant``: its answers by finite differences of the
    variant's forward, called with the exercise's own arguments."""
    names = list(inspect.signature(exercise.reference).parameters)
    node = family.nodes.get(exercise.name)
    forward = variant.forward_of(exercise.name)

    def reference(*values):
        inputs = dict(zip(names, values))
        if node == "jacobian":
            return jacobian(forward, inputs["x"])
        if isinstance(node, tuple):
            return tuple(node_gradient(forward, inputs, name) for name in node)
        if node is not None:
            return node_gradient(forward, inputs, node)
        answers = input_gradients(forward, inputs, exercise.wrt)
        return answers if len(answers) > 1 else answers[0]

    reference.__name__ = f"{exercise.name}_{variant.name}_by_finite_differences"
    reference.__signature__ = inspect.signature(exercise.reference)  # the exercise's arguments, by name
    return reference


def varied(family: Family, exercise: Exercise, variant: Variant) -> Exercise:
    """``exercise`` as ``variant`` poses it: its statement added to the signature, its reference the
    finite differences of the variant's forward (so the finite-difference column would only repeat
    it: none is computed), and no named hint (each names a mistake of the textbook's form)."""
    signature = f"{exercise.signature}\n  your variant, {family.name} '{variant.name}': {variant.statement}"
    forward = variant.forward_of(exercise.name) if exercise.forward is not None or family.nodes.get(
        exercise.name) not in (None, "jacobian") else None
    return replace(exercise, signature=signature, reference=_answers(family, exercise, variant), forward=None,
                   hints=(_textbook_hint(exercise, variant),), timed_forward=forward, variant=variant.name)


def _textbook_hint(textbook: Exercise, variant: Variant) -> Callable:
    """The hint for an answer that is the textbook form's, not the variant's."""
    def hint(got, expected, inputs, output):
        answer = textbook.reference(*inputs.values())
        answer = answer[textbook.outputs.index(output)] if len(textbook.outputs) > 1 else answer
        answer = numpy.asarray(answer, dtype=numpy.float64)
        if answer.shape == got.shape and numpy.allclose(got, answer, rtol=1e-7, atol=1e-12):
            return f"this is the textbook form's answer, not your variant's ('{variant.name}': {variant.statement})"
        return ""
    return hint
