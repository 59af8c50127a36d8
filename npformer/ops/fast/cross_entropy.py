"""Fast form of ``npformer.ops.cross_entropy``: row blocks on threads, one array of the logits' size.

What changes: the textbook form builds ``log p`` (N, V), then ``p`` (N, V), then
``q`` (N, V) in backward. Here each block of rows (one per thread,
``threads.parallel_rows``) writes ``exp(z - max)`` into one array, reads the
target's and the mean shifted logit on the way, and divides by the row sum in
place: that array becomes ``cache["probs"]``, and the loss comes from the row
sums (``log p_j = s_j - log sum_k exp(s_k)``) without any ``(N, V)`` log array.
The backward pass scales ``p`` by each row's weight into a new array and fixes
the target column: ``q`` is never built. Same cache keys, same equations.
"""

from __future__ import annotations

from typing import Any

from ... import threads
from ...backend import xp
from ...tokens import PAD_ID
from ..cross_entropy import check_cross_entropy_inputs


def cross_entropy_forward(
    logits: Any, targets: Any, ignore_index: int | None = PAD_ID, label_smoothing: float = 0.0
) -> tuple[Any, dict]:
    """See ``npformer.ops.cross_entropy.cross_entropy_forward``."""
    kept = check_cross_entropy_inputs(logits, targets, ignore_index, label_smoothing)
    vocab_size = logits.shape[-1]
    z = logits.reshape(-1, vocab_size)
    target_ids = xp.where(kept, targets.reshape(-1), 0)  # ignored positions read class 0, then count 0
    n_rows = z.shape[0]
    probs = xp.empty(z.shape, dtype=z.dtype)
    log_norm, target_shifted, mean_shifted = (xp.empty(n_rows, dtype=z.dtype) for _ in range(3))

    # With s = z - max(z):  log p_j = s_j - log_norm,  log_norm = log(sum_k exp(s_k)) >= 0.
    def exponentiate(rows: slice) -> None:
        shifted = xp.subtract(z[rows], z[rows].max(axis=-1, keepdims=True), out=probs[rows])
        target_shifted[rows] = shifted[xp.arange(shifted.shape[0]), target_ids[rows]]
        if label_smoothing > 0:
            mean_shifted[rows] = shifted.mean(axis=-1)
        xp.exp(shifted, out=probs[rows])
        row_sum = probs[rows].sum(axis=-1)
        probs[rows] /= row_sum[:, None]
        log_norm[rows] = xp.log(row_sum)

    threads.parallel_rows(exponentiate, n_rows, row_size=vocab_size)
    per_position = (1.0 - label_smoothing) * (log_norm - target_shifted)  # -log p_target
    if label_smoothing > 0:
        per_position += label_smoothing * (log_norm - mean_shifted)  # -mean_j log p_j
    n_kept = int(kept.sum())
    loss = (per_position * kept).sum() / max(n_kept, 1)
    cache = {"probs": probs, "target_ids": target_ids, "kept": kept, "n_kept": n_kept,
             "label_smoothing": label_smoothing, "logits_shape": tuple(logits.shape)}
    return loss, cache


def cross_entropy_backward(dloss: Any, cache: dict) -> Any:
    """See ``npformer.ops.cross_entropy.cross_entropy_backward``; the cache is read, never written."""
    probs, target_ids, eps = cache["probs"], cache["target_ids"], cache["label_smoothing"]
    vocab_size = probs.shape[-1]
    weight = (cache["kept"] * (dloss / max(cache["n_kept"], 1))).astype(probs.dtype)
    dlogits = xp.empty(probs.shape, dtype=probs.dtype)

    def probabilities_minus_smoothing(rows: slice) -> None:
        xp.multiply(probs[rows], weight[rows, None], out=dlogits[rows])
        if eps > 0:
            dlogits[rows] -= (eps / vocab_size * weight[rows])[:, None]

    threads.parallel_rows(probabilities_minus_smoothing, probs.shape[0], row_size=vocab_size)
    dlogits[xp.arange(dlogits.shape[0]), target_ids] -= (1.0 - eps) * weight
    return dlogits.reshape(cache["logits_shape"])
