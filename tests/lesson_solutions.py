"""The instructor's solutions, as functions: each graded function of the lessons (the repository's
instructor edition), collected as the grader collects a student's, then defined in this process.

Tests grade them as a complete student's work, and build wrong variants on top of them (npformer's
own references cannot be graded: the worker refuses npformer)."""

import functools
import pathlib
import textwrap

from npformer.course import collect

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"


@functools.cache
def sources() -> dict[str, str]:
    """Exercise name -> a module defining the instructor's solution alone."""
    return collect(LESSONS, None).sources


def solution(name: str):
    """The instructor's solution to ``name``, defined afresh (a module of its own, not importable,
    so the grader sends it by value)."""
    namespace = {"__name__": f"solution_{name}"}
    exec(compile(sources()[name], f"<solution {name}>", "exec"), namespace)
    return namespace[name]


def replace_solution(path, function: str, body: str) -> None:
    """Write ``body`` (a function body) in place of the solution of ``function`` in the lesson file
    ``path`` (an instructor edition's): a student's own answer, right, wrong or hostile."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"def {function}(")
    begin = text.index("### BEGIN SOLUTION\n", start) + len("### BEGIN SOLUTION\n")
    end = text.index("    ### END SOLUTION", begin)
    path.write_text(text[:begin] + textwrap.indent(textwrap.dedent(body).strip() + "\n", "    ") + text[end:],
                    encoding="utf-8")
