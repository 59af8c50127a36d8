"""The course as a website: every lesson as a page, run, with the guides and the API, built offline.

``build_site(out)`` writes a static site (``out/index.html``) that a browser opens from the disk and
that makes no request outside itself:

* each lesson of the student edition as a page: its prose, its LaTeX, its code, and the printed
  output and figures of the instructor edition's run in quick mode (the solutions' code replaced by
  the stubs, their cells' outputs dropped, the ``instructor`` cells left out), with a link to the
  student edition's notebook and script;
* the guides of ``docs/`` and the record of measurements (``benchmarks/RESULTS.md``) as pages;
* the API, from the docstrings: the ops with their derivations, the blocks, the models, the grader's
  public calls;
* search, and on lesson 15's page the attention explorer, live, of the shipped toy translator.

The tool is Sphinx with MyST-NB (which reads the executed notebooks as they are, running nothing),
the Furo theme and MathJax from the ``sphinx-mathjax-offline`` package (no CDN): the ``docs`` extra.
The lessons run once: by the suite's notebook test (``NPFORMER_EXECUTED_LESSONS``), whose executed
notebooks ``executed`` names; without them, the build runs the lessons itself (minutes).
``instructor=True`` builds the instructor edition's site for teaching assistants: the solutions and
the instructor cells shown.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .edition import BEGIN, END, lesson_files, lessons_with_solutions, student_edition, student_source
from .exercise_report import TEXTBOOK_SHOWN
from .notebooks import lesson_notebooks

__all__ = ["build_site", "check_inputs", "GUIDES", "API_PAGES", "lesson_page"]

ROOT = Path(__file__).resolve().parents[2]   # a source checkout's root (docs/, benchmarks/)
# the guides on every site; the instructor's guide (how grading works, which steps no variant changes) on
# the instructor edition's only
INSTRUCTOR_GUIDES = ("instructor.md",)
GUIDES = ("course.md", "instructor.md", "gradient-checking.md", "attention.md", "translation.md", "speed.md",
          "gpu.md", "tokenisation.md", "architecture.md", "development.md")
# the API pages: title -> the modules whose public names they document
API_PAGES = {
    "ops": ("npformer.ops.linear", "npformer.ops.relu", "npformer.ops.gelu", "npformer.ops.softmax",
            "npformer.ops.cross_entropy", "npformer.ops.layernorm", "npformer.ops.embedding",
            "npformer.ops.positional", "npformer.ops.masks", "npformer.ops.attention", "npformer.ops.dropout",
            "npformer.ops.adam", "npformer.ops.rmsnorm", "npformer.ops.rope", "npformer.ops.swiglu",
            "npformer.ops.grouped_attention", "npformer.ops.pooling", "npformer.ops.patches",
            "npformer.ops.switch"),
    "blocks": ("npformer.nn.linear", "npformer.nn.layernorm", "npformer.nn.attention", "npformer.nn.feedforward",
               "npformer.nn.residual", "npformer.nn.layer", "npformer.nn.encoder", "npformer.nn.decoder"),
    "models": ("npformer.models.transformer", "npformer.optim", "npformer.gradcheck"),
    "grader": ("npformer.course.grader", "npformer.course.grading", "npformer.course.collect"),
}
EXPLORER_SENTENCES = ("the black cat eats the apple.", "where are the dogs?", "i am tired.")
_MARKERS = (BEGIN, END)


def lesson_page(notebook: dict, instructor: bool = False) -> dict:
    """One executed lesson notebook (a dict, nbformat 4) as its page: the ``instructor`` cells left out
    and each solution replaced by its stub, that cell's output dropped (a check that passed prints the
    textbook form); with ``instructor``, everything kept but the solution markers."""
    cells = []
    for cell in notebook["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        source = _joined(cell["source"])
        if "instructor" in tags and not instructor:
            continue
        if cell["cell_type"] == "code" and BEGIN in source:
            if instructor:
                source = "".join(line for line in source.splitlines(keepends=True) if line.strip() not in _MARKERS)
            else:
                source, cell = student_source(source), {**cell, "outputs": [], "execution_count": None}
        if cell["cell_type"] == "code":
            kept = [_without_widget(output) for output in cell.get("outputs", [])]
            cell = {**cell, "outputs": kept if instructor else [_without_answers(output) for output in kept]}
        cells.append({**cell, "source": source, "metadata": {}})
    metadata = {key: value for key, value in notebook.get("metadata", {}).items() if key != "widgets"}
    return {**notebook, "metadata": metadata, "cells": [{**cell, "id": f"cell-{index}"} for index, cell in enumerate(cells)]}


# from the line that shows the compact form (one line, or the lines of a function) to the report's last line
_TEXTBOOK_LINE = re.compile(r"^.*" + re.escape(TEXTBOOK_SHOWN) + r".*?(?=^exercise |\Z)", re.MULTILINE | re.DOTALL)


def _without_answers(output: dict) -> dict:
    """An output without the compact form a passing check prints after the student's answer (on the
    student's site, the run's checks passed with the instructor's solutions)."""
    if output.get("output_type") == "stream":
        return {**output, "text": _TEXTBOOK_LINE.sub("", _joined(output["text"]))}
    data = output.get("data", {})
    if "text/plain" in data:
        return {**output, "data": {**data, "text/plain": _TEXTBOOK_LINE.sub("", _joined(data["text/plain"]))}}
    return output


def _joined(text: str | list[str]) -> str:
    """A notebook's multi-line string, which nbformat may store as a list of lines, as one string."""
    return "".join(text) if isinstance(text, list) else text


def _without_widget(output: dict) -> dict:
    """An output as text where it is a Jupyter widget (tqdm's bar in a notebook), whose page would load
    its script from a CDN."""
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" not in data:
        return output
    return {**output, "data": {"text/plain": data.get("text/plain", "")}}


def _downloads(stem: str) -> dict:
    """A markdown cell linking the lesson's student edition, as a notebook and as a script."""
    text = (f"Download this lesson (the student edition): {{download}}`{stem}.ipynb <../downloads/{stem}.ipynb>` "
            f"· {{download}}`{stem}.py <../downloads/{stem}.py>`")
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _explorer_cell() -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": (
        "The explorer of the shipped toy translator, live in this page (hover a token):\n\n"
        '<iframe src="../_static/explorer.html" title="attention explorer" class="npformer-explorer" '
        'style="width: 100%; height: 640px; border: 1px solid #ccc"></iframe>\n')}


def _lesson_pages(executed: Path, source: Path, instructor: bool) -> list[str]:
    names = []
    (source / "lessons").mkdir(parents=True, exist_ok=True)
    for path in sorted(executed.glob("[0-9][0-9]_*.ipynb")):
        notebook = lesson_page(json.loads(path.read_text(encoding="utf-8")), instructor)
        cells = notebook["cells"]
        cells.insert(1, {**_downloads(path.stem), "id": "downloads"})
        if path.name.startswith("15_"):
            where = next((i for i, cell in enumerate(cells) if "## Explore it yourself" in cell["source"]), len(cells) - 1)
            cells.insert(where + 1, {**_explorer_cell(), "id": "explorer"})
        (source / "lessons" / path.name).write_text(json.dumps(notebook), encoding="utf-8")
        names.append(f"lessons/{path.stem}")
    return names


_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")


def _guide(text: str, pages: set[str]) -> str:
    """A guide's links: to the web, to an anchor or to another page of the site as they are; to any other
    file of the repository its words alone (the site holds no copy of that file)."""
    def relinked(match: re.Match) -> str:
        words, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#", target) or target.split("#", 1)[0] in pages:
            return match.group(0)
        return words
    return _LINK.sub(relinked, text)


def _copy_guides(docs: Path, source: Path, instructor: bool) -> list[str]:
    (source / "guides").mkdir(parents=True, exist_ok=True)
    shown = [name for name in GUIDES if instructor or name not in INSTRUCTOR_GUIDES]
    pages = set(shown) | {"../benchmarks/RESULTS.md", "RESULTS.md"}
    names = []
    for name in shown:
        if (docs / name).is_file():
            text = _guide((docs / name).read_text(encoding="utf-8"), pages)
            (source / "guides" / name).write_text(text.replace("../benchmarks/RESULTS.md", "RESULTS.md"),
                                                  encoding="utf-8")
            names.append(f"guides/{name[:-3]}")
    results = docs.parent / "benchmarks" / "RESULTS.md"
    if results.is_file():
        (source / "guides" / "RESULTS.md").write_text(_guide(results.read_text(encoding="utf-8"), pages),
                                                      encoding="utf-8")
        names.append("guides/RESULTS")
    return names


def _api_pages(source: Path) -> list[str]:
    (source / "api").mkdir(parents=True, exist_ok=True)
    for title, modules in API_PAGES.items():
        body = "\n".join(f"```{{eval-rst}}\n.. automodule:: {module}\n   :members:\n```\n" for module in modules)
        (source / "api" / f"{title}.md").write_text(f"# API: {title}\n\n{body}", encoding="utf-8")
    return [f"api/{title}" for title in API_PAGES]


def _index(lessons: list[str], guides: list[str], api: list[str], instructor: bool) -> str:
    edition = "instructor edition (solutions shown: for teaching assistants)" if instructor else "student edition"
    def toc(caption: str, names: list[str]) -> str:
        return "```{toctree}\n:maxdepth: 1\n:caption: " + caption + "\n\n" + "\n".join(names) + "\n```\n"
    return (f"# npformer: a Transformer in NumPy, every backward pass by hand\n\nThe course, {edition}: "
            "every lesson run in quick mode, with its output and figures; the guides; the API from the "
            "docstrings.\n\n" + toc("Lessons", lessons) + toc("Guides", guides) + toc("API", api))


CONF = '''project = "npformer"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx-mathjax-offline"]
nb_execution_mode = "off"
nb_ipywidgets_js = {}
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "npformer"
html_static_path = ["_static"]
autodoc_member_order = "bysource"
suppress_warnings = ["myst.header", "myst.xref_missing", "misc.highlighting_failure", "toc.not_included"]
exclude_patterns = ["_build", "downloads/**"]
html_copy_source = False
html_show_sourcelink = False
'''


def _explorer(static: Path) -> None:
    """The explorer page of the shipped toy translator, for lesson 15."""
    from .. import viz
    from ..tasks.translation.pretrained import pretrained
    from ..tasks.translation.translator import Translator

    found = Translator.from_run(pretrained("toy")).translations(list(EXPLORER_SENTENCES))
    viz.attention_explorer(found, path=static / "explorer.html",
                           title="npformer attention explorer: the shipped toy translator")


def check_inputs(executed: str | Path | None, lessons: str | Path | None) -> Path:
    """The lessons folder (with solutions) the site is built from, once the inputs are checked: the docs
    extra installed, ``executed`` a folder when given. Raises a one-line error before any work."""
    import importlib.util

    missing_tools = [name for name in ("sphinx", "myst_nb", "furo") if importlib.util.find_spec(name) is None]
    if missing_tools:
        raise ImportError(f"the site needs the docs extra ({', '.join(missing_tools)} missing): pip install '.[docs]'")
    if executed is not None and not Path(executed).is_dir():
        raise FileNotFoundError(f"--executed {executed}: no such folder (NPFORMER_EXECUTED_LESSONS=DIR python -m "
                                "pytest tests/test_lessons.py writes the executed lessons there)")
    return lessons_with_solutions(lessons, "the course's site")


def build_site(out: str | Path, *, executed: str | Path | None = None, instructor: bool = False,
               lessons: str | Path | None = None, docs: str | Path | None = None) -> Path:
    """Write the site into ``out`` (``out/index.html``); a Sphinx error or warning stops the build."""
    out = Path(out)
    lessons_dir = check_inputs(executed, lessons)
    docs = Path(docs) if docs else ROOT / "docs"
    work = out.parent / f".{out.name}-source"
    shutil.rmtree(work, ignore_errors=True)
    source = work / "source"
    (source / "_static").mkdir(parents=True)
    if executed is None:
        executed = work / "executed"
        lesson_notebooks(lessons_dir, executed, quick=True, timeout=600)
    executed = Path(executed)
    missing = sorted({path.stem for path in lesson_files(lessons_dir)} - {path.stem for path in executed.glob("*.ipynb")})
    if missing:
        raise FileNotFoundError(f"{executed}: no executed notebook of {', '.join(missing)} "
                                "(NPFORMER_EXECUTED_LESSONS=DIR python -m pytest tests/test_lessons.py writes them)")
    failed = [path.name for path in executed.glob("*.ipynb") if '"output_type": "error"' in path.read_text(encoding="utf-8")]
    if failed:
        raise ValueError(f"{executed}: a cell raised in {', '.join(sorted(failed))}; the site shows no traceback")
    downloads = source / "downloads"
    student_edition(lessons_dir, downloads)
    lesson_notebooks(downloads, downloads, execute=False)
    names = _lesson_pages(executed, source, instructor)
    guides, api = _copy_guides(docs, source, instructor), _api_pages(source)
    _explorer(source / "_static")
    (source / "index.md").write_text(_index(names, guides, api, instructor), encoding="utf-8")
    (source / "conf.py").write_text(CONF, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(work / "doctrees"),
                             str(source), str(out)],
                            capture_output=True, text=True)
    problems = [line for line in result.stderr.splitlines() if _is_problem(line)]
    if result.returncode != 0 or problems:
        raise ValueError("the site's build failed:\n" + "\n".join(problems or result.stderr.splitlines()[-40:])
                         + f"\n(its sources: {source})")
    shutil.rmtree(work, ignore_errors=True)
    (out / ".buildinfo").unlink(missing_ok=True)   # Sphinx's note for its next build: nothing a reader needs
    return out / "index.html"


# what Sphinx may say without failing the build: the docstrings' layout (plain text, not
# reStructuredText), and nbformat's note on cell ids
_NOT_A_PROBLEM = re.compile(r"docstring of |MissingIDFieldWarning|_validate\(nbdict|parallel reading|serial read")


def _is_problem(line: str) -> bool:
    """A warning or an error of the build that fails it: a page, a link or a notebook that went wrong."""
    return bool(re.search(r"WARNING|ERROR|CRITICAL|Traceback", line)) and not _NOT_A_PROBLEM.search(line)
