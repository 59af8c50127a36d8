"""The SwiGLU gate (Shazeer, 2020, "GLU variants improve Transformer"), elementwise.

The feed-forward block of LLaMA-style models projects ``x`` twice, to a gate ``a = x W_gate`` and a
linear branch ``b = x W_up``, and multiplies them after passing the gate through SiLU (also called
Swish, Ramachandran et al., 2017)::

    sigmoid(a) = 1 / (1 + exp(-a))
    silu(a)    = a * sigmoid(a)
    y          = silu(a) * b

This op is that product; the three matrix products around it are ordinary linear layers
(``nn.SwiGLUFeedForward``).

Backward. ``y`` is a product, so each factor's gradient is ``dy`` times the other; SiLU's
derivative is the product rule on ``a * sigmoid(a)`` with ``sigmoid' = sigmoid (1 - sigmoid)``::

    db = dy * silu(a)
    da = dy * b * silu'(a),   silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a)))
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_same_dtype


def sigmoid(a: Any) -> Any:
    """``1 / (1 + exp(-a))`` from ``e = exp(-|a|) <= 1``: never overflows, never cancels."""
    e = xp.exp(-xp.abs(a))
    return xp.where(a >= 0, 1.0, e) / (1.0 + e)


def swiglu_forward(gate: Any, up: Any) -> tuple[Any, dict]:
    """``silu(gate) * up``, elementwise.

    Args:
        gate: the gate's pre-activation ``a``, any shape (``(B, T, F)`` in the block).
        up: the linear branch ``b``, the shape of ``gate``.

    Returns:
        ``y`` (the shape of ``gate``) and the cache for ``swiglu_backward``.
    """
    op = "swiglu_forward"
    check_float(op, "gate", gate)
    check_float(op, "up", up)
    if tuple(gate.shape) != tuple(up.shape):
        raise ValueError(f"{op}: up must have the shape of gate {tuple(gate.shape)}, got {tuple(up.shape)}")
    check_same_dtype(op, ("gate", "up"), (gate, up))
    sig = sigmoid(gate)                                  # (..., F)
    silu = gate * sig                                    # (..., F)
    return silu * up, {"gate": gate, "up": up, "sigmoid": sig, "silu": silu}


def swiglu_backward(dy: Any, cache: dict) -> tuple[Any, Any]:
    """Gradients ``(d_gate, d_up)`` of ``swiglu_forward``."""
    gate, up, sig, silu = cache["gate"], cache["up"], cache["sigmoid"], cache["silu"]
    d_up = dy * silu                                             # (..., F)
    d_gate = dy * up * sig * (1.0 + gate * (1.0 - sig))          # (..., F)
    return d_gate, d_up
