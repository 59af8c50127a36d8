"""Every command, driven with arguments that hypothesis draws: numbers of any size and sign, text,
paths that do not exist, folders where files are expected, files of random bytes, binary stdin.
Whatever it draws, a command ends in a normal exit status and at most one line on stderr, never in
"unexpected error" or a traceback.

The flags come from the parser itself (``cli.build_parser``), so a new option is fuzzed as soon as it
exists. The long work behind a command is cut short (training stops before its first step, the
benchmarks and the full model checks are stubs), so that every example runs the checks a command
makes before it works: that is where a user's bad input must be caught.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npformer import cli
from test_bad_input import TEXT_OPTIONS  # the flags that take text: drawn here as paths

# What keeps each command's real work small: appended after the drawn arguments (the last value of
# a flag wins), and the work behind --score, evaluate and the small models capped.
CAPS = {
    "train": ["--max-pairs", "300", "--eval-every", "1000", "--test-sentences", "2"],
    "translate": ["--beam", "2"],
    "evaluate": ["--max-sentences", "3"],
    "attention": ["--max-pairs", "3"],
    "language-id": ["--steps", "1", "--max-pairs", "60"],
    "lm": ["--steps", "1", "--max-pairs", "60", "--samples", "1"],
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers.choices


_NAMES = itertools.count()  # every drawn path is a new one


def _path(draw, folder: str) -> str:
    """A path a user might type by mistake, or a good one: made inside ``folder``."""
    # hypothesis favours the first entries of a list: the ones most likely to break a command come first
    kind = draw(st.sampled_from(["in a file", "folder", "random bytes", "latin-1", "no parent", "empty", "pairs",
                                 "missing", "text"]))
    path = os.path.join(folder, f"p{next(_NAMES)}")
    if kind == "folder":
        os.makedirs(path, exist_ok=True)
    elif kind == "random bytes":
        with open(path, "wb") as file:
            file.write(draw(st.binary(min_size=1, max_size=200)))
    elif kind == "latin-1":
        with open(path, "wb") as file:
            file.write("the café\tle café\n".encode("latin-1") * 3)
    elif kind == "empty":
        open(path, "w").close()
    elif kind == "pairs":
        with open(path, "w", encoding="utf-8") as file:
            file.write("the cat.\tle chat.\n" * draw(st.integers(1, 40)))
    elif kind == "in a file":
        open(path, "w").close()
        path = os.path.join(path, "inside.png")
    elif kind == "no parent":
        path = os.path.join(folder, "no", "such", "place.png")
    elif kind == "text":
        return draw(st.text(min_size=0, max_size=12))
    return path


GOOD_NUMBERS = st.integers(1, 40).map(str)  # most drawn numbers are fine, so that the checks behind them run
NUMBERS = st.one_of(GOOD_NUMBERS, GOOD_NUMBERS, GOOD_NUMBERS, st.integers(-3, 10**7).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(str),
                    st.sampled_from(["", "x", "1e309", "-0", "0x10", "0.5"]))


@st.composite
def command_lines(draw, command: str, folder: str) -> list[str]:
    """One command line: a few of ``command``'s options with drawn values, and its positionals."""
    return [command, *_arguments(draw, _commands()[command], folder), *CAPS.get(command, [])]


def _arguments(draw, parser: argparse.ArgumentParser, folder: str) -> list[str]:
    """A few of ``parser``'s options with drawn values, and its positionals: an action of ``course``
    drawn with its own arguments."""
    arguments: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings and draw(st.integers(0, 3)) > 0:  # a quarter of the options, every positional
            continue
        if not action.option_strings:  # a positional: sentences, a prompt, the course action and its path
            if isinstance(action, argparse._SubParsersAction):
                name = draw(st.sampled_from(list(action.choices)))
                arguments += [name, *_arguments(draw, action.choices[name], folder)]
            elif action.choices:
                arguments.append(draw(st.sampled_from(list(action.choices))))
            elif action.nargs == "?":  # a course action's folder or file
                arguments.append(_path(draw, folder))
            else:
                arguments += draw(st.lists(st.text(min_size=0, max_size=30), min_size=0, max_size=2))
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            arguments.append(flag)
        elif action.choices is not None:
            arguments += [flag, draw(st.sampled_from([*map(str, action.choices), "bogus"]))]
        elif flag in TEXT_OPTIONS:
            arguments += [flag, _path(draw, folder)]
        else:
            arguments += [flag, draw(NUMBERS)]
    return arguments


@pytest.fixture()
def short_work(monkeypatch):
    """The long work behind the commands, cut short after their checks."""
    from npformer import bench, course, gradcheck
    from npformer.gradcheck import mutants
    from npformer.tasks.translation import trainer

    class Passed:
        passed = True

        def table(self):
            return ""

    def stub(function, result):
        """``function``'s name and signature (the parser reads them), ``result`` at once."""
        return functools.wraps(function)(lambda *args, **kwargs: result)

    monkeypatch.setattr(trainer.Trainer, "_loop", lambda self, position, stop: 130)
    monkeypatch.setattr(bench, "run", stub(bench.run, {}))
    monkeypatch.setattr(gradcheck, "check_model", stub(gradcheck.check_model, Passed()))
    monkeypatch.setattr(gradcheck, "check_all_ops", stub(gradcheck.check_all_ops, Passed()))
    monkeypatch.setattr(mutants, "run_mutants", stub(mutants.run_mutants, []))
    monkeypatch.setattr(mutants, "results_table", stub(mutants.results_table, ""))
    monkeypatch.setattr(course, "lesson_notebooks", stub(course.lesson_notebooks, []))
    monkeypatch.setattr(course, "grade_class", stub(course.grade_class, []))
    from npformer.course import site

    def checked_only(out, *, executed=None, instructor=False, lessons=None):  # the site's checks, not its build
        site.check_inputs(executed, lessons)
        return os.path.join(out, "index.html")
    monkeypatch.setattr(site, "build_site", checked_only)
    from npformer.data import download
    fetch = download._fetch

    def no_network(url, target, progress):  # a drawn file path or file:// URL is fetched; the internet never
        if url.startswith("http"):
            raise download.DataError(f"could not download {url} (the tests do not reach the internet)")
        return fetch(url, target, progress)

    monkeypatch.setattr(download, "_fetch", no_network)


def _run(arguments: list[str], stdin: bytes, folder: str) -> tuple[int, str]:
    """``cli.main(arguments)`` in ``folder`` with ``stdin``: its status and what it wrote to stderr."""
    err, out = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
            status = cli.main(arguments)
    finally:
        sys.stdin = sys.__stdin__
        os.chdir(here)
    return status, err.getvalue()


TRAINING = ("language-id", "lm", "attention")  # each example trains a small model or scores a test split


def _check(command: str, data, stdin: bytes, folder: str) -> None:
    arguments = data.draw(command_lines(command, folder), label="arguments")
    status, errors = _run(arguments, stdin, folder)
    assert "unexpected error" not in errors and "Traceback" not in errors, (arguments, errors)
    assert status in (0, 1, 2, 130), (arguments, status, errors)
    assert status != 1 or command == "gradcheck", (arguments, errors)  # 1: a gradient check failed


FUZZ = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                     HealthCheck.too_slow])


@pytest.mark.parametrize("command", sorted(set(_commands()) - set(TRAINING)))
@settings(max_examples=60, **FUZZ)
@given(data=st.data(), stdin=st.binary(max_size=60))
def test_no_drawn_command_line_ends_in_an_unexpected_error(command, data, stdin, short_work, tmp_path_factory):
    _check(command, data, stdin, str(tmp_path_factory.mktemp("fuzz")))


@pytest.mark.parametrize("command", TRAINING)
@settings(max_examples=15, **FUZZ)
@given(data=st.data(), stdin=st.binary(max_size=60))
def test_no_drawn_command_line_of_a_training_command_ends_in_an_unexpected_error(command, data, stdin, short_work,
                                                                                 tmp_path_factory):
    _check(command, data, stdin, str(tmp_path_factory.mktemp("fuzz")))
