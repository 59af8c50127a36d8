"""The one kind of error a user can fix by changing what they asked for.

``UsageError`` is raised by any layer (a run folder that does not exist, a data file that is not a
TSV of pairs, an output path that cannot be written, a bad option) and carries one line that says
what is wrong and what to do. The command line prints that line and exits with status 2; in Python
it is an ordinary exception. Each layer's own error classes derive from it (``RunError``,
``DataError``, ``OutputPathError``, ...), usually together with ``ValueError``.
"""

from __future__ import annotations


class UsageError(Exception):
    """A problem the user can fix; its message is one line (the command line prints it, exit 2)."""
