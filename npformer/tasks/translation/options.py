"""The options of a translation run (``npformer train``), and the model presets.

Every option and its default are written here once: the command line derives
its flags from this dataclass.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, fields

from ...models import MODEL_PRESETS, TransformerConfig
from ...tokens import SPECIAL_TOKENS
from ..checks import check_option
from .decoding import BEAM_SIZE

# The sizes ``--preset`` offers: the CPU sizes of ``models.MODEL_PRESETS`` (not "large").
PRESETS = {name: dict(MODEL_PRESETS[name]) for name in ("tiny", "small", "base")}
DEFAULT_STEPS = 900  # the default run on the embedded corpus: steps, not minutes, so every machine agrees
TOKENIZERS = ("word", "bpe")
# "budget": warm-up, then a cosine decay to zero at the end of the budget (optim.BudgetSchedule);
# "noam": the paper's warm-up and 1 / sqrt(step) decay, scaled to peak at lr (optim.NoamSchedule).
SCHEDULES = ("budget", "noam")
MODEL_OVERRIDES = ("d_model", "n_layers", "n_heads", "d_ff", "norm", "activation", "tie_embeddings",
                   "share_embeddings")


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
    long_words: int | None = None  # with data: also train on pairs up to this long, some held out (long.tsv)
    max_pairs: int | None = None  # also caps the toy corpus's training split
    lowercase: bool = False
    min_freq: int = 1
    max_vocab: int | None = None
    tokenizer: str = "word"  # "word": one id per word; "bpe": byte-pair pieces (npformer.data.bpe)
    bpe_merges: int = 8000
    joint_vocab: bool = False  # with bpe: one vocabulary learned on both languages
    unk_rate: float = 0.0  # make aligned word pairs unknown: <unk> (word) or invented (bpe); data.unknown_words
    # model: a preset, then any override (None keeps the preset's value)
    preset: str = "tiny"
    d_model: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    d_ff: int | None = None
    norm: str = "post"
    activation: str = "relu"
    tie_embeddings: bool = False
    share_embeddings: bool = False  # needs joint_vocab
    dropout: float = 0.1
    label_smoothing: float = 0.1
    # optimisation
    token_budget: int = 2048
    lr: float = 2e-3  # the peak of the warm-up schedule
    warmup: int = 300
    schedule: str | None = None  # None: "budget" with data, "noam" on the toy corpus (the shipped toy's)
    average_last: int = 1  # the final model: the mean of the parameters at the last N evaluation points
    clip: float = 1.0
    minutes: float | None = None  # a wall-clock budget; it makes the result depend on the machine
    max_steps: int | None = None  # None (and no minutes): DEFAULT_STEPS on the toy corpus, 30 minutes with data
    # reporting
    eval_every: int = 250
    eval_sentences: int = 200
    log_every: int = 10
    test_sentences: int | None = 1000
    beam_size: int = BEAM_SIZE
    seed: int = 0

    def run_name(self) -> str:
        if self.name:
            return self.name
        data = "toy" if self.data is None else os.path.splitext(os.path.basename(self.data))[0]
        return f"{data}-{self.preset}"

    def budget(self) -> tuple[int | None, float | None]:
        """``(max_steps, minutes)``: as given, or, when neither is, ``DEFAULT_STEPS`` on the toy
        corpus (the same model on every machine of one kind, about a minute on two cores) and 30 minutes
        with ``data``."""
        if self.minutes is None and self.max_steps is None:
            return (DEFAULT_STEPS, None) if self.data is None else (None, 30.0)
        return self.max_steps, self.minutes

    def learning_rate_schedule(self) -> str:
        """``schedule`` as given, or, when it is not, "budget" with ``data`` and "noam" on the embedded
        corpus, so that the default toy run still trains the shipped toy translator."""
        if self.schedule is None:
            return "noam" if self.data is None else "budget"
        return self.schedule

    def check(self) -> None:
        """Every value and every combination, before any work starts; ``ValueError`` names the option.

        Numbers follow ``tasks.checks`` (positive; ``seed >= 0``; ``dropout``,
        ``label_smoothing`` and ``unk_rate`` in [0, 1)). Then: the preset exists, the model's
        sizes fit together (heads divide ``d_model``), and a batch of ``token_budget`` tokens can
        hold the longest example the model takes (``max_len`` tokens).
        """
        hints = typing.get_type_hints(type(self))
        for option in fields(self):
            value = getattr(self, option.name)
            kind = typing.get_args(hints[option.name]) or (hints[option.name],)
            if (int in kind or float in kind) and bool not in kind:
                check_option(option.name, value)
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {self.tokenizer!r}")
        if self.joint_vocab and self.tokenizer != "bpe":
            raise ValueError("joint_vocab needs tokenizer bpe (a word vocabulary is per language)")
        if self.long_words is not None and (self.data is None or self.max_words is None
                                            or self.long_words <= self.max_words):
            raise ValueError(f"long_words needs data and must be more than max_words ({self.max_words}), "
                             f"got {self.long_words}")
        if self.share_embeddings and not self.joint_vocab:
            raise ValueError("share_embeddings needs joint_vocab (one vocabulary for both languages)")
        model = self.model_options()
        try:
            # the vocabularies are not built yet: the smallest legal size stands in for them
            TransformerConfig(src_vocab=len(SPECIAL_TOKENS), tgt_vocab=len(SPECIAL_TOKENS), **model)
        except ValueError as error:
            raise ValueError(str(error).removeprefix("TransformerConfig: ")) from None
        if self.token_budget < model["max_len"]:
            raise ValueError(f"token_budget must be at least max_len = {model['max_len']} (the longest example "
                             f"a batch must hold), got {self.token_budget}")

    def model_options(self) -> dict:
        """The preset with the overrides applied, for ``TransformerConfig``."""
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        overrides = {name: getattr(self, name) for name in MODEL_OVERRIDES if getattr(self, name) is not None}
        return {**PRESETS[self.preset], "max_len": 64, "dropout": self.dropout,
                "label_smoothing": self.label_smoothing, **overrides}


# What a resumed run may change: its budget (a longer run) and how much it reports. Everything else is
# the run's, from its config.json: the data, the model, the schedule, the seed.
CHANGEABLE_ON_RESUME = ("max_steps", "minutes", "log_every", "eval_every", "eval_sentences", "test_sentences",
                        "beam_size")


def resumed_options(given: TrainOptions, recorded: dict) -> tuple[TrainOptions, dict]:
    """The options a resumed run trains with: ``recorded`` (its config.json's ``train``), but where the run
    is (``name``, ``runs_dir``) and what ``given`` changes of ``CHANGEABLE_ON_RESUME``; and those changes,
    ``{option: (recorded, given)}``. A value of ``given`` that differs from both the default and the
    run's own is a ValueError naming both; one equal to the default is taken as not given."""
    defaults, values, changed = TrainOptions(), {}, {}
    for name in (field.name for field in fields(TrainOptions)):
        mine, default = getattr(given, name), getattr(defaults, name)
        theirs = recorded.get(name, default)
        if name in ("name", "runs_dir", "resume") or mine == theirs or mine == default:
            values[name] = mine if name in ("name", "runs_dir", "resume") else theirs
        elif name in CHANGEABLE_ON_RESUME:
            values[name], changed[name] = mine, (theirs, mine)
        else:
            raise ValueError(f"--{name.replace('_', '-')} {mine} differs from the run's own {theirs} (its config.json): "
                             "a resumed run keeps its settings; leave the flag out, or start a new run")
    return TrainOptions(**values), changed
