"""A student's variants in their op set: the forward ops of their variant-graded exercises run the
variant's forward, so that their backward passes (derived for their variant) are the gradients of
what the model computes, and lesson 27's translator trains on the student's own variants.

``student_ops`` builds each op as for the lesson's form (a forward that keeps the inputs, a backward
that hands them to the student's function); ``with_variants`` then wraps each forward op whose
exercise the student derived in a variant: the output is the variant's forward of the same inputs
(``course.variants``, in NumPy, cast to the model's dtype), the cache the one the backward reads. An
op the exercise does not cover (GELU's tanh form, another epsilon, RoPE's other bases, a loss that
ignores another id) keeps the lesson's forward and backward. Grouped-query attention repeats its
heads inside npformer's op, so a variant of ``repeat_kv_backward`` cannot run there: that exercise
keeps npformer's op, and the report says why.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .. import backend, ops
from ..tokens import PAD_ID
from .variants import FAMILY_OF, TEXTBOOK_FORM


def _linear(a, cache):
    b = a["b"] if a["b"] is not None else backend.xp.zeros(a["W"].shape[1], dtype=a["W"].dtype)
    return a["x"], a["W"], b


def _exact(a, cache):
    return (a["x"],) if a.get("options", {}).get("approximate", "none") == "none" else None


def _layernorm(a, cache):
    return (a["x"], a["gamma"], a["beta"]) if a["eps"] == 1e-5 else None


def _dropout(a, cache):
    return None if cache["keep"] is None else (a["x"], cache["keep"], a["p"])


def _attention(a, cache):
    """A decoding step's queries start at ``ops.query_start()``, not 0: zero queries stand for the rows before
    them, so that a variant reading positions (ALiBi) scores the new rows as training did (``_varied`` keeps the
    last rows of its output; each query's row depends on its own query alone)."""
    q, k, mask = a["q"], a["k"], a["mask"]
    start = ops.query_start()
    if start:
        q = backend.xp.concatenate([backend.xp.zeros(q.shape[:2] + (start,) + q.shape[3:], dtype=q.dtype), q], axis=2)
        if mask is not None and mask.shape[-2] > 1:   # a mask with a row per query: the earlier rows see every key
            earlier = backend.xp.ones(mask.shape[:-2] + (start, mask.shape[-1]), dtype=bool)
            mask = backend.xp.concatenate([earlier, mask], axis=-2)
    shape = (1, 1, q.shape[2], k.shape[2])
    return q, k, a["v"], backend.xp.ones(shape, dtype=bool) if mask is None else mask


def _loss(smoothed):
    def inputs(a, cache):
        ours = a["ignore_index"] == PAD_ID and (a["label_smoothing"] > 0) == smoothed
        return (a["logits"], a["targets"], a["label_smoothing"]) if ours else None
    return inputs


def _rmsnorm(a, cache):
    return (a["x"], a["gamma"]) if a["eps"] == 1e-5 else None


def _rope(a, cache):
    return (a["x"], a["offset"]) if a["base"] == 10000.0 else None


# (forward op, the exercise whose variant it runs, its inputs for the variant's forward from the op's
# arguments by name and its cache: None where the exercise does not cover the call)
FORWARDS: list[tuple[str, str, Callable]] = [
    ("linear_forward", "linear_backward", _linear),
    ("relu_forward", "relu_backward", _exact),
    ("gelu_forward", "gelu_backward", _exact),
    ("layernorm_forward", "layernorm_backward", _layernorm),
    ("embedding_forward", "embedding_backward", lambda a, cache: (a["ids"], a["W"])),
    ("dropout_forward", "dropout_backward", _dropout),
    ("attention_forward", "attention_backward", _attention),
    ("cross_entropy_forward", "cross_entropy_backward", _loss(smoothed=False)),
    ("cross_entropy_forward", "smoothed_cross_entropy_backward", _loss(smoothed=True)),
    ("rmsnorm_forward", "rmsnorm_backward", _rmsnorm),
    ("rope_forward", "rope_backward", _rope),
    ("swiglu_forward", "swiglu_backward", lambda a, cache: (a["x"], a["W_gate"], a["W_up"])),
]
NOT_IN_THE_MODEL = ("repeat_kv_backward",)  # its forward is inside an op that does more


def _varied(op: Callable, choices: list[tuple[Callable, Callable]]) -> Callable:
    """``op`` whose output is, for the first of ``choices`` (a variant's forward, its inputs) that covers
    the call, that forward of the same inputs."""
    signature = inspect.signature(op)

    def varied_forward(*args: Any, **options: Any) -> tuple[Any, dict]:
        out, cache = op(*args, **options)
        bound = signature.bind(*args, **options)
        bound.apply_defaults()
        for forward, inputs in choices:
            chosen = inputs(bound.arguments, cache)
            if chosen is not None:
                host = [backend.to_numpy(value) if hasattr(value, "shape") else value for value in chosen]
                varied = backend.asarray(forward(*host)).astype(out.dtype)
                if varied.shape != out.shape:   # rows before the call's stood in for earlier positions
                    varied = varied[..., -out.shape[-2]:, :]
                return varied, cache
        return out, cache

    return varied_forward


def with_variants(functions: dict[str, Callable], variants: dict[str, str]) -> dict[str, Callable]:
    """``functions`` (an op set) with each forward op of a variant in ``variants`` (exercise -> variant)
    running that variant's forward where the exercise covers the call."""
    choices: dict[str, list] = {}
    for op, exercise, inputs in FORWARDS:
        variant = variants.get(exercise, TEXTBOOK_FORM)
        if op in functions and variant != TEXTBOOK_FORM:
            forward = FAMILY_OF[exercise].variant(variant).forward_of(exercise)
            choices.setdefault(op, []).append((forward, inputs))
    return {op: _varied(function, choices[op]) if op in choices else function for op, function in functions.items()}
