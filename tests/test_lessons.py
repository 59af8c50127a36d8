"""Every lesson runs as a plain script (quick mode) and writes its figures."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

LESSONS = sorted((pathlib.Path(__file__).resolve().parents[1] / "lessons").glob("[0-9][0-9]_*.py"))

EXPECTED_FIGURES = {
    "01": ["01_finite_differences.png", "01_gradcheck_all_ops.png"], "02": ["02_relu_gelu.png"],
    "03": ["03_label_smoothing.png"], "04": ["04_layernorm.png"],
    "05": ["05_positional_encoding.png", "05_position_similarity.png"], "06": ["06_masks.png"],
    "07": ["07_attention.png"], "08": ["08_heads.png"], "09": ["09_post_vs_pre_norm.png"],
    "10": ["10_causal_self_attention.png"], "11": ["11_parameters.png"], "12": ["12_adam_and_warmup.png"],
    "13": ["13_training_curves.png", "13_loss.png"], "14": ["14_kv_cache.png"],
    "15": ["15_cross_attention.png"], "16": ["16_training_step.png"], "17": ["17_language_id.png"],
    "18": ["18_language_model.png"], "19": ["19_right_context.png"],
    "20": ["20_vit_attention.png"],
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One working folder for all lessons, so lesson 15 finds lesson 13's run."""
    return tmp_path_factory.mktemp("lessons")


def test_the_lessons_are_numbered_in_order_in_percent_format():
    assert [path.name[:2] for path in LESSONS] == [f"{n:02d}" for n in range(1, len(LESSONS) + 1)]
    assert len(LESSONS) >= 17
    for path in LESSONS:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# %% [markdown]\n# # Lesson "), path.name
        assert "# ## Exercises" in text, path.name
        # Python reads "coding: x" or "coding=x" in the first two lines as the file's encoding
        assert not re.search(r"coding[:=]", "\n".join(text.splitlines()[:2])), path.name


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_lesson_runs_and_writes_its_figures(lesson, workdir):
    figures = workdir / "figures"
    env = dict(os.environ, NPFORMER_QUICK="1", NPFORMER_FIGURES=str(figures), MPLBACKEND="Agg",
               NPFORMER_BACKEND="numpy")
    result = subprocess.run([sys.executable, str(lesson)], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in EXPECTED_FIGURES[lesson.name[:2]]:
        assert (figures / name).is_file(), name
