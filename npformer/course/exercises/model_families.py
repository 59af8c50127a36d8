"""The exercises of lessons 17-19: the encoder-only classifier, the decoder-only language model, the masked language model."""

from __future__ import annotations

from .base import Exercise, WrongSolution

EXERCISES: list[Exercise] = []
WRONG_SOLUTIONS: list[WrongSolution] = []
