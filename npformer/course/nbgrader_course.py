"""nbgrader: a course folder that nbgrader's own commands take as it is.

``npformer course nbgrader OUT`` writes::

    OUT/nbgrader_config.py               the course id, the assignments, and the settings the lessons need
    OUT/source/week01/01_....ipynb ...   one assignment per week of the syllabus, its lessons' notebooks

Each notebook is nbgrader's *source*: every graded function's published solution sits between
nbgrader's markers, so ``nbgrader generate_assignment`` hands out the ``def`` line and the
docstring with nbgrader's own stub; the cell that checks an exercise is an autograded test worth
its points; the open questions get one manually graded answer cell
(``notebooks.add_nbgrader_metadata``). The source is nbgrader's solved assignment, so it is built
only from lessons with their solutions, a source checkout's (``edition.lessons_with_solutions``):
from the student edition that the installed package carries, the "solved" source held the stubs
and scored 0 of week 1's 7 points, so that edition is refused in one line.

Two settings, both written in the configuration with the reason beside them:

* ``c.Execute.timeout``: nbgrader gives a cell 30 s by default, and ``autograde`` runs the whole
  notebook; a lesson's training cell runs longer than that (lesson 13's did, and autograding
  stopped with "Timeout waiting for execute reply"). ``TIMEOUT`` seconds covers the slowest whole
  lesson in full mode as recorded on a 2-core machine (lesson 26, 428 s) with room to spare.
* ``NPFORMER_QUICK=1`` for the kernels nbgrader starts: the grades come only from the check cells,
  which do not depend on how long the lessons' models train, and quick mode autogrades the 28
  lessons in about 4 minutes instead of about 22 (the recorded lesson times). Delete the line to autograde in full mode.
"""

from __future__ import annotations

from pathlib import Path

from . import syllabus
from .edition import lessons_with_solutions
from .notebooks import lesson_notebooks

TIMEOUT = 900  # seconds one cell may run under autograde (nbgrader's default: 30)

CONFIG = '''# nbgrader's configuration for npformer's course, written by `npformer course nbgrader`.
import os

c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.course_id = "{course_id}"
# c.CourseDirectory.db_students = [dict(id="ada"), dict(id="bo")]   # or: nbgrader db student import roster.csv

# A lesson's training cell runs longer than nbgrader's default 30 s per cell, and autograde runs
# every cell: {timeout} s covers the slowest whole lesson in full mode on a 2-core machine (428 s).
c.Execute.timeout = {timeout}
c.Execute.startup_timeout = 120

# The grades come only from the check cells, which do not depend on how long the lessons train:
# autograde with short trainings (the 28 lessons run in about 4 minutes instead of about 22).
# Delete this line to autograde in full mode.
os.environ.setdefault("NPFORMER_QUICK", "1")

# The lessons' figures, from every notebook autograded: one folder of the course (without it,
# each kernel would make a temporary folder of its own).
os.environ["NPFORMER_FIGURES"] = os.path.abspath(os.environ.get("NPFORMER_FIGURES")
                                                 or os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures"))
'''


def assignment_name(week: int) -> str:
    return f"week{week:02d}"


def write_course(out: str | Path, weeks: list[int] | None = None, *, lessons_dir: str | Path | None = None,
                 course_id: str = "npformer") -> list[Path]:
    """Write nbgrader's course folder into ``out`` for ``weeks`` (default: all fourteen); returns the
    notebooks written. Needs the course extra (jupytext, nbformat) and the lessons with their solutions
    (``lessons_dir``, default: the checkout npformer was installed from); ``FileNotFoundError`` from
    the student edition."""
    lessons_dir = lessons_with_solutions(lessons_dir, "an nbgrader course (its source holds the solutions)",
                                         "nbgrader")
    out = Path(out)
    chosen = [syllabus.week(number) for number in (weeks or [w.number for w in syllabus.WEEKS])]
    written = []
    for week in chosen:
        folder = out / "source" / assignment_name(week.number)
        written += lesson_notebooks(lessons_dir, folder, execute=False, only=list(week.lessons), nbgrader=True)
    (out / "nbgrader_config.py").write_text(CONFIG.format(course_id=course_id, timeout=TIMEOUT), encoding="utf-8")
    return written
