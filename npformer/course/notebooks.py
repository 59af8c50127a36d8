"""The lessons as Jupyter notebooks, executed (outputs and figures inline) or not.

A lesson is a percent-format script (``# %%`` cells); jupytext reads it as a
notebook, nbclient runs it in a fresh kernel whose working folder is the output
folder, so lesson 15 finds the run that lesson 13 wrote. Needs the ``course``
extra: ``pip install ".[course]"`` from a clone.

The student edition's notebooks carry nbgrader's cell metadata (schema 3), so that a
class that already runs nbgrader can use them as they are:

* each cell with an exercise's stub is a **solution** cell (the student writes there);
* each cell that grades an exercise is an **autograded test** cell, locked, worth the
  exercise's points; it ends with an ``assert`` that the exercise passes, because nbgrader
  gives a test cell its points when it runs without an error;
* after the ``## Exercises`` section, one **manually graded** answer cell, worth one point
  per open question (after each of its markdown cells that asks questions, where the code cells of
  auto-graded question parts cut the section; the first is ``NN_answers``, a later one
  ``NN_answers_K``, K the number of its first question);
* every other cell is **locked** (read-only; nbgrader restores it before grading).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any, Iterator

from .edition import BEGIN, STUB, graded_exercises, lesson_files, nbgrader_source, student_source
from .exercises import EXERCISES

_QUESTION = re.compile(r"^\d+\. ", re.MULTILINE)
_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)
_CHECKED = re.compile(r"""\bcheck\(\s*["']([a-z_]+)["']\s*,\s*(\w+)\s*[,)]""")


class NotebookError(RuntimeError):
    """A lesson's cell raised while it ran as a notebook; the message names the lesson and the cell."""


def _course_tools() -> tuple[Any, Any, Any]:
    try:
        import jupytext
        import nbclient
        import nbformat
    except ImportError as error:
        raise ImportError(f"the notebooks need the course extra ({error.name} is missing): "
                          "pip install jupytext nbclient nbformat ipykernel, or, from a clone of "
                          "npformer, pip install \".[course]\"") from None
    return jupytext, nbclient, nbformat


@contextlib.contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the kernels started inside the block, then restore them."""
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
              points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def add_nbgrader_metadata(notebook: Any, lesson: str, nbformat: Any) -> Any:
    """Mark a student notebook's cells for nbgrader (see the module's docstring); returns it."""
    cells, answered = [], None  # questions of the ## Exercises section given an answer cell (None: not there yet)
    for index, cell in enumerate(notebook.cells):
        source = cell.source
        graded = graded_exercises(source) if cell.cell_type == "code" else []
        if cell.cell_type == "code" and (STUB[1] in source or BEGIN in source):
            name = (_DEF.findall(source) or [f"cell{index}"])[0]
            cell.metadata["nbgrader"] = _nbgrader(f"{lesson}_{name}", solution=True)
        elif graded:
            checks = "\n".join(f"assert check({name!r}, {function}).passed, "
                               f"\"exercise {name} does not pass yet: its report is printed above\""
                               for name, function in _CHECKED.findall(source) if name in graded)
            cell.source = source.rstrip() + "\n" + checks
            cell.metadata["nbgrader"] = _nbgrader(f"{lesson}_check_{'_'.join(graded)}", grade=True, locked=True,
                                                  points=sum(EXERCISES[name].points for name in graded))
        else:
            cell.metadata["nbgrader"] = _nbgrader(f"{lesson}_cell{index}", locked=True)
        cells.append(cell)
        if cell.cell_type == "markdown" and "## Exercises" in source:
            source, answered = source.split("## Exercises", 1)[1], 0
        questions = _QUESTION.findall(source) if cell.cell_type == "markdown" and answered is not None else []
        if questions:  # the questions' text may be cut by the code cells of their auto-graded parts
            answer = nbformat.v4.new_markdown_cell("YOUR ANSWER HERE")
            answer.metadata["nbgrader"] = _nbgrader(f"{lesson}_answers" + (f"_{answered + 1}" if answered else ""),
                                                    grade=True, solution=True, points=len(questions))
            cells.append(answer)
            answered += len(questions)
    notebook.cells = cells
    return notebook


def lesson_notebooks(lessons_dir: str | Path, out_dir: str | Path, *, execute: bool = True,
                     student: bool = False, quick: bool = False, timeout: int = 900,
                     only: list[str] | None = None, nbgrader: bool = False) -> list[Path]:
    """Write every lesson of ``lessons_dir`` as ``out_dir/NN_topic.ipynb``; return the files.

    Args:
        execute: run each notebook (in ``out_dir``), so that outputs and figures are inline.
        student: the student edition (solutions replaced by stubs).
        quick: ``NPFORMER_QUICK=1`` for the kernels (short trainings).
        timeout: seconds one cell may run.
        only: lesson numbers (``["04", "13"]``) to convert; None for all.
        nbgrader: nbgrader's source of the student notebook (``edition.nbgrader_source``: each body
            between nbgrader's markers), with its cell metadata; implies ``student``.

    The figures go to ``out_dir/figures`` (``$NPFORMER_FIGURES`` when set).

    Raises ``NotebookError`` naming the lesson and the cell when a cell raises; the
    notebook is still written, with the error in its outputs.
    """
    from tqdm.auto import tqdm  # imported here: ``import npformer`` need not load it

    jupytext, nbclient, nbformat = _course_tools()
    files = [path for path in lesson_files(lessons_dir) if only is None or path.name[:2] in only]
    if only is not None and not files:
        raise FileNotFoundError(f"no lesson numbered {', '.join(only)} (the lessons are 01 to "
                                f"{lesson_files(lessons_dir)[-1].name[:2]})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    # Figures inline whatever the caller's MPLBACKEND says (a kernel would otherwise honour Agg, say),
    # and to files in one folder, absolute since the kernels run in out
    figures = os.path.abspath(os.environ.get("NPFORMER_FIGURES") or out / "figures")
    changes = {"MPLBACKEND": "module://matplotlib_inline.backend_inline", **({"NPFORMER_QUICK": "1"} if quick else {}),
               "NPFORMER_FIGURES": figures}
    with _environment(changes):
        for path in tqdm(files, desc="notebooks", unit="lesson", disable=not execute):
            text = path.read_text(encoding="utf-8")
            if nbgrader:
                text = nbgrader_source(text, path.name)
            elif student:
                text = student_source(text, path.name)
            notebook = jupytext.reads(text, fmt="py:percent")
            if student or nbgrader:
                add_nbgrader_metadata(notebook, path.stem, nbformat)
            notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            target = out / f"{path.stem}.ipynb"
            try:
                if execute:
                    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                                     resources={"metadata": {"path": str(out)}})
                    client.execute()
            except nbclient.exceptions.CellExecutionError as error:
                summary = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
                raise NotebookError(f"{path.name}: a cell raised while running as a notebook: {summary}") from error
            finally:
                nbformat.write(notebook, target)
            written.append(target)
    return written
