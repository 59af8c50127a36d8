"""What a user asks for, checked before any work starts: option ranges and output paths.

The tasks (``TrainOptions.check``, the trainer's run folder) and the command line (every numeric
flag as it is parsed, every output path) apply the same rules, so a run never fails at its end.

**Ranges, by option name** (a new option cannot forget its check: it is positive unless listed):

* ``dropout``, ``label_smoothing``, ``unk_rate``: a fraction in ``[0, 1)``;
* ``seed``: an integer ``>= 0``; ``length_penalty`` (beam search's alpha): ``>= 0``;
* every other number (sizes, steps, budgets, rates, beams, temperatures, tolerances): ``> 0``.

**Output paths**: a file whose folder exists and is writable; a folder that exists or can be made.
Both raise ``OutputPathError`` (a ``ValueError`` and a ``UsageError``) naming the path; neither
creates anything.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any

from ..errors import UsageError

FRACTIONS = ("dropout", "label_smoothing", "unk_rate")
NON_NEGATIVE = ("seed", "length_penalty")


def option_bound(name: str) -> str:
    """What values the option ``name`` allows, in words."""
    if name in FRACTIONS:
        return "in [0, 1)"
    if name in NON_NEGATIVE:
        return ">= 0"
    return "> 0"


def check_option(name: str, value: Any) -> None:
    """``ValueError`` naming the option, what it allows and what it got, when ``value`` is out of range."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number {option_bound(name)}, got {value!r}")
    low_ok = value >= 0 if name in FRACTIONS + NON_NEGATIVE else value > 0
    if not low_ok or (name in FRACTIONS and value >= 1):
        raise ValueError(f"{name} must be {option_bound(name)}, got {value!r}")


class OutputPathError(ValueError, UsageError):
    """A file or folder that cannot be written."""


def check_folder_can_be_created(path: str) -> None:
    """``path`` is a writable folder, or can be made one (missing parents included, as ``mkdir -p``).

    Permissions do not tell the whole story (``root`` passes ``os.access`` inside ``/proc``, where
    nothing can be made), so a missing folder is made, then removed again, as the proof."""
    folder = existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputPathError(f"cannot create the folder {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot create the folder {path}: {existing} is not writable")
    missing = []  # the folders to make, outermost first
    while folder != existing:
        missing.insert(0, folder)
        folder = os.path.dirname(folder)
    made = []
    try:
        for folder in missing:
            os.mkdir(folder)
            made.append(folder)
    except FileExistsError:  # another process made it meanwhile: it can be made
        pass
    except OSError as error:
        raise OutputPathError(f"cannot create the folder {path}: {error.strerror or error}") from None
    finally:  # leave the disk as it was (the work that follows makes them for real), innermost first
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # another process may have put something in it
                os.rmdir(folder)


def check_file_can_be_written(path: str) -> None:
    """``path`` names a file whose folder exists and is writable (the folder is not created: a
    missing one is more often a typing mistake than a wish)."""
    if os.path.isdir(path):
        raise OutputPathError(f"cannot write {path}: it is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputPathError(f"cannot write {path}: the folder {os.path.dirname(path) or folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise OutputPathError(f"cannot write {path}: the folder {folder} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise OutputPathError(f"cannot write {path}: the file is read-only")
