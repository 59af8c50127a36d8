"""Every op of ``npformer.ops``, with inputs that exercise it, and the checks over them.

``OP_CASES`` maps an op's name to its case builder ``builder(rng, **sizes) ->
(forward, backward, inputs)``: the op's forward (extra arguments such as a mask
or a fixed dropout generator bound in a closure), its reference backward, and
host inputs drawn from ``rng``. The pair is the active op set's (``ops.current()``
when the case is built): the default fast forms, the textbook ones inside
``ops.using("textbook")``, or a student's set. Sizes are keyword arguments so that tests can
draw them (hypothesis) and the command can use the defaults. ``check_op`` runs
``check_gradients`` on one case; ``check_all_ops`` on every one (the command
``npformer gradcheck`` prints that table and exits 1 on a failure).
"""

from __future__ import annotations

import functools
import inspect
from functools import partial
from typing import Any, Callable

import numpy

from .. import backend, ops
from ..tokens import PAD_ID
from .arguments import check_fits, check_int, check_known, check_number, check_type
from .engine import check_gradients
from .report import DEFAULT_TOL, GradcheckReport


def _away_from_zero(values: numpy.ndarray, margin: float = 0.05) -> numpy.ndarray:
    """Push values at least ``margin`` from 0, so no finite difference straddles ReLU's kink."""
    return values + numpy.where(values >= 0, margin, -margin)


def padded_ids(rng: numpy.random.Generator, batch: int, length: int, vocab: int,
               fully_padded_row: bool) -> numpy.ndarray:
    """Token ids in ``[1, vocab)`` followed by ``<pad>``; the last row all padding if asked."""
    lengths = rng.integers(1, length + 1, size=batch)
    ids = rng.integers(PAD_ID + 1, vocab, size=(batch, length))
    ids[numpy.arange(length)[None, :] >= lengths[:, None]] = PAD_ID
    if fully_padded_row:
        ids[-1] = PAD_ID
    return ids


def checked_case(builder: Callable) -> Callable:
    """A case builder that checks its arguments first: ``rng`` a ``numpy.random.Generator``, each
    size (an argument whose default is an int) an int >= 1 (a seed or an offset >= 0; an axis, any int: the op
    checks it), each switch (a bool default) a bool. Other values are checked by the op itself."""
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def checked(rng: Any, **sizes: Any) -> Any:
        caller = builder.__name__
        check_type(caller, "rng", rng, numpy.random.Generator, "a numpy.random.Generator")
        check_fits(caller, "sizes", builder, ["rng"], keywords=sizes)
        for key, value in sizes.items():
            default = signature.parameters[key].default
            if isinstance(default, bool):
                check_type(caller, key, value, bool, "a bool")
            elif key == "axis":
                check_type(caller, key, value, (int, numpy.integer), "an int")
            elif isinstance(default, int):
                check_int(caller, key, value, low=0 if key.endswith("seed") or key == "offset" else 1)
        return builder(rng, **sizes)

    return checked


@checked_case
def linear_case(rng, batch=2, length=3, d_in=4, d_out=5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    inputs = {
        "x": rng.standard_normal((batch, length, d_in)),
        "W": rng.standard_normal((d_in, d_out)),
        "b": rng.standard_normal(d_out),
    }
    # in a closure: a set's own forward may name its arguments otherwise (the values go in order)
    return (lambda x, W, b: op_set.linear_forward(x, W, b)), op_set.linear_backward, inputs


@checked_case
def relu_case(rng, batch=2, length=3, width=5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    inputs = {"x": _away_from_zero(rng.standard_normal((batch, length, width)))}
    return (lambda x: op_set.relu_forward(x)), op_set.relu_backward, inputs  # the names, as linear_case


@checked_case
def gelu_case(rng, batch=2, length=3, width=5, approximate="none"):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x):
        return op_set.gelu_forward(x, approximate=approximate)

    inputs = {"x": 2.0 * rng.standard_normal((batch, length, width))}
    return forward, op_set.gelu_backward, inputs


@checked_case
def softmax_case(rng, batch=2, length=3, width=5, axis=-1):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x):
        return op_set.softmax_forward(x, axis=axis)

    inputs = {"x": 2.0 * rng.standard_normal((batch, length, width))}
    return forward, op_set.softmax_backward, inputs


@checked_case
def layernorm_case(rng, batch=2, length=3, d_model=6, eps=1e-5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x, gamma, beta):
        return op_set.layernorm_forward(x, gamma, beta, eps=eps)

    x = 1.0 + 2.0 * rng.standard_normal((batch, length, d_model))
    x[:, -1] = 1.0 + 0.1 * rng.standard_normal((batch, d_model))  # small variance: eps matters there
    inputs = {
        "x": x,
        "gamma": 1.0 + 0.5 * rng.standard_normal(d_model),
        "beta": rng.standard_normal(d_model),
    }
    return forward, op_set.layernorm_backward, inputs


@checked_case
def embedding_case(rng, batch=2, length=4, vocab=7, d_model=5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    inputs = {
        "ids": rng.integers(0, vocab, size=(batch, length)),
        "W": rng.standard_normal((vocab, d_model)),
    }
    return (lambda ids, W: op_set.embedding_forward(ids, W)), op_set.embedding_backward, inputs  # as linear_case


@checked_case
def attention_case(rng, batch=2, heads=2, q_len=4, k_len=4, head_dim=3, causal=True,
                   fully_padded_row=True):
    """Self-attention shapes with key padding (and the look-ahead mask when ``q_len == k_len``)."""
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    key_ids = padded_ids(rng, batch, k_len, vocab=9, fully_padded_row=fully_padded_row)
    mask = op_set.padding_mask(backend.asarray(key_ids))
    if causal and q_len == k_len:
        mask = mask & op_set.causal_mask(q_len)

    def forward(q, k, v):
        return op_set.attention_forward(q, k, v, mask)

    inputs = {
        "q": rng.standard_normal((batch, heads, q_len, head_dim)),
        "k": rng.standard_normal((batch, heads, k_len, head_dim)),
        "v": rng.standard_normal((batch, heads, k_len, head_dim)),
    }
    return forward, op_set.attention_backward, inputs


@checked_case
def dropout_case(rng, batch=2, length=3, width=5, p=0.3, training=True, mask_seed=7):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x):
        # A fresh generator with the same seed per call: every call drops the same elements.
        return op_set.dropout_forward(x, p, backend.default_rng(mask_seed), training)

    inputs = {"x": rng.standard_normal((batch, length, width))}
    return forward, op_set.dropout_backward, inputs


@checked_case
def cross_entropy_case(rng, batch=2, length=3, vocab=6, label_smoothing=0.1,
                       fully_padded_row=True):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    targets = padded_ids(rng, batch, length, vocab, fully_padded_row=fully_padded_row)

    def forward(logits):
        return op_set.cross_entropy_forward(
            logits, backend.asarray(targets), ignore_index=PAD_ID, label_smoothing=label_smoothing
        )

    inputs = {"logits": 2.0 * rng.standard_normal((batch, length, vocab))}
    return forward, op_set.cross_entropy_backward, inputs


@checked_case
def pooling_case(rng, batch=3, length=5, width=4, kind="mean", fully_padded_row=True):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    check_known("pooling_case", "kind", kind, ("mean", "max"))
    mask = backend.asarray(padded_ids(rng, batch, length, 9, fully_padded_row) != PAD_ID)
    forward_op, backward_op = {
        "mean": (op_set.masked_mean_pool_forward, op_set.masked_mean_pool_backward),
        "max": (op_set.masked_max_pool_forward, op_set.masked_max_pool_backward),
    }[kind]

    def forward(x):
        return forward_op(x, mask)

    # distinct values, far apart: no two candidates for a maximum within a finite-difference step
    values = rng.permutation(batch * length * width).reshape(batch, length, width) * 0.1
    return forward, backward_op, {"x": values + 0.01 * rng.standard_normal(values.shape)}


@checked_case
def patches_case(rng, batch=2, channels=1, size=4, patch=2):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(images):
        return op_set.patches_forward(images, patch)

    return forward, op_set.patches_backward, {"images": rng.standard_normal((batch, channels, size, size))}



@checked_case
def rmsnorm_case(rng, batch=2, length=3, d_model=6, eps=1e-5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x, gamma):
        return op_set.rmsnorm_forward(x, gamma, eps=eps)

    x = 1.0 + 2.0 * rng.standard_normal((batch, length, d_model))
    inputs = {"x": x, "gamma": 1.0 + 0.5 * rng.standard_normal(d_model)}
    return forward, op_set.rmsnorm_backward, inputs


@checked_case
def rope_case(rng, batch=2, heads=2, length=4, head_dim=6, offset=3):
    """Queries or keys ``(B, H, T, Dh)`` rotated from position ``offset`` (a KV cache's next position)."""
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set

    def forward(x):
        return op_set.rope_forward(x, offset=offset)

    return forward, op_set.rope_backward, {"x": rng.standard_normal((batch, heads, length, head_dim))}


@checked_case
def swiglu_case(rng, batch=2, length=3, d_model=4, width=5):
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    inputs = {"x": rng.standard_normal((batch, length, d_model)),
              "W_gate": 1.5 * rng.standard_normal((d_model, width)), "W_up": rng.standard_normal((d_model, width))}
    return ((lambda x, W_gate, W_up: op_set.swiglu_forward(x, W_gate, W_up)), op_set.swiglu_backward,
            inputs)  # the names, as linear_case


@checked_case
def grouped_attention_case(rng, batch=2, heads=4, kv_heads=2, length=4, head_dim=3, fully_padded_row=True):
    """Causal self-attention of ``heads`` query heads over ``kv_heads`` shared key/value heads."""
    op_set = ops.current()  # the active set's pair, bound now: a case checks one set
    key_ids = padded_ids(rng, batch, length, vocab=9, fully_padded_row=fully_padded_row)
    mask = op_set.padding_mask(backend.asarray(key_ids)) & op_set.causal_mask(length)

    def forward(q, k, v):
        return op_set.grouped_query_attention_forward(q, k, v, mask)

    inputs = {
        "q": rng.standard_normal((batch, heads, length, head_dim)),
        "k": rng.standard_normal((batch, kv_heads, length, head_dim)),
        "v": rng.standard_normal((batch, kv_heads, length, head_dim)),
    }
    return forward, op_set.grouped_query_attention_backward, inputs


OP_CASES: dict[str, Callable] = {
    "linear": linear_case,
    "relu": relu_case,
    "gelu": gelu_case,
    "gelu_tanh": partial(gelu_case, approximate="tanh"),
    "softmax": softmax_case,
    "layernorm": layernorm_case,
    "embedding": embedding_case,
    "attention": attention_case,
    "cross_attention": partial(attention_case, q_len=3, k_len=5, causal=False),
    "dropout": dropout_case,
    "cross_entropy": cross_entropy_case,
    "masked_mean_pool": pooling_case,
    "masked_max_pool": partial(pooling_case, kind="max"),
    "patches": patches_case,
    "rmsnorm": rmsnorm_case,
    "rope": rope_case,
    "swiglu": swiglu_case,
    "grouped_query_attention": grouped_attention_case,
}


def op_case(name: str, seed: int, sizes: dict[str, Any], caller: str) -> tuple[Callable, Callable, dict[str, Any]]:
    """The case of ``OP_CASES[name]`` drawn with ``seed``, its inputs on the active backend.

    Checked first: ``name`` a key of ``OP_CASES`` (the message offers the close ones), ``seed``
    an int >= 0; the case builder checks ``sizes``."""
    check_known(caller, "name", name, OP_CASES)
    check_int(caller, "seed", seed)
    check_fits(caller, "sizes", OP_CASES[name], ["rng"], keywords=sizes)
    forward, backward, inputs = OP_CASES[name](numpy.random.default_rng(seed), **sizes)
    inputs = {k: backend.asarray(v) if isinstance(v, numpy.ndarray) else v for k, v in inputs.items()}
    return forward, backward, inputs


def check_op(name: str, seed: int = 0, tol: float = DEFAULT_TOL, **sizes: Any) -> GradcheckReport:
    """Check one op of ``OP_CASES`` by name; ``sizes`` override its default shapes.

    Checked before any work: ``name`` (close names offered), ``seed`` an int >= 0, ``tol`` a
    number > 0, ``sizes`` keywords of the op's case builder."""
    check_number("check_op", "tol", tol)
    forward, backward, inputs = op_case(name, seed, sizes, caller="check_op")
    return check_gradients(forward, backward, inputs, name=name, seed=seed, tol=tol)


def check_all_ops(seed: int = 0, names: list[str] | None = None,
                  tol: float = DEFAULT_TOL) -> GradcheckReport:
    """Check every op (or those named) and gather one report.

    Checked before any op runs: ``names`` a list of keys of ``OP_CASES`` or None, ``seed`` an
    int >= 0, ``tol`` a number > 0."""
    check_int("check_all_ops", "seed", seed)
    check_number("check_all_ops", "tol", tol)
    if names is not None:
        check_type("check_all_ops", "names", names, (list, tuple), "a list of op names or None")
        for name in names:
            check_known("check_all_ops", "names", name, OP_CASES)
    report = GradcheckReport(tol=tol)
    for name in names or list(OP_CASES):
        report.extend(check_op(name, seed=seed, tol=tol))
    return report
