"""Ctrl-C during training: the first press asks the loop to stop after the current step and
save; a second press stops at once (``KeyboardInterrupt``)."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator


class StopRequest:
    """``requested`` turns True at the first Ctrl-C; the loop checks it between steps."""

    def __init__(self) -> None:
        self.requested = False

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


@contextlib.contextmanager
def graceful_interrupts() -> Iterator[StopRequest]:
    """Catch SIGINT in the block (main thread only; elsewhere Ctrl-C cannot arrive) and restore
    the previous handler afterwards."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGINT, stop._on_signal)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
