"""Training a translator: ``npformer train``.

``train(options)`` runs these parts, each in its own place:

1. **A new run** (``start_run``): load the data (the embedded toy corpus, or a
   Tatoeba TSV file split by English sentence), build the vocabularies from
   the training split, and write them, the splits and ``config.json`` into the
   run folder (``run_folder.RunFolder``).
2. **The loop** (``Trainer.run``): epochs of shuffled, length-bucketed batches
   of ``token_budget`` tokens (with ``unk_rate``, some aligned word pairs made
   unknown, drawn anew each epoch: ``<unk>`` with words, an invented word with
   BPE pieces; ``data.unknown_words``); each step is
   ``training.train_step`` (Adam with betas 0.9/0.98 and eps 1e-9, as in the
   paper; the learning rate warms up to ``lr`` and then decays to zero at the end
   of the budget, ``optim.BudgetSchedule``, or as the paper's ``NoamSchedule``;
   gradient clipping and label smoothing), with a progress bar.
3. **Evaluation** every ``eval_every`` steps (``evaluation.validate``):
   validation loss, token accuracy, greedy BLEU on a sample, three sample
   translations, a line in ``metrics.jsonl`` and the curves in ``curves.png``.
4. **Checkpoints** (``training.checkpoint``) after each evaluation and at the
   end, atomic; with ``average_last`` N > 1 the final model is the mean of the
   parameters at the last N evaluation points and the last step
   (``training.Snapshots``); then the test BLEU, greedy and beam.

A student's ``train_loop`` (lesson 13; ``train(options, loop=...)``, ``npformer train --ops``) can
take the steps instead of ``train_step``: ``student_loop`` hands it the same batches, the loss and
gradients, the schedule and the optimizer's state, and everything else stays as it is.

Safety: Ctrl-C finishes the current step, saves and exits (a second Ctrl-C
stops at once); a non-finite loss stops the run, naming the step, and keeps
the last good checkpoint; ``resume=True`` continues from the checkpoint and
reproduces the uninterrupted run's losses exactly (same batches, same dropout
masks, same optimizer state).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict
from typing import IO, Any, Iterator

import numpy

from ... import backend, optim, threads
from ...data import (ATTRIBUTION, BPEVocab, Splits, Vocab, check_splits, copy_links, encode_pairs, encode_tokens,
                     hide_links, invent_links, load_pairs, make_batches, split_by_source, split_hint, tokenize,
                     toy_corpus, WordInventor)
from ...data.final_mark import marks_of
from ...data.truecase import Truecaser
from ...models import Transformer, TransformerConfig
from ...tokens import PAD_ID
from ...training import (CheckpointError, Snapshots, generator_state, graceful_interrupts, load_checkpoint,
                         save_checkpoint, set_generator_state, train_step)
from ...viz import close, training_curves
from ..checks import check_folder_can_be_created
from . import student_loop
from .evaluation import metrics_line, test_bleu, validate
from .long_pairs import split_by_length, with_longer_pairs
from .options import TrainOptions
from .run_folder import RunError, RunFolder
from .translator import Translator


def load_splits(options: TrainOptions, log: Any = print) -> tuple[Splits, dict]:
    """The splits and a description of where they came from; ``DataError`` (a ``ValueError`` naming
    the file) when ``options.data`` cannot be read or leaves the training, validation or test split
    empty (the validation BLEU and the test BLEU would be over nothing)."""
    if options.data is None:
        splits = toy_corpus(n_train=options.max_pairs or 12000, seed=options.seed)
        info = {"source": "embedded toy corpus (npformer.data.toy_corpus)", **splits.counts()}
    else:
        # DataError (naming the file) when it cannot be read or a split comes out empty: before any work
        pairs, report = load_pairs(options.data, options.long_words or options.max_words, options.max_pairs,
                                   options.lowercase)
        log(report.summary())
        pairs, longer = split_by_length(pairs, options.max_words)
        splits = check_splits(split_by_source(pairs, seed=options.seed), options.data,
                              hint=split_hint(report, options.max_pairs, options.max_words))
        info = {"source": os.path.abspath(options.data), "attribution": ATTRIBUTION,
                "max_words": options.max_words, "max_pairs": options.max_pairs,
                "lowercase": options.lowercase, "malformed_lines": sum(map(len, report.problems.values())),
                **splits.counts()}
        if options.long_words:
            short_train = len(splits.train)
            splits = with_longer_pairs(splits, longer, options.seed)
            info.update(long_words=options.long_words, train=len(splits.train), long_held_out=len(splits.long))
            log(f"longer pairs (up to {options.long_words} words a side): {len(splits.train) - short_train:,} "
                f"in training, {len(splits.long):,} held out (long.tsv)")
    log("data: " + ", ".join(f"{k} {v:,}" for k, v in splits.counts().items()) + " pairs")
    return splits, info


def build_vocabularies(options: TrainOptions, train_tokens: list[tuple[list[str], list[str]]],
                       log: Any = print) -> tuple[Vocab, Vocab]:
    """The source and target vocabularies, from the training split only (``train_tokens``: its
    pairs tokenised): words (``min_freq``, ``max_vocab``), or BPE pieces (``bpe_merges`` merges per
    language, or one joint set)."""
    english = [source for source, _ in train_tokens]
    french = [target for _, target in train_tokens]
    if options.tokenizer == "word":
        return (Vocab.build(english, options.min_freq, options.max_vocab),
                Vocab.build(french, options.min_freq, options.max_vocab))
    if options.joint_vocab:
        joint = BPEVocab.learn(english + french, options.bpe_merges)
        src_vocab = tgt_vocab = joint
    else:
        src_vocab = BPEVocab.learn(english, options.bpe_merges)
        tgt_vocab = BPEVocab.learn(french, options.bpe_merges)
    words = sum(map(len, english)) + sum(map(len, french))
    pieces = sum(len(src_vocab.pieces(s)) for s in english) + sum(len(tgt_vocab.pieces(s)) for s in french)
    log(f"BPE: {len(src_vocab.merges):,} merges ({'joint' if options.joint_vocab else 'per language'}), "
        f"{pieces / max(words, 1):.2f} pieces per word on the training split")
    return src_vocab, tgt_vocab


def training_copy_links(options: TrainOptions, splits: Splits, token_pairs: list[tuple[list[str], list[str]]],
                        log: Any = print) -> list[list[tuple[int, int]]]:
    """The aligned word pairs of every training pair (``token_pairs``: ``splits.train`` tokenised)
    that ``unk_rate`` may hide (``data.unknown_words``): the gold one-to-one links on the embedded
    corpus (stored in the run folder with the splits), words written the same on both sides otherwise."""
    alignments = splits.alignments.get("train")  # a resumed run reads them back from its folder
    if alignments is None and options.data is None:
        log("unk_rate: this run's folder holds no gold alignments (made before they were stored); the "
            "words hidden are those written the same on both sides")
    alignments = alignments or [None] * len(splits.train)
    return [copy_links(source, target, alignment) for (source, target), alignment in zip(token_pairs, alignments)]


def start_run(options: TrainOptions, folder: RunFolder, log: Any = print) -> tuple[dict, Vocab, Vocab, Splits]:
    """Write a new run's configuration, vocabularies and splits (never over an existing run),
    and return them, as ``RunFolder.read`` would."""
    if folder.has_run():
        raise RunError(f"{folder.folder} already holds a run: pass --resume to continue it, "
                       f"or --name for a new one")
    model_options = options.model_options()
    splits, data_info = load_splits(options, log)
    train_tokens = [(tokenize(source, "en"), tokenize(target, "fr")) for source, target in splits.train]
    src_vocab, tgt_vocab = build_vocabularies(options, train_tokens, log)
    model = TransformerConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), **model_options)
    # How the training text was written, so that input as people type it is read the same way: the
    # embedded corpus is lower-case; it and Tatoeba end every sentence with the mark its words ask for
    # (data.final_mark), which input typed without one is given.
    style = {"lowercase": options.data is None or options.lowercase,
             "final_mark": marks_of([source for source, _ in train_tokens])}
    config = {"model": model.to_dict(), "train": asdict(options), "data": data_info, "input": style,
              "vocab": {"src": len(src_vocab), "tgt": len(tgt_vocab)}}
    # Other text is written in sentence case: input typed without case is read in the training text's.
    truecaser = None if style["lowercase"] else Truecaser.learn(train_tokens)
    folder.create(config, src_vocab, tgt_vocab, splits, truecaser)
    return config, src_vocab, tgt_vocab, splits


class Trainer:
    """One training run; see the module docstring."""

    def __init__(self, options: TrainOptions, stream: IO[str] | None = None, loop: Any = None) -> None:
        self.options = options
        self.loop = loop          # the student's train_loop (lesson 13), or None: npformer's steps
        self.loop_state: dict | None = None  # what the student's loop keeps between its calls
        self.stream = stream or sys.stderr
        self.run_folder = RunFolder(os.path.join(options.runs_dir, options.run_name()))
        self.folder = self.run_folder.folder
        self._records_plotted: int | None = None  # metrics.jsonl's lines when curves.png was last drawn

    def log(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _build(self, config: dict, src_vocab: Vocab, tgt_vocab: Vocab, splits: Splits) -> None:
        """Model, optimizer, schedule and encoded data of a run (new, or read back to resume)."""
        options = self.options
        self.model_config = TransformerConfig(**config["model"])
        max_len = self.model_config.max_len
        self.train_examples = encode_pairs(splits.train, src_vocab, tgt_vocab, max_len)
        token_pairs = ([(tokenize(source, "en"), tokenize(target, "fr")) for source, target in splits.train]
                       if options.unk_rate else None)
        self.train_links = training_copy_links(options, splits, token_pairs, self.log) if options.unk_rate else None
        self.train_tokens = token_pairs if options.unk_rate and options.tokenizer == "bpe" else None
        if self.train_tokens is not None:  # invented words, in letters both vocabularies know
            known = {token for token in src_vocab.index if len(token) == 1} & set(tgt_vocab.index)
            self.inventor = WordInventor((word for pair in self.train_tokens for side in pair for word in side), known)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.valid_pairs = splits.valid
        self.valid_examples = encode_pairs(self.valid_pairs, src_vocab, tgt_vocab, max_len)
        self.test_pairs = splits.test
        self.model = Transformer(self.model_config, seed=options.seed)
        self.optimizer = optim.Adam(self.model, lr=0.0, betas=(0.9, 0.98), eps=1e-9)
        d_model = self.model_config.d_model
        if options.learning_rate_schedule() == "noam":
            noam = optim.NoamSchedule(d_model, options.warmup, factor=options.lr * math.sqrt(d_model * options.warmup))
            self.learning_rate = lambda step, spent: noam(step)       # peak = lr, at step = warmup
        else:
            self.learning_rate = optim.BudgetSchedule(options.lr, options.warmup)   # zero when the budget is spent
        self.snapshots = Snapshots(self.run_folder.path("snapshots.npz"), options.average_last)
        self.data_rng = numpy.random.default_rng(options.seed)
        self.translator = Translator.for_config(self.model, src_vocab, tgt_vocab, config, self.run_folder.truecaser())

    def epoch_examples(self) -> list[tuple[list[int], list[int]]]:
        """The training examples of the next epoch: with ``unk_rate``, some aligned word pairs
        made unknown anew (``<unk>`` for words, an invented word spelled in pieces for BPE)."""
        if not self.options.unk_rate:
            return self.train_examples
        if self.train_tokens is None:
            return hide_links(self.train_examples, self.train_links, self.options.unk_rate, self.data_rng)
        examples, max_len = list(self.train_examples), self.model_config.max_len
        changed = invent_links(self.train_tokens, self.train_links, self.options.unk_rate, self.data_rng,
                               self.inventor)
        for n, (source, target) in changed.items():
            # A pair the invented word makes too long would lose it on one side: it stays as it was.
            if len(self.src_vocab.pieces(source)) <= max_len and len(self.tgt_vocab.pieces(target)) < max_len:
                examples[n] = encode_tokens(source, target, self.src_vocab, self.tgt_vocab, max_len)
        return examples

    def save(self, position: dict) -> None:
        """A checkpoint of the model, the optimizer and ``position`` (where the loop stands); under
        the student's loop, the optimizer's state is first what their ``state`` holds."""
        if self.loop_state is not None:
            student_loop.store_state(self.optimizer, self.loop_state)
        meta = {**position, "dropout_rng_state": generator_state(self.model.dropout_rng),
                "train_loop": "yours" if self.loop is not None else "npformer's"}
        save_checkpoint(self.run_folder.checkpoint, self.model, self.optimizer, meta)

    def _average(self, step: int) -> None:
        """The final model: the mean of the last ``average_last`` snapshots (the evaluation points and
        this last step), with the validation of both in ``metrics.jsonl``."""
        self.snapshots.take(self.model, step)
        if len(self.snapshots.steps) < 2:
            return
        last, _ = validate(self.translator, self.valid_examples, self.valid_pairs, self.options.token_budget,
                           self.options.eval_sentences)
        self.snapshots.load_mean_into(self.model)
        averaged, _ = validate(self.translator, self.valid_examples, self.valid_pairs, self.options.token_budget,
                               self.options.eval_sentences)
        self._record({"kind": "average", "step": step, "steps": self.snapshots.steps,
                      "last": last, "averaged": averaged})
        self.log(f"the final model is the mean of the parameters at steps {self.snapshots.steps}: validation loss "
                 f"{last['valid_loss']:.3f} -> {averaged['valid_loss']:.3f}, BLEU on {self.options.eval_sentences} "
                 f"sentences {last['valid_bleu']:.1f} -> {averaged['valid_bleu']:.1f}")

    def _record(self, record: dict) -> None:
        with open(self.run_folder.path("metrics.jsonl"), "a", encoding="utf-8") as metrics:
            metrics.write(json.dumps(record) + "\n")

    def _plot(self) -> None:
        path = self.run_folder.path("metrics.jsonl")
        records = []
        if os.path.exists(path):  # a run shorter than log_every steps has logged nothing yet
            with open(path, encoding="utf-8") as file:
                records = [json.loads(line) for line in file if line.strip()]
        if records and len(records) == self._records_plotted:
            return  # nothing logged since the last figure (a run that ends on an evaluation step)
        self._records_plotted = len(records)
        close(training_curves(records, self.run_folder.path("curves.png"), title=os.path.basename(self.folder)))

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        """Train; returns the exit status (0 done, 1 non-finite loss, 130 interrupted)."""
        options = self.options
        try:  # every option, and where the run will write, before any work
            options.check()
            check_folder_can_be_created(self.folder)
        except ValueError as error:
            raise RunError(str(error)) from None
        if options.resume:
            if not os.path.isfile(self.run_folder.checkpoint):
                raise RunError(f"nothing to resume in {self.folder} (no {os.path.basename(self.run_folder.checkpoint)})")
            config, *read_back = self.run_folder.read()
            self.options, changed = self.run_folder.resumed_settings(options, config)
            options = self.options
            self._build(config, *read_back)
        else:
            self._build(*start_run(options, self.run_folder, self.log))
        position = {"step": 0, "epoch": 0, "batch_index": 0, "elapsed_seconds": 0.0,
                    "epoch_rng_state": generator_state(self.data_rng)}
        if options.resume:
            try:
                meta = load_checkpoint(self.run_folder.checkpoint, self.model, self.optimizer)
                position = {key: meta[key] for key in position}
                if not set_generator_state(self.model.dropout_rng, meta["dropout_rng_state"]):
                    why = ("holds no dropout stream" if meta["dropout_rng_state"] is None else
                           "holds a dropout stream drawn on another backend (NumPy's generator on a CPU, npformer's "
                           "counter generator on CuPy)")
                    self.log(f"note: {self.run_folder.checkpoint} {why}; dropout restarts from the run's seed, so "
                             f"the run is not the one it would have been")
            except CheckpointError as error:
                raise RunError(f"cannot resume: {error}") from None
            except KeyError as error:
                raise RunError(f"cannot resume: {self.run_folder.checkpoint} was not written by npformer train "
                               f"(its metadata has no {error.args[0]!r})") from None
            max_steps, minutes = options.budget()
            if (max_steps is not None and position["step"] >= max_steps) or \
                    (minutes is not None and max_steps is None and position["elapsed_seconds"] >= 60 * minutes):
                budget = f"--max-steps {max_steps}" if max_steps is not None else f"--minutes {minutes:g}"
                raise RunError(f"{self.folder} has already trained {position['step']} steps, its whole budget "
                               f"({budget}): nothing to resume; give a larger {budget.split()[0]} to train on")
            self.run_folder.record_resume(config, options, changed, self.log)
            self.log(f"resuming {self.folder} at step {position['step']}")
        self._note_short_warmup()
        c = self.model_config
        self.log(f"run folder: {self.folder}; model: {self.model.num_params():,} parameters "
                 f"({options.preset}: d_model {c.d_model}, {c.n_layers}+{c.n_layers} layers); "
                 f"vocab {self.model_config.src_vocab:,}/{self.model_config.tgt_vocab:,}; "
                 f"{threads.get_threads()} thread(s) (NPFORMER_THREADS; another count sums in another order "
                 f"and gives slightly different weights)")
        if self.loop is not None:
            self.log(student_loop.HEADER)
        with graceful_interrupts() as stop:
            status = self._loop(position, stop)
        if status != 0:
            return status
        self._plot()
        test = self.test_pairs[: options.test_sentences] if options.test_sentences else self.test_pairs
        record = {**test_bleu(self.translator, test, options.beam_size), "step": position["step"]}
        self._record(record)
        self.log(f"{metrics_line(record)}; run folder {self.folder}")
        self.log(f"wrote {self.folder}: {self._written()}")
        return 0

    def _written(self) -> str:
        """The files of the run folder, named, with what each holds."""
        holds = {"checkpoint.npz": "the model and optimizer", "curves.png": "loss, BLEU and learning rate",
                 "metrics.jsonl": "what was logged", "config.json": "the settings"}
        names = sorted(name for name in os.listdir(self.folder) if not name.endswith(".tmp"))
        return ", ".join(f"{name} ({holds[name]})" if name in holds else name for name in names)

    def _note_short_warmup(self) -> None:
        """A note when a step budget ends inside (or right after) the learning rate's warm-up: the
        run then trains at a fraction of ``--lr`` and learns little."""
        max_steps, _ = self.options.budget()
        if max_steps is not None and self.options.warmup >= max_steps / 2:
            self.log(f"note: the learning rate warms up over {self.options.warmup} steps, "
                     f"{'more than' if self.options.warmup >= max_steps else 'half or more of'} the "
                     f"{max_steps} of this run, so it trains mostly below --lr and learns little; give a "
                     f"smaller --warmup (a tenth of the steps is usual) or more --max-steps")

    def _loop(self, position: dict, stop: Any) -> int:
        """Epochs of batches until the budget is spent or Ctrl-C; ``position`` is updated in place.
        The steps are npformer's (``train_step``), or the student's ``loop`` (``student_loop``)."""
        from tqdm.auto import tqdm   # here, not at the top: importing npformer starts no progress bar

        options = self.options
        max_steps, minutes = options.budget()
        self._started, self._elapsed_before, self._tokens_seen = time.perf_counter(), position["elapsed_seconds"], 0
        elapsed_before = self._elapsed_before

        def spent() -> float:
            """The share of the budget used so far: of the steps, or of the time (the run's whole time,
            resumed sessions included), whichever is further."""
            shares = [0.0]
            if max_steps is not None:
                shares.append(position["step"] / max_steps)
            if minutes is not None:
                shares.append((elapsed_before + time.perf_counter() - self._started) / (60 * minutes))
            return min(max(shares), 1.0)

        interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._bar = tqdm(total=max_steps, initial=position["step"], file=self.stream, unit="step",
                         dynamic_ncols=True, mininterval=0.1 if interactive else 30.0)
        self.model.train()
        batches = self._batches(position, stop, spent)
        status = self._npformer_steps(batches, position, spent) if self.loop is None else \
            student_loop.run(self, batches, position, spent)
        self._bar.close()
        if status != 0:
            return status
        position["elapsed_seconds"] = elapsed_before + time.perf_counter() - self._started
        if not stop.requested and self.options.average_last > 1:
            self._average(position["step"])
        self.save(position)
        if not stop.requested and minutes is not None and (max_steps is None or position["step"] < max_steps):
            self.log(f"stopping: the time budget of {minutes:g} minutes is spent, at step {position['step']}")
        if stop.requested:
            where = "" if self.options.runs_dir == "runs" else f" --runs-dir {self.options.runs_dir}"
            self.log(f"interrupted at step {position['step']}; checkpoint saved in {self.folder}; continue "
                     f"with: npformer train --name {os.path.basename(self.folder)}{where} --resume (the run's "
                     "settings are in its config.json)")
            return 130
        return 0

    def _batches(self, position: dict, stop: Any, spent: Any) -> Iterator[Any]:
        """The batches still to train on, one at a time, until the budget is spent or Ctrl-C. The
        batches of an epoch are a function of the generator's state at its start, so a resumed run
        rebuilds them exactly and skips the ones already done; each step ends with ``after_step``
        (which moves ``position`` on) before the next batch is drawn."""
        while spent() < 1.0 and not stop.requested:
            set_generator_state(self.data_rng, position["epoch_rng_state"])
            batches = make_batches(self.epoch_examples(), self.options.token_budget, self.data_rng)
            while position["batch_index"] < len(batches) and spent() < 1.0 and not stop.requested:
                yield batches[position["batch_index"]]
            if position["batch_index"] >= len(batches):
                position.update(epoch=position["epoch"] + 1, batch_index=0,
                                epoch_rng_state=generator_state(self.data_rng))

    def _npformer_steps(self, batches: Iterator[Any], position: dict, spent: Any) -> int:
        """npformer's own steps (``train_step``) on ``batches``; 1 at a non-finite loss, else 0."""
        for batch in batches:
            self.optimizer.lr = self.learning_rate(position["step"] + 1, spent())
            result = train_step(self.model, (backend.asarray(batch.src), backend.asarray(batch.tgt_in)),
                                backend.asarray(batch.tgt_out), self.optimizer, ignore_index=PAD_ID,
                                label_smoothing=self.model_config.label_smoothing, max_norm=self.options.clip,
                                only_counted_targets=True)
            if not math.isfinite(result.loss):
                return self.stop_at_non_finite(result.loss, position)
            self.after_step(position, batch, result.loss, result.grad_norm, self.optimizer.lr)
        return 0

    def stop_at_non_finite(self, loss: float, position: dict) -> int:
        self._bar.close()
        self.log(f"stopping: the loss is {loss} at step {position['step'] + 1}; the last "
                 f"good checkpoint ({self.run_folder.checkpoint}) is kept")
        return 1

    def after_step(self, position: dict, batch: Any, loss: float, grad_norm: float, lr: float) -> None:
        """What follows every step: ``position`` moved on, the progress bar, and every ``log_every``
        and ``eval_every`` steps a line of ``metrics.jsonl``, an evaluation and a checkpoint."""
        options = self.options
        position["step"] += 1
        position["batch_index"] += 1
        step = position["step"]
        self._tokens_seen += batch.n_tokens
        rate = self._tokens_seen / max(time.perf_counter() - self._started, 1e-9)
        self._bar.update(1)
        self._bar.set_postfix_str(f"loss {loss:.3f} | {rate:,.0f} tok/s | lr {lr:.1e}", refresh=False)
        if step % options.log_every == 0:
            self._record({"kind": "train", "step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                          "tokens_per_second": rate, "epoch": position["epoch"]})
        if step % options.eval_every == 0:
            record, lines = validate(self.translator, self.valid_examples, self.valid_pairs,
                                     options.token_budget, options.eval_sentences)
            self._record({**record, "step": step})
            self._bar.write(f"step {step}: " + "\n".join(lines), file=self.stream)
            position["elapsed_seconds"] = self._elapsed_before + time.perf_counter() - self._started
            self.snapshots.take(self.model, step)
            self.save(position)
            self._plot()


def train(options: TrainOptions, stream: IO[str] | None = None, loop: Any = None) -> int:
    """Run ``npformer train``; returns the exit status. ``loop``: a student's ``train_loop`` (lesson
    13's exercise) to take the steps instead of npformer's (``student_loop``)."""
    return Trainer(options, stream, loop).run()
