"""``npformer attention``: draw, explore or score the attention of a trained translator.

* ``SENTENCE``: one PNG of heatmaps per kind (``--kind``; one subplot per layer and head);
* ``--html PATH SENTENCE...``: one interactive page for several sentences;
* ``--score``: every cross-attention head, their average, rollout and saliency against the gold
  alignments of the run's test split (embedded corpus only), and a figure of the head scores.

Every picture comes from one decoding per sentence (``Translator.translations``): the maps shown are
those of the tokens the decoder produced.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import UsageError
from .arguments import add_run_arguments, add_search_arguments, number, require
from .inputs import run_for_command, run_folder, writable_files


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..models import ATTENTION_KINDS

    parser = commands.add_parser(
        "attention", help="draw, explore or score the attention of a trained run",
        description="Translate SENTENCE with a trained run and draw its attention weights as heatmaps (one "
                    "subplot per layer and head, with token labels); with --html, write an interactive "
                    "explorer of one or more sentences; with --score, measure every cross-attention head "
                    "against the gold word alignments of the run's test split (embedded corpus only).")
    parser.add_argument("sentences", nargs="*", metavar="sentence", help="English sentences (one for PNGs)")
    add_run_arguments(parser)
    parser.add_argument("--kind", choices=(*ATTENTION_KINDS, "all"), default="cross",
                        help="cross-attention, encoder or decoder self-attention, or all three (default: cross)")
    parser.add_argument("--out", help="PNG path (default: attention-<kind>.png, or aer.png with --score, "
                                      "in the run folder; with --pretrained, in the current folder)")
    parser.add_argument("--html", metavar="PATH", help="write an interactive explorer (one self-contained "
                                                       "HTML file) of the sentences instead of PNGs")
    parser.add_argument("--score", action="store_true",
                        help="print the alignment error rate of every cross-attention head, their average, "
                             "rollout and saliency against the gold alignments of the test split")
    parser.add_argument("--max-pairs", type=number("max-pairs", int), default=None,
                        help="with --score: score only the first N test pairs (default: all)")
    add_search_arguments(parser, "beam size for the translation")
    parser.set_defaults(handler=run)


def _check_sentences(args: argparse.Namespace) -> None:
    require(not (args.score and args.sentences), "--score scores the run's test split: give no sentence with it")
    require(args.score or bool(args.sentences), "give a sentence to translate (or --score)")
    require(all(sentence.strip() for sentence in args.sentences), "a sentence is empty")
    require(len(args.sentences) <= 1 or bool(args.html),
            f"{len(args.sentences)} sentences: PNG heatmaps take one; use --html for several")


def output_paths(args: argparse.Namespace, folder: str) -> dict[str, str]:
    """Where this call writes: ``{"score": png}``, ``{"html": page}`` or ``{kind: png}`` per kind.
    Beside the run unless ``--out`` says where; a shipped translator's files go to the current
    folder (never into the installed package)."""
    from ..models import ATTENTION_KINDS

    beside = "." if args.pretrained else folder
    if args.score:
        return {"score": args.out or os.path.join(beside, "aer.png")}
    if args.html:
        return {"html": args.html}
    kinds = list(ATTENTION_KINDS) if args.kind == "all" else [args.kind]
    if args.out and len(kinds) == 1:
        return {kinds[0]: args.out}
    stem, extension = os.path.splitext(args.out or os.path.join(beside, "attention.png"))
    return {kind: f"{stem}-{kind}{extension or '.png'}" for kind in kinds}


def run(args: argparse.Namespace) -> int:
    from .. import viz
    from ..tasks.translation import Translator

    _check_sentences(args)
    folder = run_folder("attention", args.run, args.pretrained)
    if not os.path.isdir(folder):
        raise UsageError(f"no run folder at {folder}")
    paths = output_paths(args, folder)
    writable_files(*paths.values())
    trained = run_for_command("attention", folder)
    if args.score:
        return _score(trained, paths["score"], args.max_pairs)
    found = Translator.from_run(trained).translations(args.sentences, beam_size=args.beam,
                                                      length_penalty=args.length_penalty)
    for one in found:
        print(f"{one.sentence}  ->  {one.text}")
    if args.html:
        viz.attention_explorer(found, path=args.html)
        print(f"wrote {args.html} (open it in a browser: choose the kind, layer and head; hover a token)")
        return 0
    for kind, path in paths.items():
        rows, columns = found[0].labels[kind]
        viz.close(viz.attention_heatmaps(found[0].attention[kind], rows, columns, path=path,
                                         title=found[0].title(kind)))
        print(f"wrote {path}")
    return 0


def _score(trained: Any, figure_path: str, max_pairs: int | None) -> int:
    """Every cross-attention head, the head average, rollout and saliency against the gold
    alignments of the run's test split."""
    from .. import viz
    from ..tasks.translation.alignment import gold_test_split, score_alignments

    try:
        pairs, golds = gold_test_split(trained)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if max_pairs:
        pairs, golds = pairs[:max_pairs], golds[:max_pairs]
    scores = score_alignments(trained.model, trained.src_vocab, trained.tgt_vocab, pairs, golds, progress=True)
    print(scores.table())
    layer, head, aer = scores.best_head()
    print(f"best head: layer {layer}, head {head} (AER {aer:.3f}); rollout {scores.rollout:.3f}; "
          f"saliency {scores.saliency:.3f}")
    viz.close(viz.aer_heatmap(scores.heads, path=figure_path,
                              title=f"Cross-attention AER by layer and head ({scores.pairs} test pairs)"))
    print(f"wrote {figure_path}")
    return 0
