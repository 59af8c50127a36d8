"""README stays true: its quickstart runs as written, and the counts it quotes match the code."""

import io
import os
import pathlib
import re
import subprocess
import sys

import pytest

from npformer import cli, gradcheck
from npformer.tasks.translation import TrainOptions, train

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _block_after(heading: str, language: str) -> str:
    section = README[README.index(heading):]
    return re.search(rf"```{language}\n(.*?)```", section, re.DOTALL).group(1)


def test_the_python_quickstart_runs_as_written(tmp_path):
    # a small stand-in for the default run, where the quickstart expects it
    status = train(TrainOptions(runs_dir=str(tmp_path / "runs"), name="toy-tiny", max_steps=30, d_model=16,
                                d_ff=32, n_layers=1, n_heads=2, eval_every=1000, test_sentences=10),
                   stream=io.StringIO())
    assert status == 0
    code = _block_after("## Python quickstart", "python")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stderr
    assert "all passed" in result.stdout
    assert (tmp_path / "cross-attention.png").stat().st_size > 5_000


def test_the_gradcheck_table_in_readme_is_what_the_command_prints(capsys):
    assert cli.main(["gradcheck"]) == 0
    printed = capsys.readouterr().out.splitlines()[1:]  # after the backend line
    quoted = _block_after("`npformer gradcheck` runs it over every op", "").strip().splitlines()

    def without_errors(lines):  # the error values depend on the machine's rounding; the rest must not
        return [re.sub(r"\d\.\d\de-\d\d", "E", line) for line in lines]

    assert without_errors(quoted) == without_errors(printed)
    assert f"{sum(1 for _ in printed) - 3} tensors checked" in quoted[-1]


def test_readme_counts_the_lessons_there_are():
    lessons = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    rows = re.findall(r"^\| (\d+) \| ", README, re.MULTILINE)
    assert [int(row) for row in rows] == list(range(1, len(lessons) + 1))
    units = ["", "-one", "-two", "-three", "-four", "-five", "-six", "-seven", "-eight", "-nine"]
    words = {20 + n: "twenty" + unit for n, unit in enumerate(units)}
    assert f"a course in {words[len(lessons)]} steps" in README


@pytest.mark.parametrize("name", ["tiny", "small", "base"])
def test_readme_presets_match_the_code(name):
    from npformer.tasks.translation import PRESETS

    preset = PRESETS[name]
    assert f"`{name}` (d_model {preset['d_model']}" in README or f"`{name}` ({preset['d_model']}" in README


def test_readme_counts_the_tensors_of_the_model_check():
    model = gradcheck.model_case()[0]
    assert f"float64 Transformer ({len(model.params())} tensors)" in README
