"""Inverted dropout (Srivastava et al., 2014).

Training: each element is kept with probability ``1 - p`` and scaled by
``1 / (1 - p)``, so the expected output equals the input and nothing needs
rescaling at evaluation time::

    keep ~ Bernoulli(1 - p),   out = x * keep / (1 - p)
    dx   = dout * keep / (1 - p)

Evaluation (``training=False``) or ``p = 0``: the identity, ``dx = dout``.

The random mask comes from the ``Generator`` passed in, never from global
state, so a seeded run is reproducible.
"""

from __future__ import annotations

from typing import Any

from ._validate import check_float


def check_dropout_inputs(x: Any, p: float) -> None:
    """The checks of ``x`` and ``p`` in ``dropout_forward``, shared with its GPU twin."""
    check_float("dropout_forward", "x", x)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_forward: p must be a number in [0, 1), got {p!r}")


def dropout_forward(x: Any, p: float, rng: Any, training: bool) -> tuple[Any, dict]:
    """Drop each element of ``x`` (any shape) with probability ``p`` when training.

    Args:
        x: inputs.
        p: drop probability, in ``[0, 1)``.
        rng: a ``Generator`` of the active backend (``npformer.backend.default_rng``);
            unused when not training or when ``p == 0``.
        training: apply dropout (True) or the identity (False).

    Returns:
        ``out`` (the shape of ``x``) and the cache; ``cache["keep_scale"]`` holds
        ``keep / (1 - p)``, or None for the identity.
    """
    check_dropout_inputs(x, p)
    if not training or p == 0:
        return x, {"keep_scale": None}
    if not hasattr(rng, "random"):
        raise TypeError(
            f"dropout_forward: rng must be a random Generator (npformer.backend.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    keep_scale = rng.random(x.shape, dtype=x.dtype) >= p
    keep_scale = keep_scale * x.dtype.type(1.0 / (1.0 - p))
    return x * keep_scale, {"keep_scale": keep_scale}


def dropout_backward(dout: Any, cache: dict) -> Any:
    """``dx = dout * keep / (1 - p)``; ``dout`` itself for the identity."""
    keep_scale = cache["keep_scale"]
    return dout if keep_scale is None else dout * keep_scale
