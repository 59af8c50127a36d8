"""Training a translator: data, vocabularies, the loop, evaluation, checkpoints, resumption.

``train(options)`` does what ``npformer train`` does:

1. Load the data: the embedded toy corpus, or a Tatoeba TSV file (``--data``),
   split by English sentence; write the validation and test splits to the run
   folder.
2. Build the vocabularies from the training split; write them and ``config.json``.
3. Train with Adam (betas 0.9/0.98, eps 1e-9, as in the paper), the warm-up
   schedule of the paper scaled to peak at ``lr``, gradient clipping and
   label smoothing, on shuffled length-bucketed batches of ``token_budget``
   tokens, with a progress bar.
4. Every ``eval_every`` steps: validation loss, token accuracy, greedy BLEU on
   a validation sample, three sample translations, a line in ``metrics.jsonl``,
   the curves in ``curves.png``, and a checkpoint.
5. At the end (step or time budget): a checkpoint and test BLEU, greedy and beam.

Safety: checkpoints are atomic (``npformer.checkpoint``); Ctrl-C saves one and
exits; a non-finite loss stops the run, naming the step, without overwriting
the last good checkpoint; ``resume=True`` continues from the checkpoint and
reproduces the uninterrupted run's losses exactly (same batches, same dropout
masks, same optimizer state).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import numpy

from . import backend, ops, optim
from .checkpoint import generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .data import (ATTRIBUTION, Splits, Vocab, encode_pairs, load_pairs, make_batches,
                   split_by_source, tokenize, toy_corpus)
from .decode import Translator
from .metrics import bleu
from .nn import PAD_ID, Transformer, TransformerConfig
from .progress import ProgressBar
from .viz import training_curves

PRESETS = {
    "tiny": dict(d_model=64, n_heads=4, d_ff=256, n_layers=2),
    "small": dict(d_model=128, n_heads=4, d_ff=512, n_layers=2),
    "base": dict(d_model=256, n_heads=8, d_ff=1024, n_layers=3),
}
CHECKPOINT = "checkpoint.npz"


class TrainingError(RuntimeError):
    """A problem the user can fix (bad folder, bad data); reported in one line."""


@dataclass
class TrainOptions:
    name: str | None = None
    runs_dir: str = "runs"
    resume: bool = False
    data: str | None = None  # None: the embedded toy corpus
    max_words: int | None = 8
    max_pairs: int | None = None  # also caps the toy corpus's training split
    lowercase: bool = False
    preset: str = "tiny"
    model: dict = field(default_factory=dict)  # overrides of the preset / TransformerConfig
    dropout: float = 0.1
    label_smoothing: float = 0.1
    min_freq: int = 1
    max_vocab: int | None = None
    token_budget: int = 2048
    lr: float = 2e-3  # the peak of the warm-up schedule
    warmup: int = 300
    clip: float = 1.0
    minutes: float | None = None
    max_steps: int | None = None
    eval_every: int = 250
    eval_sentences: int = 200
    log_every: int = 10
    test_sentences: int | None = 1000
    beam_size: int = 4
    seed: int = 0


def _run_name(options: TrainOptions) -> str:
    if options.name:
        return options.name
    data = "toy" if options.data is None else os.path.splitext(os.path.basename(options.data))[0]
    return f"{data}-{options.preset}"


def load_splits(options: TrainOptions, log: Any = print) -> tuple[Splits, dict]:
    """The splits and a description of where they came from."""
    if options.data is None:
        splits = toy_corpus(n_train=options.max_pairs or 12000, seed=options.seed)
        info = {"source": "embedded toy corpus (npformer.data.toy_corpus)", **splits.counts()}
    else:
        pairs, report = load_pairs(options.data, options.max_words, options.max_pairs, options.lowercase)
        log(report.summary())
        if not pairs:
            raise TrainingError(f"no usable sentence pairs in {options.data}")
        splits = split_by_source(pairs, seed=options.seed)
        info = {"source": os.path.abspath(options.data), "attribution": ATTRIBUTION,
                "max_words": options.max_words, "max_pairs": options.max_pairs,
                "lowercase": options.lowercase, "malformed_lines": sum(map(len, report.problems.values())),
                **splits.counts()}
    log("data: " + ", ".join(f"{k} {v:,}" for k, v in splits.counts().items()) + " pairs")
    return splits, info


def write_tsv(path: str, pairs: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8") as file:
        for english, french in pairs:
            file.write(f"{english}\t{french}\n")


def read_tsv(path: str) -> list[tuple[str, str]]:
    pairs, _ = load_pairs(path, max_words=None)
    return pairs


@dataclass
class Run:
    """Everything a trained run folder holds, loaded."""

    folder: str
    config: dict
    model: Transformer
    src_vocab: Vocab
    tgt_vocab: Vocab

    def translator(self) -> Translator:
        return Translator(self.model, self.src_vocab, self.tgt_vocab)


def load_run(folder: str) -> Run:
    """Load a run folder written by ``train``; raises ``TrainingError`` with one clear line."""
    if not os.path.isdir(folder):
        raise TrainingError(f"no run folder at {folder}")
    needed = ["config.json", "src_vocab.json", "tgt_vocab.json", CHECKPOINT]
    missing = [name for name in needed if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        raise TrainingError(f"{folder} is not a complete npformer run (missing {', '.join(missing)})")
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as file:
            config = json.load(file)
        model_config = TransformerConfig(**config["model"])
        model = Transformer(model_config, seed=0)
        load_checkpoint(os.path.join(folder, CHECKPOINT), model)
        src_vocab = Vocab.load(os.path.join(folder, "src_vocab.json"))
        tgt_vocab = Vocab.load(os.path.join(folder, "tgt_vocab.json"))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as error:
        raise TrainingError(f"{folder} does not fit this version of npformer: {error}") from None
    if len(src_vocab) != model_config.src_vocab or len(tgt_vocab) != model_config.tgt_vocab:
        raise TrainingError(f"{folder}: the vocabularies do not match the model's sizes")
    return Run(folder, config, model.eval(), src_vocab, tgt_vocab)


def evaluate_loss(model: Transformer, examples: list, token_budget: int) -> tuple[float, float]:
    """Teacher-forced cross-entropy (no smoothing) and token accuracy over ``examples``."""
    model.eval()
    total_loss = total_correct = total_tokens = 0.0
    for batch in make_batches(examples, token_budget):
        tgt_out = backend.asarray(batch.tgt_out)
        logits = model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
        loss, _ = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
        real = tgt_out != PAD_ID
        n = int(real.sum())
        total_loss += float(loss) * n
        total_correct += int((logits.argmax(-1)[real] == tgt_out[real]).sum())
        total_tokens += n
    model.train()
    return total_loss / max(total_tokens, 1), total_correct / max(total_tokens, 1)


def corpus_bleu(translator: Translator, pairs: list[tuple[str, str]], beam_size: int = 1) -> tuple[float, list[str]]:
    hypotheses = translator.translate([english for english, _ in pairs], beam_size=beam_size)
    return bleu(hypotheses, [french for _, french in pairs]), hypotheses


class Trainer:
    """One training run; see the module docstring."""

    def __init__(self, options: TrainOptions, stream: IO[str] | None = None) -> None:
        self.options = options
        self.stream = stream or sys.stderr
        self.folder = os.path.join(options.runs_dir, _run_name(options))

    def log(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    # -- setting up ---------------------------------------------------------------------------

    def _prepare_new_run(self) -> None:
        options = self.options
        if os.path.exists(self.path("config.json")):
            raise TrainingError(f"{self.folder} already holds a run: pass --resume to continue it, "
                                f"or --name for a new one")
        if options.preset not in PRESETS:
            raise TrainingError(f"unknown preset {options.preset!r}; choose from {', '.join(PRESETS)}")
        splits, data_info = load_splits(options, self.log)
        os.makedirs(self.folder, exist_ok=True)
        write_tsv(self.path("valid.tsv"), splits.valid)
        write_tsv(self.path("test.tsv"), splits.test)
        src_vocab = Vocab.build((tokenize(e, "en") for e, _ in splits.train), options.min_freq, options.max_vocab)
        tgt_vocab = Vocab.build((tokenize(f, "fr") for _, f in splits.train), options.min_freq, options.max_vocab)
        src_vocab.save(self.path("src_vocab.json"))
        tgt_vocab.save(self.path("tgt_vocab.json"))
        model = dict(PRESETS[options.preset], max_len=64, dropout=options.dropout,
                     label_smoothing=options.label_smoothing, **options.model)
        model = TransformerConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), **model)
        config = {"model": model.to_dict(), "train": asdict(options), "data": data_info,
                  "vocab": {"src": len(src_vocab), "tgt": len(tgt_vocab)}}
        with open(self.path("config.json"), "w", encoding="utf-8") as file:
            json.dump(config, file, indent=1, ensure_ascii=False)
        write_tsv(self.path("train.tsv"), splits.train)

    def _load_state(self) -> None:
        with open(self.path("config.json"), encoding="utf-8") as file:
            self.config = json.load(file)
        self.model_config = TransformerConfig(**self.config["model"])
        self.src_vocab = Vocab.load(self.path("src_vocab.json"))
        self.tgt_vocab = Vocab.load(self.path("tgt_vocab.json"))
        max_len = self.model_config.max_len
        self.train_examples = encode_pairs(read_tsv(self.path("train.tsv")), self.src_vocab, self.tgt_vocab, max_len)
        self.valid_pairs = read_tsv(self.path("valid.tsv"))
        self.valid_examples = encode_pairs(self.valid_pairs, self.src_vocab, self.tgt_vocab, max_len)
        self.test_pairs = read_tsv(self.path("test.tsv"))
        self.model = Transformer(self.model_config, seed=self.options.seed)
        self.optimizer = optim.Adam(self.model, lr=0.0, betas=(0.9, 0.98), eps=1e-9)
        d_model = self.model_config.d_model
        factor = self.options.lr * math.sqrt(d_model * self.options.warmup)  # peak = lr
        self.schedule = optim.NoamSchedule(d_model, self.options.warmup, factor=factor)
        self.data_rng = numpy.random.default_rng(self.options.seed)
        self.translator = Translator(self.model, self.src_vocab, self.tgt_vocab)

    # -- checkpoints --------------------------------------------------------------------------

    def save(self, step: int, epoch: int, batch_index: int, epoch_rng_state: dict, elapsed: float) -> None:
        meta = {"step": step, "epoch": epoch, "batch_index": batch_index,
                "epoch_rng_state": epoch_rng_state, "elapsed_seconds": elapsed,
                "dropout_rng_state": generator_state(self.model.dropout_rng)}
        save_checkpoint(self.path(CHECKPOINT), self.model, self.optimizer, meta)

    # -- evaluation ---------------------------------------------------------------------------

    def evaluate(self, step: int, bar: ProgressBar) -> dict:
        options = self.options
        valid_loss, accuracy = evaluate_loss(self.model, self.valid_examples, options.token_budget)
        sample = self.valid_pairs[: options.eval_sentences]
        valid_bleu, hypotheses = corpus_bleu(self.translator, sample)
        self.model.train()
        record = {"kind": "eval", "step": step, "valid_loss": valid_loss, "valid_accuracy": accuracy,
                  "valid_bleu": valid_bleu, "bleu_sentences": len(sample)}
        lines = [f"step {step}: valid loss {valid_loss:.3f}, token accuracy {accuracy:.1%}, "
                 f"BLEU {valid_bleu:.1f} on {len(sample)} sentences"]
        for (english, french), hypothesis in list(zip(sample, hypotheses))[:3]:
            lines.append(f"  {english}  ->  {hypothesis}   (reference: {french})")
        bar.message("\n".join(lines))
        return record

    # -- the loop -----------------------------------------------------------------------------

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        """First Ctrl-C: finish the current step, save, stop. Second: stop at once."""
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True

    def run(self) -> int:
        self.interrupted = False
        in_main_thread = threading.current_thread() is threading.main_thread()
        previous_handler = signal.signal(signal.SIGINT, self._on_interrupt) if in_main_thread else None
        try:
            return self._run()
        finally:
            if in_main_thread:
                signal.signal(signal.SIGINT, previous_handler)

    def _run(self) -> int:
        options = self.options
        if options.resume:
            if not os.path.isfile(os.path.join(self.folder, CHECKPOINT)):
                raise TrainingError(f"nothing to resume in {self.folder} (no {CHECKPOINT})")
        else:
            self._prepare_new_run()
        self._load_state()
        step, epoch, start_index, elapsed_before = 0, 0, 0, 0.0
        epoch_rng_state = generator_state(self.data_rng)
        if options.resume:
            meta = load_checkpoint(self.path(CHECKPOINT), self.model, self.optimizer)
            step, epoch, start_index = meta["step"], meta["epoch"], meta["batch_index"]
            epoch_rng_state, elapsed_before = meta["epoch_rng_state"], meta["elapsed_seconds"]
            set_generator_state(self.model.dropout_rng, meta["dropout_rng_state"])
            self.log(f"resuming {self.folder} at step {step}")
        self.log(f"run folder: {self.folder}; model: {self.model.num_params():,} parameters "
                 f"({options.preset}: d_model {self.model_config.d_model}, {self.model_config.n_layers}+"
                 f"{self.model_config.n_layers} layers); vocab {len(self.src_vocab):,}/{len(self.tgt_vocab):,}")
        budget_seconds = options.minutes * 60 if options.minutes else None
        bar = ProgressBar(total_steps=options.max_steps, total_seconds=budget_seconds, stream=self.stream)
        started = time.perf_counter()
        tokens_seen = 0

        def elapsed() -> float:
            return elapsed_before + time.perf_counter() - started

        def done() -> bool:
            return ((options.max_steps is not None and step >= options.max_steps)
                    or (budget_seconds is not None and time.perf_counter() - started >= budget_seconds))

        self.model.train()
        with open(self.path("metrics.jsonl"), "a", encoding="utf-8") as metrics:
            while not done() and not self.interrupted:
                # The batches of an epoch are a function of the generator's state at its start,
                # so a resumed run rebuilds them exactly and skips the ones already done.
                set_generator_state(self.data_rng, epoch_rng_state)
                batches = make_batches(self.train_examples, options.token_budget, self.data_rng)
                next_epoch_rng_state = generator_state(self.data_rng)
                while start_index < len(batches) and not done() and not self.interrupted:
                    batch = batches[start_index]
                    self.optimizer.lr = self.schedule(step + 1)
                    logits = self.model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
                    loss = float(self.model.loss(logits, backend.asarray(batch.tgt_out)))
                    if not math.isfinite(loss):
                        bar.close()
                        self.log(f"stopping: the loss is {loss} at step {step + 1}; the last good "
                                 f"checkpoint ({self.path(CHECKPOINT)}) is kept")
                        return 1
                    self.model.zero_grad()
                    self.model.backward(self.model.criterion.backward())
                    grad_norm = optim.clip_grad_norm(self.model, options.clip)
                    self.optimizer.step()
                    step += 1
                    start_index += 1
                    tokens_seen += batch.n_tokens
                    rate = tokens_seen / max(time.perf_counter() - started, 1e-9)
                    if step % options.log_every == 0:
                        metrics.write(json.dumps({"kind": "train", "step": step, "loss": loss,
                                                  "lr": self.optimizer.lr, "grad_norm": grad_norm,
                                                  "tokens_per_second": rate, "epoch": epoch}) + "\n")
                        metrics.flush()
                    bar.update(step, loss=f"loss {loss:.3f}", rate=f"{rate:,.0f} tok/s",
                               lr=f"lr {self.optimizer.lr:.1e}")
                    if step % options.eval_every == 0:
                        metrics.write(json.dumps(self.evaluate(step, bar)) + "\n")
                        metrics.flush()
                        self.save(step, epoch, start_index, epoch_rng_state, elapsed())
                        self._plot()
                if start_index >= len(batches):
                    epoch, start_index, epoch_rng_state = epoch + 1, 0, next_epoch_rng_state
        self.save(step, epoch, start_index, epoch_rng_state, elapsed())
        bar.close()
        if self.interrupted:
            self.log(f"interrupted at step {step}; checkpoint saved in {self.folder}; continue with: "
                     f"npformer train --name {os.path.basename(self.folder)} --resume")
            return 130
        self._plot()
        self.finish(step)
        return 0

    def finish(self, step: int) -> None:
        """Final evaluation on the test split, greedy and beam, into metrics.jsonl."""
        test = self.test_pairs[: self.options.test_sentences] if self.options.test_sentences else self.test_pairs
        self.model.eval()
        greedy, _ = corpus_bleu(self.translator, test, 1)
        beam, _ = corpus_bleu(self.translator, test, self.options.beam_size)
        record = {"kind": "test", "step": step, "sentences": len(test), "bleu_greedy": greedy,
                  "bleu_beam": beam, "beam_size": self.options.beam_size}
        with open(self.path("metrics.jsonl"), "a", encoding="utf-8") as metrics:
            metrics.write(json.dumps(record) + "\n")
        self.log(f"test BLEU on {len(test)} sentences: greedy {greedy:.1f}, "
                 f"beam {self.options.beam_size} {beam:.1f}; run folder {self.folder}")

    def _plot(self) -> None:
        with open(self.path("metrics.jsonl"), encoding="utf-8") as file:
            records = [json.loads(line) for line in file if line.strip()]
        training_curves(records, self.path("curves.png"), title=os.path.basename(self.folder))


def train(options: TrainOptions, stream: IO[str] | None = None) -> int:
    """Run ``npformer train``; returns the exit status."""
    return Trainer(options, stream).run()
