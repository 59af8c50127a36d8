"""One training step, written once, in the textbook order.

Every model in npformer maps inputs to logits and has a hand-written
``backward(dlogits)``; the loss is an op, not part of the model. A step is::

    logits = model.forward(*inputs)                                  # (..., V)
    loss, cache = ops.current().cross_entropy_forward(logits, targets, ignore_index, label_smoothing)
    model.zero_grad()
    model.backward(ops.current().cross_entropy_backward(1.0, cache))  # fills model.grads()
    grad_norm = clip_grad_norm(model, max_norm)                      # optional
    optimizer.step()

The translator's trainer, the small models' loop (``fit``), ``npformer bench``
and the lessons all call ``train_step``. With ``only_counted_targets=True`` (the
translator's trainer and ``npformer bench`` ask for it), a ``Transformer`` runs its blocks in
the packed layout (``model.forward(..., only_at=counted)``): the logits of the counted targets
only, the same loss and gradients without any work on padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import allocator, ops, threads
from ..models import Transformer
from ..optim import clip_grad_norm
from ..tokens import PAD_ID


@dataclass
class StepResult:
    """What one step reports: the loss before the update and the gradient norm before clipping
    (NaN when the step did not clip)."""

    loss: float
    grad_norm: float


@threads.with_blas_on_one_thread_when(ops.holds_blas)  # the fast ops split over npformer's threads: BLAS keeps to one
def train_step(model: Any, inputs: tuple, targets: Any, optimizer: Any, *,
               ignore_index: int | None = PAD_ID, label_smoothing: float = 0.0,
               max_norm: float | None = None, only_counted_targets: bool = False) -> StepResult:
    """Forward, loss, backward, clipping and one optimizer update.

    Args:
        model: any npformer model: ``forward(*inputs) -> logits``, ``backward(dlogits)``.
        inputs: the arguments of ``model.forward``, e.g. ``(src_ids, tgt_in_ids)``.
        targets: integer class ids, ``logits.shape[:-1]``.
        optimizer: updates ``model.params()`` from ``model.grads()``; its ``lr`` is used as set.
        ignore_index: the target id that adds nothing to the loss (``<pad>``); None keeps all.
        label_smoothing: the weight ``eps`` spread over all classes.
        max_norm: clip the global gradient norm to this; None does not clip.
        only_counted_targets: the fast path: no work on padding, and only the positions whose
            target counts projected onto the vocabulary (``Transformer.forward``'s ``only_at``; the
            model must be a ``Transformer``; same loss and gradients).

    A non-finite loss skips the update (nothing is changed) and is returned as it is,
    so that the caller can stop and keep its last good checkpoint.
    """
    loss = loss_and_gradients(model, inputs, targets, ignore_index=ignore_index, label_smoothing=label_smoothing,
                              only_counted_targets=only_counted_targets)
    if not math.isfinite(loss):
        return StepResult(loss, math.nan)
    grad_norm = clip_grad_norm(model, max_norm) if max_norm is not None else math.nan
    optimizer.step()
    return StepResult(loss, grad_norm)


@threads.with_blas_on_one_thread_when(ops.holds_blas)
def loss_and_gradients(model: Any, inputs: tuple, targets: Any, *, ignore_index: int | None = PAD_ID,
                       label_smoothing: float = 0.0, only_counted_targets: bool = False) -> float:
    """The first half of ``train_step`` (its arguments): forward, the active op set's loss, and the
    backward pass, which fills ``model.grads()``; returns the loss. A non-finite loss is returned
    before any gradient is computed (the model's gradients are then those of the step before)."""
    allocator.keep_freed_memory()  # once per process: each step reuses the last one's memory
    if only_counted_targets and ignore_index is not None:
        if not isinstance(model, Transformer):
            raise TypeError(f"train_step: only_counted_targets needs an npformer Transformer; "
                            f"got {type(model).__name__}")
        # The fast path: logits only where a target counts (the same loss and gradients as the
        # textbook step of the module docstring, checked by tests/test_fastpath.py).
        counted = targets != ignore_index
        logits, targets = model.forward(*inputs, only_at=counted), targets[counted]
    else:
        logits = model.forward(*inputs)
    op_set = ops.current()
    loss, cache = op_set.cross_entropy_forward(logits, targets, ignore_index=ignore_index,
                                               label_smoothing=label_smoothing)
    loss = float(loss)
    if not math.isfinite(loss):
        return loss
    model.zero_grad()
    dlogits = op_set.cross_entropy_backward(1.0, cache)
    del cache, logits  # the (N, V) probabilities and logits are not needed during backward
    model.backward(dlogits)
    return loss
