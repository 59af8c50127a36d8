"""``benchmarks/mutations.py`` names each deliberate bug by an exact snippet of the code it breaks.
When the code changes, a snippet stops matching and the mutation check stops at once; this test says
so in the suite, the day the code changes, instead of the next time someone runs the check."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mutants():
    spec = importlib.util.spec_from_file_location("mutations", ROOT / "benchmarks" / "mutations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up by name
    spec.loader.exec_module(module)
    return module.MUTANTS


@pytest.mark.parametrize("mutant", _mutants(), ids=lambda mutant: mutant.name)
def test_every_mutant_still_finds_the_code_it_breaks(mutant):
    text = (ROOT / mutant.path).read_text(encoding="utf-8")
    assert text.count(mutant.old) == 1, (
        f"{mutant.name}: its snippet occurs {text.count(mutant.old)} times in {mutant.path}; "
        "update benchmarks/mutations.py with the code")
    assert mutant.new != mutant.old
