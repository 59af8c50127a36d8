"""Softmax cross-entropy on logits, with padding ignored and label smoothing.

Shapes: ``logits (..., V)`` (typically ``(B, T, V)``), ``targets (...)``
integers. The loss is the mean over the positions whose target is not
``ignore_index``.

Forward, per position, with a fused log-softmax (never ``log(0)``)::

    m        = max_j z_j
    log p_j  = (z_j - m) - log(sum_k exp(z_k - m))      # the sum is >= 1
    q        = (1 - eps) * onehot(target) + eps / V     # label smoothing
    loss_pos = -sum_j q_j log p_j
             = (1 - eps) * (-log p_target) + eps * mean_j(-log p_j)
    loss     = sum over kept positions of loss_pos / n_kept

The smoothing follows PyTorch's ``CrossEntropyLoss(label_smoothing=eps)``:
``eps / V`` goes to every class, the target included. With ``eps = 0`` the
loss is ``-log p_target``. Logits of 1e4 stay finite because only
differences ``z_j - m <= 0`` are exponentiated.

Backward: ``dlogits = dloss * (p - q) / n_kept`` at kept positions and 0 at
ignored ones. The forward pass keeps ``exp(z - max)`` and the row sums and
never materialises ``log p`` or ``p``; the backward pass builds the gradient
in one scaling pass, ``exp(z - max) * (weight / row sum)``, into a new array,
so the cache is never changed and can serve any number of backward passes.
When every target is ignored the loss is 0 and so is the gradient (PyTorch
would return NaN).
"""

from __future__ import annotations

from typing import Any

from .. import threads
from ..backend import xp
from ..tokens import PAD_ID
from ._validate import check_float, check_ids_in_range, check_integer, check_min_ndim


def _check_inputs(logits: Any, targets: Any, label_smoothing: float) -> None:
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
        The loss (a 0-d array in the dtype of ``logits``) and the cache.
    """
    _check_inputs(logits, targets, label_smoothing)
    vocab_size = logits.shape[-1]
    z = logits.reshape(-1, vocab_size)
    target_ids = targets.reshape(-1)

    kept = xp.ones(target_ids.shape, dtype=bool) if ignore_index is None else target_ids != ignore_index
    check_ids_in_range(
        "cross_entropy_forward", "targets", target_ids[kept], vocab_size,
        f"number of classes V = logits.shape[-1], except ignore_index = {ignore_index}",
    )
    safe_ids = xp.where(kept, target_ids, 0)  # ignored positions read class 0, then count 0
    n_kept = int(kept.sum())
    n_rows = z.shape[0]
    exps = xp.empty(z.shape, dtype=z.dtype)
    normalizer = xp.empty(n_rows, dtype=z.dtype)
    target_shifted = xp.empty(n_rows, dtype=z.dtype)
    mean_shifted = xp.empty(n_rows, dtype=z.dtype)

    # With s = z - max(z):  log p_j = s_j - log_norm,  log_norm = log(sum_k exp(s_k)) >= 0.
    def exponentiate(rows: slice) -> None:  # rows are independent: one block per thread
        shifted = xp.subtract(z[rows], z[rows].max(axis=-1, keepdims=True), out=exps[rows])
        target_shifted[rows] = shifted[xp.arange(shifted.shape[0]), safe_ids[rows]]
        if label_smoothing > 0:
            mean_shifted[rows] = shifted.mean(axis=-1)
        xp.exp(shifted, out=shifted)  # the same buffer, now exp(s); normalised in backward
        normalizer[rows] = shifted.sum(axis=-1)

    threads.parallel_rows(exponentiate, n_rows, row_size=vocab_size)
    log_norm = xp.log(normalizer)

    per_position = (1.0 - label_smoothing) * (log_norm - target_shifted)  # -log p_target
    if label_smoothing > 0:
        per_position += label_smoothing * (log_norm - mean_shifted)  # -mean_j log p_j
    per_position *= kept
    loss = per_position.sum() / max(n_kept, 1)

    cache = {
        "exps": exps,
        "normalizer": normalizer,
        "target_ids": safe_ids,
        "kept": kept,
        "n_kept": n_kept,
        "label_smoothing": label_smoothing,
        "logits_shape": tuple(logits.shape),
    }
    return loss, cache


def cross_entropy_backward(dloss: Any, cache: dict, out: Any = None) -> Any:
    """``dlogits = dloss * (softmax(logits) - q) / n_kept``, 0 at ignored positions.

    The cache is read, never written: calling it twice gives the same gradient.
    ``out``, optional: an array of ``exp``'s shape and dtype to write the gradient
    into instead of a new one. A caller that is done with the cache may pass the
    cache's own ``cache["exps"]`` buffer (``training.train_step`` does), which
    saves allocating an array of the logits' size on every step; the cache is
    then spent.
    """
    exps, target_ids, kept = cache["exps"], cache["target_ids"], cache["kept"]
    eps = cache["label_smoothing"]
    vocab_size = exps.shape[-1]
    dtype = exps.dtype

    # Per-position weight: dloss / n_kept where kept, else 0.
    weight = (kept * (xp.asarray(dloss, dtype=dtype) / max(cache["n_kept"], 1))).astype(dtype)
    row_scale = weight / cache["normalizer"]
    dlogits = xp.empty(exps.shape, dtype=dtype) if out is None else out

    def probabilities_minus_smoothing(rows: slice) -> None:
        xp.multiply(exps[rows], row_scale[rows, None], out=dlogits[rows])  # p = exp(s) / sum: one pass
        if eps > 0:
            dlogits[rows] -= (eps / vocab_size * weight[rows])[:, None]

    threads.parallel_rows(probabilities_minus_smoothing, exps.shape[0], row_size=vocab_size)
    dlogits[xp.arange(dlogits.shape[0]), target_ids] -= (1.0 - eps) * weight
    return dlogits.reshape(cache["logits_shape"])
