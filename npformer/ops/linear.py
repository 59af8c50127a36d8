"""The affine map ``y = x @ W + b``, applied to the last axis.

Shapes: ``x (..., Din)``, ``W (Din, Dout)``, ``b (Dout,)`` -> ``y (..., Dout)``.

Backward. Flatten the leading axes into ``N`` rows (``X (N, Din)``,
``dY (N, Dout)``); every row uses the same ``W`` and ``b``, so their gradients
sum over the rows::

    dX = dY @ W.T          (N, Din)
    dW = X.T @ dY          (Din, Dout)
    db = sum_rows(dY)      (Dout,)

Each is one matrix product on 2-D arrays: no loop over batch or time. The fast
form, ``npformer.ops.fast.linear``, computes the same products split over threads.
"""

from __future__ import annotations

from typing import Any

from ._validate import check_float, check_min_ndim, check_ndim, check_same_dtype


def check_linear_inputs(x: Any, W: Any, b: Any) -> None:
    """The checks of ``linear_forward``, shared with its fast twin."""
    op = "linear_forward"
    check_float(op, "x", x)
    check_float(op, "W", W)
    check_min_ndim(op, "x", x, 1, "(..., Din)")
    check_ndim(op, "W", W, 2, "(Din, Dout)")
    if x.shape[-1] != W.shape[0]:
        raise ValueError(
            f"{op}: x must have last dimension Din = {W.shape[0]} (from W {tuple(W.shape)}), "
            f"got x of shape {tuple(x.shape)}"
        )
    if b is None:
        check_same_dtype(op, ("x", "W"), (x, W))
        return
    check_float(op, "b", b)
    if tuple(b.shape) != (W.shape[1],):
        raise ValueError(f"{op}: b must have shape (Dout,) = ({W.shape[1]},), got {tuple(b.shape)}")
    check_same_dtype(op, ("x", "W", "b"), (x, W, b))


def linear_forward(x: Any, W: Any, b: Any = None) -> tuple[Any, dict]:
    """``y = x @ W + b``.

    Args:
        x: inputs, shape ``(..., Din)``.
        W: weights, shape ``(Din, Dout)``.
        b: bias, shape ``(Dout,)``, or None for no bias.

    Returns:
        ``y`` of shape ``(..., Dout)`` and the cache for ``linear_backward``.
    """
    check_linear_inputs(x, W, b)
    d_in, d_out = W.shape
    y = x.reshape(-1, d_in) @ W                  # (N, Dout)
    if b is not None:
        y = y + b                                # (N, Dout), b added to every row
    cache = {"x": x, "W": W, "has_bias": b is not None}
    return y.reshape(*x.shape[:-1], d_out), cache


def linear_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients of ``linear_forward``.

    Args:
        dy: upstream gradient, shape ``(..., Dout)``.
        cache: from ``linear_forward``.

    Returns:
        ``(dx, dW, db)`` with the shapes of ``x``, ``W`` and ``b``;
        ``db`` is None when the forward pass had no bias.
    """
    x, W = cache["x"], cache["W"]
    d_in, d_out = W.shape
    x_rows = x.reshape(-1, d_in)                 # (N, Din)
    dy_rows = dy.reshape(-1, d_out)              # (N, Dout)
    dx = dy_rows @ W.T                           # (N, Din)
    dW = x_rows.T @ dy_rows                      # (Din, Dout)
    db = dy_rows.sum(axis=0) if cache["has_bias"] else None   # (Dout,)
    return dx.reshape(x.shape), dW, db
