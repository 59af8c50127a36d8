"""Seeded parameter initialisation.

Parameters are drawn on the host from a ``numpy.random.Generator`` and then
moved to the active backend, so the same seed gives the same model on NumPy
and on CuPy.

* ``xavier_uniform``: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``
  (Glorot and Bengio, 2010). It keeps the variance of activations and of
  gradients roughly constant through a linear layer, which is what a deep
  stack of projections needs; PyTorch's ``nn.Transformer`` uses it too.
* ``normal``: ``N(0, std^2)``. Embeddings use ``std = d_model^-0.5``: the
  model multiplies them by ``sqrt(d_model)``, so the scaled embedding has
  unit-variance entries, the same scale as the positional encoding added to
  it, and a tied output projection starts with logits of order 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import backend


def xavier_uniform(rng: numpy.random.Generator, fan_in: int, fan_out: int, dtype: Any) -> Any:
    """A ``(fan_in, fan_out)`` matrix from ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return backend.asarray(rng.uniform(-bound, bound, size=(fan_in, fan_out)), dtype=dtype)


def normal(rng: numpy.random.Generator, shape: tuple[int, ...], std: float, dtype: Any) -> Any:
    """An array of ``shape`` from ``N(0, std^2)``."""
    return backend.asarray(rng.normal(0.0, std, size=shape), dtype=dtype)


def zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    return backend.xp.zeros(shape, dtype=dtype)


def ones(shape: tuple[int, ...], dtype: Any) -> Any:
    return backend.xp.ones(shape, dtype=dtype)


def seeded_generators(seed: int) -> tuple[numpy.random.Generator, Any]:
    """Two independent streams from one seed: a host generator for initialisation and a
    backend generator for dropout (so the same seed gives the same model on NumPy and CuPy)."""
    init_seed, dropout_seed = numpy.random.SeedSequence(seed).spawn(2)
    return numpy.random.default_rng(init_seed), backend.default_rng(int(dropout_seed.generate_state(1)[0]))
