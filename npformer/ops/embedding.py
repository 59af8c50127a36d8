"""Embedding lookup: row ``ids[b, t]`` of the table ``W``.

Forward: ``out[b, t] = W[ids[b, t]]``; ``ids (B, T)`` integers, ``W (V, D)``
-> ``out (B, T, D)``. (Any shape of ``ids`` works; ``out`` adds a last axis.)

Backward: a token that occurs ``k`` times receives the sum of its ``k``
upstream rows, and rows of tokens that never occur get zero::

    dW[v] = sum over (b, t) with ids[b, t] == v of dout[b, t]

That is a scatter-add, which ``add.at`` does directly: unlike ``dW[ids] += rows``,
it adds every occurrence of a repeated id, not just the last one. The fast form,
``npformer.ops.fast.embedding``, sorts the ids to sum each token's rows at once.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_ids_in_range, check_integer, check_ndim


def check_embedding_inputs(ids: Any, W: Any) -> None:
    """The checks of ``embedding_forward``, shared with its fast twin."""
    op = "embedding_forward"
    check_integer(op, "ids", ids)
    check_float(op, "W", W)
    check_ndim(op, "W", W, 2, "(V, D)")
    check_ids_in_range(op, "ids", ids, W.shape[0], f"vocabulary size V of W {tuple(W.shape)}")


def embedding_forward(ids: Any, W: Any) -> tuple[Any, dict]:
    """Look up the rows of ``W`` named by ``ids``.

    Args:
        ids: integer token ids, shape ``(B, T)`` (any shape), values in ``[0, V)``.
        W: the table, shape ``(V, D)``.

    Returns:
        ``out`` of shape ``ids.shape + (D,)`` and the cache for ``embedding_backward``.
    """
    check_embedding_inputs(ids, W)
    out = W[ids]                                             # (B, T, D)
    return out, {"ids": ids, "table_shape": tuple(W.shape), "dtype": W.dtype}


def embedding_backward(dout: Any, cache: dict) -> Any:
    """``dW`` (shape ``(V, D)``): each token's upstream rows summed into its row."""
    vocab_size, d_model = cache["table_shape"]
    dW = xp.zeros((vocab_size, d_model), dtype=cache["dtype"])               # (V, D)
    xp.add.at(dW, cache["ids"].reshape(-1), dout.reshape(-1, d_model))    # (N,) ids, (N, D) rows
    return dW
