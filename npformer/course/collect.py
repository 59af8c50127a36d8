"""Collecting a student's graded functions into one importable module.

``npformer course collect FOLDER --out my_npformer.py`` reads the student's filled-in lessons
(``NN_topic.py`` in the percent format, or ``NN_topic.ipynb`` as Jupyter saved them) and writes
one module: the lessons' imports, then each graded function in lesson order, with a comment
naming its lesson, the helper functions it calls and the lesson's constants it reads. Nothing in the student's files changes.

What cannot be collected is reported by name and left out: a function in a cell that does not
parse, an exercise whose lesson file is missing. The module then serves as an op set
(``course.student_ops``, ``npformer train --ops``, ``npformer gradcheck --model --ops``).

The grader collects every student of a class the same way, so nothing here trusts a file: a lesson
is opened without following a symbolic link and read only when it is a regular file of at most
``MAX_LESSON_BYTES`` (``read_lesson``); a notebook must have the shape Jupyter saves; a lesson's
code is parsed only up to ``MAX_CODE_CHARS``, and a function nested too deeply for Python to parse
or compile is reported like a syntax error. Each of these is a one-line problem naming the file,
never an exception, and the other lessons are collected as usual. Every name and error from a
student's file is made printable (``inert.printable``) before it is reported.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .exercises import EXERCISES
from .inert import printable
from .lesson_pieces import (definitions_source, imports_used, lesson_constants, names_needed,
                            with_helpers)
from .wire import Status

__all__ = ["collect", "CollectResult", "Collected", "Refused", "lesson_source", "read_lesson", "UnreadableLesson",
           "MAX_LESSON_BYTES", "MAX_CODE_CHARS"]

MAX_LESSON_BYTES = 16 * 2**20  # a lesson file that is read: a notebook with its figures takes a few MB
MAX_CODE_CHARS = 2**20         # the Python code of one lesson (a notebook's code cells joined); the longest has 50 kB
LESSON_NAME = re.compile(r"[0-9][0-9]_.*\.(py|ipynb)", re.DOTALL)  # NN_topic.py or NN_topic.ipynb

_CELL = re.compile(r"^# %%.*$", re.MULTILINE)
_DEF = re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE)
_TOO_DEEP = (RecursionError, MemoryError)  # what CPython's parser and compiler raise for code nested too deeply


# -- reading a lesson file, trusting nothing in it ------------------------------------------------

class UnreadableLesson(ValueError):
    """A lesson file that was not read, or is not a lesson: its message is one line naming the file
    (``04_layer_normalization.py is a symbolic link: not read``)."""


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def read_lesson(path: str | Path) -> bytes:
    """The bytes of the lesson file ``path``, read as nothing of a student's is trusted: a symbolic
    link is not followed (to another student's lesson, to ``/dev/zero``...), and only a regular file
    of at most ``MAX_LESSON_BYTES`` is read (not a named pipe, which would wait for a writer, nor a
    device, nor a sparse file of 8 GB). Opened with ``O_NOFOLLOW | O_NONBLOCK``, checked with
    ``fstat`` on what was opened, and read up to one byte past the limit. Anything else is an
    ``UnreadableLesson`` whose one-line message names the file."""
    path = Path(path)
    shown = printable(path.name)
    try:
        seen = os.lstat(path)  # a pipe or a device is refused before it is even opened
    except OSError as error:
        raise UnreadableLesson(f"{shown} could not be read ({error.strerror}): not read") from None
    if not stat.S_ISREG(seen.st_mode):
        raise UnreadableLesson(f"{shown} is {_kind(seen.st_mode)}: not read")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:  # replaced since: a link is ELOOP under O_NOFOLLOW
        why = "is a symbolic link" if error.errno == errno.ELOOP else f"could not be read ({error.strerror})"
        raise UnreadableLesson(f"{shown} {why}: not read") from None
    try:
        opened = os.fstat(descriptor)
        if not stat.S_ISREG(opened.st_mode):
            raise UnreadableLesson(f"{shown} is {_kind(opened.st_mode)}: not read")
        if opened.st_size > MAX_LESSON_BYTES:
            raise UnreadableLesson(f"{shown} is {opened.st_size / 2**20:.0f} MB, over the limit of "
                                   f"{MAX_LESSON_BYTES // 2**20} MB: not read")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            data = file.read(MAX_LESSON_BYTES + 1)
    except OSError as error:
        raise UnreadableLesson(f"{shown} could not be read ({error.strerror}): not read") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_LESSON_BYTES:  # it grew while it was read
        raise UnreadableLesson(f"{shown} is over the limit of {MAX_LESSON_BYTES // 2**20} MB: not read")
    return data


def _notebook_code(shown: str, text: str) -> str:
    """The code cells of a notebook's JSON ``text``, joined as a percent-format script (IPython's
    ``%`` and ``!`` lines dropped); an ``UnreadableLesson`` unless it has the shape Jupyter saves:
    an object whose ``cells`` is a list of objects, each code cell's ``source`` a string or a list
    of strings."""
    try:
        notebook = json.loads(text)
    except ValueError as error:
        raise UnreadableLesson(f"{shown} is not a notebook (not JSON: {printable(error)[:80]}): not read") from None
    except _TOO_DEEP:
        raise UnreadableLesson(f"{shown} is not a notebook (JSON nested too deeply): not read") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise UnreadableLesson(f"{shown} is not a notebook as Jupyter saves one (no list of cells): not read")
    code = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise UnreadableLesson(f"{shown} is not a notebook as Jupyter saves one (cell {number} is not a "
                                   "cell): not read")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", [])
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise UnreadableLesson(f"{shown} is not a notebook as Jupyter saves one (cell {number}'s source is "
                                   "not text): not read")
        code.append("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    return "\n\n# %%\n".join(code) + "\n"


def lesson_text(name: str, data: bytes) -> str:
    """The Python source held by the bytes of the lesson file called ``name``: the text of a
    ``.py``, the code cells of an ``.ipynb``; an ``UnreadableLesson`` when it is not UTF-8, not a
    notebook, or more than ``MAX_CODE_CHARS`` of code."""
    shown = printable(name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableLesson(f"{shown} is not UTF-8 text (byte {error.start}): not read") from None
    if name.endswith(".ipynb"):
        text = _notebook_code(shown, text)
    if len(text) > MAX_CODE_CHARS:
        raise UnreadableLesson(f"{shown} holds {len(text) / 2**20:.1f} MB of code, over the limit of "
                               f"{MAX_CODE_CHARS // 2**20} MB: not read")
    return text


@dataclass(frozen=True)
class Refused:
    """What ``collect`` left out, and why: ``str`` says it in one line. ``names``: the exercises of a
    lesson whose file is missing or not read, else the one function that is missing, does not parse
    or does not compile (for a cell that does not parse, each function it defines); ``file``: the
    lesson file's printable name ("" when it is missing); ``why``: the file's or the parser's words."""

    status: Status  # MISSING, SYNTAX_ERROR or FILE_NOT_READ
    names: tuple[str, ...]
    file: str = ""
    why: str = ""

    def __str__(self) -> str:
        if self.status is Status.FILE_NOT_READ:
            return self.why  # ``read_lesson``'s words, which name the file
        if not self.file:
            return f"lesson {EXERCISES[self.names[0]].lesson} is missing: {', '.join(self.names)}"
        if self.status is Status.MISSING:
            return f"{self.file}: no function {self.names[0]}"
        return f"{self.file}: {self.names[0]} {self.why}"


@dataclass
class Collected:
    """One exercise of the lessons: the ``file`` it was found in, its ``source`` (a module that defines
    it alone: its imports, constants, helpers and itself) and whether it is still a ``stub``; or, when
    it was left out, ``refused``."""

    file: str = ""
    source: str = ""
    stub: bool = False
    refused: Refused | None = None


@dataclass
class CollectResult:
    """What ``collect`` wrote and what it left out: each exercise, in lesson order, and the reasons
    things were left out (a cell that does not parse may define no exercise), each a ``problem``."""

    out: Path
    exercises: dict[str, Collected] = field(default_factory=dict)
    refusals: list[Refused] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [str(refused) for refused in self.refusals]

    @property
    def functions(self) -> list[tuple[str, str]]:
        """(lesson file, exercise) of each exercise collected."""
        return [(found.file, name) for name, found in self.exercises.items() if found.refused is None]

    @property
    def sources(self) -> dict[str, str]:
        return {name: found.source for name, found in self.exercises.items() if found.refused is None}

    @property
    def stubs(self) -> list[str]:
        return [name for name, found in self.exercises.items() if found.stub]

    def summary(self) -> str:
        written = len(self.functions) - len(self.stubs)
        lines = [f"wrote {self.out}: {len(self.functions)} graded function(s) from "
                 f"{len({lesson for lesson, _ in self.functions})} lesson(s): {written} written, "
                 f"{len(self.stubs)} still a stub"]
        lines += [f"  left out: {problem}" for problem in self.problems]
        return "\n".join(lines)


def lesson_source(path: str | Path) -> str:
    """The Python source of a lesson file: the text of a ``.py``, the code cells of an ``.ipynb``
    (IPython's ``%`` and ``!`` lines dropped). Read with ``read_lesson``; a file that is not a lesson
    is an ``UnreadableLesson`` (a ``ValueError``) naming it."""
    path = Path(path)
    return lesson_text(path.name, read_lesson(path))


def _why_not_parsed(error: Exception, where: str = "") -> str:
    """Why ``ast.parse`` or ``compile`` refused some code, in a few words (``where``: what its line
    number counts in)."""
    if isinstance(error, SyntaxError):
        return f"{printable(error.msg)[:120]}, line {error.lineno}{where}"
    if isinstance(error, _TOO_DEEP):
        return "nested too deeply for Python"
    return printable(error)[:120]  # a ValueError: a null byte, a lone surrogate


def _parsed_cells(source: str, shown: str, refusals: list[Refused]) -> tuple[list[ast.Module], dict[str, Refused]]:
    """The whole file as one tree when it parses; else each cell alone. Returns the trees and, for
    each function in a cell that does not parse, why it is left out (also added to ``refusals``).
    Code nested too deeply for Python's parser (``x = 1+1+...`` with 100,000 terms) is a cell that
    does not parse, like a syntax error."""
    try:
        return [ast.parse(source)], {}
    except (SyntaxError, ValueError, *_TOO_DEEP):
        pass
    trees, unparsed = [], {}
    for cell in _CELL.split(source):
        try:
            trees.append(ast.parse(cell))
        except (SyntaxError, ValueError, *_TOO_DEEP) as error:
            why = _why_not_parsed(error, " of its cell")
            for name in _DEF.findall(cell) or ["(a cell without a function)"]:
                refused = Refused(Status.SYNTAX_ERROR, (printable(name),), shown, f"does not parse ({why})")
                refusals.append(refused)
                unparsed.setdefault(name, refused)
    return trees, unparsed


def _is_stub(function: ast.FunctionDef) -> bool:
    """The student edition's stub: a body (after a docstring) that only raises NotImplementedError."""
    body = [node for node in function.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
            and "NotImplementedError" in ast.unparse(body[0].exc))


def _by_lesson(paths: list[Path]) -> dict[str, Path]:
    """Lesson number -> file; a notebook wins over a script of the same lesson (it is what Jupyter saved)."""
    files: dict[str, Path] = {}
    for path in sorted(paths, key=lambda path: (path.suffix == ".ipynb", path.name)):  # notebooks last: they win
        files[path.name[:2]] = path
    return files


def _lesson_files(folder: Path) -> dict[str, Path]:
    """The lessons at the top of ``folder`` (``NN_topic.py``, ``NN_topic.ipynb``), by lesson number.
    Only their names are looked at here; each is read, or refused, by ``read_lesson``."""
    with os.scandir(folder) as entries:
        return _by_lesson([Path(entry.path) for entry in entries if LESSON_NAME.fullmatch(entry.name)])


def _left_out(result: CollectResult, refused: Refused) -> None:
    """The exercises ``refused.names`` not collected, for that reason (kept once in the result)."""
    if refused not in result.refusals:
        result.refusals.append(refused)
    for name in refused.names:
        result.exercises.setdefault(name, Collected(refused=refused))


def _module_of(name: str, lesson_imports: list[ast.stmt], definitions: dict[str, ast.FunctionDef],
               constants: dict[str, ast.Assign], shown: str) -> str:
    """The module that defines exercise ``name`` alone: its imports, constants, helpers and itself,
    compiled here (never run) so that what the grader sends can be loaded."""
    alone = with_helpers([name], definitions)
    used = names_needed(alone, definitions, constants)
    source = ("\n".join(imports_used(lesson_imports, used)) + "\n\n\n"
              + "\n\n".join(definitions_source(alone, definitions, constants)) + "\n")
    compile(source, f"{shown}:{name}", "exec")
    return source


def _header(folder: Path, out: Path | None) -> str:
    """The written module's docstring, the folder's name made harmless inside it."""
    where = printable(folder).replace("\\", "\\\\").replace('"', '\\"')
    return (f'"""The graded functions of the lessons in {where}, collected by npformer course collect.\n\n'
            f'Use them as an op set: npformer train --ops {printable((out or Path("module.py")).name)}\n"""\n')


def collect(folder: str | Path, out: str | Path | None, *, files: dict[str, Path] | None = None) -> CollectResult:
    """Write the graded functions of the lessons in ``folder`` into the module ``out`` (None: write
    nothing; ``course grade`` uses only the result's ``sources``, one module per exercise).

    ``files``: the lesson files to read, file name -> path (``course grade`` finds them in a
    submission's subfolders, ``submissions.lesson_files_in``); default: the lessons at the top of
    ``folder``. Each is read with ``read_lesson``: a file that is not read, does not parse or does
    not compile is a problem of its own lesson (``Collected.refused``), and the other lessons are collected."""
    folder, out = Path(folder), (None if out is None else Path(out))
    if files is None:
        if not folder.is_dir():
            raise FileNotFoundError(f"course collect: {folder} is not a folder of lessons")
        by_number = _lesson_files(folder)
    else:
        by_number = _by_lesson([Path(path) for path in files.values()])
    if not by_number:
        raise FileNotFoundError(f"course collect: {folder} holds no lesson (NN_topic.py or NN_topic.ipynb)")
    result = CollectResult(out or Path("(not written)"))
    imports: list[ast.stmt] = []
    sections: list[str] = []
    used_names: set[str] = set()
    by_lesson: dict[str, list[str]] = {}
    for name, exercise in EXERCISES.items():
        by_lesson.setdefault(exercise.lesson, []).append(name)
    for lesson in sorted(by_lesson):
        names = by_lesson[lesson]
        if lesson not in by_number:
            _left_out(result, Refused(Status.MISSING, tuple(names)))
            continue
        path = by_number[lesson]
        shown = printable(path.name)
        try:
            source = lesson_source(path)
        except UnreadableLesson as error:
            _left_out(result, Refused(Status.FILE_NOT_READ, tuple(names), shown, str(error)))
            continue
        trees, unparsed = _parsed_cells(source, shown, result.refusals)
        definitions = {node.name: node for tree in trees for node in tree.body if isinstance(node, ast.FunctionDef)}
        lesson_imports = [node for tree in trees for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        constants = lesson_constants(trees, lesson_imports)
        wanted = []
        for name in names:
            if name in unparsed:
                result.exercises[name] = Collected(refused=unparsed[name])
            elif name not in definitions:
                _left_out(result, Refused(Status.MISSING, (name,), shown))
            else:
                try:  # what the grader sends must compile, and Python's compiler recurses
                    module = _module_of(name, lesson_imports, definitions, constants, shown)
                    stub = _is_stub(definitions[name])
                except (SyntaxError, ValueError, *_TOO_DEEP) as error:
                    _left_out(result, Refused(Status.SYNTAX_ERROR, (name,), shown,
                                              f"does not compile ({_why_not_parsed(error)})"))
                    continue
                result.exercises[name] = Collected(path.name, module, stub)
                wanted.append(name)
        if not wanted:
            continue
        imports += lesson_imports
        chosen = with_helpers(wanted, definitions)
        used_names |= names_needed(chosen, definitions, constants)  # the imports to keep
        sections.append(f"# -- lesson {printable(path.stem)} ({shown}) " + "-" * max(0, 70 - len(path.stem)))
        sections += definitions_source(chosen, definitions, constants)  # each compiled above, with its helpers
    if out is not None:
        text = _header(folder, out) + "\n".join(imports_used(imports, used_names)) + "\n\n\n" \
            + "\n\n".join(sections) + "\n"
        try:
            compile(text, str(out), "exec")  # what is written must import
        except (SyntaxError, ValueError, *_TOO_DEEP) as error:
            raise ValueError(f"course collect: the collected module does not compile ({_why_not_parsed(error)}); "
                             f"nothing written to {out}") from None
        out.write_text(text, encoding="utf-8")
    return result
