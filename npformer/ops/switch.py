"""Whose ops the blocks run: the active op set, a value held in a context.

``npformer.ops.<name>`` always names the textbook function of ``npformer/ops/<name>.py``;
nothing rebinds it. What a block, a model, an optimizer or a training step *runs* is the
active op set, which it reads through one accessor at the moment of the call::

    from npformer import ops
    ops.current().linear_forward(x, W, b)   # what nn.Linear does: the active set's linear layer
    ops.linear_forward(x, W, b)             # always the textbook form (npformer/ops/linear.py)

``ops.using(impl)`` sets the active set::

    with ops.using("textbook"):        # the readable forms of npformer/ops/*.py
        model.forward(src, tgt_in)     # ... run here
    ops.using(my_ops)                  # a plain call: stays in force in this context (for scripts)

``impl`` is one of:

* ``"textbook"``: the functions of ``npformer/ops/*.py``, as the lessons derive them;
* ``"fast"``: the same with the fast forms in place of their twins (the ops without a fast form
  stay textbook): those of ``npformer/ops/fast/`` (CPU threads, in-place updates) on NumPy, those
  of ``npformer/ops/gpu/`` (fused CuPy kernels) on CuPy, chosen when the set is made;
* a module, an object or a dict that defines some of the names in ``OP_NAMES``
  with the op signatures (``linear_forward(x, W, b) -> (y, cache)``,
  ``linear_backward(dy, cache) -> (dx, dW, db)``, ...). The names it lacks come from
  the set active before. A replaced backward receives the cache of the active
  forward, so replace both halves of a pair unless you follow its cache's keys
  (the textbook and fast forms share them). A dict's ops are labelled "custom", or by its
  ``name`` attribute when it has one (``course.student_ops`` makes a dict named "yours").

The set lives in a ``contextvars.ContextVar``: a ``with`` block changes it for the code it
runs and nothing else, two threads may run two sets at once, and npformer's own worker
threads (``npformer.threads``) run in the context of the call that handed them the work.
A plain call lasts for its context: a thread you start yourself, an asyncio task, or a Jupyter
cell run in a context of its own (some ipykernel versions, cells with ``await``) starts from the
default again; in a notebook, put the cells that should run another set inside ``with``. A
``using`` object is entered once: ``with`` a new ``ops.using(...)`` each time, and leave nested
blocks in the order they were entered.
A thread that never set one runs the default, ``"fast"``: on the 2-core machines this project
is measured on, its threads make the training step faster than the textbook set on both bench
presets (``benchmarks/RESULTS.md``, "Op sets").

``active()`` says where each op comes from, e.g. ``{"linear_forward": "fast", ...}``.
"""

from __future__ import annotations

import contextvars
import functools
import types
from collections.abc import Mapping
from typing import Any, Callable

from ..backend import is_cupy
from . import (adam, attention, cross_entropy, dropout, embedding, gelu, grouped_attention, layernorm, linear,
               masks, patches, pooling, positional, relu, rmsnorm, rope, softmax, swiglu)

__all__ = ["OP_NAMES", "RULE_NAMES", "ACTIVATIONS", "POOLINGS", "OpSet", "current", "using", "active", "DEFAULT",
           "holds_blas"]

DEFAULT = "fast"

# The ops of every set: every differentiable op's pair, the helpers the models call through the
# active set (masks, positions) and the optimizer's update.
_TEXTBOOK_MODULES = {
    linear: ("linear_forward", "linear_backward"),
    relu: ("relu_forward", "relu_backward"),
    gelu: ("gelu_forward", "gelu_backward"),
    softmax: ("softmax_forward", "softmax_backward"),
    layernorm: ("layernorm_forward", "layernorm_backward"),
    embedding: ("embedding_forward", "embedding_backward"),
    attention: ("attention_forward", "attention_backward"),
    rmsnorm: ("rmsnorm_forward", "rmsnorm_backward"),
    rope: ("rope_forward", "rope_backward"),
    swiglu: ("swiglu_forward", "swiglu_backward"),
    grouped_attention: ("grouped_query_attention_forward", "grouped_query_attention_backward"),
    dropout: ("dropout_forward", "dropout_backward"),
    cross_entropy: ("cross_entropy_forward", "cross_entropy_backward"),
    pooling: ("masked_mean_pool_forward", "masked_mean_pool_backward",
              "masked_max_pool_forward", "masked_max_pool_backward"),
    patches: ("patches_forward", "patches_backward"),
    masks: ("padding_mask", "causal_mask"),
    positional: ("positional_encoding",),
    adam: ("adam_step",),
}
# Rules a set may bring in place of the blocks' own (``nn/attention.py``, ``nn/residual.py``, ``nn/layer.py``):
# a student's multi-head attention backward (lesson 08), residual backward passes and walks through a
# layer's blocks (lessons 09-10) and through the whole model (lesson 11) run the model this way.
# The built-in sets define none of them: the blocks' functions are the textbook, and an op never calls
# back into a block.
RULE_NAMES = ("multi_head_attention_backward", "residual_backward", "residual_backward_with_memory",
              "stack_backward_with_memory", "encoder_layer_backward", "decoder_backward", "transformer_backward")
OP_NAMES: tuple[str, ...] = tuple(name for names in _TEXTBOOK_MODULES.values() for name in names) + RULE_NAMES

# The ops a model's config chooses by name, each as its (forward, backward) pair of op names
# (``op_set.pair(ACTIVATIONS["gelu"])``): a feed-forward network's activation, a classifier's pooling.
ACTIVATIONS = {"relu": ("relu_forward", "relu_backward"), "gelu": ("gelu_forward", "gelu_backward")}
POOLINGS = {"mean": ("masked_mean_pool_forward", "masked_mean_pool_backward"),
            "max": ("masked_max_pool_forward", "masked_max_pool_backward")}


class OpSet:
    """One function for every name of ``OP_NAMES``, as attributes (``op_set.linear_forward``), and
    where each comes from (``labels``). Made by ``using``; read with ``current()``; never changed."""

    def __init__(self, table: Mapping[str, tuple[Callable, str]]) -> None:
        for op, (function, _) in table.items():
            object.__setattr__(self, op, function)
        object.__setattr__(self, "labels", {op: label for op, (_, label) in table.items()})

    def pair(self, names: tuple[str, str]) -> tuple[Callable, Callable]:
        """This set's functions for a (forward, backward) pair of op names (``ACTIVATIONS["relu"]``)."""
        return getattr(self, names[0]), getattr(self, names[1])

    def table(self) -> dict[str, tuple[Callable, str]]:
        """``{op name: (function, label)}``: this set as ``using`` builds sets from it."""
        return {op: (getattr(self, op), label) for op, label in self.labels.items()}

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an OpSet never changes; make another with ops.using")

    def __repr__(self) -> str:
        sources = sorted(set(self.labels.values()))
        return f"OpSet({', '.join(sources)})"


@functools.cache
def _textbook() -> OpSet:
    return OpSet({name: (getattr(module, name), "textbook")
                  for module, names in _TEXTBOOK_MODULES.items() for name in names})


@functools.cache
def _fast_on_cpu() -> OpSet:
    from . import fast

    return OpSet({**_textbook().table(), **{name: (getattr(fast, name), "fast") for name in fast.__all__}})


@functools.cache
def _fast_on_gpu() -> OpSet:
    from . import gpu

    return OpSet({**_textbook().table(), **{name: (getattr(gpu, name), "fast") for name in gpu.__all__}})


def _fast() -> OpSet:
    """The fast set of the active backend: ``ops/fast/`` (CPU threads) on NumPy, ``ops/gpu/`` (fused
    kernels) on CuPy."""
    return _fast_on_gpu() if is_cupy() else _fast_on_cpu()


_BUILT_IN = {"textbook": _textbook, "fast": _fast}

# The active set of this context; None: the default (made at the first ``current()``, so that
# importing npformer builds nothing).
_active_set: contextvars.ContextVar[OpSet | None] = contextvars.ContextVar("npformer_op_set", default=None)


def current() -> OpSet:
    """The op set in force here: what ``using`` last set in this context, else the default ("fast")."""
    op_set = _active_set.get()
    return op_set if op_set is not None else _BUILT_IN[DEFAULT]()


def _resolve(impl: Any, name: str | None) -> dict[str, tuple[Callable, str]]:
    """``impl`` as ``{op name: (function, label)}``, checked before anything changes."""
    if isinstance(impl, str):
        built_in = _BUILT_IN.get(impl)
        if built_in is None:
            raise ValueError(f"ops.using: impl must be 'fast', 'textbook', or a module, object or dict "
                             f"of ops, got {impl!r}")
        return built_in().table()
    if isinstance(impl, OpSet):
        return impl.table()
    if isinstance(impl, Mapping):
        unknown = sorted(set(impl) - set(OP_NAMES))
        if unknown:
            raise ValueError(f"ops.using: {unknown} are not op names; the op names are {list(OP_NAMES)}")
        functions, label = dict(impl), name or getattr(impl, "name", None) or "custom"
    else:
        functions = {op: getattr(impl, op) for op in OP_NAMES if getattr(impl, op, None) is not None}
        default_label = impl.__name__ if isinstance(impl, types.ModuleType) else type(impl).__name__
        label = name or default_label
    # An empty dict changes nothing (a student with no exercise solved yet); a module or an object
    # that defines no op name is a mistake.
    if not functions and not isinstance(impl, Mapping):
        raise ValueError(f"ops.using: {label!r} defines none of the op names {list(OP_NAMES)}")
    for op, function in functions.items():
        if not callable(function):
            raise TypeError(f"ops.using: {op} must be callable, got {type(function).__name__}")
    labels = getattr(impl, "labels", None) or {}  # a set may label some of its ops otherwise (StudentOps)
    return {op: (function, labels.get(op, label)) for op, function in functions.items()}


class using:  # noqa: N801 -- a function to its callers (like numpy.errstate)
    """Make ``impl``'s ops the active ones in this context; as a context manager, restore the
    previous set on exit.

    Args:
        impl: ``"fast"``, ``"textbook"``, an ``OpSet``, or a module, object or dict of op functions.
        name: how ``active()`` labels ``impl``'s ops (default: the module's or type's
            name, or "custom" for a dict).
    """

    def __init__(self, impl: Any, *, name: str | None = None) -> None:
        resolved = _resolve(impl, name)
        inherited = current().table()
        if isinstance(impl, str):   # a built-in set is whole: the blocks' own rules, not a student's, run under it
            inherited = {op: entry for op, entry in inherited.items() if op not in RULE_NAMES}
        self.op_set = OpSet({**inherited, **resolved})
        self._token = _active_set.set(self.op_set)

    def __enter__(self) -> "using":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _active_set.reset(self._token)


def active() -> dict[str, str]:
    """Where each op comes from now: ``{op name: "fast" | "textbook" | the label of a set}``."""
    return dict(current().labels)


def holds_blas() -> bool:
    """Whether BLAS should be held to one thread while the active set runs.

    True when the active linear layer is the fast form, which splits every matrix product over
    npformer's own threads (``npformer.threads``), and more than one thread is set; the textbook
    products instead leave the cores to BLAS's threads. The linear layer decides because its
    products are most of a step's BLAS work.
    """
    from .. import threads
    from . import fast

    op_set = current()
    linear_is_fast = op_set.linear_forward is fast.linear_forward and op_set.linear_backward is fast.linear_backward
    return linear_is_fast and threads.get_threads() > 1
