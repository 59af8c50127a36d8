"""The gradient checker measured against realistic backward bugs: every mutant caught, and named."""

import contextlib
import io

import pytest

from npformer import ops
from npformer.gradcheck import mutants

# Every test here on one worker (pytest-xdist's --dist loadgroup): the catalogue's run below, 40 s,
# is then made once per run, not once per worker.
pytestmark = pytest.mark.xdist_group("mutant-catalogue")

# The mutants whose relative error is small: a checker with its tolerance raised to 1e-2 lets them through.
SUBTLE = {"layer norm: eps forgotten in backward"}


@pytest.fixture(scope="session")  # once: every test of this file runs on the same worker
def command():
    """``npformer gradcheck --mutants``, run once: its exit status, its output, and the results its
    ``run_mutants`` call returned (recorded on the way), which the tests below read."""
    from npformer.cli import main

    recorded, original = [], mutants.run_mutants

    def recording(*args, **kwargs):
        recorded.append(original(*args, **kwargs))
        return recorded[-1]

    output = io.StringIO()
    mutants.run_mutants = recording
    try:
        with contextlib.redirect_stdout(output):
            status = main(["gradcheck", "--mutants"])
    finally:
        mutants.run_mutants = original
    assert len(recorded) == 1, "the command runs the catalogue once"
    return status, output.getvalue(), recorded[0]


@pytest.fixture(scope="session")
def results(command):
    return command[2]


def test_the_catalogue_has_at_least_30_mutants_over_every_kind_of_check():
    assert len(mutants.MUTANTS) >= 30
    assert len({m.name for m in mutants.MUTANTS}) == len(mutants.MUTANTS)
    kinds = {m.check.partition(":")[0] for m in mutants.MUTANTS}
    assert kinds == {"op", "module", "model", "optimizer"}
    checked_ops = {m.where for m in mutants.MUTANTS if m.where.startswith("ops.")}
    assert len(checked_ops) >= 10, checked_ops


@pytest.mark.slow
def test_every_check_passes_on_the_correct_library():
    for check in sorted({m.check for m in mutants.MUTANTS}):
        report = mutants.run_check(check)
        assert report.passed, (check, report)
        if check.partition(":")[0] in ("module", "model"):
            assert mutants.run_check(check, directions=2).passed, check


@pytest.mark.slow
def test_every_mutant_is_caught_by_its_check_and_by_the_fast_check(results):
    escaped = [r.mutant.name for r in results if not r.caught]
    escaped_fast = [r.mutant.name for r in results if r.caught_fast is False]
    rate = sum(r.caught for r in results) / len(results)
    print(f"catch rate {rate:.0%} over {len(results)} mutants")
    assert rate == 1.0, escaped
    assert not escaped_fast, escaped_fast


def test_the_report_names_the_pattern_of_each_mutant_that_has_one(results):
    for result in results:
        if result.mutant.pattern:
            assert result.mutant.pattern in result.diagnosis, (result.mutant.name, result.diagnosis)


def test_a_weakened_checker_lets_the_subtle_mutants_escape(results):
    """Raising the tolerance from 1e-6 to 1e-2 lets exactly the subtle mutants through."""
    escaped = {r.mutant.name for r in results if mutants._with_tolerance(r.report, 1e-2).passed}
    assert escaped == SUBTLE


def test_a_mutant_is_removed_after_its_block():
    """An op's mutant replaces it in the active set, never the package's name (the textbook form)."""
    from npformer.ops import linear

    original = ops.current().linear_backward
    mutant = next(m for m in mutants.MUTANTS if m.where == "ops.linear_backward")
    with mutant.applied():
        assert ops.current().linear_backward is not original and ops.active()["linear_backward"] == "mutant"
        assert ops.linear_backward is linear.linear_backward
    assert ops.current().linear_backward is original


def test_the_command_prints_the_table(command):
    status, output, _ = command
    assert status == 0
    assert f"caught {len(mutants.MUTANTS)} of {len(mutants.MUTANTS)} mutants (100%)" in output
    assert "transposed" in output and "constant factor" in output
