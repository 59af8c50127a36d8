"""What several commands read before they work: a trained run, sentences, the student's ops, and
the paths they will write. Each either returns what was asked for or raises ``UsageError`` with
one line; nothing here starts the work itself."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError
from ..tasks.checks import check_file_can_be_written


def run_folder(command: str, folder: str | None, pretrained: str | None) -> str:
    """``--run``, the shipped ``--pretrained NAME``, or the most recent run in ``runs/`` (said on stderr)."""
    from ..tasks.translation import latest_run
    from ..tasks.translation.pretrained import pretrained_folder, pretrained_record

    if folder is not None and pretrained is not None:
        raise UsageError("give --run or --pretrained, not both")
    if pretrained is not None:
        found = pretrained_folder(pretrained)
        credit = pretrained_record(pretrained).get("data")
        if credit:  # the data's licence asks for attribution wherever the model is used
            print(f"npformer {command}: the pretrained {pretrained!r} translator was trained on data of the {credit}",
                  file=sys.stderr)
        return found
    if folder is not None:
        return folder
    folder = latest_run("runs")
    if folder is None:
        raise UsageError("no --run given and no trained run in runs/: train one with npformer train, "
                         "or name one with --run (or use --pretrained toy)")
    print(f"npformer {command}: using {folder} (the most recent run; --run picks another)", file=sys.stderr)
    return folder


def run_for_command(command: str, folder: str | None, pretrained: str | None = None) -> Any:
    """The run a command's ``--run`` / ``--pretrained`` names (``run_folder``), loaded with the one
    ``tasks.translation.load_run``: model, vocabularies, config."""
    from ..tasks.translation import load_run

    return load_run(run_folder(command, folder, pretrained))


def sentences(given: list[str], command: str) -> list[str]:
    """The sentences to translate: the arguments, else the lines of stdin (empty lines kept, so
    the output lines up with the input)."""
    if given:
        for position, sentence in enumerate(given, start=1):
            if not sentence.strip():
                raise UsageError(f"sentence {position} is empty")
        return list(given)
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(f'give sentences as arguments (npformer {command} --pretrained toy "the black cat") '
                         "or one per line on stdin")
    try:
        lines = [line.rstrip("\n") for line in sys.stdin]
    except UnicodeDecodeError as error:
        raise UsageError(f"stdin is not UTF-8 text (byte {error.start}): pipe UTF-8 sentences, one per line") from None
    if not any(line.strip() for line in lines):
        raise UsageError("nothing to translate: the input is empty")
    return lines


def student_ops(args: argparse.Namespace) -> Any:
    """The op set of ``--ops FILE`` (its report printed), or None without ``--ops``."""
    if not args.ops:
        return None
    from ..course import StudentOpsError, load_student_ops

    try:
        student = load_student_ops(args.ops, allow_failing=args.allow_failing)
    except StudentOpsError as error:
        raise UsageError(str(error)) from None
    print(student.report(), flush=True)
    return student


def writable_files(*paths: str | None) -> None:
    """Every output file given can be written (checked before any work)."""
    for path in paths:
        if path is not None:
            check_file_can_be_written(path)
