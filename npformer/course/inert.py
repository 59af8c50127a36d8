"""What the grader writes, safe to open: text a terminal shows as text, CSV cells a spreadsheet
reads as they are, and files written whole, under names that stay in their folder.

Everything a student chose (a folder's name, an exception's type or message, what a function
printed) passes ``printable`` before it reaches a screen or a file; every CSV cell passes
``inert``; every output file is written by ``write_atomically``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import secrets
import stat
from pathlib import Path


# C0 controls (newline and tab are treated apart), DEL, C1 controls, the line and paragraph
# separators, the bidirectional overrides and isolates, a byte-order mark, and lone surrogates
# (what a file name that is not UTF-8 becomes): each can move a terminal's cursor, start an escape
# sequence, reorder what is shown, or stop a UTF-8 file from being written.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
                          "\ud800-\udfff]")


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` (anything a student chose: a file or folder name, an exception's type or message,
    what their function printed) as it may be shown on a terminal, in a CSV or on a platform's page:
    every control character written out as an escape (``\\x1b``), so that an ANSI escape sequence
    shows as text and does nothing. ``lines=True`` keeps newlines and tabs (a multi-line report);
    otherwise they become spaces, so that the text stays on one line."""
    text = str(text)
    if not lines:
        text = text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _UNPRINTABLE.sub(lambda found: (f"\\x{ord(found[0]):02x}" if ord(found[0]) < 0x100
                                           else f"\\u{ord(found[0]):04x}"), text)


# What a spreadsheet reads as the start of a formula (OWASP's list, and the fullwidth forms that
# some spreadsheets fold to them).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def inert(cell: object) -> object:
    """A CSV cell that a spreadsheet shows as it is: a number stays a number; a text is made
    printable, and starts with a quote when it would start a formula (``=2+5`` -> ``'=2+5``)."""
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return cell
    text = printable(cell)
    return "'" + text if text.lstrip().startswith(_FORMULA_STARTS) else text


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a new file beside it, then renamed over
    it (``os.replace``), so that a reader never sees half a file and an interrupted grading leaves
    the last complete one. The new file gets the permissions an ordinary write would (the umask's).
    A ``path`` that is there and is not a regular file (``/dev/stdout``, a pipe, a link the
    instructor made) is written through, as named, not replaced."""
    path = Path(path)
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        with open(path, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        return
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with open(descriptor, "w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


# What may not be in a file name here or on another system (a separator, a drive's colon, a
# wildcard), and what a student's text held before ``printable`` escaped it.
_UNSAFE_IN_FILE_NAMES = re.compile(r'[/\\:*?"<>|\x00-\x1f\x7f]')


def feedback_file_name(student: str, taken: set[str]) -> str:
    """The name of a student's feedback file: their name made printable, with a path separator, a
    colon or a wildcard made an underscore, no leading dot or dash, at most 200 bytes, and a number
    added when another student's already has it (``taken``, which this adds to, case-insensitively).
    Whatever the student's folder is called, their feedback lands inside the feedback folder."""
    stem = _UNSAFE_IN_FILE_NAMES.sub("_", printable(student))
    stem = re.sub(r"^[.-]", "_", stem) or "student"
    while len(stem.encode("utf-8")) > 200:
        stem = stem[:-1]
    name, number = f"{stem}.txt", 1
    while name.casefold() in taken:
        number += 1
        name = f"{stem}-{number}.txt"
    taken.add(name.casefold())
    return name


def csv_text(rows: list[list]) -> str:
    """``rows`` as CSV text, every cell inert."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([inert(cell) for cell in row])
    return buffer.getvalue()
