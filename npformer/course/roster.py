"""Whose variant is whose: the instructor's roster, and each student's variants drawn from it.

A roster is a CSV file with a header and two columns, ``student`` (the name the variants are drawn
from: the student's id on the course's own list) and ``submission`` (a name their work arrives
under: the folder of ``course grade``, a Gradescope user id or e-mail, a GitHub user that owns a
Classroom repository). A student has a row for each name; a group has one ``student`` name that all
its members' rows share, so that a group submission is graded with one set of variants. The variants
follow from the instructor's secret and the roster's ``student`` name, never from a name the student
gives: a student cannot choose theirs, and a renamed folder is "not on the roster".
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from .variants import MODES, assignment

MAX_ROSTER_BYTES = 4 * 2**20


class NotOnRoster(ValueError):
    """A submission whose names the roster does not map to one student."""


@dataclass(frozen=True)
class Roster:
    students: dict  # a submission's name -> the student's name

    def student(self, *names: str) -> str:
        """The student that ``names`` (a submission's names: a folder's, or each Gradescope submitter's id
        and e-mail) map to: those on the roster must all be one student's, and one at least must be."""
        found = {self.students[name.strip().lower()] for name in names if name.strip().lower() in self.students}
        if not found:
            raise NotOnRoster(f"not on the roster: {', '.join(names)}")
        if len(found) != 1:
            raise NotOnRoster(f"{', '.join(names)} are different students on the roster ({', '.join(sorted(found))}):"
                              " give a group one student name on every member's row")
        return found.pop()


def read_roster(path: str | Path) -> Roster:
    """The roster in ``path`` (see the module's docstring); a ValueError, in one line, for a file
    that is not one (no header ``student,submission``, an empty name, a submission name twice for
    two students)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no roster file {path} (a CSV with a header student,submission)")
    data = path.read_bytes()[:MAX_ROSTER_BYTES + 1]
    if len(data) > MAX_ROSTER_BYTES:
        raise ValueError(f"the roster {path} is over {MAX_ROSTER_BYTES // 2**20} MB")
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if header[:2] != ["student", "submission"]:
        raise ValueError(f"the roster {path} must start with the header student,submission (got {rows[:1]})")
    students: dict[str, str] = {}
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise ValueError(f"the roster {path}, line {number}: a student and a submission name are both needed")
        student, name = row[0].strip(), row[1].strip().lower()
        if students.get(name, student) != student:
            raise ValueError(f"the roster {path}, line {number}: {row[1].strip()} is already {students[name]}'s")
        students[name] = student
    if not students:
        raise ValueError(f"the roster {path} lists no student")
    return Roster(students)


@dataclass(frozen=True)
class Variants:
    """How a class is graded: ``mode`` "student" (each student's own variants, from ``roster``),
    "class" (one variant per family for everyone) or "off" (the lesson's form); ``secret``: the
    instructor's, which the draw hashes with the student's roster name."""

    mode: str
    secret: str
    roster: Roster | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"variants must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == "student" and self.roster is None:
            raise ValueError("variants per student need the roster (--roster FILE)")

    def of(self, *names: str) -> tuple[str, dict[str, str]]:
        """The roster's student for a submission's ``names`` (a folder's name, whole; Gradescope's
        submitters' ids and e-mails) and their variants (``NotOnRoster``)."""
        if self.mode != "student":
            return "", assignment(self.secret, "", self.mode)
        student = self.roster.student(*names)
        return student, assignment(self.secret, student, self.mode)
