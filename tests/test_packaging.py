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
    assert f'pip install ".[test]" && {command}\n' in readme


def test_runtime_dependencies_are_numpy_and_matplotlib_only():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ \[]", dep)[0] for dep in project["dependencies"]}
    assert names == {"numpy", "matplotlib"}
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


def test_ops_reach_the_array_library_only_through_the_backend():
    for path in (ROOT / "npformer" / "ops").glob("*.py"):
        modules = set(_imported_modules(path))
        assert not modules & {"numpy", "cupy"}, f"{path.name} imports {modules & {'numpy', 'cupy'}}"
        assert not any(m.startswith("..") and m not in ("..backend",) for m in modules), path.name


def test_modules_never_import_the_layers_above_them():
    above_nn = {"..optim", "..gradcheck", "..cli", "npformer.optim", "npformer.gradcheck", "npformer.cli"}
    for path in (ROOT / "npformer" / "nn").glob("*.py"):
        modules = set(_imported_modules(path))
        assert not modules & above_nn, f"{path.name} imports {modules & above_nn}"
        assert not modules & {"cupy"}, path.name
