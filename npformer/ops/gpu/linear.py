"""GPU form of ``npformer.ops.linear``'s backward: the bias gradient as a matrix-vector product.

What changes: ``db = dy.sum(axis=0)`` becomes ``ones @ dy`` (``column_sums``), a cuBLAS call like
the two matrix products beside it, instead of a reduction that CuPy plans anew on every call. The
forward pass is the textbook's (one product and one bias add). Same equations, same cache keys.
"""

from __future__ import annotations

from typing import Any

from .column_sums import column_sums


def linear_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.linear.linear_backward``."""
    x, W = cache["x"], cache["W"]
    d_in, d_out = W.shape
    x_rows = x.reshape(-1, d_in)                 # (N, Din)
    dy_rows = dy.reshape(-1, d_out)              # (N, Dout)
    dx = dy_rows @ W.T                           # (N, Din)
    dW = x_rows.T @ dy_rows                      # (Din, Dout)
    db = column_sums(dy_rows) if cache["has_bias"] else None   # (Dout,)
    return dx.reshape(x.shape), dW, db
