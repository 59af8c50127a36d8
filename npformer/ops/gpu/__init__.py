"""The GPU forms of the ops: the same equations as ``npformer.ops``, as fused CuPy kernels.

On CuPy the textbook ops are correct but slow in a way the CPU never shows: each NumPy-style
expression is one kernel launch, and a GPU's launch costs several microseconds whatever the work,
so a layer norm of a few thousand rows spends its time launching its dozen kernels, and Adam on
64K-element chunks launches hundreds. The forms here do each op's work in one or two kernels
(``cupy.RawModule`` for the row-wise ones, ``cupy.ElementwiseKernel`` for the elementwise ones),
leave the matrix products to cuBLAS, and use no CPU threads.

Each function has a textbook twin of the same name in ``npformer.ops`` and returns a cache with
its twin's keys, so a GPU forward and a textbook backward (or the reverse) work together.
``tests/test_gpu_ops.py`` shows every form equal to its twin in float64 and float32 on a GPU (it
is skipped, with the reason, where CuPy sees none); ``benchmarks/gpu_check.sh`` runs it.

The "fast" op set of ``npformer.ops.using`` is made of these on CuPy (``npformer.ops.fast`` on
NumPy); the ops not listed stay textbook (the linear layer is already one cuBLAS product and one
bias add, and its backward two products and one sum).
"""

from .adam import adam_step
from .attention import attention_backward, attention_forward
from .cross_entropy import cross_entropy_backward, cross_entropy_forward
from .dropout import dropout_forward
from .embedding import embedding_backward
from .layernorm import layernorm_backward, layernorm_forward

__all__ = [
    "layernorm_forward", "layernorm_backward",
    "attention_forward", "attention_backward",
    "cross_entropy_forward", "cross_entropy_backward",
    "dropout_forward",
    "embedding_backward",
    "adam_step",
]
