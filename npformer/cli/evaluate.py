"""``npformer evaluate``: test BLEU and chrF of a trained run, greedy and beam."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import UsageError
from .arguments import add_run_arguments, add_search_arguments, number
from .inputs import run_for_command


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "evaluate", help="test BLEU of a trained run, greedy and beam",
        description="Corpus BLEU (sacreBLEU-compatible) of a run on its test split or on --data.")
    add_run_arguments(parser)
    parser.add_argument("--data", help="english<TAB>french file instead of the run's test split")
    add_search_arguments(parser)
    parser.add_argument("--max-sentences", type=number("max_sentences", int),
                        help="evaluate on the first N pairs only")
    parser.add_argument("--worst", type=number("worst", int), default=5,
                        help="show up to this many of the worst translations, those below BLEU 100 "
                             "(default: %(default)s)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data import ATTRIBUTION, load_pairs
    from ..tasks.translation import RunFolder, Translator, test_bleu
    from ..tasks.translation.decoding import LENGTH_PENALTY

    if args.data:
        pairs, report = load_pairs(args.data, max_words=None)  # checked before the model is loaded
        print(report.summary(), file=sys.stderr)
    run_ = run_for_command("evaluate", args.run, args.pretrained)
    if not args.data:
        pairs = RunFolder(run_.folder).split("test")
    pairs = pairs[: args.max_sentences] if args.max_sentences else pairs
    if not pairs:
        raise UsageError("no sentence pairs to evaluate on")
    record = test_bleu(Translator.from_run(run_), pairs, args.beam, progress=True, worst=args.worst,
                       length_penalty=args.length_penalty)
    penalty = f"   (length penalty {args.length_penalty:g})" if args.length_penalty != LENGTH_PENALTY else ""
    print(f"{len(pairs):,} sentence pairs from {args.data or os.path.join(run_.folder, 'test.tsv')}")
    print(f"BLEU greedy      {record['bleu_greedy']:5.1f}")
    print(f"BLEU beam {args.beam:<2}     {record['bleu_beam']:5.1f}" + penalty)
    print(f"chrF greedy      {record['chrf_greedy']:5.1f}")
    print(f"chrF beam {args.beam:<2}     {record['chrf_beam']:5.1f}")
    if record["worst"]:
        print(f"the {len(record['worst'])} worst translations (beam {args.beam}, by sentence BLEU):")
        for english, french, hypothesis, score in record["worst"]:
            print(f"  {score:5.1f}  {english}\n         got:      {hypothesis}\n         expected: {french}")
    elif args.worst:
        print(f"every translation (beam {args.beam}) scores sentence BLEU 100")
    if "attribution" in run_.config.get("data", {}) or args.data:
        print(f"data: {ATTRIBUTION}")
    return 0
