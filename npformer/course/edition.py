"""The two editions of the lessons, where they are installed, and the table of their exercises.

The repository's lesson files are the instructor edition. Two things in them are for the
instructor only:

* each graded exercise's solution, between two marker lines (the convention of nbgrader)::

      def relu_backward(x, dout):
          ### BEGIN SOLUTION
          return dout * (x > 0)
          ### END SOLUTION

* whole cells tagged ``instructor`` in their header line (jupytext's cell metadata, so the tag
  also reaches the notebooks): the classic-mistake cells, whose wrong solution is the answer minus
  one term, and the answers to the open questions::

      # %% [markdown] tags=["instructor"]
      # ### Answers (instructor edition)

The student edition (``student_source``, ``npformer course student OUT``) replaces every solution
by a stub at the same indentation and leaves every ``instructor`` cell out::

    def relu_backward(x, dout):
        # YOUR CODE HERE
        raise NotImplementedError

Everything else is unchanged, so the student edition runs to the end: the grader reports each
stub as "not implemented yet", and the lesson goes on with the library's own version.
``instructor_only(text)`` is what the student edition leaves out (the tests check that none of it
reaches a student).

The lessons travel inside the installed package (``npformer/lessons`` in the wheel, the
repository's ``lessons/`` folder in a clone), so ``lessons_folder()`` finds them without a clone.
The wheel carries their **student edition** (``setup.py`` writes it at build time, README included:
``student_readme``); only a source checkout has the instructor's, and ``instructor_edition`` of a
student edition says so in one line.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")
INSTRUCTOR = "instructor"
_CELL_HEADER = re.compile(r"^# %%")
_TAGS = re.compile(r"\btags=(\[[^\]]*\])")
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([a-z_]+)["'](?![^\n]*strict=False)""")
_QUESTION = re.compile(r"^# \d+\. ")


def lessons_folder() -> Path:
    """The installed lessons: ``npformer/lessons`` of the wheel, or the repository's ``lessons/``
    when npformer is installed from a clone (editable); a clear error when neither is there."""
    spec = importlib.util.find_spec("npformer.lessons")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if any(Path(location).glob("[0-9][0-9]_*.py")):
            return Path(location)
    clone = Path(__file__).resolve().parents[2] / "lessons"
    if any(clone.glob("[0-9][0-9]_*.py")):
        return clone
    raise FileNotFoundError("the lessons are not installed with this copy of npformer: reinstall it "
                            "(pip install . from a clone, or pip install the npformer wheel), or pass --lessons FOLDER")


def lesson_files(lessons_dir: str | Path | None = None) -> list[Path]:
    """The lessons of a folder (default: the installed ones), ``NN_topic.py``, in order."""
    folder = lessons_folder() if lessons_dir is None else Path(lessons_dir)
    files = sorted(folder.glob("[0-9][0-9]_*.py"))
    if not files:
        raise FileNotFoundError(f"no lessons (NN_topic.py files) in {str(folder)!r}")
    return files


def cells(text: str) -> list[str]:
    """The cells of a percent-format script: the text before the first ``# %%`` line, then one
    string per cell, each starting with its header line; ``"".join(cells(text)) == text``."""
    pieces, current = [], []
    for line in text.splitlines(keepends=True):
        if _CELL_HEADER.match(line) and current:
            pieces.append("".join(current))
            current = []
        current.append(line)
    return pieces + ["".join(current)] if current else pieces


def cell_tags(cell: str) -> list[str]:
    """The tags in a cell's header line (``# %% [markdown] tags=["instructor"]``)."""
    header = cell.split("\n", 1)[0]
    found = _TAGS.search(header) if _CELL_HEADER.match(header) else None
    return json.loads(found.group(1)) if found else []


def is_instructor_cell(cell: str) -> bool:
    return INSTRUCTOR in cell_tags(cell)


def _stub_solutions(text: str, name: str, keep: bool) -> tuple[str, str]:
    """(``text`` with each solution replaced by a stub, the solutions' lines)."""
    lines, out, removed, start = text.splitlines(keepends=True), [], [], None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if start is not None:
                raise ValueError(f"{name}:{number}: {BEGIN} inside the block opened at line {start}")
            start = number
            indent = line[: len(line) - len(line.lstrip())]
            out += [line] if keep else [f"{indent}{stub}\n" for stub in STUB]
        elif stripped == END:
            if start is None:
                raise ValueError(f"{name}:{number}: {END} without a {BEGIN} before it")
            start = None
            out += [line] if keep else []
        elif start is None or keep:
            out.append(line)
            if start is not None:
                removed.append(line)
        else:
            removed.append(line)
    if start is not None:
        raise ValueError(f"{name}:{start}: {BEGIN} is never closed by {END}")
    return "".join(out), "".join(removed)


def _split_edition(text: str, name: str) -> tuple[str, str, str]:
    """(the student edition, the solutions' lines it leaves out, the ``instructor`` cells it leaves out)."""
    _stub_solutions(text, name, keep=True)  # the markers are checked on the whole file, tagged cells included
    parts = cells(text)
    kept = "".join(cell for cell in parts if not is_instructor_cell(cell))
    stubbed, solutions = _stub_solutions(kept, name, keep=False)
    return stubbed, solutions, "".join(cell for cell in parts if is_instructor_cell(cell))


def student_source(text: str, name: str = "lesson") -> str:
    """``text`` without its ``instructor`` cells and with every solution replaced by a stub."""
    return _split_edition(text, name)[0]


def nbgrader_source(text: str, name: str = "lesson") -> str:
    """``text`` as nbgrader's source of an assignment: no ``instructor`` cell, and each exercise's body
    between nbgrader's markers, so that ``nbgrader generate_assignment`` keeps the ``def`` line and the
    docstring and replaces only the body, the published solution: ``text`` is the instructor edition
    (a lesson of the student edition has no solution for nbgrader to grade against)."""
    _stub_solutions(text, name, keep=True)
    return "".join(cell for cell in cells(text) if not is_instructor_cell(cell))


def instructor_only(text: str, name: str = "lesson") -> str:
    """What the student edition of ``text`` leaves out: the solutions' lines and the ``instructor`` cells."""
    _, solutions, tagged = _split_edition(text, name)
    return solutions + tagged


_INSTRUCTOR_README = re.compile(r"<!-- instructor edition -->\n.*?<!-- end -->\n", re.DOTALL)
_STUDENT_README = re.compile(r"<!-- student edition\n(.*?)end -->\n", re.DOTALL)


def student_readme(text: str) -> str:
    """The lessons' README for students: the instructor's paragraph left out, the student's (kept in
    an HTML comment in the instructor's README) shown."""
    return _STUDENT_README.sub(lambda found: found.group(1), _INSTRUCTOR_README.sub("", text))


def is_student_edition(lessons_dir: str | Path | None = None) -> bool:
    """Whether a lessons folder (default: the installed one) holds no solution: the student edition,
    as the wheel ships it."""
    return not any(BEGIN in path.read_text(encoding="utf-8") for path in lesson_files(lessons_dir))


def solution_leaks(student_text: str, instructor_text: str, name: str = "lesson") -> list[str]:
    """The lines of ``instructor_text`` that only its instructor part holds (a solution's line, a
    classic-mistake cell's, an answer's) and that ``student_text`` contains: empty for a true student
    edition. Short lines (under 20 characters) and comments are not counted: too common to tell."""
    shared = {line.strip() for line in student_source(instructor_text, name).splitlines()}
    only = {line.strip() for line in instructor_only(instructor_text, name).splitlines()} - shared
    only = {line for line in only if len(line) >= 20 and not line.startswith("#")}
    return sorted(line for line in {line.strip() for line in student_text.splitlines()} if line in only)


def _write_edition(lessons_dir: str | Path | None, out_dir: str | Path, student: bool,
                   only: list[str] | None = None) -> list[Path]:
    files = lesson_files(lessons_dir)
    texts = [(path, path.read_text(encoding="utf-8")) for path in files if only is None or path.name[:2] in only]
    editions = [(path.name, student_source(text, path.name) if student else text) for path, text in texts]
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    # a lesson already there that is neither edition of its lesson is someone's work: never overwritten
    changed = [name for (path, text), (name, edition) in zip(texts, editions)
               if (out / name).is_file()
               and (out / name).read_text(encoding="utf-8") not in (edition, text, student_source(text, name))]
    if changed:
        raise FileExistsError(f"{out} holds {len(changed)} lesson(s) that were changed ({', '.join(changed[:3])}"
                              f"{', ...' if len(changed) > 3 else ''}): a student's work is never overwritten; "
                              "write the edition into another folder (nothing was written)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in editions:
        (out / filename).write_text(text, encoding="utf-8")
        written.append(out / filename)
    readme = files[0].parent / "README.md"
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        (out / "README.md").write_text(student_readme(text) if student else text, encoding="utf-8")
    return written


def student_edition(lessons_dir: str | Path | None, out_dir: str | Path, only: list[str] | None = None) -> list[Path]:
    """Write the student edition of every lesson (default: the installed ones) into ``out_dir``;
    ``only``: the lesson numbers to write (``["01", "02"]``, a week's handout)."""
    return _write_edition(lessons_dir, out_dir, student=True, only=only)


def source_checkout_lessons() -> Path | None:
    """The ``lessons/`` folder of the source checkout npformer was installed from (``pip install .``
    records where, in the distribution's ``direct_url.json``), when it is still there and holds the
    solutions; None for a wheel from an index, or a checkout since removed."""
    from importlib import metadata
    try:
        record = json.loads(metadata.distribution("npformer").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = record.get("url", "")
    folder = Path(url[len("file://"):]) / "lessons" if url.startswith("file://") else None
    if folder is None or not any(folder.glob("[0-9][0-9]_*.py")) or is_student_edition(folder):
        return None
    return folder


def lessons_with_solutions(lessons_dir: str | Path | None, built: str = "the instructor edition",
                           command: str = "instructor") -> str | Path | None:
    """The lessons that hold the solutions, which ``built`` is made from: ``lessons_dir``, or with None
    the installed ones, else (the installed package carries the student edition) the checkout npformer
    was installed from (``source_checkout_lessons``). Raises ``FileNotFoundError`` in one line, naming
    ``npformer course COMMAND OUT --lessons CLONE/lessons``, when they are the student edition."""
    if lessons_dir is None and is_student_edition(None):
        lessons_dir = source_checkout_lessons()
    if is_student_edition(lessons_dir):
        where = "the installed lessons are" if lessons_dir is None else f"{lessons_dir} is"
        raise FileNotFoundError(f"{where} the student edition (no solutions): {built} is built from a source "
                                f"checkout of npformer's repository, npformer course {command} OUT --lessons "
                                "CLONE/lessons")
    return lessons_dir


def instructor_edition(lessons_dir: str | Path | None, out_dir: str | Path,
                       only: list[str] | None = None) -> list[Path]:
    """Write the instructor edition (the lessons as they are: solutions, mistakes, answers) into
    ``out_dir``. It is built only from a source checkout (``lessons_with_solutions``)."""
    return _write_edition(lessons_with_solutions(lessons_dir), out_dir, student=False, only=only)


def graded_exercises(text: str) -> list[str]:
    """The exercises a lesson grades: its ``check("name", ...)`` calls, in order, except those
    that show a mistake on purpose (``strict=False`` on the same line)."""
    return _CHECK_CALL.findall(text)


def open_questions(text: str) -> int:
    """How many numbered questions the lesson's ``## Exercises`` section asks (its answers, in the
    instructor cells after it, are not counted)."""
    section = text.split("# ## Exercises", 1)[-1] if "# ## Exercises" in text else ""
    asked = "".join(cell for cell in cells(section) if not is_instructor_cell(cell))
    return sum(1 for line in asked.splitlines() if _QUESTION.match(line))


def exercise_table(lessons_dir: str | Path | None = None) -> str:
    """A Markdown table: each lesson, its graded exercises and its number of open questions."""
    rows = ["| lesson | graded exercises (`npformer.course.check`) | open questions |", "|---|---|---|"]
    for path in lesson_files(lessons_dir):
        text = path.read_text(encoding="utf-8")
        graded = ", ".join(f"`{name}`" for name in graded_exercises(text)) or "-"
        rows.append(f"| {path.stem} | {graded} | {open_questions(text)} |")
    return "\n".join(rows)
