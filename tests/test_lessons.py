"""Every lesson runs to the end, in quick mode: as a script (every graded exercise passes, the
figures are written), as an executed notebook (the figures inline), and as its student edition
(every graded exercise reports "not implemented yet", and the lesson still runs to the end)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from npformer.course import BEGIN, END, student_edition
from npformer.course.edition import graded_exercises

LESSONS_DIR = pathlib.Path(__file__).resolve().parents[1] / "lessons"
LESSONS = sorted(LESSONS_DIR.glob("[0-9][0-9]_*.py"))

EXPECTED_FIGURES = {
    "01": ["01_finite_differences.png", "01_gradcheck_all_ops.png"], "02": ["02_relu_gelu.png"],
    "03": ["03_label_smoothing.png"], "04": ["04_layernorm.png"],
    "05": ["05_positional_encoding.png", "05_position_similarity.png"], "06": ["06_masks.png"],
    "07": ["07_attention.png", "07_rnn_against_attention.png"], "08": ["08_heads.png"], "09": ["09_post_vs_pre_norm.png"],
    "10": ["10_causal_self_attention.png"], "11": ["11_parameters.png", "11_compute.png"], "12": ["12_adam_and_warmup.png"],
    "13": ["13_training_curves.png", "13_loss.png"], "14": ["14_kv_cache.png"],
    "15": ["15_cross_attention.png", "15_aer.png", "15_alignment.png"], "16": ["16_training_step.png"], "17": ["17_language_id.png"],
    "18": ["18_language_model.png"], "19": ["19_right_context.png"],
    "20": ["20_vit_attention.png"], "21": ["21_mutants.png"],
    "22": ["22_positional_tables.png", "22_training_checks.png"], "23": ["23_shift.png"],
    "24": ["24_layernorm_against_batchnorm.png"], "25": ["25_torch_agreement.png"],
    "26": ["26_training_curves.png", "26_encoder_self_attention.png", "26_decoder_self_attention.png",
           "26_cross_attention.png"],
}
GRADED = {path.name: graded_exercises(path.read_text(encoding="utf-8")) for path in LESSONS}


def _environment(figures, **extra):
    return dict(os.environ, NPFORMER_QUICK="1", NPFORMER_FIGURES=str(figures), MPLBACKEND="Agg",
                NPFORMER_BACKEND="numpy", **extra)


def _run(script, workdir, **extra):
    result = subprocess.run([sys.executable, str(script)], cwd=workdir, env=_environment(workdir / "figures", **extra),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


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


def test_the_markdown_math_is_latex():
    """Formulas render in Jupyter, VS Code and GitHub: no math between backticks in prose (a power
    written with ^, or a mathematical symbol); code between backticks is fine."""
    math_in_code = re.compile(r"`[^`$]*(\^|[√≈∂Σσμγβδεθ²³̂∑∏≤≥])[^`$]*`")
    for path in LESSONS:
        prose = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# ")]
        formulas = [line for line in prose if math_in_code.search(line)]
        assert not formulas, f"{path.name}: write math as $...$, not in backticks: {formulas[:3]}"


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_lesson_runs_as_a_script_passes_its_exercises_and_writes_its_figures(lesson, workdir):
    # strict: a graded exercise whose published solution fails stops the lesson with its report
    output = _run(lesson, workdir, NPFORMER_GRADER="strict")
    for name in GRADED[lesson.name]:
        assert f"exercise {name}: passed" in output, name
    for name in EXPECTED_FIGURES[lesson.name[:2]]:
        assert (workdir / "figures" / name).is_file(), name


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("student")


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_the_student_edition_runs_to_the_end_with_every_exercise_not_implemented_yet(lesson, student_dir, workdir):
    if not GRADED[lesson.name]:
        assert BEGIN not in lesson.read_text(encoding="utf-8"), "a solution block that nothing grades"
        pytest.skip("no graded exercise: the student edition is the lesson itself")
    [student] = [path for path in student_edition(LESSONS_DIR, student_dir) if path.name == lesson.name]
    text = student.read_text(encoding="utf-8")
    assert BEGIN not in text and END not in text and text.count("raise NotImplementedError") >= len(GRADED[lesson.name])
    output = _run(student, workdir)  # in the lessons' folder: lesson 15 reads lesson 13's run
    for name in GRADED[lesson.name]:
        assert f"exercise {name}: not implemented yet" in output, name


@pytest.fixture(scope="module")
def notebook_dir(tmp_path_factory):
    reason = "the notebooks need the course extra: pip install '.[course]'"
    if os.environ.get("NPFORMER_REQUIRE_COURSE") == "1":  # CI installs it: a missing tool is a failure
        for module in ("jupytext", "nbclient", "nbformat", "ipykernel"):
            try:
                __import__(module)
            except ImportError as error:
                pytest.fail(f"{reason} and NPFORMER_REQUIRE_COURSE=1 ({error})", pytrace=False)
    pytest.importorskip("nbclient", reason=reason)
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_lesson_runs_as_a_notebook_with_its_figures_inline(lesson, notebook_dir, monkeypatch):
    import nbformat

    from npformer.course import lesson_notebooks

    monkeypatch.setenv("NPFORMER_FIGURES", str(notebook_dir / "figures"))
    monkeypatch.setenv("NPFORMER_GRADER", "strict")
    monkeypatch.setenv("NPFORMER_BACKEND", "numpy")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the figures
    [path] = lesson_notebooks(LESSONS_DIR, notebook_dir, quick=True, only=[lesson.name[:2]], timeout=300)
    notebook = nbformat.read(path, as_version=4)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    text = "".join(output.get("text", "") for output in outputs)
    for name in GRADED[lesson.name]:
        assert f"exercise {name}: passed" in text, name
    images = sum("image/png" in output.get("data", {}) for output in outputs)
    assert images >= len(EXPECTED_FIGURES[lesson.name[:2]]), f"{images} inline figures"
