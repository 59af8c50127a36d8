"""Teacher-forced evaluation: the loss and token accuracy of a model on held-out batches."""

from __future__ import annotations

from typing import Any, Iterable

from .. import backend, ops
from ..tokens import PAD_ID


def evaluate_loss(model: Any, batches: Iterable[Any]) -> tuple[float, float]:
    """Mean cross-entropy per target token (no label smoothing) and token accuracy.

    ``batches`` hold ``src``, ``tgt_in`` and ``tgt_out`` host arrays (``data.Batch``).
    The model runs in eval mode and is put back in the mode it had.
    """
    total_loss = total_correct = total_tokens = 0.0
    with model.evaluating():
        for batch in batches:
            tgt_out = backend.asarray(batch.tgt_out)
            logits = model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
            loss, _ = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
            real = tgt_out != PAD_ID
            n = int(real.sum())
            total_loss += float(loss) * n
            total_correct += int((logits.argmax(-1)[real] == tgt_out[real]).sum())
            total_tokens += n
    return total_loss / max(total_tokens, 1), total_correct / max(total_tokens, 1)
