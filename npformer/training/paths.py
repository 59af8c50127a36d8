"""Where the commands write: checked before any work starts, so a long run never fails at its end.

Both checks raise ``OutputPathError`` (a ``ValueError``) with one line that names the path and
what is wrong with it, and neither creates anything.
"""

from __future__ import annotations

import os


class OutputPathError(ValueError):
    """A file or folder that cannot be written."""


def check_folder_can_be_created(path: str) -> None:
    """``path`` is a writable folder, or can be made one (missing parents included, as ``mkdir -p``)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputPathError(f"cannot create the folder {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot create the folder {path}: {existing} is not writable")


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
