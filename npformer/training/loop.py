"""The training loop of the small models (classifier, language models, vision).

``fit`` runs ``steps`` calls of ``train_step`` with AdamW, linear warm-up and
cosine decay, and gradient clipping; or as many as fit in ``minutes``, the cosine following the clock. ``next_batch(step)`` supplies
``(inputs, targets)``, with ``inputs`` one array or a tuple of the arguments
of ``model.forward``, as arrays of the active backend; or None to skip the
step. It returns the loss of every step taken. A bar shows the progress
(``tqdm.auto``: a widget in Jupyter, a line in a terminal). The translator's
trainer (``npformer.tasks.translation``) adds evaluation, checkpoints and
resumption around the same ``train_step``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from .. import optim
from ..tokens import PAD_ID
from .step import train_step


def fit(model: Any, next_batch: Callable[[int], Any], steps: int, *, ignore_index: int | None = PAD_ID,
        lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.98), weight_decay: float = 0.01,
        clip: float = 1.0, progress: bool = False, minutes: float | None = None,
        warmup: int | None = None) -> list[float]:
    """Train ``model`` for ``steps`` steps; returns the losses. ``ignore_index``: as in ``train_step``.

    With ``minutes``, training stops when that much time is spent or ``steps`` are taken, whichever
    comes first, and the learning rate follows the share of the budget spent (``optim.BudgetSchedule``,
    the time's or the steps', whichever is further): it lands at zero at the end, so two models given
    the same minutes get the same schedule. ``warmup``: the warm-up steps (default a tenth of
    ``steps``; with ``minutes``, at most 100).
    """
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float))
                                or not math.isfinite(minutes) or minutes <= 0):
        raise ValueError(f"fit: minutes must be a number > 0 or None, got {minutes!r}")
    optimizer = optim.AdamW(model, lr=lr, betas=betas, weight_decay=weight_decay)
    if warmup is None:  # a tenth of the steps; under a time budget, where steps is only a ceiling, at most 100
        warmup = max(steps // 10, 1) if minutes is None else min(max(steps // 10, 1), 100)
    if minutes is None:
        schedule = optim.WarmupCosineSchedule(lr, warmup_steps=warmup, total_steps=steps + 1)
    else:
        budget, start = optim.BudgetSchedule(lr, warmup_steps=max(warmup, 1)), time.perf_counter()
    from tqdm.auto import tqdm  # imported here: ``import npformer`` need not load it

    losses: list[float] = []
    with tqdm(total=steps, disable=not progress, unit="step", leave=False) as bar:
        for step in range(1, steps + 1):
            if minutes is not None:  # the share of the budget spent: of the time or of the steps, whichever is further
                spent = max((step - 1) / steps, (time.perf_counter() - start) / (60.0 * minutes))
                if spent >= 1.0:
                    break
            bar.update(1)
            batch = next_batch(step)
            if batch is None:
                continue
            inputs, targets = batch
            optimizer.lr = schedule(step) if minutes is None else budget(step, spent)
            result = train_step(model, inputs if isinstance(inputs, tuple) else (inputs,), targets,
                                optimizer, ignore_index=ignore_index, max_norm=clip)
            losses.append(result.loss)
            bar.set_postfix(loss=f"{result.loss:.4f}", refresh=False)
    return losses
