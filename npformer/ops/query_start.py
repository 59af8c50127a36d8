"""Where a call's queries start: the position of the first query row that attention is handed.

A training pass hands attention every position of a sentence, so a query's row is its position.
Cached decoding hands it one new query at a time (``Transformer.decode_step``), whose position is the
number of tokens before it, not 0. npformer's attention reads no positions (they are in the
embeddings), so it never asks; an attention form that does (a student's ALiBi variant, whose scores
depend on ``|i - j|``) reads ``query_start()`` to give a decoding step the scores its training saw.

The position lives in a ``contextvars.ContextVar``, as the op set does: ``with queries_from(p):``
sets it for the code it runs; everywhere else it is 0.
"""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["query_start", "queries_from"]

_start: contextvars.ContextVar[int] = contextvars.ContextVar("npformer_query_start", default=0)


def query_start() -> int:
    """The position of the first query row of the attention calls made here (0 outside decoding)."""
    return _start.get()


class queries_from:  # noqa: N801 -- used as a function, like ops.using
    """``with queries_from(position):`` the attention calls inside hand queries from ``position`` on."""

    def __init__(self, position: int) -> None:
        self.position = int(position)

    def __enter__(self) -> "queries_from":
        self._token = _start.set(self.position)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _start.reset(self._token)
