"""A lesson reads only the student's own folder (where it runs, and where ``npformer data tatoeba``
puts the real data) and the installed package: no path climbs out of it, no absolute path, no home
folder, and none of this repository's own data folders (``NPFORMER_SHARED``, ``../shared``)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

LESSONS = sorted((pathlib.Path(__file__).resolve().parents[1] / "lessons").glob("[0-9][0-9]_*.py"))
ABSOLUTE = re.compile(r"^(/[\w.-]+)+/?$|^~|^[A-Za-z]:\\")
HOME = re.compile(r"expanduser|Path\.home\(|[\"']HOME[\"']")


def outside_paths(text: str) -> list[str]:
    """What in a lesson's source names a place outside the student's folder and the package."""
    found = [f"line {number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1)
             if "NPFORMER_SHARED" in line or re.search(r"\.\./|\.\.\\", line) or HOME.search(line)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and ABSOLUTE.search(node.value) \
                and node.value != "/":
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_a_lesson_reads_only_the_students_folder_and_the_package(lesson):
    assert not outside_paths(lesson.read_text(encoding="utf-8"))


@pytest.mark.parametrize("line", [
    'data = os.path.join(os.environ["NPFORMER_SHARED"], "data", "fra-eng", "fra.txt")',
    "# (`npformer lm --data ../shared/data/fra-eng/fra.txt`)",
    'pairs = load_pairs("/home/ada/fra.txt")',
    'pairs = load_pairs("~/fra.txt")',
    'pairs = load_pairs(pathlib.Path.home() / "fra.txt")',
    'pairs = load_pairs(os.path.expanduser("~ada/fra.txt"))',
    'pairs = load_pairs(os.environ["HOME"] + "/fra.txt")',
])
def test_the_check_sees_a_path_outside(line):
    assert outside_paths(line + "\n")
