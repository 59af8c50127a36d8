"""The ``npformer`` command (also ``python -m npformer``): parse the arguments, call the layers below.

Subcommands: ``train``, ``translate``, ``evaluate``, ``attention`` (the translator);
``language-id``, ``lm`` (the small models); ``bench``; ``gradcheck``.

Each option's type and default are read from the signature of the function or
options dataclass that receives it (``add_arguments``), so a default is
written once, in the library; this file holds only the help texts.

Bad input never ends in a traceback:

* every number is checked as it is parsed, by the rule of ``training.options``
  (positive; ``seed >= 0``; ``dropout``, ``label_smoothing`` and ``unk_rate`` in [0, 1)), and
  every combination and output path before any work starts;
* a user error (a value out of range, a missing or damaged run folder, empty
  input, a path that cannot be written) is one line on stderr, exit status 2;
* an unexpected exception is one line with a request to report it, exit status 1;
  ``npformer --debug ...`` (or ``NPFORMER_DEBUG=1``) shows the full traceback;
* Ctrl-C outside training stops with exit status 130 and one line.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import sys
import typing
from typing import Any, Callable, NoReturn

from . import __version__, backend
from .training.options import check_option


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``npformer train: argument --lr: must be > 0, got -1``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def _number(name: str, kind: type) -> Callable[[str], Any]:
    """An argparse type: ``text`` as ``kind`` (int or float), within the range of the option ``name``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        try:
            check_option(name, value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{name} ")) from None
        return value

    parse.__name__ = kind.__name__
    return parse

# -- options from signatures ------------------------------------------------------------------


def _plain_type(annotation: Any) -> type:
    """``int | None`` -> ``int``; ``bool`` stays ``bool``."""
    options = [t for t in typing.get_args(annotation) if t is not type(None)] or [annotation]
    return options[0]


def add_arguments(parser: argparse.ArgumentParser, target: Callable, helps: dict[str, str],
                  flags: dict[str, str] | None = None, choices: dict[str, tuple] | None = None) -> None:
    """One ``--option`` per name in ``helps``; its type and default come from ``target``'s signature.

    ``target`` is a function or a dataclass. A ``bool`` whose default is False becomes a switch;
    a number is checked against the range of its name (``training.options``) as it is parsed.
    """
    flags, choices = flags or {}, choices or {}
    signature = inspect.signature(target)
    hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    for name, help_text in helps.items():
        default = signature.parameters[name].default
        kind = _plain_type(hints[name])
        flag = flags.get(name, "--" + name.replace("_", "-"))
        if kind is bool:
            parser.add_argument(flag, dest=name, action="store_true", default=default, help=help_text)
            continue
        shown = "" if default is None else " (default: %(default)s)"
        parsed = _number(name, kind) if kind in (int, float) else kind
        parser.add_argument(flag, dest=name, type=parsed, default=default, choices=choices.get(name),
                            help=help_text + shown)


def _values(args: argparse.Namespace, helps: dict[str, str]) -> dict[str, Any]:
    return {name: getattr(args, name) for name in helps}


def _fail(command: str, message: str) -> int:
    print(f"npformer {command}: {message}", file=sys.stderr)
    return 2


# -- the commands -----------------------------------------------------------------------------

TRAIN_HELP = {
    "data": "english<TAB>french file (e.g. fra.txt from manythings.org/anki); default: the embedded corpus",
    "name": "run name (default: <data>-<preset>)",
    "runs_dir": "where run folders go",
    "resume": "continue the run from its checkpoint",
    "preset": "model size",
    "minutes": "stop after this much wall-clock time (the result then depends on the machine; default: "
               "30 with --data when --max-steps is not given)",
    "max_steps": "stop after this many optimizer steps (default: {steps} on the embedded corpus, about 2 minutes "
                 "on two cores, when --minutes is not given)",
    "max_words": "with --data: longest side in words",
    "max_pairs": "use at most this many pairs",
    "lowercase": "with --data: lower-case both sides",
    "d_model": "override the preset's width",
    "n_layers": "override the preset's layers per stack",
    "n_heads": "override the preset's heads",
    "d_ff": "override the preset's feed-forward width",
    "norm": "residual layout",
    "activation": "feed-forward activation",
    "tie_embeddings": "tie the target embedding and the output projection",
    "share_embeddings": "one embedding table for source and target (needs --joint-vocab)",
    "dropout": "dropout rate",
    "label_smoothing": "label smoothing of the loss",
    "min_freq": "vocabulary: minimum count",
    "max_vocab": "vocabulary: maximum size per language",
    "tokenizer": "word: one id per word (rare words become <unk>); bpe: subword pieces learned by byte-pair "
                 "encoding, so that no word made of known characters is <unk>",
    "bpe_merges": "with --tokenizer bpe: merges to learn (the vocabulary is about this size plus the alphabet)",
    "joint_vocab": "with --tokenizer bpe: one vocabulary learned on both languages",
    "unk_rate": "the chance that an aligned word pair of a training sentence (a name or number written alike on "
                "both sides; on the embedded corpus a gold link) is made unknown on both sides, drawn each epoch: "
                "<unk> with --tokenizer word, an invented word with --tokenizer bpe; so that the model learns to "
                "copy what it does not know, and translate passes new names through (npformer.data.unknown_words)",
    "token_budget": "padded tokens per batch",
    "lr": "peak learning rate",
    "warmup": "warm-up steps",
    "clip": "gradient-norm clip",
    "eval_every": "steps between evaluations",
    "eval_sentences": "validation BLEU sample size",
    "test_sentences": "final test BLEU sample size",
    "beam_size": "beam size of the final test",
    "seed": "seed of the data split, the initialisation and dropout",
}


TRAIN_FLAGS = {"n_layers": "--layers", "n_heads": "--heads", "beam_size": "--beam"}


def _with_flags(message: str, flags: dict[str, str]) -> str:
    """A message of ``TrainOptions.check``, which names fields (``n_heads``), with the flags (``--heads``)."""
    import re

    return re.sub(r"\b(" + "|".join(TRAIN_HELP) + r")\b",
                  lambda match: flags.get(match.group(1), "--" + match.group(1).replace("_", "-")), message)


def _student_ops(command: str, args: argparse.Namespace) -> Any:
    """The op set of ``--ops FILE`` (its report printed), None without ``--ops``, or the exit status
    of a one-line error, before any work."""
    if not args.ops:
        return None
    from .course import StudentOpsError, load_student_ops

    try:
        student = load_student_ops(args.ops, allow_failing=args.allow_failing)
    except StudentOpsError as error:
        return _fail(command, str(error))
    print(student.report(), flush=True)
    return student


def _run_train(args: argparse.Namespace) -> int:
    from . import ops
    from .tasks.translation import TrainOptions, train
    from .training import RunError

    options = TrainOptions(**_values(args, TRAIN_HELP))
    try:
        options.check()  # the combinations; each number was checked as it was parsed
    except ValueError as error:
        return _fail("train", _with_flags(str(error), TRAIN_FLAGS))
    student = _student_ops("train", args)
    if isinstance(student, int):
        return student
    try:
        with ops.using(student) if student is not None else contextlib.nullcontext():
            status = train(options)
    except (RunError, FileNotFoundError) as error:
        return _fail("train", str(error))
    if student is not None:
        print(f"trained on your ops: {len(student)} of {len(ops.OP_NAMES)} ({args.ops}); the rest npformer's")
    return status


def _pretrained_names() -> list[str]:
    from .tasks.translation.pretrained import available

    return available()


def _resolve_run(command: str, folder: str | None, pretrained: str | None = None) -> str | int:
    """``--run``, ``--pretrained NAME``'s shipped run, or the most recent run in ``runs/`` (said on
    stderr); else a one-line error's status."""
    from .tasks.translation.pretrained import pretrained_folder
    from .training import RunError, latest_run

    if folder is not None and pretrained is not None:
        return _fail(command, "give --run or --pretrained, not both")
    if pretrained is not None:
        try:
            return pretrained_folder(pretrained)
        except RunError as error:
            return _fail(command, str(error))
    if folder is not None:
        return folder
    folder = latest_run("runs")
    if folder is None:
        return _fail(command, "no --run given and no trained run in runs/: train one with npformer train, "
                              "or name one with --run")
    print(f"npformer {command}: using {folder} (the most recent run; --run picks another)", file=sys.stderr)
    return folder


def _load_run(command: str, folder: str | None, pretrained: str | None = None) -> Any:
    """The loaded run (``folder``, the shipped ``pretrained`` one, or the most recent one), or the
    exit status of a one-line error."""
    from .training import RunError, load_run

    folder = _resolve_run(command, folder, pretrained)
    if isinstance(folder, int):
        return folder
    try:
        return load_run(folder)
    except RunError as error:
        return _fail(command, str(error))


def _read_sentences(sentences: list[str]) -> list[str] | str:
    """The sentences to translate (arguments, else stdin), or an error message."""
    if sentences:
        for position, sentence in enumerate(sentences, start=1):
            if not sentence.strip():
                return f"sentence {position} is empty"
        return list(sentences)
    if sys.stdin is None or sys.stdin.isatty():
        return 'give sentences as arguments (npformer translate --run runs/NAME "the black cat") or one per line on stdin'
    lines = [line.rstrip("\n") for line in sys.stdin]
    if not any(line.strip() for line in lines):
        return "nothing to translate: the input is empty"
    return lines


def _run_translate(args: argparse.Namespace) -> int:
    from .tasks.translation import Translator

    sentences = _read_sentences(args.sentences)
    if isinstance(sentences, str):
        return _fail("translate", sentences)
    run = _load_run("translate", args.run, args.pretrained)
    if isinstance(run, int):
        return run
    non_empty = [s for s in sentences if s.strip()]
    translator = Translator.from_run(run)
    unknown = translator.unknown_words(non_empty)
    if unknown:
        print(f"npformer translate: words the model never saw (copied from the source or guessed): "
              f"{', '.join(unknown)}", file=sys.stderr)
    translations = iter(translator.translate(non_empty, beam_size=args.beam, progress=len(non_empty) > 64))
    for sentence in sentences:
        print(next(translations) if sentence.strip() else "")
    return 0


def _run_evaluate(args: argparse.Namespace) -> int:
    from .data import ATTRIBUTION, load_pairs
    from .tasks.translation import Translator, test_bleu
    from .training import RunFolder

    if args.data and not os.path.isfile(args.data):
        return _fail("evaluate", f"no data file at {args.data}")
    run = _load_run("evaluate", args.run, args.pretrained)
    if isinstance(run, int):
        return run
    try:
        if args.data:
            pairs, report = load_pairs(args.data, max_words=None)
            print(report.summary(), file=sys.stderr)
        else:
            pairs = RunFolder(run.folder).split("test")
    except FileNotFoundError as error:
        return _fail("evaluate", str(error))
    pairs = pairs[: args.max_sentences] if args.max_sentences else pairs
    if not pairs:
        return _fail("evaluate", "no sentence pairs to evaluate on")
    record = test_bleu(Translator.from_run(run), pairs, args.beam, progress=True, worst=args.worst)
    print(f"{len(pairs):,} sentence pairs from {args.data or os.path.join(run.folder, 'test.tsv')}")
    print(f"BLEU greedy      {record['bleu_greedy']:5.1f}")
    print(f"BLEU beam {args.beam:<2}     {record['bleu_beam']:5.1f}")
    print(f"chrF greedy      {record['chrf_greedy']:5.1f}")
    print(f"chrF beam {args.beam:<2}     {record['chrf_beam']:5.1f}")
    if record["worst"]:
        print(f"the {len(record['worst'])} worst translations (beam {args.beam}, by sentence BLEU):")
        for english, french, hypothesis, score in record["worst"]:
            print(f"  {score:5.1f}  {english}\n         got:      {hypothesis}\n         expected: {french}")
    if "attribution" in run.config.get("data", {}) or args.data:
        print(f"data: {ATTRIBUTION}")
    return 0


def _run_attention(args: argparse.Namespace) -> int:
    from . import viz
    from .tasks.translation import attention_of
    from .tasks.translation.attention import TITLES
    from .training import OutputPathError, check_file_can_be_written

    sentences = args.sentences
    if args.score and sentences:
        return _fail("attention", "--score scores the run's test split: give no sentence with it")
    if not args.score and not sentences:
        return _fail("attention", "give a sentence to translate (or --score)")
    if any(not sentence.strip() for sentence in sentences):
        return _fail("attention", "a sentence is empty")
    if len(sentences) > 1 and not args.html:
        return _fail("attention", f"{len(sentences)} sentences: PNG heatmaps take one; use --html for several")
    run_folder = _resolve_run("attention", args.run, args.pretrained)
    if isinstance(run_folder, int):
        return run_folder
    if not os.path.isdir(run_folder):
        return _fail("attention", f"no run folder at {run_folder}")
    kinds = list(TITLES) if args.kind == "all" else [args.kind]
    beside = "." if args.pretrained else run_folder  # never write into the installed package
    paths = {}
    if args.score:
        paths["score"] = args.out or os.path.join(beside, "aer.png")
    elif args.html:
        paths["html"] = args.html
    else:
        for kind in kinds:
            if args.out and len(kinds) == 1:
                paths[kind] = args.out
            else:  # beside the run, unless --out says where
                stem, extension = os.path.splitext(args.out or os.path.join(beside, "attention.png"))
                paths[kind] = f"{stem}-{kind}{extension or '.png'}"
    for path in paths.values():
        try:
            check_file_can_be_written(path)
        except OutputPathError as error:
            return _fail("attention", str(error))
    run = _load_run("attention", run_folder)
    if isinstance(run, int):
        return run
    if args.score:
        return _score_attention(run, paths["score"], args.max_pairs)
    found = [attention_of(run, sentence, beam_size=args.beam) for sentence in sentences]
    for one in found:
        print(f"{one.sentence}  ->  {one.translation}")
    if args.html:
        viz.attention_explorer(found, path=args.html)
        print(f"wrote {args.html} (open it in a browser: choose the kind, layer and head; hover a token)")
        return 0
    for kind, path in paths.items():
        rows, columns = found[0].labels[kind]
        figure = viz.attention_heatmaps(found[0].maps[kind], rows, columns, path=path,
                                        title=f"{TITLES[kind]}\n{found[0].sentence} -> {found[0].translation}")
        viz.close(figure)
        print(f"wrote {path}")
    return 0


def _score_attention(run: Any, figure_path: str, max_pairs: int | None) -> int:
    """``npformer attention --score``: every cross-attention head, the head average, rollout and
    saliency against the gold alignments of the run's test split."""
    from . import viz
    from .tasks.translation.alignment import gold_test_split, score_alignments

    try:
        pairs, golds = gold_test_split(run)
    except ValueError as error:
        return _fail("attention", str(error))
    if max_pairs:
        pairs, golds = pairs[:max_pairs], golds[:max_pairs]
    scores = score_alignments(run.model, run.src_vocab, run.tgt_vocab, pairs, golds, progress=True)
    print(scores.table())
    layer, head, aer = scores.best_head()
    print(f"best head: layer {layer}, head {head} (AER {aer:.3f}); rollout {scores.rollout:.3f}; "
          f"saliency {scores.saliency:.3f}")
    viz.close(viz.aer_heatmap(scores.heads, path=figure_path,
                              title=f"Cross-attention AER by layer and head ({scores.pairs} test pairs)"))
    print(f"wrote {figure_path}")
    return 0


LANGUAGE_ID_HELP = {
    "data": "english<TAB>french file (default: the embedded corpus)",
    "steps": "training steps",
    "max_pairs": "use at most this many sentence pairs",
    "pooling": "how the encoder's outputs become one vector",
    "seed": "seed of the split, the initialisation and the batches",
}


def _run_language_id(args: argparse.Namespace) -> int:
    from .tasks.language_id import predict, train_language_id

    try:
        result = train_language_id(**_values(args, LANGUAGE_ID_HELP), stream=sys.stderr)
    except FileNotFoundError as error:
        return _fail("language-id", str(error))
    print(f"held-out accuracy: {result['test_accuracy']:.2%} on {result['test_sentences']:,} sentences "
          f"({result['source']})")
    for sentence, language in zip(args.sentences, predict(result["model"], result["vocab"], args.sentences,
                                                              lowercase=result["lowercase"])):
        print(f"{language:8s} {sentence}")
    return 0


LM_TRAIN_HELP = {
    "data": "english<TAB>french file whose French side is used (default: the embedded corpus)",
    "steps": "training steps",
    "max_pairs": "use at most this many sentence pairs",
}
LM_SAMPLE_HELP = {
    "count": "how many samples",
    "temperature": "divides the logits before sampling; below 1 sharpens",
    "top_k": "sample among the k most probable words only",
    "seed": "seed of the samples",
}


def _run_lm(args: argparse.Namespace) -> int:
    from .tasks.language_model import sample, train_french_lm

    try:
        result = train_french_lm(**_values(args, LM_TRAIN_HELP), stream=sys.stderr)
    except FileNotFoundError as error:
        return _fail("lm", str(error))
    print(f"validation perplexity: {result['valid_perplexity']:.2f} ({result['source']})")
    for text in sample(result["model"], result["vocab"], " ".join(args.prompt), **_values(args, LM_SAMPLE_HELP)):
        print(text)
    return 0


BENCH_HELP = {
    "steps": "timed steps per preset",
    "rounds": "alternating measurements per framework; the fastest counts",
    "ops": "npformer's op set: fast (the default) or textbook (npformer/ops/*.py)",
}


def _run_bench(args: argparse.Namespace) -> int:
    import json

    from . import bench

    from .training import OutputPathError, check_file_can_be_written

    if args.json:
        try:
            check_file_can_be_written(args.json)
        except OutputPathError as error:
            return _fail("bench", str(error))
    results = bench.run(args.presets, with_torch=False if args.no_torch else None, **_values(args, BENCH_HELP))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
        print(f"wrote {args.json}")
    return 0


GRADCHECK_MODEL_HELP = {
    "norm": "with --model: residual layout",
    "activation": "with --model: feed-forward activation",
    "tie_embeddings": "with --model: tie the target embedding and the output projection",
    "dropout": "with --model: dropout rate (masks are replayed exactly)",
}


# The paper's base sizes for `gradcheck --model --base`. GELU, not ReLU: at this size some of the
# ~100,000 hidden ReLUs sit within a finite-difference step of their kink, where the difference is
# meaningless (ReLU's backward is checked op by op and in the tiny model, away from the kink). The
# textbook attention: the fused one concatenates its weight matrices on every call, a third of each
# forward pass at this batch size (the two forms are tested equal, and the tiny model checks both).
BASE_SIZES = {"d_model": 512, "n_heads": 8, "d_ff": 2048, "n_layers": 6, "src_vocab": 1000, "tgt_vocab": 1000,
              "activation": "gelu", "batch": 1, "src_len": 4, "tgt_len": 4, "fused": False}


def _run_mutants(args: argparse.Namespace) -> int:
    from .gradcheck import mutants

    results = mutants.run_mutants(seed=args.seed, tol=None if args.tol == mutants.DEFAULT_TOL else args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}, tolerance {args.tol:.0e}")
    print(mutants.results_table(results))
    return 0 if all(result.caught for result in results) else 1


def _run_gradcheck(args: argparse.Namespace) -> int:
    import time

    from . import gradcheck, ops

    if args.list:
        print("\n".join(gradcheck.OP_CASES))
        return 0
    if args.mutants:
        return _run_mutants(args)
    if (args.fast or args.base) and not args.model:
        return _fail("gradcheck", "--fast and --base apply to --model: npformer gradcheck --model --fast --base")
    if args.ops and not args.model:
        return _fail("gradcheck", "--ops applies to --model: npformer gradcheck --model --ops FILE")
    if args.model:
        student = _student_ops("gradcheck", args)
        if isinstance(student, int):
            return student
        config = {**_values(args, GRADCHECK_MODEL_HELP), **(BASE_SIZES if args.base else {})}
        sizes = {k: config.get(k, gradcheck.TINY_MODEL[k]) for k in ("d_model", "n_heads", "d_ff", "n_layers")}
        config = {k: v for k, v in config.items() if k not in sizes}  # the rest: options, vocabularies, batch
        started = time.perf_counter()
        with ops.using(student) if student is not None else contextlib.nullcontext():
            report = gradcheck.check_model(seed=args.seed, tol=args.tol, directions=1 if args.fast else None,
                                           **config, **sizes)
        seconds = time.perf_counter() - started
        method = "one random direction per tensor" if args.fast else "every entry"
        print(f"backend: {backend.get_backend()}, float64, seed {args.seed}; "
              f"{'base' if args.base else 'tiny'} Transformer {sizes}, "
              + ", ".join(f"{k}={v}" for k, v in config.items())
              + f", label_smoothing={gradcheck.TINY_MODEL['label_smoothing']}; "
              f"loss = cross-entropy on a padded batch; {method}")
        print(report.table())
        print(f"{seconds:.1f} s")
        if student is not None:
            print(_blame_student_ops(args, student, report))
        return 0 if report.passed else 1
    unknown = [name for name in args.op or [] if name not in gradcheck.OP_CASES]
    if unknown:
        return _fail("gradcheck", f"unknown op {', '.join(unknown)}; choose from {', '.join(gradcheck.OP_CASES)}")
    report = gradcheck.check_all_ops(seed=args.seed, names=args.op, tol=args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}")
    print(report.table())
    return 0 if report.passed else 1


def _blame_student_ops(args: argparse.Namespace, student: Any, report: Any) -> str:
    """The verdict on a model check through the student's ops; on a failure, each of the student's
    ops is checked alone (its op case) to name the one, and its lesson, that breaks the model."""
    from . import gradcheck, ops
    from .course.student_ops import EXERCISE_OPS

    if report.passed:
        return f"the model's gradients through your ops pass ({len(student)} of {len(ops.OP_NAMES)} ops yours)"
    failing = [entry for entry in student.exercises if entry.status == "failing"]  # allowed in, yet wrong
    culprits = [f"{entry.name} (lesson {entry.lesson})" for entry in failing]
    blamed_ops = {op for entry in failing for op in EXERCISE_OPS[entry.name]}
    for entry in (entry for entry in student.exercises if entry.status == "passed"):
        if blamed_ops & set(EXERCISE_OPS[entry.name]):
            continue  # it shares its op with a function already named (the loss, with and without smoothing)
        cases = {op.rsplit("_", 1)[0] for op in EXERCISE_OPS[entry.name]} & set(gradcheck.OP_CASES)
        with ops.using({op: student[op] for op in EXERCISE_OPS[entry.name] if op in student}, name="yours"):
            for case in sorted(cases):
                try:
                    passed = gradcheck.check_op(case, seed=args.seed).passed
                except Exception:  # noqa: BLE001 -- the student's function raising is a failure too
                    passed = False
                if not passed:
                    culprits.append(f"{entry.name} (lesson {entry.lesson})")
                    break
    return ("the model's gradients fail through your ops; "
            + (f"the culprits (each fails its exercise or its op check): {', '.join(culprits)}" if culprits
               else "each of your ops passes its exercise and its own check: look at how they combine"))


def _run_course(args: argparse.Namespace) -> int:
    from . import course

    command = f"course {args.action}"
    if args.action in ("collect", "grade"):
        what = "the folder of your lessons" if args.action == "collect" else "the folder of submissions (one per student)"
        if not args.out:
            return _fail(command, f"needs {what}: npformer course {args.action} FOLDER --out FILE")
        try:
            if args.action == "collect":
                print(course.collect(args.out, args.module or "my_npformer.py").summary())
            else:
                graded = course.grade_class(args.out, args.module or "grades.csv", timeout=args.timeout,
                                            seed=args.seed, progress=lambda name: print(f"grading {name} ...",
                                                                                         flush=True))
                print(course.grading.summary(graded))
                print(f"wrote {args.module or 'grades.csv'} and the feedback beside it")
        except (FileNotFoundError, OSError, ValueError) as error:
            return _fail(command, str(error))
        return 0
    if args.action != "exercises" and not args.out:
        return _fail(command, f"needs an output folder: npformer course {args.action} OUT")
    try:
        if args.action == "exercises":
            print(course.exercise_table(args.lessons))
        elif args.action in ("student", "instructor"):
            student = args.action == "student"
            if args.notebooks:
                files = course.lesson_notebooks(args.lessons, args.out, execute=False, student=student)
            else:
                files = (course.student_edition if student else course.instructor_edition)(args.lessons, args.out)
            print(f"wrote the {args.action} edition of {len(files)} lessons to {args.out}")
        else:
            only = [f"{int(number):02d}" for number in args.lesson] if args.lesson else None
            files = course.lesson_notebooks(args.lessons, args.out, execute=not args.no_execute,
                                            student=args.student, quick=args.quick, only=only)
            print(f"wrote {len(files)} {'executed ' if not args.no_execute else ''}notebook"
                  f"{'s' if len(files) != 1 else ''} to {args.out}")
    except (FileNotFoundError, FileExistsError, ValueError, ImportError, course.notebooks.NotebookError) as error:
        return _fail(command, str(error))
    return 0


# -- the parser -------------------------------------------------------------------------------


def _add_ops_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--ops", metavar="FILE", default=None,
                        help=f"{what}: the module that npformer course collect wrote (each graded function "
                             "that passes its exercise replaces npformer's op; the rest stay npformer's)")
    parser.add_argument("--allow-failing", action="store_true",
                        help="with --ops: use a function that fails its exercise anyway (to see what it does)")


def build_parser() -> argparse.ArgumentParser:
    from . import bench, gradcheck
    from .models import TransformerConfig
    from .tasks.language_id import train_language_id
    from .tasks.language_model import sample, train_french_lm
    from .tasks.translation import PRESETS, TrainOptions
    from .tasks.translation.options import DEFAULT_STEPS, TOKENIZERS

    parser = _Parser(prog="npformer",
                                     description="A Transformer in pure NumPy with every backward pass written by hand.")
    parser.add_argument("--backend", choices=("numpy", "cupy"), default=None,
                        help="array library (default: $NPFORMER_BACKEND, else numpy)")
    parser.add_argument("--version", action="version", version=f"npformer {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an unexpected error (also NPFORMER_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = commands.add_parser(
        "train", help="train an English -> French translator",
        description="Train a Transformer translator into runs/NAME: the embedded toy corpus by default "
                    "(about 2 minutes), or a Tatoeba TSV file with --data. Ctrl-C saves a checkpoint; "
                    "--resume continues.")
    add_arguments(train, TrainOptions, {**TRAIN_HELP, "max_steps": TRAIN_HELP["max_steps"].format(steps=DEFAULT_STEPS)},
                  flags={"n_layers": "--layers", "n_heads": "--heads", "beam_size": "--beam"},
                  choices={"preset": tuple(PRESETS), "norm": ("post", "pre"), "activation": ("relu", "gelu"),
                           "tokenizer": TOKENIZERS})
    _add_ops_arguments(train, "train on your own ops")
    train.set_defaults(handler=_run_train)

    translate = commands.add_parser(
        "translate", help="translate sentences with a trained run",
        description="Translate English sentences given as arguments, or one per line on stdin.")
    translate.add_argument("sentences", nargs="*", help="sentences (default: read stdin)")
    translate.add_argument("--run", help="a run folder written by npformer train (default: the most recent in runs/)")
    translate.add_argument("--pretrained", metavar="NAME", choices=_pretrained_names(),
                           help="a translator that ships with npformer instead of a run: toy (the default "
                                "npformer train run)")
    translate.add_argument("--beam", type=_number("beam", int), default=4,
                           help="beam size; 1 = greedy (default: %(default)s)")
    translate.set_defaults(handler=_run_translate)

    attention = commands.add_parser(
        "attention", help="draw, explore or score the attention of a trained run",
        description="Translate SENTENCE with a trained run and draw its attention weights as heatmaps (one "
                    "subplot per layer and head, with token labels); with --html, write an interactive "
                    "explorer of one or more sentences; with --score, measure every cross-attention head "
                    "against the gold word alignments of the run's test split (embedded corpus only).")
    attention.add_argument("sentences", nargs="*", metavar="sentence", help="English sentences (one for PNGs)")
    attention.add_argument("--run", help="a run folder written by npformer train (default: the most recent in runs/)")
    attention.add_argument("--pretrained", metavar="NAME", choices=_pretrained_names(),
                           help="a translator that ships with npformer instead of a run: toy (the default "
                                "npformer train run)")
    attention.add_argument("--kind", choices=("cross", "enc", "dec", "all"), default="cross",
                           help="cross-attention, encoder or decoder self-attention, or all three")
    attention.add_argument("--out", help="PNG path (default: attention-<kind>.png, or aer.png with --score, "
                                         "in the run folder; with --pretrained, in the current folder)")
    attention.add_argument("--html", metavar="PATH", help="write an interactive explorer (one self-contained "
                                                          "HTML file) of the sentences instead of PNGs")
    attention.add_argument("--score", action="store_true",
                           help="print the alignment error rate of every cross-attention head, their average, "
                                "rollout and saliency against the gold alignments of the test split")
    attention.add_argument("--max-pairs", type=_number("max-pairs", int), default=None,
                           help="with --score: score only the first N test pairs (default: all)")
    attention.add_argument("--beam", type=_number("beam", int), default=4,
                           help="beam size for the translation (default: %(default)s)")
    attention.set_defaults(handler=_run_attention)

    evaluate = commands.add_parser(
        "evaluate", help="test BLEU of a trained run, greedy and beam",
        description="Corpus BLEU (sacreBLEU-compatible) of a run on its test split or on --data.")
    evaluate.add_argument("--run", help="a run folder written by npformer train (default: the most recent in runs/)")
    evaluate.add_argument("--pretrained", metavar="NAME", choices=_pretrained_names(),
                           help="a translator that ships with npformer instead of a run: toy (the default "
                                "npformer train run)")
    evaluate.add_argument("--data", help="english<TAB>french file instead of the run's test split")
    evaluate.add_argument("--beam", type=_number("beam", int), default=4, help="beam size (default: %(default)s)")
    evaluate.add_argument("--max-sentences", type=_number("max_sentences", int),
                          help="evaluate on the first N pairs only")
    evaluate.add_argument("--worst", type=_number("worst", int), default=5,
                          help="show this many of the worst translations (default: %(default)s)")
    evaluate.set_defaults(handler=_run_evaluate)

    bench_parser = commands.add_parser(
        "bench", help="time training steps and decoding (and PyTorch, when installed)",
        description="Measure NumPy's GEMM peak, npformer's float32 training step for the tiny/small/base "
                    "presets (tokens/s, GFLOP/s, MFU, peak memory), KV-cached decoding, and the same model "
                    "in PyTorch eager when PyTorch is importable.")
    bench_parser.add_argument("--presets", nargs="+", default=["tiny", "small", "base"], choices=tuple(bench.PRESETS))
    add_arguments(bench_parser, bench.run, BENCH_HELP, choices={"ops": ("fast", "textbook")})
    bench_parser.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    bench_parser.add_argument("--json", help="also write the results here")
    bench_parser.set_defaults(handler=_run_bench)

    language = commands.add_parser(
        "language-id", help="train the encoder-only classifier to tell English from French",
        description="Train an encoder-only Transformer classifier (learned positions, masked pooling) to "
                    "tell English sentences from French ones, report held-out accuracy, and classify SENTENCES.")
    language.add_argument("sentences", nargs="*", help="sentences to classify after training")
    add_arguments(language, train_language_id, LANGUAGE_ID_HELP, choices={"pooling": ("mean", "max")})
    language.set_defaults(handler=_run_language_id)

    lm = commands.add_parser(
        "lm", help="train the decoder-only language model on French and sample from it",
        description="Train a decoder-only (GPT-style) language model on French sentences, report validation "
                    "perplexity, and sample continuations of PROMPT with temperature and top-k on the KV cache.")
    lm.add_argument("prompt", nargs="*", help="French words to continue (default: from the start)")
    add_arguments(lm, train_french_lm, LM_TRAIN_HELP)
    add_arguments(lm, sample, LM_SAMPLE_HELP, flags={"count": "--samples"})
    lm.set_defaults(handler=_run_lm)

    check = commands.add_parser(
        "gradcheck", help="check every backward pass against finite differences",
        description="Compare each op's hand-written gradients with central finite differences in float64 "
                    "and print the worst relative error per tensor. Exits 1 if any tensor fails.")
    check.add_argument("--op", action="append", metavar="NAME", help="check only this op (repeatable; see --list)")
    check.add_argument("--list", action="store_true", help="list the ops that can be checked")
    check.add_argument("--model", action="store_true",
                       help="check every parameter of a tiny float64 Transformer through its loss (seconds)")
    check.add_argument("--fast", action="store_true",
                       help="with --model: one random direction per tensor instead of every entry")
    check.add_argument("--base", action="store_true",
                       help="with --model: the paper's base sizes (512, 8 heads, 2048, 6 layers); use with --fast")
    check.add_argument("--mutants", action="store_true",
                       help="apply each realistic backward bug of the catalogue and show which check catches it")
    add_arguments(check, TransformerConfig, {k: v for k, v in GRADCHECK_MODEL_HELP.items() if k != "dropout"},
                  choices={"norm": ("post", "pre"), "activation": ("relu", "gelu")})
    check.add_argument("--dropout", type=_number("dropout", float), default=gradcheck.TINY_MODEL["dropout"],
                       help=GRADCHECK_MODEL_HELP["dropout"] + " (default: %(default)s)")
    add_arguments(check, gradcheck.check_all_ops, {"seed": "seed for inputs and upstream gradients",
                                                   "tol": "pass threshold on the worst relative error"})
    _add_ops_arguments(check, "with --model: check the model's gradients through your own ops")
    check.set_defaults(handler=_run_gradcheck)

    course_parser = commands.add_parser(
        "course", help="the course: both editions, notebooks, the exercise table, collecting and grading",
        description="student OUT: the lessons without the solutions (each a stub that raises "
                    "NotImplementedError), the classic-mistake cells and the answers. instructor OUT: the lessons "
                    "with all of them. notebooks OUT: the lessons as executed Jupyter notebooks (needs the course "
                    "extra). exercises: the table of graded exercises and open questions. collect FOLDER --out "
                    "FILE: your graded functions, from your lessons, in one module for npformer train --ops FILE. "
                    "grade SUBMISSIONS --out grades.csv: every student folder of SUBMISSIONS graded in fresh "
                    "processes, one CSV row per student, feedback files beside the CSV. The lessons come with "
                    "the installed package (--lessons to use other ones).")
    course_parser.add_argument("action", choices=("student", "instructor", "notebooks", "exercises", "collect",
                                                  "grade"))
    course_parser.add_argument("out", nargs="?", help="output folder (student, instructor, notebooks); for "
                                                      "collect, the folder of your filled-in lessons (.py or "
                                                      ".ipynb); for grade, the folder of submissions")
    course_parser.add_argument("--out", dest="module", default=None,
                               help="collect: the module to write (default: my_npformer.py); grade: the CSV "
                                    "(default: grades.csv)")
    course_parser.add_argument("--lessons", default=None,
                               help="a lessons folder (default: the lessons installed with npformer)")
    course_parser.add_argument("--notebooks", action="store_true",
                               help="student, instructor: write .ipynb notebooks (not executed) instead of .py "
                                    "scripts; the student's carry nbgrader's cell metadata")
    course_parser.add_argument("--student", action="store_true", help="notebooks: of the student edition")
    course_parser.add_argument("--lesson", action="append", type=_number("lesson", int), metavar="NN",
                               help="notebooks: only this lesson (repeat for several; default: all)")
    course_parser.add_argument("--no-execute", action="store_true", help="notebooks: convert without running")
    course_parser.add_argument("--quick", action="store_true",
                               help="notebooks: short trainings (NPFORMER_QUICK=1), as the tests run them")
    course_parser.add_argument("--timeout", type=_number("timeout", float), default=30.0,
                               help="grade: seconds one exercise may run (default: %(default)s)")
    course_parser.add_argument("--seed", type=_number("seed", int), default=None,
                               help="grade: the seed of the unseen cases, the same for the whole class "
                                    "(default: drawn once, written in the feedback)")
    course_parser.set_defaults(handler=_run_course)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, or a parse error already reported in one line
        return int(stop.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.backend:
        try:
            backend.set_backend(args.backend)
        except backend.BackendUnavailableError as error:
            print(f"npformer: {error}", file=sys.stderr)
            return 2
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"npformer {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001  (the last line of defence: one line, not a traceback)
        if args.debug or os.environ.get("NPFORMER_DEBUG"):
            raise
        print(f"npformer {args.command}: unexpected error ({type(error).__name__}: {error}); this is a bug "
              f"in npformer: please report it, with the traceback that --debug shows", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
