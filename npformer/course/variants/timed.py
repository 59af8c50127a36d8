"""The timed case: a large case whose time tells an analytic backward pass from a numerical one.

A backward pass derived by hand costs a few forward passes. One that takes finite differences of
the forward (lesson 1's ``central_difference``, applied to every input) costs at least two forward
passes per input entry. On a case of a few thousand entries, coupled along a long last axis so that
perturbing a whole column at once still takes hundreds of passes, the two are thousands of times
apart. The grader times the student's function on this case in the worker and the forward pass in
its own process (the best of ``REPEATS``), and fails a function slower than ``RATIO_LIMIT``
forward passes, with the reason. The case's answer is checked too, on ``SAMPLED`` entries per
tensor (finite differences of every entry would cost what the numerical student pays), to
``TOLERANCE``: the small cases hold the answer to 1e-6, this one only refuses a made-up answer.

The steps of layer norm's, attention's and multi-head attention's derivations are timed the same
way, against the whole forward pass (2,048 rows of 4 numbers for layer norm's per-row ``dL/dvar``
and ``dL/dmean``).
Not caught: differences that perturb many entries at once where their effects do not mix (every
entry of an elementwise op, a column of every row of the linear layer, every row's variance), which
cost a few forward passes, like the derived answer; those exercises rest on their variants alone.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect

import numpy

from ... import ops
from ...tokens import PAD_ID
from ..exercises import DERIVATIONS, EXERCISES
from ..exercises.base import Case, from_secret, normal

TIMED_LABEL = "timed"  # the case's label starts with this
RATIO_LIMIT = 1000     # at most this many forward passes' time
REPEATS = 5            # the forward is timed this many times, the fastest kept
SAMPLED = 16           # entries per tensor whose answer is checked, drawn afresh each time
TOLERANCE = 1e-4       # of those entries: enough to refuse a made-up answer. Finite differences of a
                       # loss over 4,096 logits carry round-off near 1e-12, 1e-5 of its smallest entries


def _linear(rng):
    return {"x": normal(rng, 2, 32, 64), "W": normal(rng, 64, 48), "b": normal(rng, 48)}


def _elementwise(rng):
    return {"x": 2 * normal(rng, 48, 64)}


def _elementwise_gate(rng):
    return {"gate": 2 * normal(rng, 48, 64)}


def _softmax(rng):
    return {"x": 2 * normal(rng, 4, 1024)}


def _loss(smoothing):
    def inputs(rng):
        targets = rng.integers(1, 512, size=(2, 4))
        targets[1, 2:] = PAD_ID
        made = {"logits": 2 * normal(rng, 2, 4, 512), "targets": targets}
        if smoothing:
            made["label_smoothing"] = 0.1
        return made
    return inputs


def _layernorm(rng):
    return {"x": 3 + 2 * normal(rng, 2, 2048), "gamma": 1 + 0.5 * normal(rng, 2048), "beta": normal(rng, 2048)}


def _attention(rng):
    return {"q": normal(rng, 1, 2, 32, 32), "k": normal(rng, 1, 2, 32, 32), "v": normal(rng, 1, 2, 32, 32),
            "mask": ops.causal_mask(32)}


def _embedding(rng):
    return {"ids": rng.integers(0, 512, size=(4, 64)), "W": normal(rng, 512, 16)}


def _dropout(rng):
    return {"x": normal(rng, 48, 64), "keep": rng.random((48, 64)) >= 0.3, "p": 0.3}


def _multi_head(rng):
    weights = {name: normal(rng, 32, 32) / 6 for name in ("Wq", "Wk", "Wv", "Wo")}
    return {"query": normal(rng, 1, 16, 32), "memory": normal(rng, 1, 16, 32), **weights, "n_heads": 4,
            "mask": ops.causal_mask(16)}


def _pooling(rng):
    mask = numpy.arange(64)[None, :] < numpy.array([64, 40])[:, None]
    return {"x": rng.permutation(2 * 64 * 32).reshape(2, 64, 32) / 100.0 + normal(rng, 2, 64, 32) * 1e-3,
            "mask": mask}


def _batchnorm(rng):
    keep = numpy.ones((4, 32), dtype=bool)
    keep[3, 20:] = False
    return {"x": 1 + 2 * normal(rng, 4, 32, 32), "gamma": 1 + 0.5 * normal(rng, 32), "beta": normal(rng, 32),
            "keep": keep}


def _rmsnorm(rng):
    return {"x": 1 + 2 * normal(rng, 2, 2048), "gamma": 1 + 0.5 * normal(rng, 2048)}


def _rope(rng):
    return {"x": normal(rng, 1, 2, 64, 32), "offset": 3}


def _swiglu(rng):
    return {"x": normal(rng, 2, 16, 32), "W_gate": normal(rng, 32, 48) / 5, "W_up": normal(rng, 32, 48) / 5}


def _repeat_kv(rng):
    return {"k": normal(rng, 1, 4, 64, 16), "n_rep": 3}


def _patches(rng):
    return {"images": normal(rng, 2, 3, 32, 32), "patch_size": 4}


def _batchnorm_features(rng):
    keep = numpy.ones((2, 4), dtype=bool)
    keep[1, 3] = False
    return {"x": 1 + 2 * normal(rng, 2, 4, 2048), "gamma": 1 + 0.5 * normal(rng, 2048), "beta": normal(rng, 2048),
            "keep": keep}


def _rmsnorm_rows(rng):
    return {"x": 1 + 2 * normal(rng, 2048, 4), "gamma": 1 + 0.5 * normal(rng, 4)}


def _pooling_wide(rng):
    """Many (sentence, feature) pairs: a step whose answer is one number per pair."""
    mask = numpy.arange(3)[None, :] < rng.integers(1, 4, size=48)[:, None]
    return {"x": normal(rng, 48, 3, 96), "mask": mask}


def _classifier_head(rng):
    mask = numpy.arange(8)[None, :] < rng.integers(1, 9, size=16)[:, None]
    return {"x": normal(rng, 16, 8, 128), "mask": mask, "W": normal(rng, 128, 5) / 8, "b": normal(rng, 5),
            "labels": rng.integers(0, 5, size=16)}


def _vit_embedding(rng):
    return {"images": normal(rng, 2, 3, 32, 32), "patch_size": 4, "W": normal(rng, 48, 32) / 7,
            "b": normal(rng, 32), "cls_token": normal(rng, 1, 1, 32), "pos": normal(rng, 65, 32)}


def _swiglu_sublayer(rng):
    return {**_swiglu(rng), "W_down": normal(rng, 48, 32) / 5}


def _linear_row(rng):
    return {"x": normal(rng, 128), "W": normal(rng, 128, 96), "b": normal(rng, 96)}


def _layernorm_rows(rng):
    return {"x": 3 + 2 * normal(rng, 2048, 4), "gamma": 1 + 0.5 * normal(rng, 4), "beta": normal(rng, 4)}


LARGE = {"layernorm_dvar": _layernorm_rows, "layernorm_dmean": _layernorm_rows, "attention_dv": _attention,
         "attention_d_scores": _attention,
         "embedding_backward": _embedding, "dropout_backward": _dropout,
         "multi_head_attention_backward": _multi_head, "multi_head_attention_d_heads": _multi_head,
         "multi_head_attention_d_inputs": _multi_head, "masked_mean_pool_backward": _pooling,
         "masked_max_pool_backward": _pooling, "classifier_head_backward": _classifier_head, "batchnorm_backward": _batchnorm,
         "batchnorm_dvar": _batchnorm_features, "batchnorm_dmean": _batchnorm_features, "rmsnorm_backward": _rmsnorm,
         "rope_backward": _rope, "swiglu_backward": _swiglu, "swiglu_ffn_backward": _swiglu_sublayer, "silu_backward": _elementwise_gate,
         "repeat_kv_backward": _repeat_kv, "patches_backward": _patches, "vit_embedding_backward": _vit_embedding,
         "linear_backward": _linear, "relu_backward": _elementwise, "gelu_backward": _elementwise,
         "gelu_gate_backward": _elementwise,
         "softmax_backward": _softmax, "cross_entropy_backward": _loss(False),
         "cross_entropy_d_log_probs": _loss(False), "smoothed_cross_entropy_d_log_probs": _loss(True),
         "smoothed_cross_entropy_backward": _loss(True), "layernorm_backward": _layernorm,
         "attention_backward": _attention, "linear_row_backward": _linear_row, "masked_mean_pool_d_sum": _pooling_wide,
         "rmsnorm_d_mean_square": _rmsnorm_rows, "swiglu_d_gate": _swiglu, "swiglu_d_up": _swiglu}

# The graded steps without a timed case, and why: their answer is not the gradient of a loss, so there
# is no upstream gradient to draw (each final they lead to is timed).
UNTIMED = {"softmax_jacobian": "the Jacobian of one short vector",
           "masked_max_pool_jacobian": "a 0/1 Jacobian of the max, not a gradient",
           "patches_destination": "an index map, not a gradient"}


def timed_case(exercise, seed: int) -> list[Case]:
    """The timed case of ``exercise`` (none for an exercise without one), drawn with ``seed``, its
    upstream gradient (``dout``, or ``dloss`` for a loss) shaped by the forward's output."""
    make = LARGE.get(exercise.name)
    forward = forward_of(exercise)
    if make is None or forward is None:
        return []
    rng = numpy.random.default_rng(seed)
    inputs = make(rng)
    upstream = numpy.asarray(forward(*inputs.values()))
    upstream_name = list(inspect.signature(exercise.reference).parameters)[-1]
    inputs[upstream_name] = float(rng.uniform(0.5, 2)) if upstream.ndim == 0 else rng.standard_normal(upstream.shape)
    sizes = ", ".join(f"{key} {value.shape}" for key, value in inputs.items()
                      if isinstance(value, numpy.ndarray) and key not in (upstream_name, "mask"))
    return [Case(f"{TIMED_LABEL}: {sizes}", inputs)]


def forward_of(exercise):
    """The forward pass ``exercise``'s time is compared with: a variant's, the backward pass's own, or,
    for a step of the lesson's derivation, the derivation's (a step's answer costs about one of it)."""
    if exercise.timed_forward or exercise.forward:
        return exercise.timed_forward or exercise.forward
    final = next((name for name, steps in DERIVATIONS.items() if exercise.name in steps), None)
    return EXERCISES[final].forward if final is not None else None


def is_timed(label: str) -> bool:
    return label.startswith(TIMED_LABEL + ":")


_SAMPLING: contextvars.ContextVar = contextvars.ContextVar("sampling", default=None)
_TIMED_CASE: contextvars.ContextVar = contextvars.ContextVar("timed_case", default=False)


@contextlib.contextmanager
def answering(label: str):
    """Within it, the grader computes the answers of the case ``label``: a timed case's are taken at
    ``SAMPLED`` entries a tensor (``in_timed_case``), every other case's at all of them."""
    token = _TIMED_CASE.set(is_timed(label))
    try:
        yield
    finally:
        _TIMED_CASE.reset(token)


def in_timed_case() -> bool:
    return _TIMED_CASE.get()


@contextlib.contextmanager
def sampled_with(secret: str | None, *keys):
    """Within it, the checked entries are drawn from ``secret`` and ``keys`` (the class's seed, the
    exercise, the variant): a class's grading draws the same entries each time it is run with the same
    secret, which no student knows. Without a secret, from the system's entropy."""
    if secret is None:
        yield
        return
    token = _SAMPLING.set(numpy.random.default_rng(from_secret(secret, "sampled", *keys)))
    try:
        yield
    finally:
        _SAMPLING.reset(token)


def sampled_entries(size: int) -> numpy.ndarray:
    """``SAMPLED`` of ``size`` flat indices, drawn from the system's entropy (or, in ``sampled_with``,
    from the instructor's secret): a student's function cannot know which entries of a large case are
    checked, so it must get them all right."""
    rng = _SAMPLING.get() or numpy.random.default_rng()
    return numpy.sort(rng.choice(size, min(SAMPLED, size), replace=False))


def forward_seconds(forward, inputs: dict) -> float:
    """The fastest of ``REPEATS`` runs of ``forward`` on ``inputs`` (its upstream gradient left out)."""
    import time
    forward_inputs = [value for key, value in inputs.items() if key not in ("dout", "dloss")]
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        forward(*forward_inputs)
        best = min(best, time.perf_counter() - started)
    return best


def too_slow(seconds: float, forward: float) -> str:
    """The reason a backward pass that took ``seconds`` fails, against a forward of ``forward`` seconds
    ("" when it is fast enough)."""
    if seconds <= RATIO_LIMIT * forward or seconds < 0.005:
        return ""
    return (f"took {seconds:.2g} s, {seconds / forward:.0f} times its forward pass ({forward:.2g} s): a backward "
            f"pass by finite differences costs two forward passes per input entry; derive it (at most "
            f"{RATIO_LIMIT} forward passes' time)")
