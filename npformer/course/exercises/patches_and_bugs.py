"""The exercises of lessons 20-22: patch embeddings, reading a gradient check, a bug of the zoo fixed."""

from __future__ import annotations

from .base import Exercise, WrongSolution

EXERCISES: list[Exercise] = []
WRONG_SOLUTIONS: list[WrongSolution] = []
