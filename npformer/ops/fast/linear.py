"""Fast form of ``npformer.ops.linear`` (``y = x @ W + b``): the same products, split over threads.

What changes: each product is cut into blocks, one per thread
(``threads.parallel_rows``): the rows of ``y``; in backward, ``dX`` and ``dW``
run side by side, half the threads on the rows of ``dX`` and half on the columns
of ``dW`` (``threads.parallel_row_pairs``); each block writes into an array
made before the split (``out=``), and the bias
gradient is a matrix-vector product (BLAS) rather than a ``sum``. A block is the
same product on fewer rows or columns, so the split changes no equation: the
tests show this form equal to its twin in float64.

Why: NumPy's BLAS threads only the large products, and the elementwise work in
between runs on one core; npformer's own threads keep every core busy on both.
"""

from __future__ import annotations

from typing import Any

from ... import threads
from ...backend import xp
from ..linear import check_linear_inputs


@threads.with_blas_on_one_thread  # BLAS on one thread while it runs, small products included
def linear_forward(x: Any, W: Any, b: Any = None) -> tuple[Any, dict]:
    """``y = x @ W + b``, row blocks on threads; see ``npformer.ops.linear.linear_forward``."""
    check_linear_inputs(x, W, b)
    x_rows = x.reshape(-1, W.shape[0])
    y_rows = xp.empty((x_rows.shape[0], W.shape[1]), dtype=x.dtype)

    def affine(rows: slice) -> None:
        xp.matmul(x_rows[rows], W, out=y_rows[rows])
        if b is not None:
            y_rows[rows] += b

    threads.parallel_rows(affine, x_rows.shape[0], row_size=W.size)
    y = y_rows.reshape(*x.shape[:-1], W.shape[1])
    return y, {"x": x, "W": W, "has_bias": b is not None}


@threads.with_blas_on_one_thread  # BLAS on one thread while it runs, small products included
def linear_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
    """``(dx, dW, db)``, blocks on threads; see ``npformer.ops.linear.linear_backward``."""
    x, W = cache["x"], cache["W"]
    d_in, d_out = W.shape
    x_rows = x.reshape(-1, d_in)
    dy_rows = xp.ascontiguousarray(dy).reshape(-1, d_out)
    dx_rows = xp.empty(x_rows.shape, dtype=dy_rows.dtype)
    dW = xp.empty(W.shape, dtype=dy_rows.dtype)

    def input_gradient(rows: slice) -> None:
        xp.matmul(dy_rows[rows], W.T, out=dx_rows[rows])

    def weight_gradient(columns: slice) -> None:  # each block sums over every row
        xp.matmul(x_rows.T, dy_rows[:, columns], out=dW[:, columns])

    # dX and dW cost the same (N Din Dout multiply-adds each): half the threads take each
    threads.parallel_row_pairs(input_gradient, dy_rows.shape[0], W.size, weight_gradient, d_out, x_rows.size)
    # The column sums as one matrix-vector product: BLAS, 3x faster than sum(axis=0) here.
    db = xp.ones(dy_rows.shape[0], dtype=dy_rows.dtype) @ dy_rows if cache["has_bias"] else None
    return dx_rows.reshape(x.shape), dW, db
