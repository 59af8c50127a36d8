"""The exercises of lessons 23-26: teacher forcing, batch norm, the layout of PyTorch's weights, BPE."""

from __future__ import annotations

from .base import Exercise, WrongSolution

EXERCISES: list[Exercise] = []
WRONG_SOLUTIONS: list[WrongSolution] = []
