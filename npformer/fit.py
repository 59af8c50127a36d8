"""The training loop shared by the small models (classifier, language models, vision).

``fit`` runs ``steps`` optimizer steps of AdamW with linear warm-up and cosine decay and gradient
clipping; ``next_batch(step)`` supplies ``(inputs, targets)`` as arrays of the active backend, or
None to skip a step. It returns the loss of every step taken. (The translator has its own trainer,
``npformer.train``, with checkpoints and evaluation.)
"""

from __future__ import annotations

from typing import Any, Callable

from . import optim


def fit(model: Any, next_batch: Callable[[int], Any], steps: int, lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.98), weight_decay: float = 0.01, clip: float = 1.0,
        log: Callable[[str], None] | None = None) -> list[float]:
    optimizer = optim.AdamW(model, lr=lr, betas=betas, weight_decay=weight_decay)
    schedule = optim.WarmupCosineSchedule(lr, warmup_steps=max(steps // 10, 1), total_steps=steps + 1)
    losses: list[float] = []
    for step in range(1, steps + 1):
        batch = next_batch(step)
        if batch is None:
            continue
        inputs, targets = batch
        optimizer.lr = schedule(step)
        loss = float(model.loss(model.forward(inputs), targets))
        model.zero_grad()
        model.backward(model.criterion.backward())
        optim.clip_grad_norm(model, clip)
        optimizer.step()
        losses.append(loss)
        if log and step % max(steps // 5, 1) == 0:
            log(f"step {step}: loss {loss:.4f}")
    return losses
