"""No solution in a student's install: the wheel ships the student edition of the lessons (no
solution, no classic-mistake cell, no answer to an open question), the instructor edition comes
only from a source checkout, and a leak is found."""

import importlib.util
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from npformer.course import BEGIN, END, student_source
from npformer.course.edition import (INSTRUCTOR, instructor_edition, is_student_edition, solution_leaks,
                                     student_edition, student_readme)

from lesson_solutions import LESSONS


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(out),
                    str(LESSONS.parent)], check=True, capture_output=True)
    [built] = out.glob("npformer-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_lessons(wheel):
    """The lessons inside the wheel: name -> text."""
    with zipfile.ZipFile(wheel) as archive:
        return {name.rsplit("/", 1)[-1]: archive.read(name).decode("utf-8")
                for name in archive.namelist() if name.startswith("npformer/lessons/") and not name.endswith("/")}


def test_the_wheel_ships_the_student_edition_and_nothing_of_the_instructors(wheel_lessons):
    lessons = sorted(LESSONS.glob("[0-9][0-9]_*.py"))
    assert sorted(name for name in wheel_lessons if name.endswith(".py") and name[:2].isdigit()) == \
        [path.name for path in lessons]
    for path in lessons:
        shipped, source = wheel_lessons[path.name], path.read_text(encoding="utf-8")
        assert shipped == student_source(source, path.name), path.name
        assert BEGIN not in shipped and END not in shipped and f'"{INSTRUCTOR}"' not in shipped, path.name
        assert solution_leaks(shipped, source, path.name) == [], path.name
    readme = wheel_lessons["README.md"]
    assert readme == student_readme((LESSONS / "README.md").read_text(encoding="utf-8"))
    assert "instructor edition: the" not in readme and "These are your lessons" in readme
    # a student's install holds no repository: the README points only to what it has
    assert "repository's README" not in readme and "docs/instructor.md" not in readme


def test_a_leaked_solution_line_is_found():
    source = (LESSONS / "04_layer_normalization.py").read_text(encoding="utf-8")
    student = student_source(source)
    assert solution_leaks(student, source) == []
    solutions = [block.split(END, 1)[0] for block in source.split(BEGIN)[1:]]
    solution_line = next(line for block in solutions for line in block.splitlines()
                         if len(line.strip()) >= 20 and not line.strip().startswith("#"))
    leaked = student.replace("# YOUR CODE HERE", "# YOUR CODE HERE\n" + solution_line, 1)
    assert solution_leaks(leaked, source) == [solution_line.strip()]


def test_the_instructor_edition_comes_only_from_a_source_checkout(tmp_path, capsys):
    from npformer.cli import main

    student_edition(LESSONS, tmp_path / "installed")
    assert is_student_edition(tmp_path / "installed") and not is_student_edition(LESSONS)
    with pytest.raises(FileNotFoundError, match="source checkout"):
        instructor_edition(tmp_path / "installed", tmp_path / "out")
    assert main(["course", "instructor", str(tmp_path / "out"), "--lessons", str(tmp_path / "installed")]) == 2
    error = capsys.readouterr().err.strip()
    assert "student edition" in error and "source checkout" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_install_from_a_checkout_finds_the_checkouts_instructor_edition(monkeypatch):
    """``pip install .`` records the checkout (direct_url.json): ``course instructor`` then builds from
    its lessons; a wheel from an index records none, and the one-line refusal stands."""
    import json
    from importlib import metadata

    from npformer.course.edition import source_checkout_lessons

    class Distribution:
        def __init__(self, url):
            self.url = url

        def read_text(self, name):
            return json.dumps({"url": self.url, "dir_info": {}}) if self.url and name == "direct_url.json" else None

    for url, found in ((f"file://{LESSONS.parent}", LESSONS), ("https://example.org/npformer.whl", None),
                       (None, None), ("file:///nowhere", None)):
        monkeypatch.setattr(metadata, "distribution", lambda name, url=url: Distribution(url))
        assert source_checkout_lessons() == found, url


# -- nothing in a student's install passes a graded exercise as their variant states it ------------------

def _audit(root, lessons=None, only=None):
    """``install_audit.py`` run on ``root``'s npformer (and ``lessons``) in a process of its own."""
    command = [sys.executable, str(Path(__file__).with_name("install_audit.py")), str(root)]
    command += ([str(lessons)] if lessons else []) + (["--only", only] if only else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_nothing_in_the_wheel_passes_a_graded_exercise_as_a_variant_states_it(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "installed")
    installed = tmp_path / "installed"
    assert _audit(installed, installed / "npformer" / "lessons") == []
    # shown red: the answer of one variant, left in the install
    (installed / "npformer" / "leaked_answer.py").write_text(textwrap.dedent("""
        from npformer.course.variants import posed

        def layernorm_backward(x, gamma, beta, dout):
            return posed("layernorm_backward", "unbiased").reference(x, gamma, beta, dout)
    """))
    assert _audit(installed, only="npformer.leaked_answer") == [
        ["npformer.leaked_answer", "layernorm_backward", "layernorm_backward", "unbiased"]]


def test_the_classroom_template_holds_nothing_the_audited_wheel_does_not(wheel, tmp_path):
    """The template's copy of npformer and its lessons are the wheel's, byte for byte, so the audit of
    the wheel above covers them (nothing in them passes a graded exercise as a variant states it)."""
    from npformer.course.classroom import VENDORED, write_template
    write_template(tmp_path / "template", 3, seed=0, lessons_dir=LESSONS)  # lessons 04 and 05: three derivations
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name: archive.read(name) for name in archive.namelist() if name.startswith("npformer/")}
    vendored = tmp_path / "template" / VENDORED
    copied = sorted(path for path in vendored.rglob("*.py"))
    assert len(copied) > 100
    for path in copied:
        assert shipped.get(str(path.relative_to(vendored))) == path.read_bytes(), path
    for lesson in (tmp_path / "template").glob("[0-9][0-9]_*.py"):
        assert shipped[f"npformer/lessons/{lesson.name}"] == lesson.read_bytes(), lesson.name
