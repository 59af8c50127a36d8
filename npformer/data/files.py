"""Opening a file of sentence pairs: the one checked path every command reads data through.

``read_pairs_file(path)`` opens an ``english<TAB>french`` file and yields its lines, decoded;
everything that makes the file unusable *as a file* is a ``DataError`` (a ``ValueError``) with one
line that names the path, says what is wrong and what to do (``DataError`` is also a
``npformer.errors.UsageError``):

- no such file (that one is also a ``FileNotFoundError``, as it always was);
- a directory; not readable (permissions, or another error of the system);
- empty;
- not text: a NUL byte (an archive, a checkpoint, an image), with its byte offset;
- not UTF-8: a UTF-16 or UTF-32 byte-order mark, or too many lines that are not UTF-8 (see
  ``check_encoding``), with the byte offset of the first bad byte and, when the line reads as
  Windows-1252 / Latin-1, that encoding and the ``iconv`` line that converts the file.

What the lines hold (tabs, empty sides, how many pairs are kept, whether they can be split) is
judged by ``tatoeba.load_pairs`` and ``tatoeba.check_splits``, with messages in the same form.
A UTF-8 byte-order mark at the start is dropped (Windows editors write one).
"""

from __future__ import annotations

import codecs
import os
from typing import Iterator, NamedTuple

from ..errors import UsageError

EXPECTED = "expected UTF-8 text, one english<TAB>french pair per line"


class DataError(ValueError, UsageError):
    """A data file, or the pairs it holds, that a command cannot use; one line naming the file and
    what to do (a ``UsageError``: the command line prints it and exits with status 2)."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """No such data file: a ``DataError``, and a ``FileNotFoundError`` for the callers that catch that."""


class Line(NamedTuple):
    """One line of a pairs file: its number (from 1), the byte offset of its start, its bytes
    (without the line end) and its text (``None`` when the bytes are not UTF-8)."""

    number: int
    offset: int
    raw: bytes
    text: str | None


def data_error(path: str, problem: str) -> DataError:
    """The ``DataError`` of every check: ``data file PATH: PROBLEM``."""
    return DataError(f"data file {path}: {problem}")


def _utf8_name(path: str) -> str:
    root, extension = os.path.splitext(path)
    return f"{root}.utf8{extension or '.txt'}"


def _open(path: str):  # noqa: ANN202 -- a binary file
    """``path`` opened for reading bytes, or the ``DataError`` that says why not."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DataFileNotFoundError(f"data file {path}: no such file")
    if os.path.isdir(path):
        raise data_error(path, "a directory, not a file: give the file of sentence pairs in it "
                               "(for the Tatoeba data, fra.txt)")
    try:
        return open(path, "rb")
    except PermissionError:
        raise data_error(path, "cannot be read: permission denied") from None
    except OSError as error:
        raise data_error(path, f"cannot be read: {error.strerror or error}") from None


def read_pairs_file(path: str, allow_empty: bool = False) -> Iterator[Line]:
    """The lines of the pairs file ``path``, checked (see the module docstring), decoded as UTF-8.

    A line that is not UTF-8 comes with ``text=None``: the caller counts them and calls
    ``check_encoding``, so that one damaged line in a large file is reported and skipped while a
    file in another encoding is an error. ``allow_empty``: an empty file yields nothing instead of
    raising (a run folder's empty split). The checks run when the first line is asked for."""
    file = _open(path)
    with file:
        head = file.read(4)
        if not head:
            if allow_empty:
                return
            raise data_error(path, f"empty ({EXPECTED})")
        for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                          (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
            if head.startswith(bom):
                raise data_error(path, f"not UTF-8: it starts with a {name} byte-order mark; convert it: "
                                       f"iconv -f {name} -t UTF-8 {path} > {_utf8_name(path)}")
        file.seek(len(codecs.BOM_UTF8) if head.startswith(codecs.BOM_UTF8) else 0)
        offset = file.tell()
        for number, raw in enumerate(file, start=1):
            nul = raw.find(b"\x00")
            if nul >= 0:
                raise data_error(path, f"not text: a NUL byte at byte offset {offset + nul:,} (line {number:,}), "
                                       f"as in an archive, an image or a checkpoint; {EXPECTED}")
            body = raw.rstrip(b"\r\n")
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            yield Line(number, offset, body, text)
            offset += len(raw)


def check_encoding(path: str, first_bad: Line | None, bad_lines: int, lines: int, pairs: int) -> None:
    """Raise the ``not UTF-8`` ``DataError`` when the lines that are not UTF-8 say the file is in
    another encoding (or is not text): more than one of them and more than 1% of the ``lines``
    read, or any of them when no pair could be kept. ``first_bad``: the first such line."""
    if first_bad is None or not bad_lines or (bad_lines <= max(1, lines // 100) and pairs):
        return
    try:
        first_bad.raw.decode("utf-8")
        where = 0
    except UnicodeDecodeError as error:
        where = error.start
    byte = first_bad.raw[where]
    share = f"{bad_lines:,} of {lines:,} lines are not UTF-8"
    try:
        as_cp1252 = first_bad.raw.decode("cp1252")
    except UnicodeDecodeError:
        as_cp1252 = None
    if as_cp1252 is not None and not any(ord(c) < 32 and c != "\t" for c in as_cp1252):
        shown = as_cp1252 if len(as_cp1252) <= 40 else as_cp1252[:37] + "..."
        guess = (f"it reads as Windows-1252 (Latin-1): {shown!r}; convert it: "
                 f"iconv -f WINDOWS-1252 -t UTF-8 {path} > {_utf8_name(path)}")
    else:
        guess = f"it looks like binary data, not text; {EXPECTED}"
    raise data_error(path, f"not UTF-8: byte 0x{byte:02X} at byte offset {first_bad.offset + where:,} "
                           f"(line {first_bad.number:,}) is not UTF-8 ({share}); {guess}")
