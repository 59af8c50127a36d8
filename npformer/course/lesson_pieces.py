"""What a collected function takes with it from its lesson: the helper functions it calls, the constants
it reads (a literal, or a value computed from the lesson's imports alone) and the import lines of the
names they use (``course collect``, ``collect.py``)."""

from __future__ import annotations

import ast
import builtins

from .. import tokens

__all__ = ["is_literal", "lesson_constants", "names_used", "free_names", "imports_used", "with_helpers",
           "constants_read", "names_needed", "definitions_source"]


def is_literal(node: ast.AST) -> bool:
    """A constant a function may read from its lesson (``END = " "``, ``SIZES = (2, 4)``)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def lesson_constants(trees: list[ast.Module], lesson_imports: list[ast.stmt]) -> dict[str, ast.Assign]:
    """The lesson's constants, by name: a literal (``END = " "``), or a value computed from literals, the lesson's
    imports and earlier constants alone (``C = math.sqrt(2 / math.pi)``), which the collected file computes
    again. A value that reads anything else the lesson computed (data, a model) is not a constant."""
    known = {alias.asname or alias.name.split(".")[0] for node in lesson_imports for alias in node.names
             if not ((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name).startswith("npformer")}
    known |= set(dir(builtins))   # npformer's names are not known: the grading worker has no npformer
    constants: dict[str, ast.Assign] = {}
    for node in (node for tree in trees for node in tree.body):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if is_literal(node.value) or names_used(node.value) <= known | set(constants) - {name}:
            constants[name] = node
        else:
            constants.pop(name, None)   # the name now holds something else the lesson computed
    return constants


def names_used(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def free_names(function: ast.FunctionDef) -> set[str]:
    """The names ``function`` reads and never binds (neither a parameter nor assigned), its nested scopes included."""
    bound = {arg.arg for node in ast.walk(function) if isinstance(node, ast.arguments)
             for arg in (*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg) if arg is not None}
    bound |= {child.id for child in ast.walk(function) if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load)}
    return names_used(function) - bound


def imports_used(imports: list[ast.stmt], used: set[str]) -> list[str]:
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


def with_helpers(wanted: list[str], definitions: dict[str, ast.FunctionDef]) -> list[str]:
    """The graded functions, then the helpers they call (of the same lesson), each once."""
    chosen, queue = [], list(wanted)
    while queue:
        name = queue.pop(0)
        if name in chosen:
            continue
        chosen.append(name)
        queue += sorted(used for used in names_used(definitions[name]) & set(definitions) if used not in chosen)
    return chosen


def constants_read(chosen: list[str], definitions: dict[str, ast.FunctionDef],
                    constants: dict[str, ast.Assign]) -> list[str]:
    """The lesson's constants that ``chosen`` read, and those that these constants read, in the lesson's order.
    A computed constant goes only where a function reads it as a global (``x`` is often a parameter too)."""
    read, queue = set(), set()
    for function in (definitions[name] for name in chosen):
        free = free_names(function)
        queue |= {name for name in names_used(function) & set(constants)
                  if name in free or is_literal(constants[name].value)}
    while queue:
        name = queue.pop()
        read.add(name)
        queue |= (names_used(constants[name].value) & set(constants)) - read
    return [name for name in constants if name in read]


def names_needed(chosen: list[str], definitions: dict[str, ast.FunctionDef],
                  constants: dict[str, ast.Assign]) -> set[str]:
    """Every name that ``chosen`` and the constants they read use (which imports to keep)."""
    return set().union(*(names_used(definitions[name]) for name in chosen),
                       *(names_used(constants[name].value) for name in constants_read(chosen, definitions, constants)))


def definitions_source(chosen: list[str], definitions: dict[str, ast.FunctionDef], constants: dict[str, ast.Assign]) -> list[str]:
    """The lesson's constants that ``chosen`` read, then their definitions, as source."""
    return [ast.unparse(constants[name]) for name in constants_read(chosen, definitions, constants)] + \
        [ast.unparse(definitions[name]) + "\n" for name in chosen]
