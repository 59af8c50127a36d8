"""The project's promises about itself: one test command, few dependencies, one-way imports."""

import ast
import pathlib
import re

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r'^TEST_COMMAND="([^"]+)"', ci, re.MULTILINE).group(1)
    readme = (ROOT / "README.md").read_text()
    assert f'pip install ".[test,course]" && {command}\n' in readme


def test_runtime_dependencies_are_numpy_matplotlib_tqdm_and_threadpoolctl_only():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ \[]", dep)[0] for dep in project["dependencies"]}
    assert names == {"numpy", "matplotlib", "tqdm", "threadpoolctl"}  # threadpoolctl: the fast ops
    assert {"pytest", "hypothesis"} <= {re.split(r"[<>=!~ ]", d)[0]
                                        for d in project["optional-dependencies"]["test"]}
    assert project["scripts"]["npformer"] == "npformer.cli:main"


def _imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or "")


# The layers of DESIGN.md, bottom first. A module may import its own layer's package
# (inside the same folder) and any layer below; never a layer above, nor a sibling of the
# same rank. `data` needs only `tokens` and host NumPy; gradcheck, metrics and viz sit
# beside `training`, above the models they check, score and draw; the tasks use training.
LAYERS = {
    "counter_random": -1,  # the device backends' random generator, which backend returns; imports only NumPy
    "backend": 0, "strict_backend": 0, "tokens": 0, "errors": 0, "allocator": 0,
    "threads": 0.5,  # how ops run on the CPU's cores; asks backend whether the arrays are on a GPU
    "ops": 1, "data": 1,
    "nn": 2,
    "models": 3, "optim": 3,
    "training": 4, "gradcheck": 4, "metrics": 4, "viz": 4, "interop": 4,
    "tasks": 5,
    "bench": 6, "course": 6,
    "cli": 7,
    "__main__": 8,
}


def _component(path, root):
    """The top-level part of the package a file belongs to: 'nn' for npformer/nn/attention.py."""
    parts = path.relative_to(root).with_suffix("").parts
    return parts[0]


def _resolve(module, path, root, package):
    """The top-level component an import names, or None when it is outside the package."""
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        here = list(path.relative_to(root).parent.parts)
        base = here[: len(here) - (level - 1)] if level > 1 else here
        rest = [part for part in module.lstrip(".").split(".") if part]
        parts = base + rest
        return parts[0] if parts else None
    if module == package or module.startswith(package + "."):
        rest = module.split(".")[1:]
        return rest[0] if rest else ""
    return None


def import_violations(root, package="npformer"):
    """Every import in the package tree at ``root`` that goes up the layers or sideways."""
    violations = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == root:
            continue  # the top-level __init__ re-exports every layer
        own = _component(path, root)
        for module in _imported_modules(path):
            target = _resolve(module, path, root, package)
            if target in (None, own):
                continue
            if target == "" or target not in LAYERS:
                violations.append(f"{path.relative_to(root)} imports {module!r}: not a known layer")
            elif own not in LAYERS:
                violations.append(f"{path.relative_to(root)}: {own!r} is not in LAYERS")
            elif LAYERS[target] >= LAYERS[own]:
                violations.append(f"{path.relative_to(root)} ({own}, layer {LAYERS[own]}) imports "
                                  f"{module!r} ({target}, layer {LAYERS[target]})")
    return violations


def test_every_import_runs_down_the_layers():
    root = ROOT / "npformer"
    components = {_component(p, root) for p in root.rglob("*.py")} - {"__init__"}
    assert components <= set(LAYERS), f"place {components - set(LAYERS)} in LAYERS"
    assert import_violations(root) == []


def test_the_import_check_catches_an_import_that_goes_up(tmp_path):
    """The check above must be able to fail: a copy of the package with one upward import."""
    import shutil

    copy = tmp_path / "npformer"
    shutil.copytree(ROOT / "npformer", copy, ignore=shutil.ignore_patterns("__pycache__"))
    attention = copy / "nn" / "attention.py"
    attention.write_text(attention.read_text() + "\nfrom ..training import train_step\n")
    masks = copy / "ops" / "masks.py"
    masks.write_text(masks.read_text() + "\nfrom npformer.data import Vocab\n")
    found = import_violations(copy)
    assert any("nn/attention.py" in v and "training" in v for v in found), found
    assert any("ops/masks.py" in v and "npformer.data" in v for v in found), found  # same rank: sideways
    assert len(found) == 2


def _module_name(path, root, package):
    """``npformer.nn.attention`` for ``root/nn/attention.py``; ``npformer.nn`` for ``root/nn/__init__.py``."""
    parts = (package, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root, package="npformer"):
    """``{module: sorted modules of the package it imports}`` for every module under ``root``.

    Every import counts, at the top of the file or inside a function. ``from .x import y`` names
    the submodule ``x.y`` when there is one, else ``x`` (its ``__init__``). The parent packages
    that Python runs before a module are not edges: they are not imports the module asks for.
    """
    files = {_module_name(path, root, package): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]  # the module's package
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = here.split(".")
                    stem = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    stem = node.module
                imported.update(f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in files else stem
                                for alias in node.names)
        graph[name] = sorted(module for module in imported if module in files and module != name)
    return graph


def import_cycles(graph):
    """The import circles of ``graph``, each as ``[a, b, ..., a]``: one per import that closes a
    circle in a depth-first walk, so the list is empty exactly when there is no circle."""
    state, path, cycles = {}, [], []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for target in graph[module]:
            if state.get(target) == "open":
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_no_import_circle_anywhere():
    graph = import_graph(ROOT / "npformer")
    assert "npformer.data.vocab" in graph and "npformer.ops.softmax" in graph["npformer.ops.cross_entropy"]
    cycles = import_cycles(graph)
    assert cycles == [], "import circles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_circle_check_catches_a_circle_closed_inside_a_function(tmp_path):
    """The check above must be able to fail: a subclass imported lazily by its base's module."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .a import A\n")
    (package / "sub" / "a.py").write_text("class A:\n    def load(self):\n        from .b import B\n        return B()\n")
    (package / "sub" / "b.py").write_text("from .a import A\n\n\nclass B(A):\n    pass\n")
    (package / "c.py").write_text("import numpy\n\nfrom .sub import a\nfrom . import sub\n")
    graph = import_graph(package, "pkg")
    assert graph["pkg.c"] == ["pkg.sub", "pkg.sub.a"]
    assert import_cycles(graph) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]]


def test_ops_reach_the_array_library_only_through_the_backend():
    for path in (ROOT / "npformer" / "ops").glob("*.py"):
        modules = set(_imported_modules(path))
        assert not modules & {"numpy", "cupy"}, f"{path.name} imports {modules & {'numpy', 'cupy'}}"


def test_special_token_ids_are_written_only_in_tokens():
    """No module compares with, or assigns, a bare 0-3 where a special token id is meant."""
    offenders = []
    for path in (ROOT / "npformer").rglob("*.py"):
        if path.name == "tokens.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#")[0]
            if re.search(r"\b(\w*ids|tokens?|targets?|src|tgt\w*)(\[[^\]]*\]|\([^)]*\))?\s*(==|!=|=)\s*[0-3]\b", code) \
                    or re.search(r"\b[A-Z]+_ID\s*=\s*[0-9]", code):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_no_module_over_450_lines_and_no_function_over_80():
    """One idea per file, and a function a reader can hold: every module of the package under 450
    lines and every function or method under 80."""
    root = ROOT / "npformer"
    too_long = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        if len(source.splitlines()) > 450:
            too_long.append(f"{path.relative_to(root)}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                too_long.append(f"{path.relative_to(root)}: {node.name} has {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, too_long


def _loaded_by_import_npformer(prefixes):
    """The modules whose names start with one of ``prefixes`` that ``import npformer`` loads in a fresh process."""
    import subprocess
    import sys

    code = f"import sys, npformer; print(sorted(m for m in sys.modules if m.startswith({tuple(prefixes)!r})))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_npformer_opens_no_network_module():
    """``import npformer`` does not load urllib's request module or http.client: only a download does
    (``data.download._fetch``)."""
    assert _loaded_by_import_npformer(("urllib.request", "http.client")) == "[]"


def test_import_npformer_loads_no_progress_bar_and_no_network_module():
    """Nor tqdm, nor any of http: the progress bars import tqdm when they start (``training.fit``,
    ``data.download``, the notebooks)."""
    assert _loaded_by_import_npformer(("tqdm", "urllib.request", "http")) == "[]"
