"""Checks shared by the model configurations and the models' inputs.

Each raises ``ValueError`` or ``TypeError`` whose message names the owner,
the argument, what was expected and what was received.
"""

from __future__ import annotations

from typing import Any

from ..nn import check_heads
from ..ops._validate import check_integer, check_ndim


def check_positive_ints(owner: str, config: Any, names: tuple[str, ...]) -> None:
    """Each ``config.<name>`` must be a positive int."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def check_choice(owner: str, name: str, value: Any, choices: tuple) -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def check_probability(owner: str, name: str, value: Any) -> None:
    """``value`` must be a number in ``[0, 1)`` (a dropout rate, a label-smoothing weight)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1), got {value!r}")


def check_config(owner: str, config: Any, positive: tuple[str, ...]) -> None:
    """The checks every configuration shares: positive sizes, and heads that divide ``d_model``."""
    check_positive_ints(owner, config, positive)
    check_heads(owner, config.d_model, config.n_heads)
    if hasattr(config, "dropout"):
        check_probability(owner, "dropout", config.dropout)


def check_token_ids(owner: str, name: str, ids: Any, max_len: int) -> None:
    """``ids`` must be an integer array ``(B, T)`` with ``1 <= T <= max_len``.

    (That every id lies inside the vocabulary is checked by ``ops.embedding_forward``.)
    """
    check_integer(owner, name, ids)
    check_ndim(owner, name, ids, 2, "(B, T)")
    if not 1 <= ids.shape[1] <= max_len:
        raise ValueError(f"{owner}: {name} must have length 1 <= T <= max_len = {max_len}, "
                         f"got shape {tuple(ids.shape)}")


def check_target_batch(tgt_in_ids: Any, batch: int) -> None:
    """The target ids of a Transformer must come one row per source sentence: ``batch`` rows."""
    if tgt_in_ids.shape[0] != batch:
        raise ValueError(f"Transformer: tgt_in_ids must have batch size {batch} "
                         f"(from the source), got {tgt_in_ids.shape[0]}")


def check_only_at(only_at: Any, tgt_in_ids: Any) -> None:
    """``only_at`` (the target positions whose logits are asked for) must be a boolean array shaped like ``tgt_in_ids``."""
    if getattr(only_at, "dtype", None) != bool or tuple(only_at.shape) != tuple(tgt_in_ids.shape):
        raise ValueError(f"Transformer: only_at must be a boolean array shaped like tgt_in_ids "
                         f"{tuple(tgt_in_ids.shape)}, got {getattr(only_at, 'dtype', type(only_at).__name__)} "
                         f"{tuple(getattr(only_at, 'shape', ()))}")
