"""README and docs/ stay true: their examples do what the text says, and the counts they quote match
the code. (tests/test_docs.py runs every block; this file checks what the blocks and tables claim.)"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from npformer import cli, gradcheck

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _flat(text: str) -> str:
    """The text with every run of whitespace as one space, so that a phrase may wrap."""
    return " ".join(text.split())


def _block_after(text: str, heading: str, language: str) -> str:
    section = text[text.index(heading):]
    return re.search(rf"```{language}\n(.*?)```", section, re.DOTALL).group(1)


def _run_python(code: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "MPLBACKEND": "Agg"}, timeout=120)


def test_the_readme_installs_from_the_clone_never_from_a_package_index():
    assert "pip install . && npformer train" in README
    assert not re.search(r"pip install npformer\b", README + "".join(_page(p.name) for p in DOCS.glob("*.md")))


def test_the_readme_attention_example_draws_and_writes_the_explorer(tmp_path):
    result = _run_python(_block_after(README, "## Reading attention", "python"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "le chat noir mange la pomme." in result.stdout  # the comment in the block says so
    assert (tmp_path / "cross-attention.png").stat().st_size > 5_000
    assert "<script" in (tmp_path / "explorer.html").read_text(encoding="utf-8")


def test_the_readme_gradient_example_passes_both_checks(tmp_path):
    result = _run_python(_block_after(README, "## Checking gradients", "python"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("all passed") == 2


def test_the_gradcheck_table_in_the_docs_is_what_the_command_prints(capsys):
    assert cli.main(["gradcheck"]) == 0
    printed = capsys.readouterr().out.splitlines()[1:]  # after the backend line
    quoted = _block_after(_page("gradient-checking.md"), "`npformer gradcheck` runs it over every op",
                          "text").strip().splitlines()

    def without_errors(lines):  # the error values depend on the machine's rounding; the rest must not
        return [re.sub(r"\d\.\d\de-\d\d", "E", line) for line in lines]

    assert without_errors(quoted) == without_errors(printed)
    assert f"{sum(1 for _ in printed) - 3} tensors checked" in quoted[-1]


def test_the_course_page_counts_the_lessons_there_are():
    lessons = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    course = _page("course.md")
    rows = re.findall(r"^\| (\d+) \| ", course, re.MULTILINE)
    assert [int(row) for row in rows] == list(range(1, len(lessons) + 1))
    units = ["", "-one", "-two", "-three", "-four", "-five", "-six", "-seven", "-eight", "-nine"]
    words = {20 + n: "twenty" + unit for n, unit in enumerate(units)}
    assert f"a course in {words[len(lessons)]} steps" in _flat(course)
    assert f"a course in {words[len(lessons)]} steps" in _flat(README)
    assert f"a course of {words[len(lessons)]} lessons" in _flat(README)


def test_the_course_page_counts_the_exercises_there_are():
    from npformer.course.exercises import EXERCISES

    lessons = {exercise.lesson for exercise in EXERCISES.values()}
    assert f"{len(EXERCISES)} graded exercises in {len(lessons)} lessons" in _flat(_page("course.md"))


@pytest.mark.parametrize("name", ["tiny", "small", "base"])
def test_the_translation_page_presets_match_the_code(name):
    from npformer.tasks.translation import PRESETS

    preset = PRESETS[name]
    translation = _flat(_page("translation.md"))
    assert f"`{name}` (d_model {preset['d_model']}" in translation or f"`{name}` ({preset['d_model']}" in translation


def test_the_gradient_page_counts_the_tensors_of_the_model_check():
    model = gradcheck.model_case()[0]
    assert f"float64 Transformer ({len(model.params())} tensors)" in _flat(_page("gradient-checking.md"))


def test_no_install_hint_names_a_package_index_entry_that_does_not_exist():
    """npformer is installed from a clone or a wheel: no message of the package may tell a user to
    ``pip install npformer`` or ``npformer[extra]`` from an index."""
    sources = "".join(path.read_text(encoding="utf-8") for path in (ROOT / "npformer").rglob("*.py"))
    assert not re.search(r"pip install ['\"]?npformer(\[|\b(?! wheel))", sources)


def test_the_readme_sends_the_commands_that_write_files_to_a_scratch_folder():
    """Following the README once left secret.txt, grades.csv and handout/ in the clone."""
    before_the_course_commands = README[:README.index("npformer course student my-course")]
    assert "mkdir -p ~/npformer-try && cd ~/npformer-try" in before_the_course_commands
    assert "apt-get install chromium chromium-driver bubblewrap" in _flat(README)   # the browser tests skip without
