"""Softmax cross-entropy on logits, with padding ignored and label smoothing.

Shapes: ``logits (..., V)`` (typically ``(B, T, V)``), ``targets (...)``
integers. The loss is the mean over the positions whose target is not
``ignore_index``.

Forward, per position, with a log-softmax that never takes ``log(0)``::

    log p_j  = (z_j - m) - log(sum_k exp(z_k - m)),  m = max_j z_j
    q        = (1 - eps) * onehot(target) + eps / V     # label smoothing
    loss_pos = -sum_j q_j log p_j
             = (1 - eps) * (-log p_target) + eps * mean_j(-log p_j)
    loss     = sum over kept positions of loss_pos / n_kept

The smoothing follows PyTorch's ``CrossEntropyLoss(label_smoothing=eps)``:
``eps / V`` goes to every class, the target included. With ``eps = 0`` the
loss is ``-log p_target``. Logits of 1e4 stay finite because only
differences ``z_j - m <= 0`` are exponentiated.

Backward: the gradient of ``-sum_j q_j log p_j`` with respect to the logits is
``p - q``, so::

    dlogits = dloss * (p - q) / n_kept     at kept positions, 0 at ignored ones

When every target is ignored the loss is 0 and so is the gradient (PyTorch
would return NaN). The fast form, ``npformer.ops.fast.cross_entropy``, writes
the same cache with row-blocked threads and fewer temporary arrays.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ..tokens import PAD_ID
from ._validate import check_float, check_ids_in_range, check_integer, check_min_ndim
from .softmax import log_softmax


def check_cross_entropy_inputs(logits: Any, targets: Any, ignore_index: int | None,
                               label_smoothing: float) -> Any:
    """The checks of ``cross_entropy_forward``, shared with its fast twin.

    Returns ``kept``: a boolean ``(N,)`` array, True where the target counts.
    """
    op = "cross_entropy_forward"
    check_float(op, "logits", logits)
    check_min_ndim(op, "logits", logits, 1, "(..., V)")
    check_integer(op, "targets", targets)
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"{op}: targets must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
            f"got {tuple(targets.shape)}"
        )
    if isinstance(label_smoothing, bool) or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    target_ids = targets.reshape(-1)
    kept = xp.ones(target_ids.shape, dtype=bool) if ignore_index is None else target_ids != ignore_index
    check_ids_in_range(
        op, "targets", target_ids[kept], logits.shape[-1],
        f"number of classes V = logits.shape[-1], except ignore_index = {ignore_index}",
    )
    return kept


def cross_entropy_forward(
    logits: Any, targets: Any, ignore_index: int | None = PAD_ID, label_smoothing: float = 0.0
) -> tuple[Any, dict]:
    """Mean softmax cross-entropy over the targets that are not ``ignore_index``.

    Args:
        logits: unnormalised scores, ``(..., V)``.
        targets: class ids, ``logits.shape[:-1]``, in ``[0, V)`` except where equal
            to ``ignore_index``.
        ignore_index: target id that contributes nothing (``<pad>`` = 0); None keeps all.
        label_smoothing: ``eps`` in ``[0, 1]``.

    Returns:
        The loss (a 0-d array in the dtype of ``logits``) and the cache;
        ``cache["probs"]`` is ``softmax(logits)`` as ``(N, V)`` rows.
    """
    kept = check_cross_entropy_inputs(logits, targets, ignore_index, label_smoothing)
    eps = label_smoothing
    log_probs = log_softmax(logits.reshape(-1, logits.shape[-1]))   # (N, V)
    target_ids = xp.where(kept, targets.reshape(-1), 0)              # (N,), ignored rows read class 0
    nll = -log_probs[xp.arange(len(target_ids)), target_ids]          # (N,)  -log p_target
    per_position = (1.0 - eps) * nll + eps * -log_probs.mean(axis=-1)  # (N,)
    n_kept = int(kept.sum())
    loss = (per_position * kept).sum() / max(n_kept, 1)
    cache = {"probs": xp.exp(log_probs), "target_ids": target_ids, "kept": kept, "n_kept": n_kept,
             "label_smoothing": eps, "logits_shape": tuple(logits.shape)}
    return loss, cache


def cross_entropy_backward(dloss: Any, cache: dict) -> Any:
    """``dlogits = dloss * (softmax(logits) - q) / n_kept``, 0 at ignored positions."""
    probs, target_ids, eps = cache["probs"], cache["target_ids"], cache["label_smoothing"]
    weight = cache["kept"] * (dloss / max(cache["n_kept"], 1))         # (N,)
    smoothed_targets = xp.zeros_like(probs) + eps / probs.shape[-1]  # (N, V)  q
    smoothed_targets[xp.arange(len(target_ids)), target_ids] += 1.0 - eps
    dlogits = (probs - smoothed_targets) * weight[:, None].astype(probs.dtype)   # (N, V)
    return dlogits.reshape(cache["logits_shape"])
