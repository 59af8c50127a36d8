"""One Adam update of one parameter array (Kingma and Ba, 2015, Algorithm 1).

With ``g`` the gradient and ``t`` the number of the step being taken (1 on the first)::

    m     = beta1 * m + (1 - beta1) * g          first moment: a running mean of g
    v     = beta2 * v + (1 - beta2) * g^2        second moment: a running mean of g^2
    m_hat = m / (1 - beta1^t)                    bias correction: m and v start at 0
    v_hat = v / (1 - beta2^t)
    param = param - lr * m_hat / (sqrt(v_hat) + eps)

``npformer.optim.Adam`` calls this for every parameter (after adding the L2 term to
``g``; ``AdamW`` decays the parameter first instead). It is an op like the others, so
``ops.using`` chooses it: the fast form, ``npformer.ops.fast.adam``, updates the arrays
in place.
"""

from __future__ import annotations

from typing import Any

from ..backend import xp


def adam_step(param: Any, grad: Any, m: Any, v: Any, step: int, lr: float,
              beta1: float, beta2: float, eps: float) -> tuple[Any, Any, Any]:
    """The new ``(param, m, v)``, each the shape of ``param``; the inputs are not changed."""
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1**step)
    v_hat = v / (1.0 - beta2**step)
    param = param - lr * m_hat / (xp.sqrt(v_hat) + eps)
    return param, m, v
