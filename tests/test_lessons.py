"""Every lesson runs to the end, in quick mode, once: as an executed notebook, which runs the same
cells as the script does (every graded exercise passes, the figures are written to files and shown
inline). Its student edition differs from it only in the stubs, so what is run of it is what
changes: each stub against the grader ("not implemented yet"), and a check that nothing else in
the lesson calls a stub (so the rest runs as it does in the instructor's edition)."""

import ast
import contextlib
import io
import os
import pathlib
import re

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
    "27": ["27_your_transformer.png"],
    "28": ["28_rope_relative.png", "28_kv_cache.png", "28_modern_against_2017.png"],
}
GRADED = {path.name: graded_exercises(path.read_text(encoding="utf-8")) for path in LESSONS}


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


GRADED_LESSONS = [path for path in LESSONS if GRADED[path.name]]


def test_a_lesson_without_graded_exercises_has_no_solution_block():
    for path in LESSONS:
        if not GRADED[path.name]:
            assert BEGIN not in path.read_text(encoding="utf-8"), f"{path.name}: a solution block that nothing grades"


def _guarded_by_a_pass(tree):
    """The nodes that run only when the grader passed the student's function: the true branch of an
    ``if``/``... if ... else ...`` whose test reads a name bound to ``check(...).passed``."""
    flags = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Attribute) and node.value.attr == "passed"
             for target in node.targets if isinstance(target, ast.Name)}
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)) and {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & flags:
            for branch in (node.body if isinstance(node.body, list) else [node.body]):
                guarded |= {id(child) for child in ast.walk(branch)}
    return guarded


def _uses_outside_check_calls(tree, name):
    """Line numbers where the function ``name`` is called, other than by the grader or behind a pass."""
    guarded = _guarded_by_a_pass(tree)
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
            and id(node) not in guarded]


@pytest.mark.parametrize("lesson", GRADED_LESSONS, ids=[path.stem for path in GRADED_LESSONS])
def test_the_student_edition_grades_every_stub_as_not_implemented_and_nothing_else_calls_a_stub(lesson, tmp_path):
    [student] = [path for path in student_edition(LESSONS_DIR, tmp_path) if path.name == lesson.name]
    text = student.read_text(encoding="utf-8")
    assert BEGIN not in text and END not in text and text.count("raise NotImplementedError") >= len(GRADED[lesson.name])
    tree = ast.parse(text)
    definitions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    namespace = {}
    exec("from npformer.course import check", namespace)
    output = io.StringIO()
    for name in GRADED[lesson.name]:
        assert not _uses_outside_check_calls(tree, name), (
            f"{lesson.name}: line(s) {_uses_outside_check_calls(tree, name)} of the student edition call the stub {name}: it "
            "would stop there")
        exec(compile(ast.Module([definitions[name]], []), str(student), "exec"), namespace)
        with contextlib.redirect_stdout(output):
            print(namespace["check"](name, namespace[name]))
    for name in GRADED[lesson.name]:
        assert f"exercise {name}: not implemented yet" in output.getvalue(), name


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
    # NPFORMER_EXECUTED_LESSONS=DIR keeps the executed notebooks there, for the course's site to read
    # (npformer course site OUT --executed DIR): the lessons run once, here
    kept = os.environ.get("NPFORMER_EXECUTED_LESSONS")
    folder = pathlib.Path(kept) if kept else tmp_path_factory.mktemp("notebooks")
    folder.mkdir(parents=True, exist_ok=True)
    # the real data where a student's `npformer data tatoeba` puts it, in the folder the lessons run in
    from conftest import shared_folder

    real, linked = shared_folder() / "data" / "fra-eng" / "fra.txt", folder / "data" / "fra-eng" / "fra.txt"
    if real.is_file() and not linked.is_symlink():
        linked.parent.mkdir(parents=True, exist_ok=True)
        linked.symlink_to(real)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_lesson_runs_as_a_notebook_with_its_figures_inline(lesson, notebook_dir, monkeypatch):
    import nbformat

    from npformer.course import lesson_notebooks

    monkeypatch.setenv("NPFORMER_FIGURES", str(notebook_dir / "figures"))
    monkeypatch.setenv("NPFORMER_GRADER", "strict")
    monkeypatch.setenv("NPFORMER_BACKEND", "numpy")
    monkeypatch.setenv("NPFORMER_LESSONS", str(LESSONS_DIR))  # lesson 27 collects the lessons' functions
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the figures
    [path] = lesson_notebooks(LESSONS_DIR, notebook_dir, quick=True, only=[lesson.name[:2]], timeout=300)
    notebook = nbformat.read(path, as_version=4)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    text = "".join(output.get("text", "") for output in outputs)
    for name in GRADED[lesson.name]:
        assert f"exercise {name}: passed" in text, name
    if lesson.name.startswith("26_") and (notebook_dir / "data" / "fra-eng" / "fra.txt").exists():
        assert "Tatoeba pairs from data/fra-eng/fra.txt" in text, "lesson 26 did not train on the real data"
    images = sum("image/png" in output.get("data", {}) for output in outputs)
    assert images >= len(EXPECTED_FIGURES[lesson.name[:2]]), f"{images} inline figures"
    for name in EXPECTED_FIGURES[lesson.name[:2]]:
        assert (notebook_dir / "figures" / name).is_file(), f"{name} not written"


def test_a_call_of_a_stub_is_allowed_only_behind_the_graders_pass():
    guarded = "passed = check('f', f, strict=False).passed\ny = f(1) if passed else 0\nif passed:\n    f(2)\n"
    assert _uses_outside_check_calls(ast.parse(guarded), "f") == []
    unguarded = guarded + "z = f(3)\nw = f(4) if ready else 0\n"
    assert _uses_outside_check_calls(ast.parse(unguarded), "f") == [5, 6]


def _names(source):
    """(the names a piece of code binds, in any scope; the names it reads)."""
    bound, read = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def _read_from_instructor_cells(text):
    """Names that the student's cells read but only the instructor's cells bind: the student edition
    (and nbgrader's release), which leaves those cells out, would stop there with a NameError."""
    from npformer.course.edition import cells, is_instructor_cell

    pieces = cells(text)
    student_bound, student_read = _names("".join(cell for cell in pieces if not is_instructor_cell(cell)))
    instructor_bound, _ = _names("".join(cell for cell in pieces if is_instructor_cell(cell)))
    return sorted(student_read & (instructor_bound - student_bound))


def test_no_student_cell_reads_a_name_only_an_instructor_cell_binds():
    """The notebook run above keeps the instructor's cells; this is what keeps it a run of the
    student edition too (and of every week nbgrader releases, tests/test_platforms.py)."""
    for path in LESSONS:
        assert not _read_from_instructor_cells(path.read_text(encoding="utf-8")), path.name
    leaky = ('# %% tags=["instructor"]\nscale = 2.0\n\n# %%\nprint(scale * 3)\n')
    assert _read_from_instructor_cells(leaky) == ["scale"]
