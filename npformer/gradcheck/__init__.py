from .engine import *  # noqa: F401,F403  (split into files below)
from .engine import (DEFAULT_EPS, DEFAULT_TOL, OP_CASES, RESOLUTION, TINY_MODEL, GradcheckReport,  # noqa: F401
                     TensorCheck, check_all_ops, check_exercise, check_loss, check_gradients, check_model, check_module,
                     check_op, model_case, numerical_gradient, relative_error)
