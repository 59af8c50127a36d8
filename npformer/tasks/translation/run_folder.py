"""The run folder: everything a translation run writes, and loading it back.

``runs/<name>/`` holds::

    config.json                  the model configuration, the training options, where the data came from
    src_vocab.json tgt_vocab.json the vocabularies, built from the training split
    train.tsv valid.tsv test.tsv  the splits (english<TAB>french), so a resumed run reads the same data
    long.tsv                      with --long-words: the longer pairs held out of training
    alignments.json               the embedded corpus only: each split's gold word alignments, in order
    truecase.json                 other data: how the training text writes each English word (``data.truecase``)
    checkpoint.npz (+ .json)     parameters, optimizer state, step and generator states (``checkpoint``)
    metrics.jsonl curves.png     what training logged, and its plot

``RunFolder.create`` writes the first four kinds once, when a run starts;
``load_run`` gives back a trained model and its vocabularies, which is all
that ``translate``, ``evaluate`` and ``attention`` need. Problems a user can
fix (no folder, a missing or damaged file) raise ``RunError`` with one line.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from ...data import Splits, Vocab, load_pairs
from ...data.truecase import Truecaser
from ...data.toy_corpus import Alignment
from ...errors import UsageError
from ...models import Transformer, TransformerConfig
from ...training.checkpoint import CheckpointError, load_checkpoint
from .options import resumed_options

CHECKPOINT = "checkpoint.npz"
ALIGNMENTS = "alignments.json"  # the embedded corpus's gold alignments, by split
TRUECASE = "truecase.json"  # how the training text writes each source word (not for the lower-case toy corpus)


class RunError(RuntimeError, UsageError):
    """A problem with a run folder or its data that the user can fix; reported in one line."""


def write_tsv(path: str, pairs: list[tuple[str, str]]) -> None:
    """Write ``pairs`` as ``english<TAB>french`` lines (a split file of a run folder)."""
    with open(path, "w", encoding="utf-8") as file:
        for english, french in pairs:
            file.write(f"{english}\t{french}\n")


def read_tsv(path: str) -> list[tuple[str, str]]:
    """The pairs of a split file of a run folder (an empty split of an older run gives none)."""
    pairs, _ = load_pairs(path, max_words=None, allow_empty=True)
    return pairs


class RunFolder:
    """Paths and files of one run folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    @property
    def checkpoint(self) -> str:
        return self.path(CHECKPOINT)

    def has_run(self) -> bool:
        return os.path.exists(self.path("config.json"))

    def create(self, config: dict, src_vocab: Vocab, tgt_vocab: Vocab, splits: Splits,
               truecaser: Truecaser | None = None) -> None:
        """Write the configuration, the vocabularies, the splits and the truecaser of a new run."""
        os.makedirs(self.folder, exist_ok=True)
        if truecaser is not None:
            truecaser.save(self.path(TRUECASE))
        for name, pairs in (("train.tsv", splits.train), ("valid.tsv", splits.valid), ("test.tsv", splits.test)):
            write_tsv(self.path(name), pairs)
        if splits.long:  # --long-words: the longer pairs held out of training
            write_tsv(self.path("long.tsv"), splits.long)
        if splits.alignments:  # the embedded corpus: its gold alignments, kept with the pairs they belong to
            with open(self.path(ALIGNMENTS), "w", encoding="utf-8") as file:  # dumps: C's encoder, 30x dump's
                file.write(json.dumps({name: [alignment.to_json() for alignment in alignments]
                                       for name, alignments in splits.alignments.items()}, separators=(",", ":")))
        src_vocab.save(self.path("src_vocab.json"))
        tgt_vocab.save(self.path("tgt_vocab.json"))
        self.write_config(config)

    def write_config(self, config: dict) -> None:
        """config.json, whole or not at all (written beside it, then moved over it)."""
        partial = self.path("config.json.partial")
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(config, file, indent=1, ensure_ascii=False)
        os.replace(partial, self.path("config.json"))

    def resumed_settings(self, given: Any, config: dict) -> tuple[Any, dict]:
        """The options a resumed run trains with: its own (config.json), with the budget and reporting that
        ``given`` changes, and those changes (``options.resumed_options``); a conflicting setting is a
        one-line ``RunError``. Nothing is written: ``record_resume`` keeps the changes once the run resumes."""
        try:
            return resumed_options(given, config.get("train", {}))
        except ValueError as error:
            raise RunError(f"{self.folder}: {error}") from None

    def record_resume(self, config: dict, options: Any, changed: dict, log: Any) -> None:
        """Say the settings a resumed run changed, and keep them in config.json's ``resumed`` list."""
        if changed:
            log("resuming with changed settings: " + ", ".join(f"{name} {old} -> {new}"
                                                              for name, (old, new) in changed.items()))
            config.update(train=asdict(options),
                          resumed=config.get("resumed", []) + [{name: new for name, (_, new) in changed.items()}])
            self.write_config(config)

    def _json(self, name: str) -> Any:
        """The JSON document ``name``; ``RunError`` names the file when it is not JSON."""
        path = self.path(name)
        try:
            with open(path, encoding="utf-8") as file:
                return json.load(file)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RunError(f"{path} is damaged: not valid JSON ({error})") from None

    def config(self) -> dict:
        config = self._json("config.json")
        if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
            raise RunError(f"{self.path('config.json')} is damaged: it has no 'model' section")
        return config

    def vocabularies(self) -> tuple[Vocab, Vocab]:
        vocabularies = []
        for name in ("src_vocab.json", "tgt_vocab.json"):
            document = self._json(name)
            try:
                vocabularies.append(Vocab.from_dict(document))
            except (KeyError, TypeError, ValueError) as error:
                reason = error.args[0] if isinstance(error, ValueError) else "it has no list of 'tokens'"
                raise RunError(f"{self.path(name)} is damaged: {reason}") from None
        return vocabularies[0], vocabularies[1]

    def split(self, name: str) -> list[tuple[str, str]]:
        """``"train"``, ``"valid"`` or ``"test"``: the sentence pairs written when the run started."""
        return read_tsv(self.path(f"{name}.tsv"))

    def alignments(self) -> dict[str, list[Alignment]]:
        """The gold alignments of each split, stored by ``create`` for a run on the embedded corpus
        (``alignments.json``); empty for other data and for runs made before they were stored."""
        if not os.path.exists(self.path(ALIGNMENTS)):
            return {}
        return {name: [Alignment.from_json(document) for document in documents]
                for name, documents in self._json(ALIGNMENTS).items()}

    def truecaser(self) -> Truecaser | None:
        """The run's truecaser (``truecase.json``); None for runs without one (the toy corpus, older runs)."""
        if not os.path.exists(self.path(TRUECASE)):
            return None
        try:
            return Truecaser.from_dict(self._json(TRUECASE))
        except ValueError as error:
            raise RunError(f"{self.path(TRUECASE)} is damaged: {error}") from None

    def read(self) -> tuple[dict, Vocab, Vocab, Splits]:
        """What ``create`` wrote: the configuration, both vocabularies and the splits (with their
        gold alignments when the run has them)."""
        long = self.split("long") if os.path.exists(self.path("long.tsv")) else []
        return (self.config(), *self.vocabularies(),
                Splits(self.split("train"), self.split("valid"), self.split("test"), self.alignments(), long))


@dataclass
class Run:
    """A trained run, loaded: the model (in eval mode), its vocabularies and its truecaser (or None)."""

    folder: str
    config: dict
    model: Transformer
    src_vocab: Vocab
    tgt_vocab: Vocab
    truecaser: Truecaser | None = None


def load_run(folder: str) -> Run:
    """Load a run folder written by ``npformer train``; raises ``RunError`` with one clear line."""
    if not os.path.isdir(folder):
        raise RunError(f"no run folder at {folder}")
    run = RunFolder(folder)
    needed = ["config.json", "src_vocab.json", "tgt_vocab.json", CHECKPOINT]
    missing = [name for name in needed if not os.path.isfile(run.path(name))]
    if missing:
        raise RunError(f"{folder} is not a complete npformer run (missing {', '.join(missing)})")
    config = run.config()
    try:
        model_config = TransformerConfig(**config["model"])
    except (TypeError, ValueError) as error:
        raise RunError(f"{run.path('config.json')}: its model settings do not fit this version of "
                       f"npformer ({error})") from None
    src_vocab, tgt_vocab = run.vocabularies()
    if len(src_vocab) != model_config.src_vocab or len(tgt_vocab) != model_config.tgt_vocab:
        raise RunError(f"{folder}: the vocabularies ({len(src_vocab)}, {len(tgt_vocab)} tokens) do not match "
                       f"the model's sizes ({model_config.src_vocab}, {model_config.tgt_vocab})")
    model = Transformer(model_config, seed=0)
    try:
        load_checkpoint(run.checkpoint, model)
    except CheckpointError as error:
        raise RunError(str(error)) from None
    return Run(folder, config, model.eval(), src_vocab, tgt_vocab, run.truecaser())


def latest_run(runs_dir: str = "runs") -> str | None:
    """The run folder in ``runs_dir`` whose checkpoint was written last, or None when there is none."""
    if not os.path.isdir(runs_dir):
        return None
    candidates = [os.path.join(runs_dir, name) for name in os.listdir(runs_dir)]
    candidates = [folder for folder in candidates if os.path.isfile(os.path.join(folder, CHECKPOINT))]
    return max(candidates, key=lambda folder: os.path.getmtime(os.path.join(folder, CHECKPOINT)), default=None)
