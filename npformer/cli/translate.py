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
    from ..tasks.translation.input_notes import input_note

    given = sentences(args.sentences, "translate")
    translator = Translator.from_run(run_for_command("translate", args.run, args.pretrained))
    readings = [translator.read(sentence) for sentence in given if sentence.strip()]  # each read once
    # one line at most per sentence, in order: French or nothing known (left as typed), else its length
    said = [input_note(translator, reading, number) for number, reading in enumerate(readings, start=1)]
    unknown = translator.unknown_words([reading for reading, note in zip(readings, said) if note is None])
    if unknown:
        print(f"npformer translate: words the model never saw (copied from the source or guessed): "
              f"{', '.join(unknown)}", file=sys.stderr)
    for number, (reading, note) in enumerate(zip(readings, said), start=1):
        note = note or translator.length_note(reading, number)
        if note:
            print(f"npformer translate: {note}", file=sys.stderr)
    translations = iter(translator.translate(readings, beam_size=args.beam, length_penalty=args.length_penalty,
                                              progress=len(readings) > 64))
    for sentence in given:
        print(next(translations) if sentence.strip() else "")
    return 0
