"""The exercise of lesson 14's KV-cached decoding step: ``cached_attention_step``.

One decoding step of a cached self-attention: the new position's query ``q`` (length 1), its key
``k_new`` and value ``v_new``, and the caches of the earlier positions' keys and values, each
``(B, H, T, Dh)``. The step appends the new key and value at the end of the caches (axis 2), then
attends over every position so far, the new one included; it returns the output and the grown
caches. The reference appends with ``numpy.concatenate`` and attends with ``ops.attention_forward``;
npformer's own decoding step, ``nn.SelfAttention.forward_step``, does the same in preallocated
buffers. The cases include the first step, an empty cache.
"""

from __future__ import annotations

import numpy

from ... import ops
from .base import Case, Exercise, WrongSolution, normal, size

# -- the KV-cached step ---------------------------------------------------------------------------------

def _cached_attention_step(q, k_new, v_new, k_cache, v_cache):
    k_cache = numpy.concatenate([k_cache, k_new], axis=2)
    v_cache = numpy.concatenate([v_cache, v_new], axis=2)
    return ops.attention_forward(q, k_cache, v_cache, None)[0], k_cache, v_cache


def _step_inputs(rng, batch, heads, cached, head_dim):
    return {"q": normal(rng, batch, heads, 1, head_dim), "k_new": normal(rng, batch, heads, 1, head_dim),
            "v_new": normal(rng, batch, heads, 1, head_dim), "k_cache": normal(rng, batch, heads, cached, head_dim),
            "v_cache": normal(rng, batch, heads, cached, head_dim)}


def _cached_step_cases(rng):
    return [Case("B=2, H=2, 3 cached positions, Dh=4", _step_inputs(rng, 2, 2, 3, 4)),
            Case("the first step: an empty cache (B=1, H=2, 0 positions)", _step_inputs(rng, 1, 2, 0, 3)),
            Case("B=1, H=1, 1 cached position, Dh=2", _step_inputs(rng, 1, 1, 1, 2)),
            Case("B=3, H=1, 5 cached positions, Dh=1", _step_inputs(rng, 3, 1, 5, 1))]


def _unseen_cached_step(rng):
    batch, heads, cached, head_dim = size(rng, 1, 3), size(rng, 1, 4), size(rng, 0, 6), size(rng, 1, 5)
    return [Case(f"B={batch}, H={heads}, {cached} cached positions, Dh={head_dim}",
                 _step_inputs(rng, batch, heads, cached, head_dim))]


def _cached_step_hint(got, expected, inputs, output):
    """A property the answer breaks (which keys ``out`` saw, the scores' scale, the caches' order and
    length), never the fix: the step is posed as a question."""
    q, k_new, v_new, k_cache, v_cache = (inputs[key] for key in ("q", "k_new", "v_new", "k_cache", "v_cache"))
    if output == "out":
        cached_only = ops.attention_forward(q, k_cache, v_cache, None)[0] if k_cache.shape[2] else None
        if cached_only is not None and numpy.allclose(got, cached_only, rtol=1e-9, atol=1e-12):
            return ("out is attention over the cached positions only: causal attention over the whole prefix "
                    "gives another row at position t (which keys does its mask let q_t see?)")
        keys, values = numpy.concatenate([k_cache, k_new], 2), numpy.concatenate([v_cache, v_new], 2)
        scores = q @ keys.swapaxes(-1, -2)
        weights = numpy.exp(scores - scores.max(-1, keepdims=True))
        unscaled = weights / weights.sum(-1, keepdims=True) @ values
        if q.shape[-1] > 1 and numpy.allclose(got, unscaled, rtol=1e-9, atol=1e-12):
            return "out passes only where Dh = 1: your scores are sqrt(Dh) times lesson 7's"
        return ""
    cache = k_cache if output == "k_cache" else v_cache
    new = k_new if output == "k_cache" else v_new
    if cache.shape[2] and got.shape == expected.shape and numpy.array_equal(got, numpy.concatenate([new, cache], 2)):
        return (f"{output}'s positions are out of order: position t is in row 0 of axis 2, where position 0 "
                "belongs")
    if got.shape == cache.shape:
        return (f"{output} comes back with the t positions it came in with: the next step needs t + 1, "
                f"{expected.shape}")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("cached_attention_step",
             "cached_attention_step(q, k_new, v_new, k_cache, v_cache) -> (out, k_cache, v_cache)", "14",
             _cached_attention_step, _cached_step_cases, ("out", "k_cache", "v_cache"), hints=(_cached_step_hint,),
             one_token=("q", "k_new", "v_new"), unseen=_unseen_cached_step),
]

# What the grader shows once the step passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "cached_attention_step": ("K = concatenate([k_cache, k_new], axis=2), V likewise (position t last); "
                              "out = softmax(q K^T / sqrt(Dh)) V over all t + 1 positions, no mask: the cache holds "
                              "only what the causal mask lets position t see, and an earlier position's key and "
                              "value depend on positions up to it only, so they never change"),
}


# -- the mistakes students make -------------------------------------------------------------------------

def _step_without_new(q, k_new, v_new, k_cache, v_cache):
    scores = q @ k_cache.swapaxes(-1, -2) / numpy.sqrt(q.shape[-1])
    weights = numpy.exp(scores - scores.max(-1, keepdims=True))
    out = weights / weights.sum(-1, keepdims=True) @ v_cache
    return out, numpy.concatenate([k_cache, k_new], 2), numpy.concatenate([v_cache, v_new], 2)


def _step(q, keys, values, scale=True):
    scores = q @ keys.swapaxes(-1, -2) / (numpy.sqrt(q.shape[-1]) if scale else 1.0)
    weights = numpy.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ values


def _step_prepended(q, k_new, v_new, k_cache, v_cache):
    keys, values = numpy.concatenate([k_new, k_cache], 2), numpy.concatenate([v_new, v_cache], 2)
    return _step(q, keys, values), keys, values


def _step_unscaled(q, k_new, v_new, k_cache, v_cache):
    keys, values = numpy.concatenate([k_cache, k_new], 2), numpy.concatenate([v_cache, v_new], 2)
    return _step(q, keys, values, scale=False), keys, values


def _step_cache_not_grown(q, k_new, v_new, k_cache, v_cache):
    keys, values = numpy.concatenate([k_cache, k_new], 2), numpy.concatenate([v_cache, v_new], 2)
    return _step(q, keys, values), k_cache, v_cache


def _lazy_step(q, k_new, v_new, k_cache, v_cache):
    keys, values = numpy.concatenate([k_cache, k_new], 2), numpy.concatenate([v_cache, v_new], 2)
    return ops.attention_forward(q, keys, values, None)[0], keys, values


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("cached_attention_step", "attends before appending the new position", _step_without_new,
                  "cached positions only"),
    WrongSolution("cached_attention_step", "the new position prepended", _step_prepended, "out of order"),
    WrongSolution("cached_attention_step", "no 1/sqrt(d_head) scale", _step_unscaled, "sqrt(Dh) times"),
    WrongSolution("cached_attention_step", "the caches returned unchanged", _step_cache_not_grown,
                  "the next step needs"),
    WrongSolution("cached_attention_step", "npformer's attention_forward", _lazy_step, "npformer's own"),
]
