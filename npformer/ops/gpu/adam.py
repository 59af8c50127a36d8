"""GPU form of ``npformer.ops.adam``: a parameter's whole update in one kernel, in place.

What changes: the textbook step is nine array expressions, each a kernel and a temporary the size
of the parameter; the CPU fast form cuts it into 64K-element chunks to stay in the cache, which on
a GPU means hundreds of tiny launches (31.8 of the 84.4 ms of a small-preset step on an H100,
``../shared/gpu-logs-2026-11-26-h100/bench_small.log``). Here one elementwise kernel reads
``grad``, ``m`` and ``v`` once and writes ``m``, ``v`` and ``param`` once, and the three arrays it
was given come back updated (``npformer.optim.Adam`` then has nothing to copy). The order of the
floating-point operations is the CPU fast form's.
"""

from __future__ import annotations

import math
from typing import Any

_kernels: dict[str, Any] = {}


def _adam_kernel() -> Any:
    if "adam" not in _kernels:
        import cupy

        _kernels["adam"] = cupy.ElementwiseKernel(
            "T grad, T beta1, T beta2, T correction2, T step_size, T eps", "T param, T m, T v",
            """
            m = beta1 * m + ((T)1 - beta1) * grad;                  // m = beta1 m + (1 - beta1) g
            v = beta2 * v + ((T)1 - beta2) * (grad * grad);         // v = beta2 v + (1 - beta2) g^2
            param -= m / (sqrt(v) * correction2 + eps) * step_size; // lr m_hat / (sqrt(v_hat) + eps)
            """,
            "npformer_adam")
    return _kernels["adam"]


def adam_step(param: Any, grad: Any, m: Any, v: Any, step: int, lr: float,
              beta1: float, beta2: float, eps: float) -> tuple[Any, Any, Any]:
    """See ``npformer.ops.adam.adam_step``; ``param``, ``m`` and ``v`` are updated in place."""
    real = param.dtype.type
    correction2 = 1.0 / math.sqrt(1.0 - beta2**step)
    step_size = lr / (1.0 - beta1**step)
    _adam_kernel()(grad, real(beta1), real(beta2), real(correction2), real(step_size), real(eps), param, m, v)
    return param, m, v
