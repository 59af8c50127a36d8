"""The exercises of lesson 14: beam search and the KV-cached decoding step."""

from __future__ import annotations

from .base import Exercise, WrongSolution

EXERCISES: list[Exercise] = []
WRONG_SOLUTIONS: list[WrongSolution] = []
