"""The math of npformer: every differentiable operation as a pair of pure functions.

    out, cache = <name>_forward(inputs..., params...)
    grads      = <name>_backward(dout, cache)

``grads`` holds the gradients of the differentiable (floating) array
arguments, in order: a tuple, or a single array when there is one. No state,
no globals, no autograd tape. Each module's docstring gives the shapes, the
forward equation and the derivation of the backward pass.

The names of this package are the textbook forms, the functions of this folder's
files, always: ``inspect.getsourcefile(ops.layernorm_forward)`` is ``ops/layernorm.py``.
``ops/fast/`` holds the fast forms beside them. What every block, model and optimizer
*runs* is the active op set, ``ops.current()``, which ``with ops.using("textbook" |
"fast" | your_ops):`` sets for the code inside (``ops.switch``); ``ops.active()``
tells where each op comes from. The default set is ``"fast"``.
"""

from .adam import adam_step
from .attention import attention_backward, attention_forward
from .cross_entropy import cross_entropy_backward, cross_entropy_forward
from .dropout import dropout_backward, dropout_forward
from .embedding import embedding_backward, embedding_forward
from .gelu import gelu_backward, gelu_forward
from .grouped_attention import grouped_query_attention_backward, grouped_query_attention_forward
from .layernorm import layernorm_backward, layernorm_forward
from .linear import linear_backward, linear_forward
from .masks import causal_mask, padding_mask
from .patches import patches_backward, patches_forward
from .pooling import (masked_max_pool_backward, masked_max_pool_forward,
                      masked_mean_pool_backward, masked_mean_pool_forward)
from .positional import positional_encoding
from .relu import relu_backward, relu_forward
from .rmsnorm import rmsnorm_backward, rmsnorm_forward
from .rope import rope_backward, rope_forward
from .query_start import queries_from, query_start
from .softmax import log_softmax, logsumexp, softmax_backward, softmax_forward
from .special import erf, erfc
from .swiglu import swiglu_backward, swiglu_forward
from .switch import ACTIVATIONS, DEFAULT, OP_NAMES, POOLINGS, RULE_NAMES, OpSet, active, current, holds_blas, using

__all__ = [
    "linear_forward", "linear_backward",
    "relu_forward", "relu_backward",
    "gelu_forward", "gelu_backward",
    "softmax_forward", "softmax_backward",
    "layernorm_forward", "layernorm_backward",
    "embedding_forward", "embedding_backward",
    "attention_forward", "attention_backward",
    "rmsnorm_forward", "rmsnorm_backward",
    "rope_forward", "rope_backward",
    "swiglu_forward", "swiglu_backward",
    "grouped_query_attention_forward", "grouped_query_attention_backward",
    "dropout_forward", "dropout_backward",
    "cross_entropy_forward", "cross_entropy_backward",
    "masked_mean_pool_forward", "masked_mean_pool_backward",
    "masked_max_pool_forward", "masked_max_pool_backward",
    "patches_forward", "patches_backward",
    "positional_encoding", "padding_mask", "causal_mask", "log_softmax", "logsumexp",
    "adam_step", "erf", "erfc",
    "using", "current", "active", "OpSet", "DEFAULT", "ACTIVATIONS", "POOLINGS", "RULE_NAMES", "holds_blas",
    "OP_NAMES", "query_start", "queries_from",
]
