"""A student's submission folder, read without trusting it: its lesson files, wherever they lie.

``lesson_files_in`` finds a submission's lessons (``NN_topic.py`` or ``.ipynb``) at its top or in its
subfolders (an unpacked zip, nbgrader's ``submitted/<student>/<assignment>/``), without following a
linked folder or going deeper than ``MAX_FOLDER_DEPTH``; each file is then read, or refused, by
``collect.read_lesson``. ``lessons_folder_of`` gathers them side by side, as ``collect`` reads them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .collect import LESSON_NAME, UnreadableLesson, read_lesson
from .inert import printable

MAX_FOLDER_DEPTH = 16    # how deep in a submission's subfolders its lessons are looked for


def submission_lessons(folder: str | Path) -> tuple[list[Path], list[str]]:
    """``lesson_files_in``, with the notes on what was not looked into: a subfolder that is a
    symbolic link (not followed), one too deep, one that could not be listed."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{printable(folder)} is not a folder (a student's submission)")
    found, notes, pending = [], [], [(folder, 0)]
    while pending:  # no recursion: a submission's folders may nest as deep as its author likes
        current, depth = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            notes.append(f"{printable(current.relative_to(folder))} could not be listed ({error.strerror})")
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):  # hidden: .git, .ipynb_checkpoints
                continue
            if entry.is_symlink():
                if LESSON_NAME.fullmatch(entry.name):
                    found.append(path)  # refused when read, with its reason
                elif entry.is_dir():
                    notes.append(f"{printable(path.relative_to(folder))} is a symbolic link to a folder: "
                                 "not followed")
            elif entry.is_dir(follow_symlinks=False):
                if depth < MAX_FOLDER_DEPTH:
                    pending.append((path, depth + 1))
                else:
                    notes.append(f"{printable(path.relative_to(folder))}: folders deeper than {MAX_FOLDER_DEPTH} "
                                 "levels are not looked into")
            elif LESSON_NAME.fullmatch(entry.name) and "checkpoint" not in entry.name:
                found.append(path)  # a pipe or a device with a lesson's name is refused when read
    if not found:
        raise FileNotFoundError(f"{printable(folder)} holds no lesson (NN_topic.py or NN_topic.ipynb), at its top "
                                "or in its subfolders")
    by_name: dict[str, Path] = {}
    for path in sorted(found):
        if path.name in by_name:
            raise ValueError(f"{printable(folder)} holds {printable(path.name)} twice "
                             f"({printable(by_name[path.name].relative_to(folder))} and "
                             f"{printable(path.relative_to(folder))}): keep one")
        by_name[path.name] = path
    return list(by_name.values()), notes


def lesson_files_in(folder: str | Path) -> list[Path]:
    """A submission's lessons (``NN_topic.py`` or ``.ipynb``), at its top or in its subfolders (an
    unpacked zip, nbgrader's ``submitted/<student>/<assignment>/``), hidden folders and
    checkpoints left out, symbolic links to folders not followed; a FileNotFoundError when there is
    none, a ValueError when one lesson is there twice. Only names are looked at: each file is read,
    or refused, by ``collect.read_lesson``."""
    return submission_lessons(folder)[0]


@contextlib.contextmanager
def lessons_folder_of(folder: str | Path):
    """A temporary folder holding a submission's lessons side by side, as ``collect`` reads them:
    copies of the bytes that ``collect.read_lesson`` reads (a file it refuses is left out, and
    ``collect`` reports its lesson missing). ``course grade`` itself passes the files to
    ``collect(..., files=...)``."""
    files = lesson_files_in(folder)
    with tempfile.TemporaryDirectory(prefix="npformer-submission-") as gathered:
        for path in files:
            try:
                (Path(gathered) / path.name).write_bytes(read_lesson(path))
            except UnreadableLesson:
                pass
        yield Path(gathered)
