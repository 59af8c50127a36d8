"""A catalogue of realistic backward bugs ("mutants"), to measure what the checker catches.

Each mutant is one small, named change to a correct backward pass or block: the
kind of mistake that hand-written backward passes (and the peers' issue trackers)
are full of. It is applied without editing the library: ``mutant.applied()``
patches one function or method for the duration of a ``with`` block. The check
that must catch it is named by ``mutant.check``:

    "op:NAME"        check_op(NAME): the op's case of ``OP_CASES`` (padded rows, repeated ids, ...)
    "module:NAME"    check_module on a small float64 block (``MODULE_CASES``)
    "model[:OPTS]"   check_model on the tiny Transformer (OPTS: "pre", "tied", "gelu")
    "optimizer"      check_adam: three Adam steps against the closed-form update

``pattern`` is the diagnosis the report must give for it, when the mistake has a
recognisable shape ("constant factor", "sign", "transposed", "zero", "shape").
``run_mutants`` applies each one in turn and returns, per mutant, whether the full
check caught it, whether the fast directional check caught it, and the diagnosis.

The package, one idea per module (each imports only the ones above it):

    mutant.py     Mutant: one named bug, and ``applied()`` that patches it in for a ``with`` block
    ops.py        OP_MUTANTS: the bugs in the backward passes of ``npformer.ops`` (check "op:NAME")
    blocks.py     BLOCK_MUTANTS: the bugs in the blocks and the model (checks "module:NAME", "model")
    optimizer.py  OPTIMIZER_MUTANTS: the bugs in Adam's update (check "optimizer")
    checks.py     run_check: the check a mutant names; MODULE_CASES, check_adam, MODEL_ENTRIES
    runner.py     MUTANTS (the whole catalogue), run_mutants, MutantResult, results_table and with_tolerance
"""

from ..report import DEFAULT_TOL
from .blocks import BLOCK_MUTANTS
from .checks import MODEL_ENTRIES, MODULE_CASES, check_adam, run_check
from .mutant import Mutant
from .ops import OP_MUTANTS
from .optimizer import OPTIMIZER_MUTANTS
from .runner import MUTANTS, MutantResult, results_table, run_mutants, with_tolerance

__all__ = [
    "Mutant", "MUTANTS", "OP_MUTANTS", "BLOCK_MUTANTS", "OPTIMIZER_MUTANTS", "MutantResult", "run_mutants",
    "results_table", "run_check", "check_adam", "MODULE_CASES", "MODEL_ENTRIES", "DEFAULT_TOL", "with_tolerance",
]
