"""``npformer translate``: translate sentences with a trained run or a shipped translator."""

from __future__ import annotations

import argparse
import sys

from .arguments import add_run_arguments, add_search_arguments
from .inputs import run_for_command, sentences


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "translate", help="translate sentences with a trained run",
        description="Translate English sentences given as arguments, or one per line on stdin.")
    parser.add_argument("sentences", nargs="*", help="sentences (default: read stdin)")
    add_run_arguments(parser)
    add_search_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks.translation import Translator
    from ..tasks.translation.input_notes import input_notes

    given = sentences(args.sentences, "translate")
    translator = Translator.from_run(run_for_command("translate", args.run, args.pretrained))
    readings = [translator.read(sentence) for sentence in given if sentence.strip()]  # each read once
    notes = input_notes(translator, readings)   # French, nothing known
    unknown = translator.unknown_words([reading for index, reading in enumerate(readings) if index not in notes])
    if unknown:
        print(f"npformer translate: words the model never saw (copied from the source or guessed): "
              f"{', '.join(unknown)}", file=sys.stderr)
    for note in [*notes.values(), *translator.length_notes(readings)]:
        print(f"npformer translate: {note}", file=sys.stderr)
    translations = iter(translator.translate(readings, beam_size=args.beam, length_penalty=args.length_penalty,
                                              progress=len(readings) > 64))
    for sentence in given:
        print(next(translations) if sentence.strip() else "")
    return 0
