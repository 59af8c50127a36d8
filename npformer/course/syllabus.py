"""A term of the course: fourteen weeks, the lessons of each, what a student should be able to do
after it, and the problem set that grades it.

``WEEKS`` is the syllabus. A week's **problem set** is the graded exercises of its lessons, worth
their points (``problem_set(week)``): the unit an instructor hands out and grades, on whatever
platform (``npformer course grade --set N``, the Gradescope autograder of week N, the GitHub
Classroom template of week N, nbgrader's assignments). Week 14's problem set is lesson 28's (the
modern decoder's parts); lesson 27 assembles the student's functions and grades none, and the final
project (``docs/instructor.md``) takes the rest of the term.

The hours a student spends on a lesson are **estimated, not measured** (``HOURS_RULE``): reading its
prose, the exercises' minutes of ``difficulty.MINUTES_RULE``, a quarter of an hour per open question,
and the lesson's own running time in full mode. Change the rule to your class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .edition import cells, graded_exercises, is_instructor_cell, lesson_files, open_questions
from .exercises import EXERCISES

READING_WORDS_PER_MINUTE = 100   # technical prose with equations: about half the speed of a novel
MINUTES_PER_OPEN_QUESTION = 15
HOURS_RULE = (f"reading the student edition's prose at {READING_WORDS_PER_MINUTE} words a minute, plus the "
              f"exercises' estimated minutes (the difficulty table's rule), plus {MINUTES_PER_OPEN_QUESTION} "
              "minutes per open question, plus the lesson's running time in full mode as recorded (docs/course.md's table of lesson times)")


@dataclass(frozen=True)
class Week:
    """One week of the term: its lessons (by number), its title and what a student can do after it."""

    number: int
    title: str
    lessons: tuple[str, ...]
    goals: str


WEEKS = (
    Week(1, "Gradients you can trust", ("01", "02"),
         "check any backward pass against central differences in float64; derive and write the linear "
         "layer's, ReLU's and GELU's"),
    Week(2, "Softmax and the loss", ("03",),
         "derive softmax's Jacobian and its vector-Jacobian product; the cross-entropy's gradient, with "
         "label smoothing; compute both stably"),
    Week(3, "Normalisation and positions", ("04", "05"),
         "derive layer norm's backward pass through the mean and the variance; build the sinusoidal "
         "table; write the embedding's backward pass with repeated ids"),
    Week(4, "Masks and attention", ("06", "07"),
         "build padding and causal masks; derive scaled dot-product attention's backward pass through "
         "V, the weights and the scores"),
    Week(5, "Multi-head attention", ("08",),
         "split and merge heads; write multi-head attention and its whole backward pass; count its "
         "parameters"),
    Week(6, "From blocks to a Transformer", ("09", "10", "11"),
         "write the residual blocks' backward passes (with dropout, and with the encoder's memory); "
         "count a Transformer's parameters and FLOPs"),
    Week(7, "Training a translator", ("12", "13"),
         "write Adam and the warm-up schedule; train a translator and read its curves; compute BLEU's "
         "clipped precision"),
    Week(8, "Decoding and reading attention", ("14", "15"),
         "write greedy and beam search and a KV-cached step; measure the cache's speed-up; score "
         "attention heads against gold alignments"),
    Week(9, "One set of layers, other models", ("16", "17", "18"),
         "reason about a GPU's speed from FLOPs and bytes; write masked pooling's backward passes for a "
         "classifier; sample from a language model with temperature and top-k"),
    Week(10, "BERT and the Vision Transformer", ("19", "20"),
         "write BERT's 80-10-10 masking rule; turn images into patches and back for a Vision Transformer"),
    Week(11, "Debugging", ("21", "22", "23"),
         "read a gradient check to find which tensor is wrong; fix the bugs of the zoo; shift the "
         "decoder's input for teacher forcing"),
    Week(12, "Batch norm, and moving to PyTorch", ("24", "25"),
         "derive batch norm's backward pass and say why it misbehaves on padded batches; move a trained "
         "model to PyTorch and back with equal gradients"),
    Week(13, "A real translator", ("26",),
         "learn a BPE vocabulary (merges and segmentation) and train the translator on real Tatoeba pairs"),
    Week(14, "Your Transformer, a 2023 decoder, and the final project", ("27", "28"),
         "train the translator on your own functions; derive the backward passes of RMSNorm, rotary positions, "
         "SwiGLU and grouped-query attention's shared heads, and run a LLaMA-style decoder on them; start the "
         "final project"),
)

PREREQUISITES = (
    "Python: functions, lists and dictionaries, reading a traceback",
    "NumPy: arrays, shapes, broadcasting, indexing with masks, matrix products (`@`)",
    "calculus: partial derivatives and the chain rule; the derivative of exp and log",
    "linear algebra: matrix products and transposes, what a Jacobian is",
    "probability: a distribution over classes, the log-likelihood",
)


def week(number: int) -> Week:
    """The week ``number`` (1 to 14); a ValueError names the range otherwise."""
    for candidate in WEEKS:
        if candidate.number == number:
            return candidate
    raise ValueError(f"no week {number}: the term has weeks 1 to {len(WEEKS)} (problem sets 1 to "
                     f"{max(number for number, names in problem_sets().items() if names)})")


def problem_set(number: int) -> list[str]:
    """The graded exercises of week ``number``'s lessons, in lesson order; a week without one is a
    ValueError."""
    chosen, sets = week(number), problem_sets()
    if not sets[number]:
        raise ValueError(f"week {number} has no problem set (its lessons, {', '.join(chosen.lessons)}, grade "
                         "no exercise); the problem sets are weeks " + ", ".join(str(n) for n, found in sets.items() if found))
    return sets[number]


def problem_sets() -> dict[int, list[str]]:
    """Week -> the exercises of its problem set (empty for a week without one)."""
    return {w.number: [name for name, exercise in EXERCISES.items() if exercise.lesson in w.lessons]
            for w in WEEKS}


def points(names: list[str]) -> int:
    return sum(EXERCISES[name].points for name in names)


def reading_minutes(text: str) -> float:
    """Minutes to read the prose (the markdown cells) of a lesson's student edition."""
    words = 0
    for cell in cells(text):
        if is_instructor_cell(cell) or not cell.startswith("# %% [markdown]"):
            continue
        words += sum(len(line.lstrip("#").split()) for line in cell.splitlines()[1:])
    return words / READING_WORDS_PER_MINUTE


def lesson_hours(exercise_minutes: dict[str, int], machine_seconds: dict[str, float],
                 lessons_dir: str | Path | None = None) -> dict[str, float]:
    """Lesson stem -> estimated student hours (``HOURS_RULE``). ``exercise_minutes``: exercise ->
    minutes (``difficulty``); ``machine_seconds``: lesson stem -> its full-mode running time."""
    hours = {}
    for path in lesson_files(lessons_dir):
        text = path.read_text(encoding="utf-8")
        minutes = (reading_minutes(text) + sum(exercise_minutes.get(name, 0) for name in graded_exercises(text))
                   + MINUTES_PER_OPEN_QUESTION * open_questions(text) + machine_seconds.get(path.stem, 0.0) / 60)
        hours[path.stem] = minutes / 60
    return hours


def syllabus_table(exercise_minutes: dict[str, int], quick_seconds: dict[str, float],
                   full_seconds: dict[str, float], lessons_dir: str | Path | None = None) -> str:
    """The syllabus as Markdown: one row per lesson, grouped by week, with its student hours (an
    estimate) and its machine time in quick and full mode; then the problem sets with their points."""
    stems = {path.stem[:2]: path.stem for path in lesson_files(lessons_dir)}
    hours = lesson_hours(exercise_minutes, full_seconds, lessons_dir)
    rows = ["| week | lesson | student minutes (estimate) | machine seconds, quick mode | machine seconds, full mode |",
            "|---:|---|---:|---:|---:|"]
    for w in WEEKS:
        for index, number in enumerate(w.lessons):
            stem = stems[number]
            rows.append(f"| {w.number if index == 0 else ''} | {stem} | {60 * hours[stem]:.0f} | "
                        f"{quick_seconds.get(stem, 0):.0f} | {full_seconds.get(stem, 0):.0f} |")
    week_hours = {w.number: sum(hours[stems[n]] for n in w.lessons) for w in WEEKS}
    rows += ["", "| problem set | week's topic | exercises | points | student hours (estimate) |",
             "|---:|---|---|---:|---:|"]
    for number, names in problem_sets().items():
        if names:
            listed = ", ".join(f"`{name}`" for name in names)
            rows.append(f"| {number} | {week(number).title} | {listed} | {points(names)} | {week_hours[number]:.0f} |")
    total = sum(hours.values())
    rows += ["", f"In all: {total:.0f} student hours over the {len(WEEKS)} weeks (estimated: {HOURS_RULE}), "
                 f"{points(list(EXERCISES))} points in {sum(1 for names in problem_sets().values() if names)} "
                 "problem sets."]
    return "\n".join(rows)
