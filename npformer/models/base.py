"""What every whole network does first: keep its configuration and dtype, and seed its generators."""

from __future__ import annotations

from typing import Any

import numpy

from ..backend import get_default_dtype
from ..nn import Module, init


def start_model(model: Module, config: Any, seed: int, dtype: Any) -> numpy.random.Generator:
    """Set ``model.config``, ``model.dtype`` (the backend default unless given) and
    ``model.dropout_rng``; return the generator that initialises the parameters.

    Both generators come from ``seed`` (``init.seeded_generators``), so a model is a
    function of its configuration and seed alone.
    """
    model.config = config
    model.dtype = numpy.dtype(dtype or get_default_dtype())
    rng, model.dropout_rng = init.seeded_generators(seed)
    return rng
