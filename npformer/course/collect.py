"""Collecting a student's graded functions into one importable module.

``npformer course collect FOLDER --out my_npformer.py`` reads the student's filled-in lessons
(``NN_topic.py`` in the percent format, or ``NN_topic.ipynb`` as Jupyter saved them) and writes
one module: the lessons' imports, then each graded function in lesson order, with a comment
naming its lesson, the helper functions it calls and the lesson's constants it reads. Nothing in the student's files changes.

What cannot be collected is reported by name and left out: a function in a cell that does not
parse, an exercise whose lesson file is missing. The module then serves as an op set
(``course.student_ops``, ``npformer train --ops``, ``npformer gradcheck --model --ops``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import tokens
from .exercises import EXERCISES

__all__ = ["collect", "CollectResult", "lesson_source"]

_CELL = re.compile(r"^# %%.*$", re.MULTILINE)
_DEF = re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE)


@dataclass
class CollectResult:
    """What ``collect`` wrote and what it left out."""

    out: Path
    functions: list[tuple[str, str]] = field(default_factory=list)   # (lesson file, function name)
    problems: list[str] = field(default_factory=list)                # one line each
    sources: dict[str, str] = field(default_factory=dict)            # exercise -> a module defining it alone
    stubs: list[str] = field(default_factory=list)                   # exercises still a stub

    def summary(self) -> str:
        written = len(self.functions) - len(self.stubs)
        lines = [f"wrote {self.out}: {len(self.functions)} graded function(s) from "
                 f"{len({lesson for lesson, _ in self.functions})} lesson(s): {written} written, "
                 f"{len(self.stubs)} still a stub"]
        lines += [f"  left out: {problem}" for problem in self.problems]
        return "\n".join(lines)


def lesson_source(path: Path) -> str:
    """The Python source of a lesson file: the text of a ``.py``, the code cells of an ``.ipynb``
    (IPython's ``%`` and ``!`` lines dropped)."""
    if path.suffix == ".ipynb":
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = []
        for cell in notebook.get("cells", []):
            if cell.get("cell_type") == "code":
                text = "".join(cell.get("source", []))
                cells.append("\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))))
        return "\n\n# %%\n".join(cells) + "\n"
    return path.read_text(encoding="utf-8")


def _parsed_cells(source: str, path: Path, problems: list[str]) -> list[ast.Module]:
    """The whole file as one tree when it parses; else each cell alone, naming the functions of the
    cells that do not parse."""
    try:
        return [ast.parse(source)]
    except SyntaxError:
        pass
    trees = []
    for cell in _CELL.split(source):
        try:
            trees.append(ast.parse(cell))
        except SyntaxError as error:
            for name in _DEF.findall(cell) or ["(a cell without a function)"]:
                problems.append(f"{path.name}: {name} does not parse ({error.msg}, line {error.lineno} of its cell)")
    return trees


def _is_literal(node: ast.AST) -> bool:
    """A constant a function may read from its lesson (``END = " "``, ``SIZES = (2, 4)``)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _names_used(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def _imports_used(imports: list[ast.stmt], used: set[str]) -> list[str]:
    """The import lines that bind a name the collected functions use, each once, in order. A token
    id imported from ``npformer.tokens`` becomes its value (``PAD_ID = <its id>``), so that the functions
    need no npformer where they are graded."""
    lines: list[str] = []
    for node in imports:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            if bound in used:
                single = (ast.Import(names=[alias]) if isinstance(node, ast.Import)
                          else ast.ImportFrom(module=node.module, names=[alias], level=node.level))
                line = ast.unparse(single)
                if isinstance(node, ast.ImportFrom) and node.module == "npformer.tokens" \
                        and isinstance(getattr(tokens, alias.name, None), (int, str)):
                    line = f"{bound} = {getattr(tokens, alias.name)!r}  # npformer.tokens.{alias.name}"
                if line not in lines:
                    lines.append(line)
    return lines


def _is_stub(function: ast.FunctionDef) -> bool:
    """The student edition's stub: a body (after a docstring) that only raises NotImplementedError."""
    body = [node for node in function.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
            and "NotImplementedError" in ast.unparse(body[0].exc))


def _lesson_files(folder: Path) -> dict[str, Path]:
    """Lesson number -> file; a notebook wins over a script of the same lesson (it is what Jupyter saved)."""
    files: dict[str, Path] = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.py")) + sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        files[path.name[:2]] = path
    return files


def _with_helpers(wanted: list[str], definitions: dict[str, ast.FunctionDef]) -> list[str]:
    """The graded functions, then the helpers they call (of the same lesson), each once."""
    chosen, queue = [], list(wanted)
    while queue:
        name = queue.pop(0)
        if name in chosen:
            continue
        chosen.append(name)
        queue += sorted(used for used in _names_used(definitions[name]) & set(definitions) if used not in chosen)
    return chosen


def _definitions(chosen: list[str], definitions: dict[str, ast.FunctionDef], constants: dict[str, ast.Assign]) -> list[str]:
    """The lesson's constants that ``chosen`` read, then their definitions, as source."""
    used_constants = sorted(set().union(*(_names_used(definitions[name]) for name in chosen)) & set(constants))
    return [ast.unparse(constants[name]) for name in used_constants] + \
        [ast.unparse(definitions[name]) + "\n" for name in chosen]


def collect(folder: str | Path, out: str | Path | None) -> CollectResult:
    """Write the graded functions of the lessons in ``folder`` into the module ``out`` (None: write
    nothing; ``course grade`` uses only the result's ``sources``, one module per exercise)."""
    folder, out = Path(folder), (None if out is None else Path(out))
    if not folder.is_dir():
        raise FileNotFoundError(f"course collect: {folder} is not a folder of lessons")
    files = _lesson_files(folder)
    if not files:
        raise FileNotFoundError(f"course collect: {folder} holds no lesson (NN_topic.py or NN_topic.ipynb)")
    result = CollectResult(out or Path("(not written)"))
    imports: list[ast.stmt] = []
    sections: list[str] = []
    used_names: set[str] = set()
    by_lesson: dict[str, list[str]] = {}
    for name, exercise in EXERCISES.items():
        by_lesson.setdefault(exercise.lesson, []).append(name)
    for lesson in sorted(by_lesson):
        if lesson not in files:
            result.problems.append(f"lesson {lesson} is missing: {', '.join(by_lesson[lesson])}")
            continue
        path = files[lesson]
        source = lesson_source(path)
        trees = _parsed_cells(source, path, result.problems)
        definitions = {node.name: node for tree in trees for node in tree.body if isinstance(node, ast.FunctionDef)}
        constants = {node.targets[0].id: node for tree in trees for node in tree.body
                     if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                     and _is_literal(node.value)}
        lesson_imports = [node for tree in trees for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        imports += lesson_imports
        wanted = [name for name in by_lesson[lesson] if name in definitions]
        for name in by_lesson[lesson]:
            if name not in definitions and not any(name in problem for problem in result.problems):
                result.problems.append(f"{path.name}: no function {name}")
        chosen = _with_helpers(wanted, definitions)
        used_names |= set().union(*(_names_used(definitions[name]) for name in chosen))  # the imports to keep
        if chosen:
            sections.append(f"# -- lesson {path.stem} ({path.name}) " + "-" * max(0, 70 - len(path.stem)))
            sections += _definitions(chosen, definitions, constants)
        for name in wanted:
            alone = _with_helpers([name], definitions)
            used = set().union(*(_names_used(definitions[helper]) for helper in alone))
            result.sources[name] = ("\n".join(_imports_used(lesson_imports, used)) + "\n\n\n"
                                    + "\n\n".join(_definitions(alone, definitions, constants)) + "\n")
            if _is_stub(definitions[name]):
                result.stubs.append(name)
        result.functions += [(path.name, name) for name in wanted]
    header = (f'"""The graded functions of the lessons in {folder}, collected by npformer course collect.\n\n'
              f'Use them as an op set: npformer train --ops {(out or Path("module.py")).name}\n"""\n')
    text = header + "\n".join(_imports_used(imports, used_names)) + "\n\n\n" + "\n\n".join(sections) + "\n"
    compile(text, str(out or "collected"), "exec")  # what is written must import
    if out is not None:
        out.write_text(text, encoding="utf-8")
    return result
