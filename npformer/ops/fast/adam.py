"""Fast form of ``npformer.ops.adam``: the same update, written into ``param``, ``m`` and ``v``.

What changes: the textbook ``adam_step`` returns three new arrays and makes
several temporaries of the parameter's size on the way. This one updates ``m``,
``v`` and ``param`` in place with a single scratch array, and returns the same
three objects it was given (``npformer.optim.Adam`` then has nothing to copy).
The order of the floating-point operations is the twin's up to rounding.
"""

from __future__ import annotations

import math
from typing import Any

from ...backend import xp


def adam_step(param: Any, grad: Any, m: Any, v: Any, step: int, lr: float,
              beta1: float, beta2: float, eps: float) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.adam.adam_step``; ``param``, ``m`` and ``v`` are updated in place."""
    scratch = xp.multiply(grad, 1.0 - beta1)
    m *= beta1
    m += scratch                                      # m = beta1 m + (1 - beta1) g
    xp.multiply(grad, grad, out=scratch)
    scratch *= 1.0 - beta2
    v *= beta2
    v += scratch                                      # v = beta2 v + (1 - beta2) g^2
    xp.sqrt(v, out=scratch)
    scratch *= 1.0 / math.sqrt(1.0 - beta2**step)
    scratch += eps                                    # sqrt(v_hat) + eps
    xp.divide(m, scratch, out=scratch)
    scratch *= lr / (1.0 - beta1**step)               # lr m_hat / (sqrt(v_hat) + eps)
    param -= scratch
    return param, m, v
