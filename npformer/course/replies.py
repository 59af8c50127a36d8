"""A case's reply that is not a result, read as the exercise's verdict, and what a report may show of it.

The grader (``course.grader``) compares what a student's function returned; when a case's reply is
something else (it raised, it is a stub, it reached for npformer, it returned too much, the worker
sent something malformed), ``stop`` and ``fail`` give the verdict. Every text from the student's
side (an exception's type and message, a line of its source) is made printable; a line is shown
only from the student's own code (``OwnLines``); of an instructor's hidden case, only whether it
passed and the type of a built-in exception.
"""

from __future__ import annotations

import builtins
import inspect
import linecache
from typing import Callable

from . import wire
from .cases import HIDDEN_LABEL
from .exercises import Case
from .inert import printable
from .wire import Status
from .worker import Reply

SHOWN_MESSAGE = 500      # characters of an exception's message in a report (as many as the worker sends)
SHOWN_CHARACTERS = 300   # of a line of source or of a printing

# The exception types a hidden case's failure may name: Python's own and NumPy's. Any other name is
# the student's to choose (``type(f"E{x.shape}", (Exception,), {})``), so it could carry the inputs.
KNOWN_ERRORS = frozenset(name for name, value in vars(builtins).items()
                          if isinstance(value, type) and issubclass(value, BaseException)) \
    | {"LinAlgError", "AxisError"}


def is_hidden(label: str) -> bool:
    """Whether a case's label is one of the instructor's hidden cases (``cases.HIDDEN_LABEL``)."""
    return label.startswith(HIDDEN_LABEL)


PICKLED_CODE_FILE = "<dynamic-code>"  # cloudpickle's co_filename for the code it pickles by value


class OwnLines:
    """Where the text of a line that an error names may come from: only the student's own code.

    For ``course grade``, the submitted ``source`` itself, when the error's file is the ``filename``
    this grader gave that job (never the process's ``linecache``, which may hold another student's
    source, and never a file: a student's code can name any path, ``compile(text, "/secret", ...)``).
    For ``check``, the checked function's own file (a lesson, a notebook's cell), when the error's
    file is that one, or the name cloudpickle gives the code it sends by value (the function and
    its helpers arrive in the worker under ``<dynamic-code>``)."""

    def __init__(self, source: str | None, filename: str, function: Callable | None) -> None:
        self.lines = source.splitlines() if source is not None else None
        self.filename = filename
        code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
        self.code_file = getattr(code, "co_filename", None)

    def text(self, file: str, line: int) -> str:
        """The stripped text of ``line`` of ``file``, or "" when it is not the student's own."""
        if self.lines is not None:
            own = file == self.filename and 1 <= line <= len(self.lines)
            return self.lines[line - 1].strip() if own else ""
        if self.code_file is not None and file in (self.code_file, PICKLED_CODE_FILE):
            return linecache.getline(self.code_file, line).strip()
        return ""


def malformed(reply: object) -> str:
    """What is wrong with a reply as the worker sent it ("" when nothing): each field of its kind."""
    if not isinstance(reply, Reply):
        return "not a reply"
    if reply.status not in wire.FROM_WIRE.values():  # the worker checks it first: wire.check_reply
        return "an unknown status"
    for name in ("error_type", "message", "file", "module", "shown"):
        if not isinstance(getattr(reply, name), str):
            return f"{name} is not text"
    for name in ("line", "printed", "microseconds"):
        value = getattr(reply, name)
        if type(value) is not int or value < 0:
            return f"{name} is not a count"
    return ""


def fail(report, label: str, status: Status, message: str = "", detail: str = "") -> None:
    """``report`` (the grader's ``ExerciseReport``, changed in place): the exercise failed at the case
    ``label`` ("" for none) as ``status`` (said on the grade sheet with ``detail``), and ``message``
    says why in the report (default: the grade sheet's words)."""
    report.status, report.detail, report.stopped_at = status, detail, label
    report.reason = report.message = message or status.said(detail)


def case_words(label: str) -> str:
    """How a report names a case: ``case (2, 3, 4)``; a hidden one only as such (which one is said,
    with its verdict, in the hidden cases' line)."""
    return "a hidden case" if is_hidden(label) else f"case {label}"


def shown_type(error_type: str, hidden: bool) -> str:
    """An exception's type as a report shows it: printable and short; for a hidden case, only a
    type of Python's or NumPy's (a name of the student's could carry the case's inputs)."""
    if hidden and error_type not in KNOWN_ERRORS:
        return "an exception of its own class"
    return printable(error_type)[:100] or "an exception"


def stop(report, case: Case, reply: Reply, own_lines: OwnLines) -> None:
    """A case whose reply is not a result: the exercise's verdict from it, written in ``report`` (the
    grader's ``ExerciseReport``). For a hidden case, only
    the kind of failure and a known exception type: its message, its line and what it printed could
    all carry the case's inputs."""
    hidden = is_hidden(case.label)
    report.status, report.stopped_at = reply.status, case.label
    if reply.status is Status.NOT_IMPLEMENTED:
        return
    if reply.status is Status.USES_NPFORMER:
        module = "npformer" if hidden else printable(reply.module)[:100]
        report.reason = f"uses npformer ({module})"
        report.message = (f"uses {module}: npformer's own code (which holds the answers) cannot be imported "
                          "while your function is graded; write the computation yourself, with NumPy")
    elif reply.status is Status.TOO_BIG:
        report.reason = reply.status.words
        report.message = f"{case_words(case.label)}: returned more than {wire.MAX_REPLY // 2**20} MB"
    elif reply.status is Status.GRADER_ERROR:
        report.reason = reply.status.words
        report.message = f"{case_words(case.label)}: the grading process failed"
    else:  # raised, while loading the function or on a case
        error_type = report.detail = shown_type(reply.error_type, hidden)
        loading = "loading your function" if reply.status is Status.LOAD_FAILED else case_words(case.label)
        if hidden:
            report.reason = f"{error_type} in a hidden case"
            report.message = f"{loading}: raised {error_type} (its message is not shown)"
            return
        message = printable(reply.message)[:SHOWN_MESSAGE]
        where = ""
        if reply.line:
            text = printable(own_lines.text(reply.file, reply.line))[:SHOWN_CHARACTERS]
            where = f" (line {reply.line}: {text})" if text else f" (line {reply.line})"
        report.reason = f"{error_type}: {message}"[:200]
        report.message = f"{loading}: raised {error_type}: {message}{where}"
