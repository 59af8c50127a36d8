"""The fast forms of the ops: the same equations as ``npformer.ops``, scheduled for speed.

Each function here has a textbook twin of the same name in ``npformer.ops`` (the
file of the same name one folder up), and its module docstring says what it
changes and why: blocks of rows on threads (``npformer.threads``), results written
into preallocated arrays, fewer temporaries, a sort instead of ``add.at``. The
caches have the twin's keys, so a fast forward and a textbook backward (or the
reverse) work together. ``tests/test_fast_ops.py`` shows every form equal to its
twin in float64.

The "fast" op set of ``npformer.ops.using`` is the textbook set with these in place
of their twins; the ops not listed here (ReLU, GELU, softmax, dropout, pooling,
patches, masks) have only the textbook form.
"""

from .adam import adam_step
from .attention import attention_backward, attention_forward
from .cross_entropy import cross_entropy_backward, cross_entropy_forward
from .embedding import embedding_backward
from .layernorm import layernorm_backward, layernorm_forward
from .linear import linear_backward, linear_forward

__all__ = [
    "linear_forward", "linear_backward",
    "layernorm_forward", "layernorm_backward",
    "attention_forward", "attention_backward",
    "cross_entropy_forward", "cross_entropy_backward",
    "embedding_backward",
    "adam_step",
]
