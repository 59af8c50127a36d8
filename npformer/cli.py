"""The ``npformer`` command (also ``python -m npformer``).

Subcommands:

* ``train``: train an English -> French translator (the embedded corpus by
  default, or a Tatoeba TSV file with ``--data``) into ``runs/<name>``;
* ``translate``: translate sentences (arguments, or one per line on stdin)
  with a trained run;
* ``evaluate``: test BLEU of a trained run, greedy and beam;
* ``attention``: draw a trained run's attention on one sentence;
* ``bench``: time the training step and decoding, against NumPy's GEMM peak and PyTorch;
* ``gradcheck``: compare every op's hand-written backward pass with central
  finite differences in float64, print the table, exit 1 on any failure;
  ``gradcheck --model`` does the same for every parameter of a tiny Transformer.

User errors (a missing run folder, empty input, a bad data file) are one line
on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from . import backend, gradcheck


def _fail(command: str, message: str) -> int:
    print(f"npformer {command}: {message}", file=sys.stderr)
    return 2


def _run_train(args: argparse.Namespace) -> int:
    from .train import PRESETS, TrainingError, TrainOptions, train

    overrides = {key: value for key, value in (("d_model", args.d_model), ("n_layers", args.layers),
                                               ("n_heads", args.heads), ("d_ff", args.d_ff),
                                               ("norm", args.norm), ("activation", args.activation))
                 if value is not None}
    if args.tie_embeddings:
        overrides["tie_embeddings"] = True
    if args.preset not in PRESETS:
        return _fail("train", f"unknown preset {args.preset!r}; choose from {', '.join(PRESETS)}")
    defaults = TrainOptions()
    minutes = args.minutes
    if minutes is None and args.max_steps is None:
        minutes = 2.0 if args.data is None else 30.0
    options = TrainOptions(
        name=args.name, runs_dir=args.runs_dir, resume=args.resume, data=args.data,
        max_words=args.max_words, max_pairs=args.max_pairs, lowercase=args.lowercase,
        preset=args.preset, model=overrides, dropout=args.dropout,
        label_smoothing=args.label_smoothing, min_freq=args.min_freq, max_vocab=args.max_vocab,
        token_budget=args.token_budget, lr=args.lr, warmup=args.warmup, clip=args.clip,
        minutes=minutes, max_steps=args.max_steps, eval_every=args.eval_every,
        eval_sentences=args.eval_sentences, log_every=defaults.log_every,
        test_sentences=args.test_sentences, beam_size=args.beam, seed=args.seed,
    )
    try:
        return train(options)
    except (TrainingError, FileNotFoundError) as error:
        return _fail("train", str(error))


def _read_sentences(args: argparse.Namespace) -> list[str] | str:
    """The sentences to translate, or an error message."""
    if args.sentences:
        for position, sentence in enumerate(args.sentences, start=1):
            if not sentence.strip():
                return f"sentence {position} is empty"
        return list(args.sentences)
    if sys.stdin is None or sys.stdin.isatty():
        return 'give sentences as arguments (npformer translate --run runs/NAME "the black cat") or one per line on stdin'
    lines = [line.rstrip("\n") for line in sys.stdin]
    if not any(line.strip() for line in lines):
        return "nothing to translate: the input is empty"
    return lines


def _run_translate(args: argparse.Namespace) -> int:
    from .train import TrainingError, load_run

    sentences = _read_sentences(args)
    if isinstance(sentences, str):
        return _fail("translate", sentences)
    try:
        run = load_run(args.run)
    except TrainingError as error:
        return _fail("translate", str(error))
    translator = run.translator()
    non_empty = [s for s in sentences if s.strip()]
    translations = iter(translator.translate(non_empty, beam_size=args.beam))
    for sentence in sentences:
        print(next(translations) if sentence.strip() else "")
    return 0


def _run_bench(args: argparse.Namespace) -> int:
    import json

    from . import bench

    unknown = [name for name in args.presets if name not in bench.PRESETS]
    if unknown:
        return _fail("bench", f"unknown preset {', '.join(unknown)}; choose from {', '.join(bench.PRESETS)}")
    results = bench.run(args.presets, steps=args.steps, with_torch=False if args.no_torch else None,
                        rounds=args.rounds)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
        print(f"wrote {args.json}")
    return 0


def _run_language_id(args: argparse.Namespace) -> int:
    from .classify import predict, train_language_id

    try:
        result = train_language_id(args.data, steps=args.steps, max_pairs=args.max_pairs,
                                   pooling=args.pooling, stream=sys.stderr)
    except FileNotFoundError as error:
        return _fail("language-id", str(error))
    print(f"held-out accuracy: {result['test_accuracy']:.2%} on {result['test_sentences']:,} sentences "
          f"({result['source']})")
    for sentence, language in zip(args.sentences, predict(result["model"], result["vocab"], args.sentences)):
        print(f"{language:8s} {sentence}")
    return 0


def _run_lm(args: argparse.Namespace) -> int:
    from .lm import sample, train_french_lm

    if args.top_k is not None and args.top_k < 1:
        return _fail("lm", f"--top-k must be >= 1, got {args.top_k}")
    if not args.temperature > 0:
        return _fail("lm", f"--temperature must be > 0, got {args.temperature}")
    try:
        result = train_french_lm(args.data, steps=args.steps, max_pairs=args.max_pairs, stream=sys.stderr)
    except FileNotFoundError as error:
        return _fail("lm", str(error))
    print(f"validation perplexity: {result['valid_perplexity']:.2f} ({result['source']})")
    for text in sample(result["model"], result["vocab"], " ".join(args.prompt), count=args.samples,
                       temperature=args.temperature, top_k=args.top_k, seed=args.seed):
        print(text)
    return 0


_ATTENTION_KINDS = {"enc": "encoder", "dec": "decoder_self", "cross": "decoder_cross"}


def _run_attention(args: argparse.Namespace) -> int:
    import os

    import numpy

    from . import backend, viz
    from .data import tokenize
    from .nn import BOS_ID
    from .train import TrainingError, load_run

    if not args.sentence.strip():
        return _fail("attention", "the sentence is empty")
    try:
        run = load_run(args.run)
    except TrainingError as error:
        return _fail("attention", str(error))
    [translation] = run.translator().translate([args.sentence], beam_size=args.beam)
    src_tokens = tokenize(args.sentence, "en")[: run.model.config.max_len]
    tgt_tokens = tokenize(translation, "fr")[: run.model.config.max_len - 1]
    src = numpy.array([run.src_vocab.encode(src_tokens)])
    tgt_in = numpy.array([[BOS_ID] + run.tgt_vocab.encode(tgt_tokens)])
    run.model.forward(backend.asarray(src), backend.asarray(tgt_in))
    maps = run.model.attention_maps()
    labels = {
        # rows, columns: encoder queries and keys are source tokens; decoder position t reads
        # input token t (<bos> first) and produces output token t (<eos> last).
        "enc": (src_tokens, src_tokens, "Encoder self-attention"),
        "dec": (["<bos>"] + tgt_tokens, ["<bos>"] + tgt_tokens, "Decoder self-attention (causal)"),
        "cross": (tgt_tokens + ["<eos>"], src_tokens, "Decoder cross-attention: output token (row) -> source (column)"),
    }
    kinds = list(_ATTENTION_KINDS) if args.kind == "all" else [args.kind]
    print(f"{args.sentence}  ->  {translation}")
    for kind in kinds:
        rows, columns, title = labels[kind]
        weights = [layer[0] for layer in maps[_ATTENTION_KINDS[kind]]]
        if args.out and len(kinds) == 1:
            path = args.out
        else:
            stem, extension = os.path.splitext(args.out or "attention.png")
            path = f"{stem}-{kind}{extension or '.png'}"
        viz.attention_heatmaps(weights, rows, columns, title=f"{title}\n{args.sentence} -> {translation}",
                               path=path)
        print(f"wrote {path}")
    return 0


def _run_evaluate(args: argparse.Namespace) -> int:
    import os

    from .data import ATTRIBUTION, load_pairs
    from .train import TrainingError, corpus_bleu, load_run, read_tsv

    try:
        run = load_run(args.run)
        if args.data:
            pairs, report = load_pairs(args.data, max_words=None)
            print(report.summary(), file=sys.stderr)
        else:
            pairs = read_tsv(os.path.join(args.run, "test.tsv"))
    except (TrainingError, FileNotFoundError) as error:
        return _fail("evaluate", str(error))
    if args.max_sentences:
        pairs = pairs[: args.max_sentences]
    if not pairs:
        return _fail("evaluate", "no sentence pairs to evaluate on")
    translator = run.translator()
    greedy, _ = corpus_bleu(translator, pairs, 1)
    beam, _ = corpus_bleu(translator, pairs, args.beam)
    source = args.data or os.path.join(args.run, "test.tsv")
    print(f"{len(pairs):,} sentence pairs from {source}")
    print(f"BLEU greedy      {greedy:5.1f}")
    print(f"BLEU beam {args.beam:<2}     {beam:5.1f}")
    if "attribution" in run.config.get("data", {}) or args.data:
        print(f"data: {ATTRIBUTION}")
    return 0


def _run_gradcheck(args: argparse.Namespace) -> int:
    if args.list:
        print("\n".join(gradcheck.OP_CASES))
        return 0
    if args.model:
        config = dict(norm=args.norm, activation=args.activation,
                      tie_embeddings=args.tie_embeddings, dropout=args.dropout)
        report = gradcheck.check_model(seed=args.seed, tol=args.tol, **config)
        sizes = {k: gradcheck.TINY_MODEL[k] for k in ("d_model", "n_heads", "d_ff", "n_layers")}
        print(f"backend: {backend.get_backend()}, float64, seed {args.seed}; tiny Transformer "
              f"{sizes}, " + ", ".join(f"{k}={v}" for k, v in config.items())
              + f", label_smoothing={gradcheck.TINY_MODEL['label_smoothing']}; "
              "loss = cross-entropy on a padded batch")
        print(report.table())
        return 0 if report.passed else 1
    unknown = [name for name in args.op or [] if name not in gradcheck.OP_CASES]
    if unknown:
        print(
            f"npformer gradcheck: unknown op {', '.join(unknown)}; "
            f"choose from {', '.join(gradcheck.OP_CASES)}",
            file=sys.stderr,
        )
        return 2
    report = gradcheck.check_all_ops(seed=args.seed, names=args.op, tol=args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}")
    print(report.table())
    return 0 if report.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npformer",
        description="A Transformer in pure NumPy with every backward pass written by hand.",
    )
    parser.add_argument(
        "--backend",
        choices=("numpy", "cupy"),
        default=None,
        help="array library (default: $NPFORMER_BACKEND, else numpy)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = commands.add_parser(
        "train", help="train an English -> French translator",
        description="Train a Transformer translator into runs/NAME: the embedded toy corpus by "
                    "default (about 2 minutes), or a Tatoeba TSV file with --data. Ctrl-C saves a "
                    "checkpoint; --resume continues.")
    train.add_argument("--data", help="english<TAB>french file (e.g. fra.txt from manythings.org/anki)")
    train.add_argument("--name", help="run name (default: <data>-<preset>)")
    train.add_argument("--runs-dir", default="runs", help="where run folders go (default: %(default)s)")
    train.add_argument("--resume", action="store_true", help="continue the run from its checkpoint")
    train.add_argument("--preset", default="tiny", help="tiny, small or base (default: %(default)s)")
    train.add_argument("--minutes", type=float, help="time budget (default: 2 on the toy corpus, 30 on --data)")
    train.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    train.add_argument("--max-words", type=int, default=8, help="with --data: longest side in words")
    train.add_argument("--max-pairs", type=int, help="with --data: use at most this many pairs")
    train.add_argument("--lowercase", action="store_true", help="with --data: lower-case both sides")
    train.add_argument("--d-model", type=int, help="override the preset's width")
    train.add_argument("--layers", type=int, help="override the preset's layers per stack")
    train.add_argument("--heads", type=int, help="override the preset's heads")
    train.add_argument("--d-ff", type=int, help="override the preset's feed-forward width")
    train.add_argument("--norm", choices=("post", "pre"), help="residual layout (default: post)")
    train.add_argument("--activation", choices=("relu", "gelu"), help="feed-forward activation")
    train.add_argument("--tie-embeddings", action="store_true", help="tie target embedding and output")
    train.add_argument("--dropout", type=float, default=0.1, help="default: %(default)s")
    train.add_argument("--label-smoothing", type=float, default=0.1, help="default: %(default)s")
    train.add_argument("--min-freq", type=int, default=1, help="vocabulary: minimum count")
    train.add_argument("--max-vocab", type=int, help="vocabulary: maximum size per language")
    train.add_argument("--token-budget", type=int, default=2048, help="padded tokens per batch")
    train.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default: %(default)s)")
    train.add_argument("--warmup", type=int, default=300, help="warm-up steps (default: %(default)s)")
    train.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip (default: %(default)s)")
    train.add_argument("--eval-every", type=int, default=250, help="steps between evaluations")
    train.add_argument("--eval-sentences", type=int, default=200, help="validation BLEU sample size")
    train.add_argument("--test-sentences", type=int, default=1000, help="final test BLEU sample size")
    train.add_argument("--beam", type=int, default=4, help="beam size of the final test (default: 4)")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(handler=_run_train)

    translate = commands.add_parser(
        "translate", help="translate sentences with a trained run",
        description="Translate English sentences given as arguments, or one per line on stdin.")
    translate.add_argument("sentences", nargs="*", help="sentences (default: read stdin)")
    translate.add_argument("--run", required=True, help="a run folder written by npformer train")
    translate.add_argument("--beam", type=int, default=4, help="beam size; 1 = greedy (default: 4)")
    translate.set_defaults(handler=_run_translate)

    attention = commands.add_parser(
        "attention", help="draw the attention of a trained run on one sentence",
        description="Translate SENTENCE with a trained run and draw its attention weights as "
                    "heatmaps: one subplot per layer and head, with token labels.")
    attention.add_argument("sentence", help="the English sentence")
    attention.add_argument("--run", required=True, help="a run folder written by npformer train")
    attention.add_argument("--kind", choices=("cross", "enc", "dec", "all"), default="cross",
                           help="cross-attention, encoder or decoder self-attention, or all three")
    attention.add_argument("--out", help="PNG path (default: attention-<kind>.png)")
    attention.add_argument("--beam", type=int, default=4, help="beam size for the translation")
    attention.set_defaults(handler=_run_attention)

    bench = commands.add_parser(
        "bench", help="time training steps and decoding (and PyTorch, when installed)",
        description="Measure NumPy's GEMM peak, npformer's float32 training step for the tiny/small/"
                    "base presets (tokens/s, GFLOP/s, MFU, peak memory), KV-cached decoding, and the "
                    "same model in PyTorch eager when PyTorch is importable.")
    bench.add_argument("--presets", nargs="+", default=["tiny", "small", "base"])
    bench.add_argument("--steps", type=int, default=10, help="timed steps per preset (default: 10)")
    bench.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    bench.add_argument("--rounds", type=int, default=2,
                       help="alternating measurements per framework; the fastest counts (default: 2)")
    bench.add_argument("--json", help="also write the results here")
    bench.set_defaults(handler=_run_bench)

    language = commands.add_parser(
        "language-id", help="train the encoder-only classifier to tell English from French",
        description="Train an encoder-only Transformer classifier (learned positions, masked "
                    "pooling) to tell English sentences from French ones, report held-out accuracy, "
                    "and classify SENTENCES.")
    language.add_argument("sentences", nargs="*", help="sentences to classify after training")
    language.add_argument("--data", help="english<TAB>french file (default: the embedded corpus)")
    language.add_argument("--steps", type=int, default=300)
    language.add_argument("--max-pairs", type=int, default=20000)
    language.add_argument("--pooling", choices=("mean", "max"), default="mean")
    language.set_defaults(handler=_run_language_id)

    lm = commands.add_parser(
        "lm", help="train the decoder-only language model on French and sample from it",
        description="Train a decoder-only (GPT-style) language model on French sentences, report "
                    "validation perplexity, and sample continuations of PROMPT with temperature and "
                    "top-k on the KV cache.")
    lm.add_argument("prompt", nargs="*", help="French words to continue (default: from the start)")
    lm.add_argument("--data", help="english<TAB>french file (default: the embedded corpus)")
    lm.add_argument("--steps", type=int, default=400)
    lm.add_argument("--max-pairs", type=int, default=30000)
    lm.add_argument("--samples", type=int, default=3)
    lm.add_argument("--temperature", type=float, default=0.8)
    lm.add_argument("--top-k", type=int, default=10)
    lm.add_argument("--seed", type=int, default=0)
    lm.set_defaults(handler=_run_lm)

    evaluate = commands.add_parser(
        "evaluate", help="test BLEU of a trained run, greedy and beam",
        description="Corpus BLEU (sacreBLEU-compatible) of a run on its test split or on --data.")
    evaluate.add_argument("--run", required=True, help="a run folder written by npformer train")
    evaluate.add_argument("--data", help="english<TAB>french file instead of the run's test split")
    evaluate.add_argument("--beam", type=int, default=4, help="beam size (default: 4)")
    evaluate.add_argument("--max-sentences", type=int, help="evaluate on the first N pairs only")
    evaluate.set_defaults(handler=_run_evaluate)

    check = commands.add_parser(
        "gradcheck",
        help="check every backward pass against finite differences",
        description=(
            "Compare each op's hand-written gradients with central finite differences "
            "in float64 and print the worst relative error per tensor. "
            "Exits 1 if any tensor fails."
        ),
    )
    check.add_argument(
        "--op", action="append", metavar="NAME",
        help="check only this op (repeatable; see --list)",
    )
    check.add_argument("--list", action="store_true", help="list the ops that can be checked")
    check.add_argument(
        "--model", action="store_true",
        help="check every parameter of a tiny float64 Transformer through its loss (about 10 s)",
    )
    check.add_argument("--norm", choices=("post", "pre"), default="post", help="with --model")
    check.add_argument("--activation", choices=("relu", "gelu"), default="relu", help="with --model")
    check.add_argument("--tie-embeddings", action="store_true", help="with --model")
    check.add_argument("--dropout", type=float, default=gradcheck.TINY_MODEL["dropout"],
                       help="with --model (default: %(default)s; masks are replayed exactly)")
    check.add_argument("--seed", type=int, default=0, help="seed for inputs and upstream gradients")
    check.add_argument(
        "--tol", type=float, default=gradcheck.DEFAULT_TOL,
        help="pass threshold on the worst relative error (default: %(default)g)",
    )
    check.set_defaults(handler=_run_gradcheck)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.backend:
        try:
            backend.set_backend(args.backend)
        except backend.BackendUnavailableError as error:
            print(f"npformer: {error}", file=sys.stderr)
            return 2
    return args.handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
