"""The options of a translation run (``npformer train``), and the model presets.

Every option and its default are written here once: the command line derives
its flags from this dataclass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PRESETS = {
    "tiny": dict(d_model=64, n_heads=4, d_ff=256, n_layers=2),
    "small": dict(d_model=128, n_heads=4, d_ff=512, n_layers=2),
    "base": dict(d_model=256, n_heads=8, d_ff=1024, n_layers=3),
}
MODEL_OVERRIDES = ("d_model", "n_layers", "n_heads", "d_ff", "norm", "activation", "tie_embeddings")


@dataclass
class TrainOptions:
    """What ``npformer train`` does; see ``Trainer``."""

    # where
    name: str | None = None  # None: "<data>-<preset>", e.g. "toy-tiny"
    runs_dir: str = "runs"
    resume: bool = False
    # data
    data: str | None = None  # None: the embedded toy corpus
    max_words: int | None = 8
    max_pairs: int | None = None  # also caps the toy corpus's training split
    lowercase: bool = False
    min_freq: int = 1
    max_vocab: int | None = None
    # model: a preset, then any override (None keeps the preset's value)
    preset: str = "tiny"
    d_model: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    d_ff: int | None = None
    norm: str = "post"
    activation: str = "relu"
    tie_embeddings: bool = False
    dropout: float = 0.1
    label_smoothing: float = 0.1
    # optimisation
    token_budget: int = 2048
    lr: float = 2e-3  # the peak of the warm-up schedule
    warmup: int = 300
    clip: float = 1.0
    minutes: float | None = None  # None (and no max_steps): 2 on the toy corpus, 30 with data
    max_steps: int | None = None
    # reporting
    eval_every: int = 250
    eval_sentences: int = 200
    log_every: int = 10
    test_sentences: int | None = 1000
    beam_size: int = 4
    seed: int = 0

    def run_name(self) -> str:
        if self.name:
            return self.name
        data = "toy" if self.data is None else os.path.splitext(os.path.basename(self.data))[0]
        return f"{data}-{self.preset}"

    def budget_minutes(self) -> float | None:
        """The time budget: ``minutes``, or the default when no budget at all is given."""
        if self.minutes is None and self.max_steps is None:
            return 2.0 if self.data is None else 30.0
        return self.minutes

    def model_options(self) -> dict:
        """The preset with the overrides applied, for ``TransformerConfig``."""
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        overrides = {name: getattr(self, name) for name in MODEL_OVERRIDES if getattr(self, name) is not None}
        return {**PRESETS[self.preset], "max_len": 64, "dropout": self.dropout,
                "label_smoothing": self.label_smoothing, **overrides}
