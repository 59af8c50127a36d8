"""The course's graded exercises, one module per part of the course, gathered in lesson order.

    base.py         Exercise, Case, WrongSolution, and the pieces cases are drawn with
    foundations.py  lessons 1-15: the ops' backward passes, attention, the Transformer's pieces,
                    Adam and its schedule, BLEU's precision, the length penalty, attention's entropy
    decoding.py     lesson 14: beam search and the KV-cached decoding step
    model_families.py   lessons 17-19: pooling, sampling, BERT's masking rule
    patches_and_bugs.py lessons 20-22: patch embeddings, reading a gradient check, a bug fixed
    training_details.py lessons 23-26: teacher forcing, batch norm, PyTorch's layout, BPE

Each module lists its ``EXERCISES`` (and may list ``WRONG_SOLUTIONS``, realistic mistakes the
grader must fail, beside ``course.wrong_solutions``'s catalogue).
"""

from __future__ import annotations

from . import decoding, foundations, model_families, patches_and_bugs, training_details
from .base import Case, Exercise, WrongSolution

MODULES = (foundations, decoding, model_families, patches_and_bugs, training_details)

EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in sorted(
    (exercise for module in MODULES for exercise in module.EXERCISES), key=lambda exercise: exercise.lesson)}

__all__ = ["EXERCISES", "Exercise", "Case", "WrongSolution", "MODULES"]
