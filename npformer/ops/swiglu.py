"""The SwiGLU unit (Shazeer, 2020, "GLU variants improve Transformer").

The feed-forward block of LLaMA-style models projects ``x`` twice, to a gate ``a = x W_gate`` and a
linear branch ``b = x W_up``, and multiplies them after passing the gate through SiLU (also called
Swish, Ramachandran et al., 2017)::

    a          = x @ W_gate                (..., F)
    b          = x @ W_up                  (..., F)
    sigmoid(a) = 1 / (1 + exp(-a))
    silu(a)    = a * sigmoid(a)
    y          = silu(a) * b               (..., F)

with ``x (..., D)`` and ``W_gate, W_up (D, F)``. The block projects ``y`` back with a third matrix,
an ordinary linear layer (``nn.SwiGLUFeedForward``).

Backward. ``y`` is a product, so each factor's gradient is ``dy`` times the other; SiLU's
derivative is the product rule on ``a * sigmoid(a)`` with ``sigmoid' = sigmoid (1 - sigmoid)``;
then both products go back as lesson 2's linear layer, and ``x``, which feeds both, sums the two::

    db = dy * silu(a)
    da = dy * b * silu'(a),   silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a)))
    dW_gate = x^T da,   dW_up = x^T db        (summed over every row)
    dx = da @ W_gate^T + db @ W_up^T
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_min_ndim, check_ndim, check_same_dtype


def sigmoid(a: Any) -> Any:
    """``1 / (1 + exp(-a))`` from ``e = exp(-|a|) <= 1``: never overflows, never cancels."""
    e = xp.exp(-xp.abs(a))
    return xp.where(a >= 0, 1.0, e) / (1.0 + e)


def check_swiglu_inputs(x: Any, W_gate: Any, W_up: Any) -> None:
    """The checks of ``swiglu_forward``."""
    op = "swiglu_forward"
    for name, value in (("x", x), ("W_gate", W_gate), ("W_up", W_up)):
        check_float(op, name, value)
    check_min_ndim(op, "x", x, 1, "(..., D)")
    check_ndim(op, "W_gate", W_gate, 2, "(D, F)")
    if W_gate.shape[0] != x.shape[-1] or tuple(W_up.shape) != tuple(W_gate.shape):
        raise ValueError(f"{op}: W_gate and W_up must both have shape (D, F) with D = {x.shape[-1]} (x {tuple(x.shape)}), "
                         f"got {tuple(W_gate.shape)} and {tuple(W_up.shape)}")
    check_same_dtype(op, ("x", "W_gate", "W_up"), (x, W_gate, W_up))


def swiglu_forward(x: Any, W_gate: Any, W_up: Any) -> tuple[Any, dict]:
    """``silu(x @ W_gate) * (x @ W_up)``.

    Args:
        x: inputs, ``(..., D)``.
        W_gate: the gate's weights, ``(D, F)``.
        W_up: the linear branch's weights, ``(D, F)``.

    Returns:
        ``y (..., F)`` and the cache for ``swiglu_backward``.
    """
    check_swiglu_inputs(x, W_gate, W_up)
    gate = x @ W_gate                                    # (..., F)
    up = x @ W_up                                        # (..., F)
    sig = sigmoid(gate)                                  # (..., F)
    silu = gate * sig                                    # (..., F)
    cache = {"x": x, "W_gate": W_gate, "W_up": W_up, "gate": gate, "up": up, "sigmoid": sig, "silu": silu}
    return silu * up, cache


def swiglu_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dx, dW_gate, dW_up)`` of ``swiglu_forward``."""
    x, W_gate, W_up = cache["x"], cache["W_gate"], cache["W_up"]
    gate, up, sig, silu = cache["gate"], cache["up"], cache["sigmoid"], cache["silu"]
    d_up = dy * silu                                             # (..., F)
    d_gate = dy * up * sig * (1.0 + gate * (1.0 - sig))          # (..., F)
    rows = x.reshape(-1, x.shape[-1])                            # (N, D)
    dW_gate = rows.T @ d_gate.reshape(-1, gate.shape[-1])        # (D, F)
    dW_up = rows.T @ d_up.reshape(-1, up.shape[-1])              # (D, F)
    dx = d_gate @ W_gate.T + d_up @ W_up.T                       # (..., D)
    return dx, dW_gate, dW_up
