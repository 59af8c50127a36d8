"""How much each graded exercise asks of a student: its steps, the length of its published answer,
and a rough estimate of the minutes it takes; and per lesson, its longest answer and how many of its
open questions have an auto-graded part.

The answer's length is measured: the lines of code between the solution markers of the instructor
edition (blank lines and comments left out; a nested helper counts). The minutes are **not**
measured on students: they follow a stated rule of thumb, ``MINUTES_RULE``, so that an instructor
can see at a glance where the work is (and change the rule to their class).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .edition import BEGIN, END, lesson_files, open_questions
from .exercises import DERIVATIONS, EXERCISES

SUBSTANTIAL_LINES = 8  # a graded lesson's longest answer should take at least this many lines of reasoning

MINUTES_RULE = ("5 minutes to read the exercise, plus 3 per line of the published answer; doubled for a "
                "backward pass (2 points), which is derived on paper first")


def answer_lines(lessons_dir: str | Path | None = None) -> dict[str, int]:
    """Exercise -> the lines of code of its published answer (instructor edition)."""
    lines: dict[str, int] = {}
    for path in lesson_files(lessons_dir):
        text = path.read_text(encoding="utf-8")
        source = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name in EXERCISES and node.name not in lines:
                body = source[node.lineno - 1: node.end_lineno]
                inside, count = False, 0
                for line in body:
                    stripped = line.strip()
                    if stripped in (BEGIN, END):
                        inside = stripped == BEGIN
                    elif inside and stripped and not stripped.startswith("#"):
                        count += 1
                if any(line.strip() == BEGIN for line in body):
                    lines[node.name] = count
    return lines


def minutes(name: str, lines: int) -> int:
    """The rule of thumb (``MINUTES_RULE``) for one exercise."""
    estimate = 5 + 3 * lines
    return 2 * estimate if EXERCISES[name].points == 2 else estimate


def difficulty_table(lessons_dir: str | Path | None = None) -> str:
    """A Markdown table: exercise, lesson, points, its steps (a derivation's), the answer's lines,
    the estimated minutes; then each lesson's total."""
    lines = answer_lines(lessons_dir)
    step_of = {step: final for final, steps in DERIVATIONS.items() for step in steps}
    rows = ["| exercise | lesson | points | steps | answer (lines) | minutes (estimate) |",
            "|---|---|---:|---|---:|---:|"]
    totals: dict[str, int] = {}
    for name, exercise in EXERCISES.items():
        count = lines.get(name, 0)
        if name in DERIVATIONS:
            steps = f"after {len(DERIVATIONS[name])}: " + ", ".join(f"`{step}`" for step in DERIVATIONS[name])
        elif name in step_of:
            steps = f"a step of `{step_of[name]}`"
        else:
            steps = "-"
        estimate = minutes(name, count)
        totals[exercise.lesson] = totals.get(exercise.lesson, 0) + estimate
        rows.append(f"| `{name}` | {exercise.lesson} | {exercise.points} | {steps} | {count} | {estimate} |")
    summary = ", ".join(f"{lesson}: {total}" for lesson, total in totals.items())
    return ("\n".join(rows) + f"\n\nEstimated minutes by lesson: {summary}; in all {sum(totals.values())}.\n\n"
            + lesson_table(lessons_dir, lines))


def lesson_table(lessons_dir: str | Path | None = None, lines: dict[str, int] | None = None) -> str:
    """A Markdown table, one row per graded lesson: its exercises, its longest answer (flagged under
    ``SUBSTANTIAL_LINES``), its open questions and how many of them have an auto-graded part
    (``Exercise.question``); then the totals."""
    lines = answer_lines(lessons_dir) if lines is None else lines
    questions = {path.stem[:2]: open_questions(path.read_text(encoding="utf-8")) for path in lesson_files(lessons_dir)}
    rows = ["| lesson | exercises | longest answer (lines) | open questions | with an auto-graded part |",
            "|---|---:|---:|---:|---:|"]
    short, marked = [], 0
    for lesson in sorted({exercise.lesson for exercise in EXERCISES.values()}):
        names = [name for name, exercise in EXERCISES.items() if exercise.lesson == lesson]
        longest = max(lines.get(name, 0) for name in names)
        auto = len({EXERCISES[name].question for name in names if EXERCISES[name].question})
        marked += auto
        flag = "" if longest >= SUBSTANTIAL_LINES else " (short)"
        short += [lesson] if flag else []
        rows.append(f"| lesson {lesson} | {len(names)} | {longest}{flag} | {questions.get(lesson, 0)} | {auto} |")
    total = sum(questions.values())
    return ("\n".join(rows) + f"\n\nOpen questions with an auto-graded part: {marked} of {total}. Graded lessons "
            f"whose longest answer is under {SUBSTANTIAL_LINES} lines: {', '.join(short) or 'none'}.")


def derivation_table() -> str:
    """A Markdown table: each backward pass derived in graded steps, its lesson and its steps in order,
    each with what it returns (the part of its signature after ``->``)."""
    rows = ["| derivation | lesson | its steps, in order (what each returns) |", "|---|---|---|"]
    for final, steps in sorted(DERIVATIONS.items(), key=lambda item: (EXERCISES[item[0]].lesson, item[0])):
        shown = "; ".join(f"`{step}` ({EXERCISES[step].signature.partition('->')[2].strip()})" for step in steps)
        rows.append(f"| `{final}` | {EXERCISES[final].lesson} | {shown} |")
    return "\n".join(rows)

