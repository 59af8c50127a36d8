"""What a student's install holds that passes a graded exercise as their variant states it.

Run as ``python install_audit.py ROOT [LESSONS] [--only MODULE]``, with ``ROOT`` a folder holding an ``npformer``
package (an unpacked wheel, a Classroom template's ``.npformer``) and ``LESSONS`` a folder of lesson
files: every function of that npformer (module functions and class methods, private ones too) and
every function defined in the lessons whose arguments are an exercise's is called on the exercise's
public cases, for each of the exercise's variants; it prints, as JSON, those whose every answer
agrees with the variant's (``[file, function, exercise, variant]``). A student could paste any of
them; the answer must be none.
"""

import ast
import importlib
import inspect
import json
import pkgutil
import sys
import warnings
from pathlib import Path


def _package_functions(npformer):
    for module_info in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if module_info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(module_info.name)
        except Exception:  # noqa: BLE001 - a module that needs an extra (CuPy) is not the student's answer
            continue
        for _, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                yield module.__name__, value
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for _, method in vars(value).items():
                    if inspect.isfunction(method):
                        yield module.__name__, method


def _lesson_functions(lessons: Path):
    import numpy
    for path in sorted(lessons.glob("[0-9][0-9]_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                namespace = {"np": numpy, "numpy": numpy}
                try:
                    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
                except Exception:  # noqa: BLE001
                    continue
                yield path.name, namespace[node.name]


def _arguments(function) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [parameter.name for parameter in parameters if parameter.default is inspect.Parameter.empty]


def _passes(function, exercise, prepared) -> bool:
    """Whether ``function`` gives the answers of ``exercise`` (a variant) on every prepared case."""
    import numpy
    from npformer.course.cases import outputs
    from npformer.course.exercise_report import compare
    for item in prepared:
        try:
            with warnings.catch_warnings(), numpy.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = outputs(exercise, function(*item.case.inputs.values()), item.case.inputs)
            rows = [compare(exercise, item.case, name, value, expected, None)
                    for name, value, expected in zip(exercise.outputs, got, item.expected)]
        except Exception:  # noqa: BLE001 - raising is failing
            return False
        if len(got) != len(item.expected) or not all(row.passed for row in rows):
            return False
    return True


def audit(root: Path, lessons: Path | None, only: str = "") -> list:
    """The functions of ``root``'s npformer (those of modules named from ``only``, when given) and of
    ``lessons`` that pass some graded exercise's variant."""
    sys.path.insert(0, str(root))
    for name in [name for name in sys.modules if name == "npformer" or name.startswith("npformer.")]:
        del sys.modules[name]
    import numpy
    import npformer
    from npformer.course.cases import prepare
    from npformer.course.exercises import EXERCISES
    from npformer.course.variants import FAMILIES, graded_with_variants, posed
    assert Path(npformer.__file__).resolve().is_relative_to(root.resolve()), npformer.__file__
    candidates = [(where, function) for where, function in _package_functions(npformer) if where.startswith(only)]
    candidates += list(_lesson_functions(lessons)) if lessons else []
    arguments = {tuple(_arguments(function)) for _, function in candidates}
    wanted = {}
    for family in FAMILIES.values():
        for name in family.exercises:
            signature = tuple(_arguments(EXERCISES[name].reference))
            if graded_with_variants(name) and signature in arguments:  # an exercise no function could pass: skipped
                cases = list(EXERCISES[name].cases(numpy.random.default_rng(0)))
                for variant in family.variants:
                    exercise = posed(name, variant.name)
                    wanted.setdefault(signature, []).append((name, variant.name, exercise, prepare(exercise, cases)))
    found = []
    for where, function in candidates:
        for name, variant, exercise, prepared in wanted.get(tuple(_arguments(function)), []):
            if _passes(function, exercise, prepared):
                found.append([where, function.__qualname__, name, variant])
    return found


if __name__ == "__main__":
    arguments = sys.argv[1:]
    only = arguments.pop(arguments.index("--only") + 1) if "--only" in arguments else ""
    arguments = [argument for argument in arguments if argument != "--only"]
    print(json.dumps(audit(Path(arguments[0]), Path(arguments[1]) if len(arguments) > 1 else None, only)))
