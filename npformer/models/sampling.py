"""Sampling a continuation one token at a time: what every decoder-only model's ``generate`` shares.

The model supplies ``step(token, position) -> logits (V,)``, one KV-cached step; this module checks the
arguments, feeds the prompt, and draws each new token from ``softmax(logits / temperature)``
restricted to the ``top_k`` most probable tokens, with the caller's seeded generator.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy

from .. import backend, ops


def check_sampling(owner: str, prompt_ids: list[int], temperature: float, top_k: int | None) -> None:
    if not prompt_ids:
        raise ValueError(f"{owner}: prompt_ids must hold at least one token, got none")
    if top_k is not None and top_k < 1:
        raise ValueError(f"{owner}: top_k must be >= 1 or None, got {top_k}")
    if not temperature > 0:
        raise ValueError(f"{owner}: temperature must be > 0, got {temperature}")


def sample_tokens(step: Callable[[int, int], Any], prompt_ids: list[int], total: int, rng: Any,
                  temperature: float, top_k: int | None, stop_id: int | None) -> list[int]:
    """The tokens after ``prompt_ids`` until ``total`` tokens in all or ``stop_id``.

    ``step(token, position)`` runs one position through the model on its cache and returns the
    logits of the next token; the prompt's positions are run too (filling the cache), their logits unused.
    """
    tokens = list(prompt_ids)
    for position in range(total - 1):
        logits = step(tokens[position], position)
        if position + 1 < len(tokens):
            continue  # still reading the prompt
        logits = backend.to_numpy(logits).astype(float) / temperature
        if top_k is not None and top_k < len(logits):
            logits[numpy.argsort(logits)[:-top_k]] = -numpy.inf
        probs = backend.to_numpy(ops.softmax_forward(backend.asarray(logits))[0])
        token = int(rng.choice(len(probs), p=probs))
        tokens.append(token)
        if token == stop_id:
            break
    return tokens[len(prompt_ids):]
