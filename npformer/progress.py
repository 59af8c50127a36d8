"""A dependency-free progress bar for long work.

On a terminal it redraws one line in place (at most 10 times a second)::

    step 1200 [##########----------] 52% 1:18<1:12 | loss 1.234 | 9,876 tok/s | lr 6.3e-04

Elsewhere (a log file, CI) it prints a plain line every ``log_seconds``, so
logs stay readable. Progress is counted in steps, or in seconds when the
run has a time budget.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressBar:
    """``update(step, **fields)`` after each step; ``close()`` at the end."""

    def __init__(self, total_steps: int | None = None, total_seconds: float | None = None,
                 stream: IO[str] | None = None, width: int = 20, log_seconds: float = 30.0) -> None:
        self.total_steps, self.total_seconds = total_steps, total_seconds
        self.stream = stream or sys.stderr
        self.width, self.log_seconds = width, log_seconds
        self.start = time.perf_counter()
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_draw = float("-inf")
        self._line_length = 0

    def fraction(self, step: int) -> float | None:
        fractions = []
        if self.total_steps:
            fractions.append(step / self.total_steps)
        if self.total_seconds:
            fractions.append((time.perf_counter() - self.start) / self.total_seconds)
        return min(1.0, max(fractions)) if fractions else None

    def render(self, step: int, **fields: Any) -> str:
        elapsed = time.perf_counter() - self.start
        done = self.fraction(step)
        parts = [f"step {step}"]
        if done is not None:
            filled = int(round(done * self.width))
            remaining = elapsed / done - elapsed if done > 0 else 0.0
            parts.append(f"[{'#' * filled}{'-' * (self.width - filled)}] {done:4.0%} "
                         f"{_clock(elapsed)}<{_clock(remaining)}")
        else:
            parts.append(_clock(elapsed))
        for name, value in fields.items():
            parts.append(value if isinstance(value, str) else f"{name} {value}")
        return " | ".join(parts)

    def update(self, step: int, **fields: Any) -> None:
        now = time.perf_counter()
        if self.interactive:
            if now - self._last_draw < 0.1:
                return
            line = self.render(step, **fields)
            self.stream.write("\r" + line + " " * max(0, self._line_length - len(line)))
            self._line_length = len(line)
        else:
            if now - self._last_draw < self.log_seconds:
                return
            self.stream.write(self.render(step, **fields) + "\n")
        self.stream.flush()
        self._last_draw = now

    def message(self, text: str) -> None:
        """Print a line of its own without garbling the bar."""
        if self.interactive and self._line_length:
            self.stream.write("\r" + " " * self._line_length + "\r")
            self._line_length = 0
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_draw = float("-inf") if self.interactive else self._last_draw

    def close(self) -> None:
        if self.interactive and self._line_length:
            self.stream.write("\n")
            self.stream.flush()
