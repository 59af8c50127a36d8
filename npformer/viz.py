"""Figures (Matplotlib only). Each function returns the Figure and saves it when given a path."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # files, never windows: works on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402


def training_curves(records: list[dict], path: str | None = None, title: str = "") -> Any:
    """Loss (train and validation), validation BLEU and learning rate against the step.

    ``records`` are the lines of ``metrics.jsonl``: ``{"kind": "train", "step", "loss",
    "lr", ...}`` and ``{"kind": "eval", "step", "valid_loss", "valid_bleu", ...}``.
    """
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    figure, (loss_axis, bleu_axis, lr_axis) = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    if train:
        loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train],
                       color="tab:blue", alpha=0.6, linewidth=1, label="train (label-smoothed)")
        lr_axis.plot([r["step"] for r in train], [r["lr"] for r in train], color="tab:purple")
    if evals:
        loss_axis.plot([r["step"] for r in evals], [r["valid_loss"] for r in evals], "o-",
                       color="tab:orange", label="validation")
        bleu_axis.plot([r["step"] for r in evals], [r["valid_bleu"] for r in evals], "o-",
                       color="tab:green")
    loss_axis.set(title="Cross-entropy loss", xlabel="step", ylabel="nats per token")
    loss_axis.set_yscale("log")
    loss_axis.legend()
    bleu_axis.set(title="Validation BLEU (greedy)", xlabel="step", ylabel="BLEU", ylim=(0, 100))
    lr_axis.set(title="Learning rate", xlabel="step")
    lr_axis.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    for axis in (loss_axis, bleu_axis, lr_axis):
        axis.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    if path:
        figure.savefig(path, dpi=110)
    plt.close(figure)
    return figure
