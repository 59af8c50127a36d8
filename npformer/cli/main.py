"""The parser of the ``npformer`` command, built from one module per command, and ``main``."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__, backend
from ..errors import UsageError
from . import attention, bench, course, data, evaluate, gradcheck, language_id, lm, train, translate
from .arguments import Parser

COMMANDS = (train, translate, attention, evaluate, language_id, lm, bench, gradcheck, course, data)


def build_parser() -> argparse.ArgumentParser:
    """``npformer [--backend B] [--debug] COMMAND ...``: each command module adds its own parser."""
    parser = Parser(prog="npformer", description="A Transformer in pure NumPy with every backward pass written by hand.")
    parser.add_argument("--backend", choices=("numpy", "cupy"), default=None,
                        help="array library (default: $NPFORMER_BACKEND, else numpy)")
    parser.add_argument("--version", action="version", version=f"npformer {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an unexpected error (also NPFORMER_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status: 0 done, 1 a check failed or a bug, 2 a usage error, 130 Ctrl-C."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, or a parse error already reported in one line
        return int(stop.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if argv is None and args.command == "course":  # a command's own process (not a call from Python)
        from .course import without_rfc3987_syntax

        without_rfc3987_syntax()
    try:
        if args.backend:
            backend.set_backend(args.backend)
        else:
            backend.get_backend()  # NPFORMER_BACKEND applied now: CuPy missing is one line, before any work
        return args.handler(args)
    except (UsageError, backend.BackendUnavailableError) as error:
        print(f"npformer {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"npformer {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (npformer course exercises | head): what it asked for
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as error:  # noqa: BLE001  (the last line of defence: one line, not a traceback)
        if args.debug or os.environ.get("NPFORMER_DEBUG"):
            raise
        print(f"npformer {args.command}: unexpected error ({type(error).__name__}: {error}); this is a bug "
              f"in npformer: please report it, with the traceback that --debug shows", file=sys.stderr)
        return 1
