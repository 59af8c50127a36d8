"""The README and docs/ stay true: every code block runs as pasted, every relative link resolves.

Each fenced block of README.md and docs/*.md is one of:

* ```python: run in a fresh interpreter, in an empty temporary folder;
* ```bash: run with ``bash -e`` in an empty temporary folder, with this interpreter's ``bin``
  (where ``npformer`` is installed) first on PATH;
* ```text: output or a listing, never run.

A block that is not meant to run as pasted (a 30-minute training, a GPU command, a fragment) has
``<!-- sketch -->`` on the line right before its opening fence; a sketch is still checked for
syntax (``compile`` for Python, ``bash -n`` for bash), never run.

README.md and docs/translation.md are read top to bottom by a new user, who runs each command after
the ones before it: their blocks run **as one sequence**, in one fresh folder, README first
(``test_readme_then_translation_run_in_order``), each sketch in its stand-in form
(``stand_in``: without the installing, testing and downloading, and with its trainings cut to a few
steps), so that a command that collides with an earlier one (a run folder already there) fails.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKETCH = "<!-- sketch -->"
LANGUAGES = {"python", "bash", "text"}
TIMEOUT = 120  # seconds per block


@dataclass
class Block:
    page: pathlib.Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    sketch: bool

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: pathlib.Path) -> list[Block]:
    """Every fenced block of a Markdown page (fences at the start of a line, ``` only)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        start = index
        index += 1
        body = []
        while index < len(lines) and lines[index].rstrip() != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise AssertionError(f"{page.relative_to(ROOT)}:{start + 1}: a code block is never closed")
        sketch = start > 0 and lines[start - 1].strip() == SKETCH
        found.append(Block(page, start + 1, opening.group(1), "\n".join(body) + "\n", sketch))
        index += 1
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]
IN_ORDER = [ROOT / "README.md", ROOT / "docs" / "translation.md"]  # read and run top to bottom, one folder
RUNNABLE = [block for block in BLOCKS if block.language in ("python", "bash") and not block.sketch
            and block.page not in IN_ORDER]
SKETCHES = [block for block in BLOCKS if block.language in ("python", "bash") and block.sketch]


def environment() -> dict[str, str]:
    bin_dir = str(pathlib.Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "MPLBACKEND": "Agg"}
    for name in ("NPFORMER_BACKEND", "NPFORMER_QUICK", "PYTHONPATH"):  # the docs' readers set none of these
        env.pop(name, None)
    return env


def test_the_pages_have_code_to_check():
    assert (ROOT / "docs").is_dir() and len(PAGES) > 1
    assert len(RUNNABLE) >= 10, [block.name for block in RUNNABLE]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.name)
def test_every_block_names_its_language(block):
    assert block.language in LANGUAGES, \
        f"{block.name}: a fence must say python, bash or text (got {block.language!r})"


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_block_runs_as_pasted(block, tmp_path):
    if block.language == "python":
        script = tmp_path / "block.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        command = ["bash", "-e", str(script)]
    script.write_text(block.code, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = subprocess.run(command, cwd=work, env=environment(), capture_output=True, text=True,
                                timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.name}: ran past {TIMEOUT} s; make it faster or mark it {SKETCH}")
    assert result.returncode == 0, (f"{block.name} failed (exit {result.returncode}):\n{block.code}\n"
                                    f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")


# The parts of a sketched command that the sequence leaves out: setting up (the suite runs installed),
# the suite itself, and the Tatoeba download with the 30-minute run that reads it.
LEFT_OUT = re.compile(r"^(python3 -m venv|\. \.venv/bin/activate|pip install|python -m pytest)|npformer data|fra-eng|fra-small")


def stand_in(block: Block) -> str:
    """A sketch as the sequence runs it: each command (lines joined at ``\\``, split at ``&&``)
    without the ``LEFT_OUT`` ones, and ``npformer train`` without a budget given 5 steps."""
    commands = []
    for line in block.code.replace("\\\n", " ").splitlines():
        for command in line.split("#", 1)[0].split("&&"):
            command = command.strip()
            if not command or LEFT_OUT.search(command):
                continue
            if command.startswith("npformer train") and "--max-steps" not in command:
                command += " --max-steps 5 --test-sentences 5"
            commands.append(command)
    return "\n".join(commands) + "\n"


def test_the_stand_in_of_a_sketch_keeps_its_runnable_commands():
    readme_first = next(block for block in BLOCKS if block.page == ROOT / "README.md" and block.sketch)
    assert stand_in(readme_first) == "npformer train --max-steps 5 --test-sentences 5\n"
    tatoeba = next(block for block in BLOCKS if block.sketch and "npformer data tatoeba" in block.code)
    assert stand_in(tatoeba).strip() == ""


@pytest.mark.slow
def test_readme_then_translation_run_in_order(tmp_path):
    """Every python and bash block of README.md, then of docs/translation.md, in the order written,
    in one fresh folder (sketches by their ``stand_in``): what a new user meets running them in turn."""
    work = tmp_path / "work"
    work.mkdir()
    for block in [block for page in IN_ORDER for block in blocks_of(page) if block.language in ("python", "bash")]:
        code = stand_in(block) if block.sketch else block.code
        if not code.strip():
            continue
        script = tmp_path / ("block.py" if block.language == "python" else "block.sh")
        script.write_text(code, encoding="utf-8")
        command = [sys.executable, str(script)] if block.language == "python" else ["bash", "-e", str(script)]
        try:
            result = subprocess.run(command, cwd=work, env=environment(), capture_output=True, text=True,
                                    timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block.name}: ran past {TIMEOUT} s; make it faster or mark it {SKETCH}")
        assert result.returncode == 0, (
            f"{block.name} failed (exit {result.returncode}) after the blocks before it, in one folder:\n{code}\n"
            f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")


@pytest.mark.parametrize("block", SKETCHES, ids=lambda block: block.name)
def test_a_sketch_is_still_valid_syntax(block):
    if block.language == "python":
        compile(block.code, block.name, "exec")
    else:
        result = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
        assert result.returncode == 0, f"{block.name}: {result.stderr}"


def without_code(text: str) -> str:
    """The page without its fenced blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```\s*$", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(page: pathlib.Path) -> list[str]:
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code(page.read_text(encoding="utf-8")))
    return [target for target in targets if not re.match(r"^(?:[a-z][a-z0-9+.-]*:|#)", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file(page):
    missing = [target for target in relative_links(page)
               if not (page.parent / target.split("#", 1)[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.split("#", 1)[0]).resolve() for target in relative_links(ROOT / "README.md")}
    orphans = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link to: {orphans}"


def test_a_sketch_marker_stands_right_before_a_block():
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if line.strip() == SKETCH:
                assert number < len(lines) and lines[number].startswith(("```python", "```bash")), \
                    f"{page.relative_to(ROOT)}:{number}: {SKETCH} must stand right before a python or bash block"


def test_the_readme_is_a_five_minute_read():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= 1600, f"README.md has {words} words; the depth belongs in docs/"


# Figures a page may quote without a recorded run behind them: the Python version it needs.
NOT_MEASURED = {"3.10"}
MEASUREMENT = re.compile(r"(?<![\w.,])(\d+\.\d+|\d+(?=%)|\d+(?= ?(?:s|ms|min)\b))(?![\w.])")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_measured_figure_in_the_prose_is_one_that_was_recorded(page):
    """Times, ratios, BLEU, AER, percentages: every decimal figure, percentage or duration in a page's
    prose (code blocks aside) must appear in ``benchmarks/RESULTS.md`` or in the recorded lesson times
    (``benchmarks/lesson_times.json``), so that a figure cannot be typed in, or outlive its record."""
    recorded = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    times = ROOT / "benchmarks" / "lesson_times.json"
    recorded += times.read_text(encoding="utf-8") if times.is_file() else ""
    prose = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    unrecorded = sorted({figure for figure in MEASUREMENT.findall(prose)
                         if figure not in recorded and figure not in NOT_MEASURED})
    assert not unrecorded, f"{page.name} quotes figures that no recorded run holds: {unrecorded}"


def test_the_lesson_times_table_is_the_recorded_one():
    """docs/course.md's table of lesson times is ``python benchmarks/lesson_times.py --table``, from
    the record, and the README's totals are the record's."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("lesson_times", ROOT / "benchmarks" / "lesson_times.py")
    lesson_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lesson_times)
    record = json.loads((ROOT / "benchmarks" / "lesson_times.json").read_text(encoding="utf-8"))
    assert lesson_times.table(record) in (ROOT / "docs" / "course.md").read_text(encoding="utf-8")
    assert len(record["quick"]) == len(record["full"]) == len(list((ROOT / "lessons").glob("[0-9][0-9]_*.py")))
    assert all(entry["passed"] for mode in ("quick", "full") for entry in record[mode].values())
    quick, full = (sum(entry["seconds"] for entry in record[mode].values()) for mode in ("quick", "full"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"{quick / 60:.0f} minutes in quick mode" in readme and f"{full / 60:.0f} minutes in full mode" in readme


def test_the_parameter_counts_of_the_base_model_are_the_blocks_own():
    """docs/architecture.md counts the paper's base model (D 512, 8 heads, F 2048, 6 + 6 layers, a
    37,000-word vocabulary on each side) by hand; every count it quotes is what npformer's blocks hold."""
    import numpy

    from npformer.models import MODEL_PRESETS
    from npformer.nn import DecoderLayer, EncoderLayer

    sizes = MODEL_PRESETS["large"]
    d_model, vocab = sizes["d_model"], 37_000
    options = dict(n_heads=sizes["n_heads"], d_ff=sizes["d_ff"], dropout=0.0, dropout_rng=numpy.random.default_rng(0),
                   pre_norm=False, activation="relu", rng=numpy.random.default_rng(0))
    encoder_layer, decoder_layer = EncoderLayer(d_model, **options), DecoderLayer(d_model, **options)
    embedding, out_proj = vocab * d_model, d_model * vocab + vocab
    total = 2 * embedding + out_proj + sizes["n_layers"] * (encoder_layer.num_params() + decoder_layer.num_params())
    counts = [encoder_layer.self_attn.num_params(), encoder_layer.ffn.num_params(), encoder_layer.norm1.num_params(),
              encoder_layer.num_params(), decoder_layer.num_params(),
              sizes["n_layers"] * (encoder_layer.num_params() + decoder_layer.num_params()), embedding, out_proj, total]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [f"{count:,}" for count in counts if f"{count:,}" not in page]
    assert not missing, f"docs/architecture.md no longer quotes these counts of the base model: {missing}"


# Counts a page may quote because another test checks them against the code, or because they are an
# input, not a result: the base model's parameter counts (test_the_parameter_counts_...) and the
# paper's 37,000-token vocabulary.
COUNTS_CHECKED_ELSEWHERE = {"1,050,624", "2,099,712", "1,024", "3,152,384", "4,204,032", "44,138,496",
                            "18,944,000", "18,981,000", "101,007,496", "37,000"}
COUNT = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,]\d)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_count_in_the_prose_has_a_source(page):
    """A count written with thousands separators (sentences, pairs, parameters, tests) must come from a
    record: ``benchmarks/RESULTS.md``, a lesson that prints and asserts it, the shared data's
    ``SOURCES.md`` (when the shared folder is there), or a test that checks it against the code."""
    sources = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    sources += "".join(path.read_text(encoding="utf-8") for path in (ROOT / "lessons").glob("*.py"))
    shared = pathlib.Path(os.environ.get("NPFORMER_SHARED", ROOT.parent / "shared")) / "data" / "SOURCES.md"
    sources += shared.read_text(encoding="utf-8") if shared.is_file() else ""
    # a lesson writes its asserted counts as Python literals: 10_656 for 10,656
    sources += sources.replace("_", ",")
    prose = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    unsourced = sorted({count for count in COUNT.findall(prose)
                        if count not in sources and count not in COUNTS_CHECKED_ELSEWHERE
                        and not (count == "167,130" and not shared.is_file())})
    assert not unsourced, f"{page.name} quotes counts without a source: {unsourced}"
