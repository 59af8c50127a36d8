"""The gradient checker measured against realistic backward bugs: every mutant caught, and named."""

import contextlib
import io

import pytest

from npformer import ops
from npformer.gradcheck import mutants

# The mutants whose relative error is small: a checker with its tolerance raised to 1e-2 lets them through.
SUBTLE = {"layer norm: eps forgotten in backward"}


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
def test_npformer_gradcheck_mutants_catches_and_names_every_mutant():
    """``npformer gradcheck --mutants``, run once (20 s; one test, not a fixture shared by several
    tests, which each worker running one of them would build again). Its exit status and table,
    and the results its ``run_mutants`` call returned (recorded on the way): every mutant caught by
    its check and by the fast check, each one's pattern named, and exactly the subtle ones let
    through by a checker weakened to a tolerance of 1e-2."""
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
    results, output = recorded[0], output.getvalue()

    assert status == 0
    assert f"caught {len(mutants.MUTANTS)} of {len(mutants.MUTANTS)} mutants (100%)" in output
    assert "transposed" in output and "constant factor" in output
    escaped = [r.mutant.name for r in results if not r.caught]
    escaped_fast = [r.mutant.name for r in results if r.caught_fast is False]
    assert not escaped, f"caught by no check: {escaped}"
    assert not escaped_fast, f"missed by the fast check: {escaped_fast}"
    for result in results:
        if result.mutant.pattern:
            assert result.mutant.pattern in result.diagnosis, (result.mutant.name, result.diagnosis)
    # Raising the tolerance from 1e-6 to 1e-2 lets exactly the subtle mutants through.
    weakened = {r.mutant.name for r in results if mutants.with_tolerance(r.report, 1e-2).passed}
    assert weakened == SUBTLE


def test_a_mutant_is_removed_after_its_block():
    """An op's mutant replaces it in the active set, never the package's name (the textbook form)."""
    from npformer.ops import linear

    original = ops.current().linear_backward
    mutant = next(m for m in mutants.MUTANTS if m.where == "ops.linear_backward")
    with mutant.applied():
        assert ops.current().linear_backward is not original and ops.active()["linear_backward"] == "mutant"
        assert ops.linear_backward is linear.linear_backward
    assert ops.current().linear_backward is original
