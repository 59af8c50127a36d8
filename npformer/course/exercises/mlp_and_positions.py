"""Lessons 2 and 5: a network's backward pass chained from its layers', the input's embedding with learned
positions, and the checkable parts of those lessons' open questions.

    mlp_backward                lesson 2: an MLP of L linear layers with ReLU between them, walked back
    normal_cdf                  lesson 2, question 4: Phi(x) that keeps its digits in the far left tail
    embedding_positions_backward  lesson 5: x = sqrt(D) W[ids] + W_pos[start + t], both tables' gradients
    position_gradient_counts    lesson 5, question 3: how many real tokens' rows reach each row of W_pos
    first_local_minimum         lesson 5, question 2: where PE_0 . PE_k first stops falling

The references call npformer's ops (``ops.linear_backward``, ``ops.relu_backward``,
``ops.embedding_backward``, ``ops.positional_encoding``; Phi is ``ops_steps.normal_cdf``); nothing here stores an answer.
The hints say which property of an answer fails (which layers are right, which rows no position reads),
never the formula that fixes it.
"""

from __future__ import annotations

import math

import numpy

from ... import ops
from ...tokens import PAD_ID
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout
from .ops_steps import normal_cdf

# -- an MLP's backward pass, chained (lesson 2) ----------------------------------------------------------


def _mlp_layers(x, weights, biases):
    """The forward pass's caches, layer by layer: ReLU after every linear layer but the last."""
    caches, h = [], x
    for index, (W, b) in enumerate(zip(weights, biases)):
        h, linear_cache = ops.linear_forward(h, W, b)
        relu_cache = None
        if index < len(weights) - 1:
            h, relu_cache = ops.relu_forward(h)
        caches.append((linear_cache, relu_cache))
    return h, caches


def _mlp(x, weights, biases):
    """y (..., D_L) of the MLP: x (..., D_0) through L linear layers, W_l (D_l, D_l+1), ReLU between them."""
    return _mlp_layers(x, weights, biases)[0]


def _mlp_backward(x, weights, biases, dout):
    """(dx, [dW_1 ... dW_L], [db_1 ... db_L]) of the MLP, the lists in the forward pass's order."""
    _, caches = _mlp_layers(x, weights, biases)
    d, d_weights, d_biases = dout, [], []
    for linear_cache, relu_cache in reversed(caches):
        if relu_cache is not None:
            d = ops.relu_backward(d, relu_cache)
        d, dW, db = ops.linear_backward(d, linear_cache)
        d_weights.insert(0, dW)
        d_biases.insert(0, db)
    return d, d_weights, d_biases


def _joined(arrays, like, name):
    """One gradient per layer, each shaped like its parameter, joined into one vector."""
    arrays = list(arrays)
    if len(arrays) != len(like):
        raise TypeError(f"{name} holds {len(arrays)} arrays for {len(like)} layers")
    for index, (array, parameter) in enumerate(zip(arrays, like)):
        if numpy.shape(array) != numpy.shape(parameter):
            raise ValueError(f"{name}[{index}] has shape {numpy.shape(array)}, its parameter {numpy.shape(parameter)}")
    return numpy.concatenate([numpy.asarray(array, dtype=numpy.float64).reshape(-1) for array in arrays])


def _mlp_outputs(result, inputs):
    dx, d_weights, d_biases = result
    return (numpy.asarray(dx, dtype=numpy.float64), _joined(d_weights, inputs["weights"], "dweights"),
            _joined(d_biases, inputs["biases"], "dbiases"))


def _mlp_inputs(widths, leading):
    def make(r):
        return {"x": normal(r, *leading, widths[0]),
                "weights": [normal(r, d_in, d_out) / math.sqrt(d_in) for d_in, d_out in zip(widths, widths[1:])],
                "biases": [0.5 * normal(r, d_out) for d_out in widths[1:]]}
    return make


def _mlp_cases(rng):
    return backward_cases(rng, _mlp, [
        ("2 layers, widths 4 -> 6 -> 3, x (2, 3, 4)", _mlp_inputs((4, 6, 3), (2, 3))),
        ("3 layers, widths 3 -> 5 -> 4 -> 2, x (5, 3)", _mlp_inputs((3, 5, 4, 2), (5,))),
        ("1 layer: no ReLU at all, 4 -> 3, x (2, 4)", _mlp_inputs((4, 3), (2,))),
        ("2 layers, square widths 3 -> 3 -> 3, x (1, 1, 3)", _mlp_inputs((3, 3, 3), (1, 1))),
    ])


def _unseen_mlp(rng):
    depth = size(rng, 2, 4)
    widths = tuple(size(rng, 2, 6) for _ in range(depth + 1))
    leading = (size(rng, 1, 3), size(rng, 1, 4))
    label = f"{depth} layers, widths {' -> '.join(map(str, widths))}, x {leading + widths[:1]}"
    return [Case(label, with_dout(rng, _mlp_inputs(widths, leading)(rng), _mlp))]


def _mlp_layers_hint(got, expected, inputs, output):
    """Which layers' gradients are right: the error enters between the last right one and the first wrong."""
    if output == "dx" or got.shape != expected.shape:
        return ""
    shapes = [numpy.shape(p) for p in inputs["weights" if output == "dweights" else "biases"]]
    ends = numpy.cumsum([int(numpy.prod(shape)) for shape in shapes])
    right = [numpy.allclose(part, answer, rtol=1e-6, atol=1e-9 * max(1.0, float(numpy.abs(expected).max())))
             for part, answer in zip(numpy.split(got, ends[:-1]), numpy.split(expected, ends[:-1]))]
    if all(right):
        return ""
    wrong = [index + 1 for index, ok in enumerate(right) if not ok]
    last = len(shapes)
    if right[-1]:
        return (f"{output}: layer {last}'s (the last) is right, layer(s) {wrong} wrong (counted from the input): "
                f"the gradient goes wrong on its way down, after it leaves layer {max(wrong) + 1}")
    return (f"{output}: the last layer's (layer {last}) is wrong already, before the gradient has passed "
            f"through any ReLU of the network; wrong: layer(s) {wrong}")


# -- Phi in the far left tail (lesson 2, question 4) ----------------------------------------------------------

def _log_phi(result, inputs):
    """log Phi: an answer that rounds Phi(-10) to 0 is -inf here, however small its absolute error."""
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return (numpy.log(numpy.asarray(result, dtype=numpy.float64)),)


def _cdf_cases(rng):
    return [Case("x from -35 to 5", {"x": numpy.linspace(-35.0, 5.0, 17)}),
            Case("x = -10", {"x": numpy.array([-10.0])}),
            Case("(3, 4), around 0", {"x": normal(rng, 3, 4)})]


def _unseen_cdf(rng):
    low = -float(rng.uniform(15, 36))
    return [Case(f"x from {low:.1f} to 3", {"x": numpy.sort(rng.uniform(low, 3.0, size(rng, 5, 12)))})]


def _cdf_tail_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    zero = numpy.isneginf(got) & numpy.isfinite(expected)
    if zero.any():
        x = numpy.asarray(inputs["x"], dtype=numpy.float64).reshape(got.shape)
        exponent = expected[zero].max() / math.log(10)
        return (f"Phi is 0 at x = {x[zero].max():.3g} and below, where it is about 1e{exponent:.0f}: "
                "Phi is positive for every x, and float64 holds numbers down to about 1e-308")
    return ""


# -- the embedding with learned positions (lesson 5) --------------------------------------------------------

def _embedding_positions(ids, W, W_pos, start):
    """x (B, T, D): sqrt(D) W[ids[b, t]] + W_pos[start + t]."""
    batch, length = ids.shape
    tokens, _ = ops.embedding_forward(ids, W)
    positions = numpy.broadcast_to(numpy.arange(start, start + length), (batch, length))
    placed, _ = ops.embedding_forward(positions, W_pos)
    return math.sqrt(W.shape[1]) * tokens + placed


def _embedding_positions_backward(ids, W, W_pos, start, dout):
    """(dW (V, D), dW_pos (max_len, D)) of x = sqrt(D) W[ids] + W_pos[start + t]."""
    batch, length = ids.shape
    positions = numpy.broadcast_to(numpy.arange(start, start + length), (batch, length))
    dW = ops.embedding_backward(math.sqrt(W.shape[1]) * dout, ops.embedding_forward(ids, W)[1])
    dW_pos = ops.embedding_backward(dout, ops.embedding_forward(positions, W_pos)[1])
    return dW, dW_pos


def _positions_inputs(ids, vocab, max_len, d_model, start):
    return lambda r: {"ids": numpy.array(ids), "W": normal(r, vocab, d_model), "W_pos": normal(r, max_len, d_model),
                      "start": start}


def _positions_cases(rng):
    return backward_cases(rng, _embedding_positions, [
        ("B=2, T=4, repeated ids, start 0", _positions_inputs([[3, 1, 3, 4], [1, 1, 2, 0]], 6, 7, 4, 0)),
        ("B=3, T=2, start 3 (a later chunk)", _positions_inputs([[2, 5], [5, 5], [0, 1]], 6, 8, 3, 3)),
        ("B=1, T=1, start 5: one new token", _positions_inputs([[4]], 5, 6, 2, 5)),
    ])


def _unseen_positions(rng):
    batch, length, vocab, d_model = size(rng, 1, 4), size(rng, 1, 5), size(rng, 3, 7), size(rng, 2, 5)
    max_len = length + size(rng, 1, 4)
    start = size(rng, 0, max_len - length)
    ids = rng.integers(0, vocab, (batch, length))
    return [Case(f"B={batch}, T={length}, start {start}",
                 with_dout(rng, _positions_inputs(ids, vocab, max_len, d_model, start)(rng), _embedding_positions))]


def _positions_rows_hint(got, expected, inputs, output):
    """dW_pos nonzero in rows that no position of the case reads, or one sentence's rows where all read."""
    if output != "dW_pos" or got.shape != expected.shape:
        return ""
    length, start = inputs["ids"].shape[1], int(inputs["start"])
    unread = numpy.ones(got.shape[0], dtype=bool)
    unread[start:start + length] = False
    if numpy.abs(got[unread]).max(initial=0.0) > 0:
        rows = numpy.flatnonzero(unread & (numpy.abs(got).max(axis=1) > 0)).tolist()
        return (f"rows {rows} of dW_pos are nonzero, but this case's positions are {start} to {start + length - 1}: "
                "a row no position reads has no gradient")
    dout = numpy.asarray(inputs["dout"], dtype=numpy.float64)
    if dout.shape[0] > 1 and any(numpy.allclose(got[start:start + length], dout[b]) for b in range(dout.shape[0])):
        return (f"dW_pos's rows are one sentence's upstream rows, but all {dout.shape[0]} sentences of the batch "
                "read the same row of W_pos at each position")
    return ""


# -- questions 2 and 3 of lesson 5 ------------------------------------------------------------------------

def _position_gradient_counts(ids, max_len):
    """(max_len,) int: how many real tokens' upstream rows are added into each row of W_pos (a <pad>
    position's row is zero: nothing reads it). The counting done by the embedding's own backward pass."""
    batch, length = ids.shape
    positions = numpy.broadcast_to(numpy.arange(length), (batch, length))
    real = (numpy.asarray(ids) != PAD_ID).astype(numpy.float64)[..., None]
    counted = ops.embedding_backward(real, ops.embedding_forward(positions, numpy.zeros((max_len, 1)))[1])
    return numpy.rint(counted[:, 0]).astype(numpy.int64)


def _counts_cases(rng):
    return [Case("B=3, T=6, max_len 10, right-padded", {"ids": numpy.array([[5, 6, 7, 8, 9, 0], [4, 5, 6, 7, 0, 0],
                                                                            [9, 8, 0, 0, 0, 0]]), "max_len": 10}),
            Case("B=2, T=3, max_len 3, no padding", {"ids": numpy.array([[3, 4, 5], [6, 7, 8]]), "max_len": 3}),
            Case("B=2, T=4, max_len 6, left-padded", {"ids": numpy.array([[0, 0, 4, 5], [0, 7, 8, 9]]), "max_len": 6})]


def _unseen_counts(rng):
    batch, length = size(rng, 2, 5), size(rng, 2, 7)
    lengths = rng.integers(1, length + 1, batch)
    ids = numpy.where(numpy.arange(length) < lengths[:, None], rng.integers(1, 20, (batch, length)), PAD_ID)
    return [Case(f"B={batch}, T={length}, right-padded", {"ids": ids, "max_len": length + size(rng, 0, 4)})]


def _counts_padding_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    ids = numpy.asarray(inputs["ids"])
    with_padding = numpy.zeros(got.shape)
    with_padding[:ids.shape[1]] = ids.shape[0]
    if numpy.array_equal(got, with_padding) and not numpy.array_equal(got, expected):
        return ("your counts are the same for every position of the padded length: they count positions holding "
                "<pad>, whose upstream rows are zero")
    return ""


def _first_local_minimum(d_model, max_k):
    """The smallest k in 1 .. max_k - 1 with PE_0 . PE_k below PE_0 . PE_(k-1) and at most PE_0 . PE_(k+1)."""
    table = ops.positional_encoding(max_k + 1, d_model, dtype=numpy.float64)
    products = table @ table[0]
    falling = (products[1:-1] < products[:-2]) & (products[1:-1] <= products[2:])
    return int(numpy.flatnonzero(falling)[0] + 1)


def _minimum_cases(rng):
    return [Case(f"d_model = {d_model}, k up to {max_k}", {"d_model": d_model, "max_k": max_k})
            for d_model, max_k in ((16, 200), (64, 200), (256, 300), (2, 50))]


def _unseen_minimum(rng):
    d_model = 2 * size(rng, 2, 300)
    return [Case(f"d_model = {d_model}, k up to 400", {"d_model": d_model, "max_k": 400})]


def _minimum_hint(got, expected, inputs, output):
    k = int(got.reshape(-1)[0]) if got.size == 1 else -1
    table = ops.positional_encoding(int(inputs["max_k"]) + 1, int(inputs["d_model"]), dtype=numpy.float64)
    products = table @ table[0]
    if not 1 <= k < len(products) - 1:
        return f"k = {k} is outside 1 .. max_k - 1, where a point has a neighbour on each side"
    if products[k] >= products[k - 1]:
        return f"at your k = {k} the product is not below its value at k - 1: the curve is not falling into k"
    if products[k] > products[k + 1]:
        return f"at your k = {k} the product still falls to k + 1"
    return f"your k = {k} is a local minimum, but the product has one at a smaller k"


EXERCISES: list[Exercise] = [
    Exercise("mlp_backward", "mlp_backward(x, weights, biases, dout) -> (dx, dweights, dbiases): x (..., D_0), "
             "weights[l] (D_l, D_l+1), biases[l] (D_l+1,), y = L linear layers with ReLU between them (none after "
             "the last); dweights, dbiases lists in the forward pass's order", "02", _mlp_backward, _mlp_cases,
             ("dx", "dweights", "dbiases"), hints=(_mlp_layers_hint,), convert=_mlp_outputs, unseen=_unseen_mlp,
             points=2),
    Exercise("normal_cdf", "normal_cdf(x) -> Phi(x), shaped like x, with its digits kept for very negative x "
             "(graded as log Phi, down to x = -35)", "02", normal_cdf, _cdf_cases, ("log_phi",),
             hints=(_cdf_tail_hint,), convert=_log_phi, unseen=_unseen_cdf, question=4),
    Exercise("embedding_positions_backward", "embedding_positions_backward(ids, W, W_pos, start, dout) -> "
             "(dW, dW_pos): "
             "x[b, t] = sqrt(D) W[ids[b, t]] + W_pos[start + t]; ids (B, T), W (V, D), W_pos (max_len, D), dout "
             "(B, T, D)", "05", _embedding_positions_backward, _positions_cases, ("dW", "dW_pos"),
             _embedding_positions, ("W", "W_pos"), hints=(_positions_rows_hint,), unseen=_unseen_positions, points=2),
    Exercise("position_gradient_counts", "position_gradient_counts(ids, max_len) -> (max_len,) int: how many real "
             "tokens' upstream rows are added into each row of W_pos", "05", _position_gradient_counts, _counts_cases,
             ("counts",), exact=True, hints=(_counts_padding_hint,), unseen=_unseen_counts, question=3),
    Exercise("first_local_minimum", "first_local_minimum(d_model, max_k) -> int: the first k in 1 .. max_k - 1 "
             "where PE_0 . PE_k has a local minimum", "05", _first_local_minimum, _minimum_cases, ("k",),
             exact=True, hints=(_minimum_hint,), unseen=_unseen_minimum, question=2),
]

# What the grader shows once an exercise passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "mlp_backward": ("keep each layer's input h_l and pre-activation z_l from the forward pass; walk the layers last "
                     "first: d = relu_backward(z_l, d) (every layer but the last), then d, dW_l, db_l = "
                     "linear_backward(h_l, W_l, b_l, d); the lists back in the forward order"),
    "embedding_positions_backward": ("dW = embedding_backward(ids, W, sqrt(D) dout); dW_pos = embedding_backward("
                                     "start + t for every row, W_pos, dout): rows start .. start + T - 1 get the "
                                     "batch's sum, the others zero"),
}


# -- the mistakes students make -----------------------------------------------------------------------------

def _mlp_walk(x, weights, biases, dout, relu_last=False, input_of=lambda h, z: h, mask=True):
    """The MLP's walk back, with one of the mistakes switched on."""
    inputs, pre, h = [], [], x
    for index, (W, b) in enumerate(zip(weights, biases)):
        z = h @ W + b
        inputs.append(input_of(h, pre[-1] if pre else h))
        pre.append(z)
        h = numpy.maximum(z, 0) if index < len(weights) - 1 or relu_last else z
    d, d_weights, d_biases = dout, [], []
    for index in reversed(range(len(weights))):
        if mask and (index < len(weights) - 1 or relu_last):
            d = d * (pre[index] > 0)
        rows, d_rows = inputs[index].reshape(-1, weights[index].shape[0]), d.reshape(-1, weights[index].shape[1])
        d_weights.insert(0, rows.T @ d_rows)
        d_biases.insert(0, d_rows.sum(axis=0))
        d = d @ weights[index].T
    return d, d_weights, d_biases


def _mlp_relu_after_last(x, weights, biases, dout):
    return _mlp_walk(x, weights, biases, dout, relu_last=True)


def _mlp_pre_activation_inputs(x, weights, biases, dout):
    return _mlp_walk(x, weights, biases, dout, input_of=lambda h, z: z)  # dW from z, not from relu(z)


def _mlp_no_relu_backward(x, weights, biases, dout):
    return _mlp_walk(x, weights, biases, dout, mask=False)


def _cdf_with_erf(x):
    return 0.5 * (1.0 + numpy.vectorize(math.erf)(numpy.asarray(x, dtype=numpy.float64) / math.sqrt(2.0)))


def _positions_from_zero(ids, W, W_pos, start, dout):
    dW = numpy.zeros_like(W)
    numpy.add.at(dW, ids.reshape(-1), math.sqrt(W.shape[1]) * dout.reshape(-1, W.shape[1]))
    dW_pos = numpy.zeros_like(W_pos)
    dW_pos[:ids.shape[1]] = dout.sum(axis=0)  # the positions counted from 0, not from start
    return dW, dW_pos


def _positions_one_sentence(ids, W, W_pos, start, dout):
    dW, _ = _positions_from_zero(ids, W, W_pos, start, dout)
    dW_pos = numpy.zeros_like(W_pos)
    dW_pos[start:start + ids.shape[1]] = dout[0]  # the first sentence's rows only
    return dW, dW_pos


def _counts_with_padding(ids, max_len):
    counts = numpy.zeros(max_len, dtype=int)
    counts[:ids.shape[1]] = ids.shape[0]  # every sentence, <pad> or not
    return counts


def _minimum_one_late(d_model, max_k):
    table = numpy.array([[f(p / 10000 ** (2 * (i // 2) / d_model)) for i, f in
                          zip(range(d_model), [math.sin, math.cos] * d_model)] for p in range(max_k + 1)])
    products = table @ table[0]
    return next(k for k in range(1, max_k) if products[k] > products[k - 1])  # the first rise, one past


def _minimum_global(d_model, max_k):
    table = numpy.array([[f(p / 10000 ** (2 * (i // 2) / d_model)) for i, f in
                          zip(range(d_model), [math.sin, math.cos] * d_model)] for p in range(max_k + 1)])
    return int(numpy.argmin(table @ table[0]))


WRONG_SOLUTIONS = [
    WrongSolution("mlp_backward", "a ReLU after the last layer too", _mlp_relu_after_last, "before the gradient has"),
    WrongSolution("mlp_backward", "dW from each layer's pre-activation below, not its input",
                  _mlp_pre_activation_inputs, "is wrong already"),
    WrongSolution("mlp_backward", "the ReLUs' backward left out", _mlp_no_relu_backward, "goes wrong on its way down"),
    WrongSolution("normal_cdf", "(1 + erf(x / sqrt 2)) / 2: 1 minus almost 1", _cdf_with_erf, "positive for every x"),
    WrongSolution("embedding_positions_backward", "positions counted from 0, not from start", _positions_from_zero,
                  "no position reads"),
    WrongSolution("embedding_positions_backward", "dW_pos from the first sentence only", _positions_one_sentence,
                  "all"),
    WrongSolution("position_gradient_counts", "<pad> positions counted", _counts_with_padding, "holding <pad>"),
    WrongSolution("first_local_minimum", "the first k where the product rises", _minimum_one_late, "not below"),
    WrongSolution("first_local_minimum", "the smallest product of the range", _minimum_global, "smaller k"),
]
