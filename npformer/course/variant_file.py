"""A student's variants file: written by the instructor for each student, read by ``check``.

``npformer course variants OUT --roster FILE --secret FILE`` writes, for each student of the roster,
``OUT/<student>/npformer_variants.json`` (their name and the variant of each family, never the
secret) and ``variants.txt`` (the same in words, with each variant's statement). The student keeps
the JSON file beside their lessons; ``check`` finds it in the working folder or a folder above it
(or at ``$NPFORMER_VARIANTS``) and grades each exercise against the student's variant. The file
only tells the student which exercise is theirs: the instructor's grading draws the variants again
from the roster and the secret, so editing the file changes nothing but the student's own checks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .inert import feedback_file_name, printable, write_atomically
from .variants import FAMILIES, FAMILY_OF, TEXTBOOK_FORM, assignment, statement, variant_for

FILE_NAME = "npformer_variants.json"
SEARCHED_LEVELS = 4  # how many folders above the working one are looked in


def write_variants(out: str | Path, roster_path: str | Path, secret: str) -> list[Path]:
    """Each roster student's variants file (and its words) under ``out``; returns the JSON files."""
    from .roster import read_roster
    roster = read_roster(roster_path)
    out = Path(out)
    written, taken = [], set()
    for student in sorted(set(roster.students.values())):
        folder = out / Path(feedback_file_name(student, taken)).stem
        folder.mkdir(parents=True, exist_ok=True)
        variants = assignment(secret, student)
        write_atomically(folder / FILE_NAME, json.dumps({"student": student, "variants": variants}, indent=1) + "\n")
        lines = [f"{printable(student)}: your variants of the course's derivations", ""]
        for family, variant in variants.items():
            lines += [f"{family} ({', '.join(FAMILIES[family].exercises)}): '{variant}'",
                      f"    {statement(FAMILIES[family].exercises[-1], variant)}", ""]
        write_atomically(folder / "variants.txt", "\n".join(lines))
        written.append(folder / FILE_NAME)
    return written


def find_file(start: str | Path | None = None) -> Path | None:
    """The student's variants file: ``$NPFORMER_VARIANTS``, else ``FILE_NAME`` in ``start`` (the
    working folder) or one of the ``SEARCHED_LEVELS`` folders above it; None when there is none."""
    if os.environ.get("NPFORMER_VARIANTS"):
        return Path(os.environ["NPFORMER_VARIANTS"])
    folder = Path(start or Path.cwd()).resolve()
    for candidate in [folder, *folder.parents][:SEARCHED_LEVELS + 1]:
        if (candidate / FILE_NAME).is_file():
            return candidate / FILE_NAME
    return None


def read_variants(path: str | Path) -> dict[str, str]:
    """The family -> variant map of a variants file (a ValueError in one line when it is not one). The
    names are checked when a family's variant is asked for (``my_variant``), so that a name this
    npformer does not know stops only that family's exercises."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        variants = data["variants"]
        if not isinstance(variants, dict) or not all(isinstance(value, str) for value in variants.values()):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a variants file ({type(error).__name__}); ask your instructor for "
                         "yours") from None
    return variants


def my_variant(name: str, start: str | Path | None = None) -> str:
    """The variant of the exercise ``name`` that the student's file gives (``TEXTBOOK_FORM`` when the
    exercise has no variants or there is no file); a ValueError when the file names one this npformer
    does not have (another version of the course: ask the instructor)."""
    path = find_file(start)
    return TEXTBOOK_FORM if path is None else _checked(name, read_variants(path), path)


def _checked(name: str, variants: dict[str, str], path: Path) -> str:
    """``name``'s variant in ``variants`` (read from ``path``), known to this npformer."""
    variant = variant_for(name, variants)
    if variant != TEXTBOOK_FORM:
        try:
            FAMILY_OF[name].variant(variant)
        except ValueError as error:
            raise ValueError(f"{path}: {error}; this npformer is another version than your instructor's: ask "
                             "them which to install") from None
    return variant


def show_variants(lesson: str) -> str:
    """What a lesson's cell prints before its exercises: each of the lesson's derivations in the form
    this student derives (their variants file's; the lesson's own form without one)."""
    from .exercises import EXERCISES
    names = [family.exercises[-1] for family in FAMILIES.values()
             if any(EXERCISES[name].lesson == lesson for name in family.exercises)]
    path = find_file()
    if path is None:
        return (f"no variants file ({FILE_NAME}) here or above: you derive the lesson's own forms. If your "
                "instructor grades with variants, put the file they gave you beside your lessons.")
    lines = [f"your variants ({path}): derive these forms of the backward passes and their steps; the lesson's "
             "closed forms are wrong for them. Forward exercises (softmax, attention...) stay the lesson's own."]
    variants = read_variants(path)
    for name in names:
        try:
            variant = _checked(name, variants, path)
        except ValueError as error:
            lines.append(f"  {FAMILY_OF[name].name}: {error}")
            continue
        lines.append(f"  {FAMILY_OF[name].name}: " + (f"'{variant}': {statement(name, variant)}"
                                                     if variant != TEXTBOOK_FORM else "the lesson's own form"))
    return "\n".join(lines)
