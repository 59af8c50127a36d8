"""The student edition of the lessons, and the table of their exercises.

A lesson holds each graded exercise's solution between two marker lines (the
convention of nbgrader)::

    def relu_backward(x, dout):
        ### BEGIN SOLUTION
        return dout * (x > 0)
        ### END SOLUTION

The student edition replaces everything from ``### BEGIN SOLUTION`` to
``### END SOLUTION`` by a stub at the same indentation::

    def relu_backward(x, dout):
        # YOUR CODE HERE
        raise NotImplementedError

Everything else is unchanged, so the student edition runs to the end: the grader
reports each stub as "not implemented yet", and the lesson goes on with the
library's own version. The full lessons are the published solutions.
"""

from __future__ import annotations

import re
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([a-z_]+)["'](?![^\n]*strict=False)""")
_QUESTION = re.compile(r"^# \d+\. ")


def lesson_files(lessons_dir: str | Path) -> list[Path]:
    """The lessons of a folder, ``NN_topic.py``, in order; a clear error when there are none."""
    folder = Path(lessons_dir)
    files = sorted(folder.glob("[0-9][0-9]_*.py"))
    if not files:
        raise FileNotFoundError(f"no lessons (NN_topic.py files) in {str(folder)!r}: pass the repository's "
                                "lessons folder (the lessons are not part of the installed package)")
    return files


def student_source(text: str, name: str = "lesson") -> str:
    """``text`` with every solution block replaced by a stub that raises ``NotImplementedError``."""
    lines, out, start = text.splitlines(keepends=True), [], None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if start is not None:
                raise ValueError(f"{name}:{number}: {BEGIN} inside the block opened at line {start}")
            start = number
            indent = line[: len(line) - len(line.lstrip())]
            out += [f"{indent}{stub}\n" for stub in STUB]
        elif stripped == END:
            if start is None:
                raise ValueError(f"{name}:{number}: {END} without a {BEGIN} before it")
            start = None
        elif start is None:
            out.append(line)
    if start is not None:
        raise ValueError(f"{name}:{start}: {BEGIN} is never closed by {END}")
    return "".join(out)


def student_edition(lessons_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write the student edition of every lesson of ``lessons_dir`` into ``out_dir``; return the files."""
    files = lesson_files(lessons_dir)
    editions = [(path.name, student_source(path.read_text(encoding="utf-8"), path.name)) for path in files]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in editions:
        (out / filename).write_text(text, encoding="utf-8")
        written.append(out / filename)
    return written


def graded_exercises(text: str) -> list[str]:
    """The exercises a lesson grades: its ``check("name", ...)`` calls, in order, except those
    that show a mistake on purpose (``strict=False`` on the same line)."""
    return _CHECK_CALL.findall(text)


def open_questions(text: str) -> int:
    """How many numbered questions the lesson's ``## Exercises`` section asks."""
    section = text.split("# ## Exercises", 1)[-1] if "# ## Exercises" in text else ""
    return sum(1 for line in section.splitlines() if _QUESTION.match(line))


def exercise_table(lessons_dir: str | Path) -> str:
    """A Markdown table: each lesson, its graded exercises and its number of open questions."""
    rows = ["| lesson | graded exercises (`npformer.course.check`) | open questions |", "|---|---|---|"]
    for path in lesson_files(lessons_dir):
        text = path.read_text(encoding="utf-8")
        graded = ", ".join(f"`{name}`" for name in graded_exercises(text)) or "-"
        rows.append(f"| {path.stem} | {graded} | {open_questions(text)} |")
    return "\n".join(rows)
