"""The exercises of lessons 1 to 5: finite differences, the ops' backward passes (the linear layer,
ReLU and GELU, softmax, the loss with and without label smoothing, layer norm, the embedding) and
the positional encoding.

Every exercise has the natural signature of what the lesson derives: a forward
takes the op's inputs, a backward takes the op's inputs and then the upstream
gradient ``dout`` and returns one gradient per differentiable input. Nothing in a
signature is one of npformer's internal caches. The references call
``npformer.ops``, which are themselves checked against finite differences and
against PyTorch.

Each exercise is checked on several cases that exercise its edges: length 1, one
entry, padded rows, scores near +-1000, repeated token ids. A case draws its inputs
from a seeded generator, so a report can be reproduced.
"""

from __future__ import annotations

import numpy

from ... import ops
from ...gradcheck.engine import numerical_gradient
from ...tokens import PAD_ID
from .. import hints
from .base import Case, Exercise, backward_cases, normal, size, with_dout

# -- finite differences --------------------------------------------------------------------------

def _central_difference(f, x, h):
    """The reference: a fourth-order difference (far more accurate than the student's h^2 one)."""
    x = numpy.array(x, dtype=numpy.float64)
    return numerical_gradient(lambda: numpy.asarray(f(x)), x, numpy.asarray(1.0))


def _scalar_functions(rng):
    def cubic(x):
        return numpy.sum(x**3) / 3

    def log_sum_exp(x):
        return numpy.log(numpy.sum(numpy.exp(x)))

    def wavy(x):
        return numpy.sum(numpy.sin(x) * x)

    return [Case("f(x) = sum(x^3) / 3, x (3, 4)", {"f": cubic, "x": rng.standard_normal((3, 4)), "h": 1e-5}),
            Case("f(x) = log(sum(exp(x))), x (5,)", {"f": log_sum_exp, "x": rng.standard_normal(5), "h": 1e-5}),
            Case("f(x) = sum(sin(x) x), x (1,)", {"f": wavy, "x": numpy.array([0.3]), "h": 1e-5})]


# -- elementwise ops, the linear layer, softmax, layer norm ---------------------------------------

def _linear(x, W, b):
    return ops.linear_forward(x, W, b)[0]


def _linear_backward(x, W, b, dout):
    return ops.linear_backward(dout, ops.linear_forward(x, W, b)[1])


def _linear_cases(rng):
    def make(batch, length, d_in, d_out):
        return lambda r: {"x": normal(r, batch, length, d_in), "W": normal(r, d_in, d_out),
                          "b": normal(r, d_out)}
    return backward_cases(rng, _linear, [("B=2, T=3, 4 -> 5", make(2, 3, 4, 5)),
                                          ("B=1, T=1, 3 -> 3: one token, square W", make(1, 1, 3, 3)),
                                          ("B=3, T=2, 6 -> 1", make(3, 2, 6, 1))])


def _elementwise_cases(forward):
    def cases(rng):
        return backward_cases(rng, forward, [
            ("(2, 3, 4)", lambda r: {"x": 2 * normal(r, 2, 3, 4)}),
            ("(1, 1, 1): one entry", lambda r: {"x": numpy.array([[[0.7]]])}),
            ("(5, 7) with large |x|", lambda r: {"x": 6 * normal(r, 5, 7)}),
        ])
    return cases


def _relu(x):
    return ops.relu_forward(x)[0]


def _relu_backward(x, dout):
    return ops.relu_backward(dout, ops.relu_forward(x)[1])


def _gelu(x):
    return ops.gelu_forward(x)[0]


def _gelu_backward(x, dout):
    return ops.gelu_backward(dout, ops.gelu_forward(x)[1])


def _gelu_hint(got, expected, inputs, output):
    """Which entries a wrong GELU slope gets right: x near 0, large |x|, or none but closely."""
    x, dout = (numpy.asarray(inputs[name], dtype=numpy.float64) for name in ("x", "dout"))
    if got.shape != expected.shape or not numpy.all(numpy.isfinite(got)) or not numpy.any(dout):
        return ""
    cdf = 0.5 * ops.erfc(-x / numpy.sqrt(2.0))
    x_times_density = x * numpy.exp(-0.5 * x * x) / numpy.sqrt(2.0 * numpy.pi)
    scale = float(numpy.abs(expected).max())
    if hints.explains(dout * cdf, got):
        return ("right where x is near 0 and where |x| is large, wrong in between (most near |x| = 1): "
                "the error is a bump that vanishes at x = 0 and in both tails")
    if hints.explains(dout * x_times_density, got):
        return ("near x = 0 your slope is about 0, but gelu(x) is about x / 2 there, a slope of 1/2; and for "
                "large x gelu(x) is about x, a slope of 1, where yours tends to 0")
    error = float(numpy.abs(got - expected).max())
    if 1e-6 * scale < error < 2e-3 * scale:
        return (f"close to the answer at every entry, within {error:.1e}, but not equal: the slope of a function "
                "close to this GELU, not of it")
    return ""


def _softmax(x):
    return ops.softmax_forward(x)[0]


def _softmax_backward(x, dout):
    return ops.softmax_backward(dout, ops.softmax_forward(x)[1])


def _softmax_cases(rng):
    big = numpy.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])
    return [Case("(2, 3, 4)", {"x": 2 * normal(rng, 2, 3, 4)}), Case("(1, 1): one entry", {"x": numpy.array([[0.3]])}),
            Case("scores near +-1000: needs the max subtracted", {"x": big})]


def _layernorm(x, gamma, beta):
    return ops.layernorm_forward(x, gamma, beta)[0]


def _layernorm_backward(x, gamma, beta, dout):
    return ops.layernorm_backward(dout, ops.layernorm_forward(x, gamma, beta)[1])


def layernorm_cases(rng):
    def make(*shape):
        return lambda r: {"x": 3 + 2 * normal(r, *shape), "gamma": 1 + 0.5 * normal(r, shape[-1]),
                          "beta": normal(r, shape[-1])}
    return backward_cases(rng, _layernorm, [("B=2, T=3, D=5", make(2, 3, 5)),
                                             ("B=1, T=1, D=4: one token", make(1, 1, 4)),
                                             ("(6, 3): D=3", make(6, 3))])


# -- the loss ---------------------------------------------------------------------------------------

def _cross_entropy(logits, targets, label_smoothing=0.0):
    return ops.cross_entropy_forward(logits, targets, PAD_ID, label_smoothing)[0]


def _cross_entropy_backward(logits, targets, dloss):
    return ops.cross_entropy_backward(dloss, ops.cross_entropy_forward(logits, targets, PAD_ID)[1])


def _smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss):
    cache = ops.cross_entropy_forward(logits, targets, PAD_ID, label_smoothing)[1]
    return ops.cross_entropy_backward(dloss, cache)


def loss_cases(smoothing):
    def cases(rng):
        def make(batch, length, vocab, padded):
            def inputs(r):
                targets = r.integers(1, vocab, size=(batch, length))
                if padded:
                    targets[-1, 1:] = PAD_ID  # a padded tail
                    targets[0, :] = PAD_ID  # a row of padding only
                made = {"logits": 2 * normal(r, batch, length, vocab), "targets": targets}
                if smoothing:
                    made["label_smoothing"] = 0.1
                return made
            return inputs
        shapes = [("B=3, T=4, V=6, padded rows (<pad> = 0 is ignored)", make(3, 4, 6, True)),
                  ("B=1, T=1, V=5: one target", make(1, 1, 5, False)),
                  ("B=2, T=3, V=3, no padding", make(2, 3, 3, False))]
        return [Case(label, {**make_inputs(rng), "dloss": float(1 + rng.random())})
                for label, make_inputs in shapes]
    return cases


# -- embedding and positions -----------------------------------------------------------------------

def _embedding(ids, W):
    return ops.embedding_forward(ids, W)[0]


def _embedding_backward(ids, W, dout):
    return ops.embedding_backward(dout, ops.embedding_forward(ids, W)[1])


def embedding_cases(rng):
    return backward_cases(rng, _embedding, [
        ("ids with repeats, B=2, T=4, V=6", lambda r: {"ids": numpy.array([[1, 3, 3, 0], [3, 5, 1, 1]]),
                                                     "W": normal(r, 6, 3)}),
        ("B=1, T=1", lambda r: {"ids": numpy.array([[2]]), "W": normal(r, 4, 5)}),
        ("one id repeated 5 times", lambda r: {"ids": numpy.full((1, 5), 4), "W": normal(r, 5, 2)}),
    ])


def _repeated_id_hint(got, expected, inputs, output):
    """Wrong only in the rows of ids that occur more than once (a property, not the fix)."""
    ids = numpy.asarray(inputs["ids"]).reshape(-1)
    counts = numpy.bincount(ids, minlength=expected.shape[0])
    if got.shape != expected.shape:
        return ""
    wrong = numpy.any(numpy.abs(got - expected) > 1e-6 * numpy.abs(expected).max(), axis=-1)
    if wrong.any() and numpy.all(counts[wrong] > 1):
        rows = numpy.flatnonzero(wrong).tolist()
        return (f"wrong only in the rows of ids that occur more than once in ids (rows {rows}), "
                "right in every row whose id occurs once: compare with the one-hot form on a tiny example "
                "with a repeated id")
    return ""


def _positional_encoding(max_len, d_model):
    return ops.positional_encoding(max_len, d_model, dtype=numpy.float64)


# -- the cases a student never sees ------------------------------------------------------------------
# Each draws its shapes and values from the generator the grader seeds afresh for every check, within
# the ranges where the exercise is defined (a layer norm needs D >= 2; ReLU's inputs stay clear of the
# kink, where a finite difference straddles it).

def _unseen_scalar_functions(rng):
    shape = (size(rng, 1, 4), size(rng, 1, 4))
    scale = float(rng.uniform(0.5, 2.0))

    def quartic(x):
        return scale * numpy.sum(x**4) / 4 + numpy.sum(x[..., :1])

    return [Case(f"f(x) = {scale:.2f} sum(x^4) / 4 + sum(x[..., 0]), x {shape}",
                 {"f": quartic, "x": rng.standard_normal(shape), "h": 1e-5})]


def _unseen_linear(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5), size(rng, 1, 5))
    batch, length, d_in, d_out = shape
    inputs = {"x": normal(rng, batch, length, d_in), "W": normal(rng, d_in, d_out), "b": normal(rng, d_out)}
    return [Case(f"B={batch}, T={length}, {d_in} -> {d_out}", with_dout(rng, inputs, _linear))]


def _unseen_elementwise(forward, away_from_zero=False):
    def cases(rng):
        shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5))
        x = 3 * normal(rng, *shape)
        if away_from_zero:  # a kink at 0: keep every entry at least 0.05 from it
            x = numpy.sign(x) * (0.05 + numpy.abs(x))
        return [Case(f"shape {shape}", with_dout(rng, {"x": x}, forward))]
    return cases


def _unseen_softmax(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 6))
    return [Case(f"shape {shape}, scores around 500", {"x": 500 + 3 * normal(rng, *shape)})]


def unseen_loss(smoothing):
    def cases(rng):
        batch, length, vocab = size(rng, 2, 4), size(rng, 1, 5), size(rng, 2, 7)
        targets = rng.integers(1, vocab, size=(batch, length))
        targets[rng.random((batch, length)) < 0.3] = PAD_ID
        inputs = {"logits": 2 * normal(rng, batch, length, vocab), "targets": targets}
        if smoothing:
            inputs["label_smoothing"] = float(rng.uniform(0.05, 0.3))
        return [Case(f"B={batch}, T={length}, V={vocab}, random padding", {**inputs, "dloss": float(rng.uniform(0.5, 2))})]
    return cases


def unseen_layernorm(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 3, 7))  # D = 2 leaves x_hat = +-1: no test
    inputs = {"x": rng.uniform(-5, 5) + 2 * normal(rng, *shape), "gamma": 1 + 0.5 * normal(rng, shape[-1]),
              "beta": normal(rng, shape[-1])}
    return [Case(f"B={shape[0]}, T={shape[1]}, D={shape[2]}", with_dout(rng, inputs, _layernorm))]


def _unseen_positional(rng):
    max_len, d_model = size(rng, 1, 40), size(rng, 2, 12)
    return [Case(f"max_len={max_len}, d_model={d_model}", {"max_len": max_len, "d_model": d_model})]


def unseen_embedding(rng):
    vocab, batch, length = size(rng, 2, 6), size(rng, 1, 3), size(rng, 2, 6)
    inputs = {"ids": rng.integers(0, vocab, size=(batch, length)), "W": normal(rng, vocab, size(rng, 1, 4))}
    return [Case(f"V={vocab}, B={batch}, T={length}, ids drawn with repeats", with_dout(rng, inputs, _embedding))]


EXERCISES: list[Exercise] = [
    Exercise("central_difference", "central_difference(f, x, h) -> the gradient of the scalar f at x", "01",
             _central_difference, _scalar_functions, ("gradient",), unseen=_unseen_scalar_functions),
    Exercise("linear_backward", "linear_backward(x, W, b, dout) -> (dx, dW, db)", "02", _linear_backward,
             _linear_cases, ("dx", "dW", "db"), _linear, ("x", "W", "b"), hints=(hints.summed_over_rows_hint,),
             unseen=_unseen_linear, points=2),
    Exercise("relu_backward", "relu_backward(x, dout) -> dx", "02", _relu_backward,
             _elementwise_cases(_relu), ("dx",), _relu, ("x",), hints=(hints.relu_hint,),
             unseen=_unseen_elementwise(_relu, away_from_zero=True), points=2),
    Exercise("gelu_backward", "gelu_backward(x, dout) -> dx", "02", _gelu_backward,
             _elementwise_cases(_gelu), ("dx",), _gelu, ("x",), hints=(_gelu_hint,), unseen=_unseen_elementwise(_gelu),
             points=2),
    Exercise("softmax", "softmax(x) -> probabilities over the last axis", "03", _softmax,
             _softmax_cases, ("probabilities",), unseen=_unseen_softmax),
    Exercise("softmax_backward", "softmax_backward(x, dout) -> dx", "03", _softmax_backward,
             _elementwise_cases(_softmax), ("dx",), _softmax, ("x",), hints=(hints.softmax_diagonal_hint,),
             unseen=_unseen_elementwise(_softmax), points=2),
    Exercise("cross_entropy_backward", "cross_entropy_backward(logits, targets, dloss) -> dlogits", "03",
             _cross_entropy_backward, loss_cases(False), ("dlogits",), _cross_entropy, ("logits",),
             unseen=unseen_loss(False), points=2),
    Exercise("smoothed_cross_entropy_backward",
             "smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss) -> dlogits", "03",
             _smoothed_cross_entropy_backward, loss_cases(True), ("dlogits",), _cross_entropy, ("logits",),
             unseen=unseen_loss(True), points=2),
    Exercise("layernorm_backward", "layernorm_backward(x, gamma, beta, dout) -> (dx, dgamma, dbeta)", "04",
             _layernorm_backward, layernorm_cases, ("dx", "dgamma", "dbeta"), _layernorm, ("x", "gamma", "beta"),
             hints=(hints.layernorm_dx_hint, hints.summed_over_rows_hint), unseen=unseen_layernorm, points=2),
    Exercise("positional_encoding", "positional_encoding(max_len, d_model) -> (max_len, d_model) table", "05",
             _positional_encoding, lambda rng: [Case("max_len=10, d_model=8", {"max_len": 10, "d_model": 8}),
                                                Case("max_len=1, d_model=2", {"max_len": 1, "d_model": 2}),
                                                Case("max_len=50, d_model=6", {"max_len": 50, "d_model": 6}),
                                                Case("max_len=7, d_model=5: odd", {"max_len": 7, "d_model": 5})],
             ("table",), hints=(hints.positional_encoding_hint,), unseen=_unseen_positional),
    Exercise("embedding_backward", "embedding_backward(ids, W, dout) -> dW", "05", _embedding_backward,
             embedding_cases, ("dW",), _embedding, ("W",), hints=(_repeated_id_hint,), unseen=unseen_embedding,
             points=2),
]
