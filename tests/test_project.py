"""The final project's automatic part: the component's backward pass against finite differences of its
own forward pass (run in the grading worker), the translator's BLEU against a threshold; and the
handout that a student starts from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npformer.cli import main
from npformer.course import project

PRETRAINED_TOY = Path(project.__file__).resolve().parents[1] / "data" / "pretrained" / "toy"

RMSNORM_FORWARD = '''def forward(x, gain):
    """x: (B, T, D), gain: (D,) -> y: (B, T, D)."""
    r = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + 1e-6)
    return x * r * gain'''

RMSNORM_BACKWARD = '''    D = x.shape[-1]
    r = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + 1e-6)
    g = dout * gain
    dx = r * g - x * r ** 3 * (g * x).sum(axis=-1, keepdims=True) / D{wrong}
    dgain = (dout * x * r).reshape(-1, D).sum(axis=0)
    return dx, dgain'''


def _handout(folder: Path, backward_wrong: str | None = None, forward: str = RMSNORM_FORWARD) -> Path:
    project.write_handout(folder)
    path = folder / project.COMPONENT_FILE
    text = path.read_text()
    text = text.replace('def forward(x, gain):\n    """x: (B, T, D), gain: (D,) -> y: (B, T, D)."""\n'
                        '    raise NotImplementedError', forward)
    body = RMSNORM_BACKWARD.format(wrong=backward_wrong or "")
    text = text.replace('returns (dx, dgain)."""\n    raise NotImplementedError', 'returns (dx, dgain)."""\n' + body)
    path.write_text(text)
    return folder


def test_the_handout_is_a_stub_and_scores_nothing(tmp_path):
    project.write_handout(tmp_path)
    assert "## Rubric (100 points)" in (tmp_path / "PROJECT.md").read_text()
    check = project.check_project(tmp_path)
    assert check.total == 0 and "forward is not implemented yet" in str(check) and "no run/" in str(check)


def test_a_right_backward_pass_passes_and_a_wrong_one_fails(tmp_path):
    passed, lines = project.check_component(_handout(tmp_path / "right"))
    assert passed, lines
    # the classic mistake: the path through the mean square left out
    passed, lines = project.check_component(_handout(tmp_path / "wrong", backward_wrong=" * 0"))
    assert not passed and any("FAIL" in line or "fail" in line for line in lines), lines


def test_the_component_runs_where_npformer_cannot_be_imported(tmp_path):
    cheat = RMSNORM_FORWARD.replace("    r = 1", "    import npformer\n    r = 1")
    passed, lines = project.check_component(_handout(tmp_path, forward=cheat))
    assert not passed and "npformer" in lines[0], lines


@pytest.mark.parametrize("shapes, words", [
    ('{"x": (64, 64, 2)}', "keep the check's inputs"),
    ('{"x": (2, 0)}', "positive sizes"),
    ('make_shapes()', "must be a literal"),
])
def test_bad_shapes_are_refused_in_one_line(shapes, words, tmp_path):
    folder = _handout(tmp_path)
    path = folder / project.COMPONENT_FILE
    path.write_text(path.read_text().replace('{"x": (2, 5, 8), "gain": (8,)}', shapes))
    passed, lines = project.check_component(folder)
    assert not passed and words in lines[0], lines


def test_the_translator_is_scored_on_the_instructors_pairs_against_a_threshold(tmp_path, capsys):
    folder = _handout(tmp_path / "submission")
    shutil.copytree(PRETRAINED_TOY, folder / project.RUN_FOLDER)
    held_out = tmp_path / "held_out.tsv"
    held_out.write_text("".join((PRETRAINED_TOY / "test.tsv").read_text().splitlines(keepends=True)[:40]))
    assert main(["course", "project-check", str(folder), "--data", str(held_out)]) == 0
    printed = capsys.readouterr().out
    assert "on 40 pairs of " + str(held_out) in printed and "30 of 30 points" in printed
    passed, lines = project.check_translator(folder, data=str(held_out), threshold=101)
    assert not passed and "below the threshold 101" in lines[0]
