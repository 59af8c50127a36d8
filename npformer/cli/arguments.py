"""The pieces every command's parser is built from: one-line errors, checked numbers, options read
from the signatures of the functions that receive them, and the flags several commands share."""

from __future__ import annotations

import argparse
import inspect
import re
import typing
from typing import Any, Callable, NoReturn

from ..errors import UsageError
from ..tasks.checks import check_option


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``npformer train: argument --lr: must be > 0, got -1``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, but an argument that no parser takes is the error of the command it was given
        to (``npformer course student: unrecognized arguments: --timeout 5``), not of ``npformer``."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def number(name: str, kind: type) -> Callable[[str], Any]:
    """An argparse type: ``text`` as ``kind`` (int or float), within the range of the option ``name``
    (``tasks.checks``)."""

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


def _plain_type(annotation: Any) -> type:
    """``int | None`` -> ``int``; ``bool`` stays ``bool``."""
    options = [t for t in typing.get_args(annotation) if t is not type(None)] or [annotation]
    return options[0]


def add_arguments(parser: argparse.ArgumentParser, target: Callable, helps: dict[str, str],
                  flags: dict[str, str] | None = None, choices: dict[str, tuple] | None = None) -> None:
    """One ``--option`` per name in ``helps``; its type and default come from ``target``'s signature,
    so a default is written once, in the library.

    ``target`` is a function or a dataclass. A ``bool`` whose default is False becomes a switch;
    a number is checked against the range of its name as it is parsed.
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
        parsed = number(name, kind) if kind in (int, float) else kind
        parser.add_argument(flag, dest=name, type=parsed, default=default, choices=choices.get(name),
                            help=help_text + shown)


def values(args: argparse.Namespace, helps: dict[str, str]) -> dict[str, Any]:
    """The parsed values of the options named in ``helps``, by name."""
    return {name: getattr(args, name) for name in helps}


def with_flags(message: str, names: typing.Iterable[str], flags: dict[str, str]) -> str:
    """A library message that names fields (``n_heads``) rewritten with their flags (``--heads``)."""
    return re.sub(r"\b(" + "|".join(names) + r")\b",
                  lambda match: flags.get(match.group(1), "--" + match.group(1).replace("_", "-")), message)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--run`` and ``--pretrained``: which trained translator a command reads."""
    from ..tasks.translation.pretrained import available

    parser.add_argument("--run", help="a run folder written by npformer train (default: the most recent in runs/)")
    parser.add_argument("--pretrained", metavar="NAME", choices=available(),
                        help="a translator that ships with npformer instead of a run: "
                             + ", ".join(available()) + " (toy: the default npformer train run)")


def add_search_arguments(parser: argparse.ArgumentParser, what: str = "beam size") -> None:
    """``--beam`` and ``--length-penalty``: how a command searches for its translations."""
    from ..tasks.translation.decoding import BEAM_SIZE, LENGTH_PENALTY

    parser.add_argument("--beam", type=number("beam", int), default=BEAM_SIZE,
                        help=f"{what}; 1 = greedy (default: %(default)s)")
    parser.add_argument("--length-penalty", type=number("length_penalty", float), default=LENGTH_PENALTY,
                        metavar="ALPHA", help="beam search's GNMT length penalty ((5 + |y|) / 6) ** ALPHA; "
                                              "larger prefers longer translations (default: %(default)s)")


def add_ops_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ops FILE`` and ``--allow-failing``: run on the student's own ops."""
    parser.add_argument("--ops", metavar="FILE", default=None,
                        help=f"{what}: the module that npformer course collect wrote (each graded function "
                             "that passes its exercise replaces npformer's op; the rest stay npformer's)")
    parser.add_argument("--allow-failing", action="store_true",
                        help="with --ops: use a function that fails its exercise anyway (to see what it does)")


def require(condition: bool, message: str) -> None:
    """``UsageError(message)`` unless ``condition``: a combination of arguments that cannot work."""
    if not condition:
        raise UsageError(message)
