"""Check hand-written gradients against central finite differences, in float64.

One concern per file; each imports only the files above it:

    arguments.py  the argument checks every entry point below (and the course's grader) makes
                  before any work: one line naming the function, the argument, what was
                  expected and what it got
    report.py     TensorCheck and GradcheckReport (the table), relative_error, the pass
                  rule (tolerance DEFAULT_TOL, RESOLUTION for entries too small to resolve)
    engine.py     the fourth-order central difference (numerical_gradient, DEFAULT_EPS) and
                  check_gradients, for any forward/backward pair
    cases.py      OP_CASES: every op of npformer.ops with inputs that exercise it (one case
                  builder per op); check_op, check_all_ops (the command ``npformer gradcheck``)
    modules.py    check_module (dropout masks replayed), check_loss, check_model: blocks and
                  models, every parameter; model_case and TINY_MODEL (``--model``)
    hints.py      diagnose: what a wrong gradient most likely got wrong (a factor, a sign, a
                  transpose, a missing sum, a leak into masked positions)

The course's exercise grader (``npformer.course.check``) builds on these.

Example::

    from npformer import gradcheck, ops
    report = gradcheck.check_gradients(ops.layernorm_forward, my_layernorm_backward,
                                       {"x": x, "gamma": gamma, "beta": beta}, name="layernorm")
    print(report)            # one row per tensor: shape, worst relative error, pass/fail
"""

from .cases import (OP_CASES, attention_case, check_all_ops, check_op, cross_entropy_case, dropout_case,
                    embedding_case, gelu_case, layernorm_case, linear_case, patches_case, pooling_case, relu_case,
                    softmax_case)
from .engine import DEFAULT_EPS, check_gradients, numerical_gradient
from .modules import TINY_MODEL, check_loss, check_model, check_module, model_case
from .report import DEFAULT_TOL, RESOLUTION, GradcheckReport, TensorCheck, relative_error

__all__ = [
    "check_gradients", "check_module", "check_loss", "check_model", "model_case", "TINY_MODEL",
    "OP_CASES", "check_op", "check_all_ops", "numerical_gradient", "relative_error",
    "GradcheckReport", "TensorCheck", "DEFAULT_TOL", "DEFAULT_EPS", "RESOLUTION",
    "linear_case", "relu_case", "gelu_case", "softmax_case", "layernorm_case", "embedding_case",
    "attention_case", "dropout_case", "cross_entropy_case", "pooling_case", "patches_case",
]
