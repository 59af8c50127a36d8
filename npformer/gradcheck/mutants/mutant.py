"""The Mutant: one realistic backward bug, named, placed, and patched into the library on demand.

A mutant replaces one function or method (``target.attribute``) with a buggy version built from
the original, only inside ``with mutant.applied():``; a mutant of an op (``target`` is the package
``npformer.ops``) replaces that op in the active op set (``ops.using``), never the package's name; ``check`` names the check that must catch it
(see the package's docstring) and ``pattern`` the diagnosis its report must give.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator


@dataclass(frozen=True)
class Mutant:
    """One realistic backward bug: where it is, what it does, which check must catch it."""

    name: str
    where: str
    bug: str
    target: Any
    attribute: str
    replacement: Callable[[Callable], Callable]  # the original -> the buggy version
    check: str
    pattern: str = ""

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The library with this bug in it, inside the ``with`` block; restored after."""
        from ... import ops

        if self.target is ops:  # an op: the buggy form of the active one becomes the active one
            with ops.using({self.attribute: self.replacement(getattr(ops.current(), self.attribute))},
                           name="mutant"):
                yield
            return
        original = getattr(self.target, self.attribute)
        inherited = self.attribute not in vars(self.target)  # a subclass's method from its base class
        setattr(self.target, self.attribute, self.replacement(original))
        try:
            yield
        finally:
            if inherited:
                delattr(self.target, self.attribute)
            else:
                setattr(self.target, self.attribute, original)
