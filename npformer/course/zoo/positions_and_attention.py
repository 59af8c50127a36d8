"""The bugs of positions and attention: entries 1-4 and 10 of the zoo, each buggy, fixed and its symptom.

1 cosine in one column of the positional table, 2 the table indexed by batch, not position;
3 scores as K Q^T, 4 scores scaled by sqrt(d_model) instead of sqrt(d_head), 10 cross-attention
masked with the decoder's padding. Plain functions on host NumPy arrays.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ... import ops
from ...tokens import PAD_ID


# == positions ====================================================================================

# -- 1. cosine in one column of the positional table ---------------------------------------------

def _angles(max_len: int, d_model: int) -> np.ndarray:
    """``p / 10000^(2i / d_model)`` for position ``p`` (rows) and column ``2i`` or ``2i + 1``."""
    columns = np.arange(d_model)
    return np.arange(max_len)[:, None] / 10000.0 ** (2 * (columns // 2) / d_model)


def positional_table_buggy(max_len: int, d_model: int) -> np.ndarray:
    table = np.sin(_angles(max_len, d_model))
    table[:, 1] = np.cos(_angles(max_len, d_model)[:, 1])           # column 1 only
    return table


def positional_table_fixed(max_len: int, d_model: int) -> np.ndarray:
    table = np.sin(_angles(max_len, d_model))
    table[:, 1::2] = np.cos(_angles(max_len, d_model)[:, 1::2])     # every odd column
    return table


def off_the_unit_circle(positional_table: Callable) -> float:
    """Largest ``|PE[p, 2i]^2 + PE[p, 2i+1]^2 - 1|``: every (sin, cos) pair lies on the unit circle,
    which is what makes ``PE[p + k]`` a rotation of ``PE[p]``, the same for every ``p``."""
    table = positional_table(50, 16)
    return np.abs(table[:, 0::2] ** 2 + table[:, 1::2] ** 2 - 1).max()


# -- 2. the positional table indexed by batch, not position --------------------------------------

def add_positions_buggy(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``x (B, T, D)``; the tutorial's table is ``(max_len, 1, D)``, written for ``(T, B, D)`` input."""
    pe = table[:, None, :]
    return x + pe[: x.shape[0]]                    # x.size(0) is B here: row b gets PE[b] everywhere


def add_positions_fixed(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return x + table[: x.shape[1]]                 # position t gets PE[t], in every row


def depends_on_batch_row(add_positions: Callable) -> float:
    """Three copies of one sentence in a batch: the largest difference between what row 0 and
    another row get. Positions do not depend on where a sentence sits in the batch: 0 when right."""
    x = np.zeros((3, 5, 8))                        # one sentence of five identical tokens, three times
    out = add_positions(x, ops.positional_encoding(16, 8, dtype=np.float64))
    return np.abs(out - out[:1]).max()


# == attention ====================================================================================

# -- 3. scores as K Q^T instead of Q K^T ----------------------------------------------------------

def attention_buggy(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``q (..., Tq, Dh)``, ``k`` and ``v (..., Tk, Dh)`` -> ``(..., Tq, Dh)``."""
    scores = k @ q.swapaxes(-1, -2) / math.sqrt(q.shape[-1])         # (Tk, Tq)
    return ops.softmax_forward(scores)[0] @ v                        # needs Tq == Tk


def attention_fixed(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])         # (Tq, Tk)
    return ops.softmax_forward(scores)[0] @ v


def query_leak(attention: Callable) -> float:
    """Move query 0 only: the largest change in the outputs of the other queries. Each output
    row reads its own query and nothing else: 0 when right. (``Tq = Tk``: the bug runs.)"""
    q, k, v = np.random.default_rng(0).standard_normal((3, 2, 5, 4))
    moved = q.copy()
    moved[:, 0] += 1.0
    return np.abs(attention(moved, k, v)[:, 1:] - attention(q, k, v)[:, 1:]).max()


# -- 4. scores scaled by sqrt(d_model) instead of sqrt(d_head) ------------------------------------

def scaled_scores_buggy(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``q (B, H, Tq, Dh)``, ``k (B, H, Tk, Dh)`` -> ``(B, H, Tq, Tk)``."""
    d_model = q.shape[1] * q.shape[-1]
    return q @ k.swapaxes(-1, -2) / math.sqrt(d_model)              # the model's width


def scaled_scores_fixed(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])          # the width of one head


def score_scale_error(scaled_scores: Callable) -> float:
    """``|ln std(scores)|`` for ``q``, ``k`` of unit variance and 8 heads of 8. The scaling exists
    to keep the scores at standard deviation 1 (Vaswani et al., 3.2.1): near 0 when right."""
    q, k = np.random.default_rng(0).standard_normal((2, 4, 8, 16, 8))
    return abs(math.log(scaled_scores(q, k).std()))


# -- 10. cross-attention masked with the decoder's padding ----------------------------------------

def cross_attention_mask_buggy(src_ids: np.ndarray, tgt_ids: np.ndarray) -> np.ndarray:
    return ops.padding_mask(tgt_ids)               # (B, 1, 1, Tt): the decoder's padding


def cross_attention_mask_fixed(src_ids: np.ndarray, tgt_ids: np.ndarray) -> np.ndarray:
    return ops.padding_mask(src_ids)               # (B, 1, 1, Ts): the keys are source positions


def weight_on_source_padding(cross_attention_mask: Callable) -> float:
    """Both sides padded to length 5, with different padding: the largest attention weight that a
    real target position puts on source ``<pad>`` keys, in all. 0 when right."""
    src_ids = np.array([[5, 6, 7, 8, 9], [5, 6, 0, 0, 0]])
    tgt_ids = np.array([[1, 5, 0, 0, 0], [1, 5, 6, 7, 8]])
    q, k, v = np.random.default_rng(0).standard_normal((3, 2, 2, 5, 4))    # (B, H, T, Dh)
    _, cache = ops.attention_forward(q, k, v, cross_attention_mask(src_ids, tgt_ids))
    on_padding = (cache["weights"] * (src_ids == PAD_ID)[:, None, None, :]).sum(axis=-1)  # (B, H, Tt)
    real_queries = np.broadcast_to((tgt_ids != PAD_ID)[:, None, :], on_padding.shape)
    return on_padding[real_queries].max()
