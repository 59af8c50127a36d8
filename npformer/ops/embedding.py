"""Embedding lookup: row ``ids[b, t]`` of the table ``W``.

Forward: ``out[b, t] = W[ids[b, t]]``; ``ids (B, T)`` integers, ``W (V, D)``
-> ``out (B, T, D)``. (Any shape of ``ids`` works; ``out`` adds a last axis.)

Backward: a token that occurs ``k`` times receives the sum of its ``k``
upstream rows, and rows of tokens that never occur get zero::

    dW[v] = sum over (b, t) with ids[b, t] == v of dout[b, t]

That is a scatter-add. ``np.add.at`` does it, but one element at a time. On
NumPy we sort the ids instead, which puts equal ids next to each other: a
token seen once has its row copied, and the runs of tokens seen several
times are summed with one ``np.add.reduceat``. For a 64 x 24 batch of ids
with V = 8000, D = 256 this is 4-6x faster than ``np.add.at`` on NumPy 2.4
(``benchmarks/embedding_scatter.py``; figures in ``benchmarks/RESULTS.md``),
and the tests compare the two. On CuPy, ``cupyx.scatter_add`` does the same
with atomic additions on the GPU.
"""

from __future__ import annotations

from typing import Any

from ..backend import is_cupy, xp
from ._validate import check_float, check_ids_in_range, check_integer, check_ndim


def embedding_forward(ids: Any, W: Any) -> tuple[Any, dict]:
    """Look up the rows of ``W`` named by ``ids``.

    Args:
        ids: integer token ids, shape ``(B, T)`` (any shape), values in ``[0, V)``.
        W: the table, shape ``(V, D)``.

    Returns:
        ``out`` of shape ``ids.shape + (D,)`` and the cache for ``embedding_backward``.
    """
    op = "embedding_forward"
    check_integer(op, "ids", ids)
    check_float(op, "W", W)
    check_ndim(op, "W", W, 2, "(V, D)")
    check_ids_in_range(op, "ids", ids, W.shape[0], f"vocabulary size V of W {tuple(W.shape)}")
    out = xp.take(W, ids, axis=0)
    return out, {"ids": ids, "table_shape": tuple(W.shape), "dtype": W.dtype}


def embedding_backward(dout: Any, cache: dict) -> Any:
    """``dW`` (shape ``(V, D)``): each token's upstream rows summed into its row."""
    vocab_size, d_model = cache["table_shape"]
    ids = cache["ids"].reshape(-1)
    rows = dout.reshape(-1, d_model)
    dW = xp.zeros((vocab_size, d_model), dtype=cache["dtype"])
    if ids.size == 0:
        return dW
    if is_cupy():
        import cupyx

        cupyx.scatter_add(dW, ids, rows)
        return dW

    # Sorting puts equal ids next to each other: each token becomes one run.
    order = xp.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    run_starts = xp.flatnonzero(xp.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    run_lengths = xp.diff(xp.r_[run_starts, ids.size])

    # A token seen once: its upstream row is its gradient, copied as is.
    seen_once = run_lengths == 1
    single_starts = run_starts[seen_once]
    dW[sorted_ids[single_starts]] = rows[order[single_starts]]

    # A token seen several times: sum its run with one reduceat over just those rows.
    if not seen_once.all():
        seen_often = ~seen_once
        repeated_rows = rows[order[xp.repeat(seen_often, run_lengths)]]
        repeated_starts = xp.r_[0, xp.cumsum(run_lengths[seen_often])[:-1]]
        dW[sorted_ids[run_starts[seen_often]]] = xp.add.reduceat(
            repeated_rows, repeated_starts, axis=0
        )
    return dW
