"""The exercises of lessons 1 to 15: the ops' backward passes, attention, the Transformer's pieces,
Adam and its schedule, BLEU's precision, decoding's length penalty, attention's entropy.

Every exercise has the natural signature of what the lesson derives: a forward
takes the op's inputs, a backward takes the op's inputs and then the upstream
gradient ``dout`` and returns one gradient per differentiable input. Nothing in a
signature is one of npformer's internal caches. The references call
``npformer.ops`` (or ``optim``, ``metrics``, the decoder), which are themselves
checked against finite differences and against PyTorch.

Each exercise is checked on several cases that exercise its edges: length 1, one
head, padded rows, a fully masked attention row, repeated token ids. A case draws
its inputs from a seeded generator, so a report can be reproduced.
"""

from __future__ import annotations

import math

import numpy

from ... import metrics, models, nn, ops, optim
from ...gradcheck.engine import numerical_gradient
from ...tasks.translation.decoding import length_penalty_factor
from ...tokens import PAD_ID
from .. import hints
from .base import Case, Exercise, backward_cases, normal, pointwise, size, with_dout

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


def _layernorm_cases(rng):
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


def _loss_cases(smoothing):
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


# -- embedding, dropout, masks, positions ------------------------------------------------------------

def _embedding(ids, W):
    return ops.embedding_forward(ids, W)[0]


def _embedding_backward(ids, W, dout):
    return ops.embedding_backward(dout, ops.embedding_forward(ids, W)[1])


def _embedding_cases(rng):
    return backward_cases(rng, _embedding, [
        ("ids with repeats, B=2, T=4, V=6", lambda r: {"ids": numpy.array([[1, 3, 3, 0], [3, 5, 1, 1]]),
                                                     "W": normal(r, 6, 3)}),
        ("B=1, T=1", lambda r: {"ids": numpy.array([[2]]), "W": normal(r, 4, 5)}),
        ("one id repeated 5 times", lambda r: {"ids": numpy.full((1, 5), 4), "W": normal(r, 5, 2)}),
    ])


def _repeated_id_hint(got, expected, inputs, output):
    ids = numpy.asarray(inputs["ids"]).reshape(-1)
    counts = numpy.bincount(ids, minlength=expected.shape[0])
    if got.shape != expected.shape:
        return ""
    wrong = numpy.any(numpy.abs(got - expected) > 1e-6 * numpy.abs(expected).max(), axis=-1)
    if wrong.any() and numpy.all(counts[wrong] > 1):
        return ("wrong only in the rows of ids that occur more than once: a repeated id must add its "
                "gradients up (numpy.add.at), not overwrite them (dW[ids] = dout keeps only the last)")
    return ""


def _dropout(x, keep, p):
    return x * keep / (1.0 - p)


def _dropout_backward(x, keep, p, dout):
    return dout * keep / (1.0 - p)


def _dropout_cases(rng):
    def make(shape, p):
        return lambda r: {"x": normal(r, *shape), "keep": r.random(shape) >= p, "p": p}
    return backward_cases(rng, _dropout, [("(2, 3, 4), p = 0.25", make((2, 3, 4), 0.25)),
                                           ("(1, 1, 3), p = 0.5", make((1, 1, 3), 0.5)),
                                           ("(4, 5), p = 0.1", make((4, 5), 0.1))])


def _padding_mask(ids):
    return ops.padding_mask(ids, PAD_ID)


def _mask_cases(rng):
    return [Case("B=2, T=4, a padded tail", {"ids": numpy.array([[5, 6, 7, 0], [4, 0, 0, 0]])}),
            Case("B=1, T=1", {"ids": numpy.array([[3]])}),
            Case("B=3, T=3, no padding", {"ids": rng.integers(1, 9, size=(3, 3))})]


def _inverted_mask_hint(got, expected, inputs, output):
    if expected.all() or not expected.any():  # one value only: inverted or not, it cannot tell
        return ""
    if got.shape == expected.shape and numpy.array_equal(got.astype(bool), ~expected.astype(bool)):
        return "inverted: True must mean 'may attend' (a real token, a key at or before the query)"
    return ""


def _causal_mask(length):
    return ops.causal_mask(length)


def _decoder_mask(tgt_ids):
    return ops.padding_mask(tgt_ids, PAD_ID) & ops.causal_mask(tgt_ids.shape[1])


def _positional_encoding(max_len, d_model):
    return ops.positional_encoding(max_len, d_model, dtype=numpy.float64)


# -- attention ----------------------------------------------------------------------------------------

def _attention(q, k, v, mask):
    return ops.attention_forward(q, k, v, mask)[0]


def _attention_backward(q, k, v, mask, dout):
    return ops.attention_backward(dout, ops.attention_forward(q, k, v, mask)[1])


def _attention_inputs(r, batch, heads, t_query, t_key, head_dim, mask):
    return {"q": normal(r, batch, heads, t_query, head_dim), "k": normal(r, batch, heads, t_key, head_dim),
            "v": normal(r, batch, heads, t_key, head_dim), "mask": mask}


def _attention_shapes():
    padded = numpy.array([True, True, False])[None, None, None, :]
    fully_masked = numpy.ones((1, 1, 3, 4), dtype=bool)
    fully_masked[0, 0, 1] = False  # query 1 may attend to nothing
    return [
        ("B=2, H=2, Tq=3, Tk=3, causal mask", lambda r: _attention_inputs(r, 2, 2, 3, 3, 4, ops.causal_mask(3))),
        ("B=1, H=1, Tq=1, Tk=3, padded key (mask (1, 1, 1, 3))",
         lambda r: _attention_inputs(r, 1, 1, 1, 3, 2, padded)),
        ("B=1, H=1, Tq=3, Tk=4, query 1 fully masked", lambda r: _attention_inputs(r, 1, 1, 3, 4, 3, fully_masked)),
        ("B=2, H=3, Tq=2, Tk=5, no mask", lambda r: _attention_inputs(r, 2, 3, 2, 5, 2, None)),
    ]


def _attention_cases(rng):
    return [Case(label, make(rng)) for label, make in _attention_shapes()]


def _attention_backward_cases(rng):
    return backward_cases(rng, _attention, _attention_shapes())


def split_heads_reference(x, n_heads):
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)


def merge_heads_reference(x):
    batch, heads, length, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_dim)


def _split_cases(rng):
    return [Case("B=2, T=3, D=8, 2 heads", {"x": normal(rng, 2, 3, 8), "n_heads": 2}),
            Case("B=1, T=1, D=4, 1 head", {"x": normal(rng, 1, 1, 4), "n_heads": 1}),
            Case("B=1, T=2, D=6, 3 heads", {"x": normal(rng, 1, 2, 6), "n_heads": 3})]


def _transpose_forgotten_hint(got, expected, inputs, output):
    """split_heads or merge_heads written as a bare reshape, without moving the head axis."""
    x = inputs["x"]
    if got.shape == expected.shape and numpy.array_equal(got, x.reshape(expected.shape)):
        return ("a bare reshape, without the transpose: the values land in the right shape but heads and "
                "positions are mixed (reshape to (B, T, H, Dh), then swap the T and H axes)")
    return ""


def _merge_cases(rng):
    return [Case(case.label, {"x": split_heads_reference(case.inputs["x"], case.inputs["n_heads"])})
            for case in _split_cases(rng)]


def _multi_head_attention_pieces(query, memory, Wq, Wk, Wv, Wo, n_heads, mask):
    caches, heads = [], []
    for x, W in ((query, Wq), (memory, Wk), (memory, Wv)):
        projected, cache = ops.linear_forward(x, W)
        caches.append(cache)
        heads.append(split_heads_reference(projected, n_heads))
    attended, attention_cache = ops.attention_forward(*heads, mask)
    out, out_cache = ops.linear_forward(merge_heads_reference(attended), Wo)
    return out, (caches, attention_cache, out_cache)


def _multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask):
    return _multi_head_attention_pieces(query, memory, Wq, Wk, Wv, Wo, n_heads, mask)[0]


def _multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    _, (caches, attention_cache, out_cache) = _multi_head_attention_pieces(
        query, memory, Wq, Wk, Wv, Wo, n_heads, mask)
    d_merged, dWo, _ = ops.linear_backward(dout, out_cache)
    d_heads = ops.attention_backward(split_heads_reference(d_merged, n_heads), attention_cache)
    (dquery, dWq, _), (dkeys, dWk, _), (dvalues, dWv, _) = (
        ops.linear_backward(merge_heads_reference(d_head), cache) for d_head, cache in zip(d_heads, caches))
    return dquery, dkeys + dvalues, dWq, dWk, dWv, dWo


def _memory_paths_hint(got, expected, inputs, output):
    """dmemory from one of the memory's two paths (through the keys, through the values) only."""
    if output != "dmemory":
        return ""
    forward_inputs = {key: value for key, value in inputs.items() if key != "dout"}
    _, (caches, attention_cache, out_cache) = _multi_head_attention_pieces(*forward_inputs.values())
    d_merged = ops.linear_backward(inputs["dout"], out_cache)[0]
    _, dk, dv = ops.attention_backward(split_heads_reference(d_merged, inputs["n_heads"]), attention_cache)
    for d_head, cache, path in ((dk, caches[1], "keys'"), (dv, caches[2], "values'")):
        if hints._explains(ops.linear_backward(merge_heads_reference(d_head), cache)[0], got):
            return (f"only the {path} path: the memory feeds both the keys and the values, so dmemory is the "
                    "sum of the two paths' gradients")
    return ""


def _multi_head_attention_inputs(r, batch, t_query, t_memory, d_model, n_heads, mask):
    return {"query": normal(r, batch, t_query, d_model), "memory": normal(r, batch, t_memory, d_model),
            "Wq": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wk": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wv": normal(r, d_model, d_model) / math.sqrt(d_model),
            "Wo": normal(r, d_model, d_model) / math.sqrt(d_model), "n_heads": n_heads, "mask": mask}


def _multi_head_attention_shapes():
    padded_memory = numpy.array([[True, True, True], [True, False, False]])[:, None, None, :]
    return [
        ("B=2, Tq=2, Tm=3, D=4, 2 heads, padded memory",
         lambda r: _multi_head_attention_inputs(r, 2, 2, 3, 4, 2, padded_memory)),
        ("B=1, Tq=1, Tm=1, D=3, 1 head", lambda r: _multi_head_attention_inputs(r, 1, 1, 1, 3, 1, None)),
        ("B=1, Tq=3, Tm=3, D=6, 3 heads, causal",
         lambda r: _multi_head_attention_inputs(r, 1, 3, 3, 6, 3, ops.causal_mask(3))),
    ]


def _multi_head_attention_cases(rng):
    return [Case(label, make(rng)) for label, make in _multi_head_attention_shapes()]


def _multi_head_attention_backward_cases(rng):
    return backward_cases(rng, _multi_head_attention, _multi_head_attention_shapes())


def _transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    config = models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1, d_ff=d_ff,
                                      n_layers=n_layers, max_len=8)
    return models.Transformer(config, seed=0).num_params()


def _parameter_count_hint(got, expected, inputs, output):
    difference = int(round(float(got))) - int(expected)
    d_model = inputs["d_model"]
    if difference and difference % d_model == 0:
        return f"off by {difference:+,} = {difference // d_model:+} x d_model: a layer norm or a bias too many or missing?"
    return f"off by {difference:+,}" if difference else ""


def _transformer_parameter_cases(rng):
    def sizes(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
        return {"src_vocab": src_vocab, "tgt_vocab": tgt_vocab, "d_model": d_model, "d_ff": d_ff,
                "n_layers": n_layers}
    return [Case("vocabularies 100 and 120, D=16, F=32, N=2", sizes(100, 120, 16, 32, 2)),
            Case("D=4, F=4, N=1, the smallest vocabularies", sizes(4, 4, 4, 4, 1)),
            Case("vocabularies 5000 and 6000, D=128, F=512, N=3", sizes(5000, 6000, 128, 512, 3))]


def _entropy_cases(rng):
    uniform = numpy.full((1, 1, 2, 4), 0.25)
    one_hot = numpy.zeros((1, 1, 2, 3))
    one_hot[..., 1] = 1.0
    one_hot[0, 0, 1] = 0.0  # a fully masked query: all-zero weights, entropy 0
    return [Case("softmax rows, (2, 3, 4, 5)", {"weights": ops.softmax_forward(2 * normal(rng, 2, 3, 4, 5))[0]}),
            Case("uniform over 4 keys: log 4", {"weights": uniform}),
            Case("one-hot and a fully masked (all-zero) row", {"weights": one_hot})]


# -- the optimiser and its schedule --------------------------------------------------------------------

def _adam_step(param, grad, m, v, step, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    return param - lr * m_hat / (numpy.sqrt(v_hat) + eps), m, v


def _adam_cases(rng):
    def make(step, shape):
        return {"param": normal(rng, *shape), "grad": normal(rng, *shape), "m": 0.1 * normal(rng, *shape),
                "v": 0.1 * rng.random(shape), "step": step, "lr": 1e-2, "beta1": 0.9, "beta2": 0.98,
                "eps": 1e-9}
    first = make(1, (3, 4))
    first["m"], first["v"] = numpy.zeros((3, 4)), numpy.zeros((3, 4))
    tiny = make(3, (2, 3))
    tiny.update(grad=1e-7 * tiny["grad"], m=1e-7 * tiny["m"], v=1e-14 * tiny["v"], eps=1e-8)
    return [Case("step 1, m = v = 0, (3, 4)", first), Case("step 7, (5,)", make(7, (5,))),
            Case("step 1000, (2, 2)", make(1000, (2, 2))),
            Case("step 3, gradients near 1e-7: where eps matters", tiny)]


def _adam_step_hint(got, expected, inputs, output):
    if output != "param":
        return ""
    for shifted, words in ((inputs["step"] - 1, "step - 1"), (inputs["step"] + 1, "step + 1")):
        if shifted >= 1:
            wrong = _adam_step(*{**inputs, "step": shifted}.values())[0]
            if numpy.allclose(got, wrong, rtol=1e-9, atol=1e-12):
                return f"the bias correction uses {words}: use the step being taken (1 on the first step)"
    uncorrected = inputs["param"] - inputs["lr"] * (
        (inputs["beta1"] * inputs["m"] + (1 - inputs["beta1"]) * inputs["grad"])
        / (numpy.sqrt(inputs["beta2"] * inputs["v"] + (1 - inputs["beta2"]) * inputs["grad"] ** 2) + inputs["eps"]))
    if numpy.allclose(got, uncorrected, rtol=1e-9, atol=1e-12):
        return "no bias correction: divide m by 1 - beta1^step and v by 1 - beta2^step"
    return ""


def _noam_lr(step, d_model, warmup_steps):
    return optim.NoamSchedule(d_model, warmup_steps)(step)


def _noam_cases(rng):
    return [Case("d_model=512, warm-up 4000, steps 1 .. 20000",
                 {"step": [1, 2, 100, 3999, 4000, 4001, 10000, 20000], "d_model": 512, "warmup_steps": 4000}),
            Case("d_model=64, warm-up 1: no warm-up", {"step": [1, 2, 3, 50], "d_model": 64, "warmup_steps": 1})]


# -- decoding and its score ---------------------------------------------------------------------------

def _modified_precision(hypothesis, references, n):
    return metrics.modified_precision(hypothesis, references, n)


def _precision_cases(rng):
    the_cat = "the cat is on the mat".split()
    return [
        Case("the the the the, n=1 (clipping)", {"hypothesis": "the the the the".split(),
                                                 "references": [the_cat, "there is a cat on the mat".split()],
                                                 "n": 1}),
        Case("bigrams, two references", {"hypothesis": "the cat the cat on the mat".split(),
                                         "references": [the_cat, "there is a cat on the mat".split()], "n": 2}),
        Case("hypothesis shorter than n", {"hypothesis": ["le"], "references": [["le", "chat"]], "n": 2}),
    ]


def _unclipped_hint(got, expected, inputs, output):
    hypothesis, n = inputs["hypothesis"], inputs["n"]
    if output != "matches":
        return ""
    grams = [tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1)]
    in_any = {tuple(r[i:i + n]) for r in inputs["references"] for i in range(len(r) - n + 1)}
    if int(got) == sum(gram in in_any for gram in grams) != int(expected):
        return ("not clipped: an n-gram counts at most as often as in the reference that has most of it "
                "('the the the the' must not match 'the' four times)")
    return ""


def _length_penalty_cases(rng):
    return [Case("alpha = 0.6, lengths 1 .. 30", {"length": [1, 2, 5, 10, 30], "alpha": 0.6}),
            Case("alpha = 0: no penalty", {"length": [1, 7], "alpha": 0.0}),
            Case("alpha = 1", {"length": [1, 3, 12], "alpha": 1.0})]


# -- residual blocks and the decoder stack (lessons 9 and 10) -------------------------------------------
# The student composes backward passes given as functions. In the cases each is a linear map with
# its own random matrix (the backward of a linear sub-layer, of a norm frozen at a point, of a
# fixed dropout mask), so a mistake in the composition changes the numbers.

def _linear_map(rng, d_model):
    matrix = normal(rng, d_model, d_model) / math.sqrt(d_model)
    return lambda d: d @ matrix


def _dropout_map(rng, shape, p=0.25):
    keep = rng.random(shape) >= p
    return lambda d: d * keep / (1.0 - p)


def _residual_cases(rng):
    cases = []
    for label, shape, pre_norm in (("post-norm, (2, 3, 4)", (2, 3, 4), False), ("pre-norm, (2, 3, 4)", (2, 3, 4), True),
                                   ("post-norm, one position (1, 1, 5)", (1, 1, 5), False),
                                   ("pre-norm, (3, 2, 3)", (3, 2, 3), True)):
        cases.append(Case(label, {"dout": normal(rng, *shape), "sublayer_backward": _linear_map(rng, shape[-1]),
                                  "norm_backward": _linear_map(rng, shape[-1]),
                                  "dropout_backward": _dropout_map(rng, shape), "pre_norm": pre_norm}))
    return cases


def _memory_map(rng, shape, memory_length):
    """A cross-attention-like backward: ``d (B, Tq, D)`` -> ``(d_input, d_memory (B, Tk, D))``."""
    to_input, to_memory = _linear_map(rng, shape[-1]), normal(rng, shape[1], memory_length)
    return lambda d: (to_input(d), numpy.einsum("bqd,qk->bkd", d, to_memory))


def _residual_memory_cases(rng):
    cases = []
    for label, shape, memory_length, pre_norm in (("post-norm, (2, 3, 4), memory 5", (2, 3, 4), 5, False),
                                                  ("pre-norm, (2, 3, 4), memory 2", (2, 3, 4), 2, True),
                                                  ("post-norm, one position, memory 1", (1, 1, 3), 1, False)):
        cases.append(Case(label, {"dout": normal(rng, *shape), "sublayer_backward": _memory_map(rng, shape, memory_length),
                                  "norm_backward": _linear_map(rng, shape[-1]),
                                  "dropout_backward": _dropout_map(rng, shape), "pre_norm": pre_norm}))
    return cases


def _stack_cases(rng):
    def layers(count, shape, memory_length):
        return [_memory_map(rng, shape, memory_length) for _ in range(count)]
    return [Case("3 layers, (2, 3, 4), memory 5", {"dout": normal(rng, 2, 3, 4), "layer_backwards": layers(3, (2, 3, 4), 5)}),
            Case("1 layer, (1, 2, 3), memory 2", {"dout": normal(rng, 1, 2, 3), "layer_backwards": layers(1, (1, 2, 3), 2)}),
            Case("2 layers, (2, 1, 3), memory 4", {"dout": normal(rng, 2, 1, 3), "layer_backwards": layers(2, (2, 1, 3), 4)})]


def _identity_path_hint(got, expected, inputs, output):
    """The classic mistakes of a residual block: the identity path's gradient not added, or the
    norm placed as in the other kind of block."""
    if output != "dx":
        return ""
    def sublayer(d):  # the sub-layer's gradient to its input (cross-attention also returns d_memory)
        result = inputs["sublayer_backward"](d)
        return result[0] if isinstance(result, tuple) else result
    dout, norm, dropout, pre_norm = inputs["dout"], inputs["norm_backward"], inputs["dropout_backward"], inputs["pre_norm"]
    only_sublayer = norm(sublayer(dropout(dout))) if pre_norm else sublayer(dropout(norm(dout)))
    if numpy.allclose(got, only_sublayer, rtol=1e-9, atol=1e-12):
        return "only the sub-layer's path: add the identity path's gradient too (x feeds the sum directly)"
    other_kind = ops.residual.residual_backward(dout, sublayer, norm, dropout, not pre_norm)
    if numpy.allclose(got, other_kind, rtol=1e-9, atol=1e-12):
        return "the post-norm formula for a pre-norm block (or the reverse): where is the norm in the forward pass?"
    return ""


def _memory_summed_hint(got, expected, inputs, output):
    """d_memory from one layer only: every layer's cross-attention reads the memory."""
    if output != "d_memory" or len(inputs["layer_backwards"]) < 2:
        return ""
    d_layer, each_layer = inputs["dout"], []
    for layer_backward in reversed(inputs["layer_backwards"]):
        d_layer, d_memory = layer_backward(d_layer)
        each_layer.append(d_memory)
    if any(numpy.allclose(got, d_memory, rtol=1e-9, atol=1e-12) for d_memory in each_layer):
        return "only one layer's memory gradient: every layer reads the memory, so add all of them"
    return ""


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


def _unseen_loss(smoothing):
    def cases(rng):
        batch, length, vocab = size(rng, 2, 4), size(rng, 1, 5), size(rng, 2, 7)
        targets = rng.integers(1, vocab, size=(batch, length))
        targets[rng.random((batch, length)) < 0.3] = PAD_ID
        inputs = {"logits": 2 * normal(rng, batch, length, vocab), "targets": targets}
        if smoothing:
            inputs["label_smoothing"] = float(rng.uniform(0.05, 0.3))
        return [Case(f"B={batch}, T={length}, V={vocab}, random padding", {**inputs, "dloss": float(rng.uniform(0.5, 2))})]
    return cases


def _unseen_layernorm(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 3, 7))  # D = 2 leaves x_hat = +-1: no test
    inputs = {"x": rng.uniform(-5, 5) + 2 * normal(rng, *shape), "gamma": 1 + 0.5 * normal(rng, shape[-1]),
              "beta": normal(rng, shape[-1])}
    return [Case(f"B={shape[0]}, T={shape[1]}, D={shape[2]}", with_dout(rng, inputs, _layernorm))]


def _unseen_positional(rng):
    max_len, d_model = size(rng, 1, 40), size(rng, 2, 12)
    return [Case(f"max_len={max_len}, d_model={d_model}", {"max_len": max_len, "d_model": d_model})]


def _padded_ids(rng, batch, length):
    ids = rng.integers(1, 9, size=(batch, length))
    for row, real in enumerate(rng.integers(0, length + 1, size=batch)):
        ids[row, real:] = PAD_ID
    return ids


def _unseen_padding_mask(rng):
    batch, length = size(rng, 1, 4), size(rng, 1, 6)
    return [Case(f"B={batch}, T={length}, random padded tails", {"ids": _padded_ids(rng, batch, length)})]


def _unseen_decoder_mask(rng):
    batch, length = size(rng, 1, 4), size(rng, 1, 6)
    return [Case(f"B={batch}, T={length}, random padded tails", {"tgt_ids": _padded_ids(rng, batch, length)})]


def _unseen_causal_mask(rng):
    length = size(rng, 3, 12)
    return [Case(f"T={length}", {"length": length})]


def _unseen_embedding(rng):
    vocab, batch, length = size(rng, 2, 6), size(rng, 1, 3), size(rng, 2, 6)
    inputs = {"ids": rng.integers(0, vocab, size=(batch, length)), "W": normal(rng, vocab, size(rng, 1, 4))}
    return [Case(f"V={vocab}, B={batch}, T={length}, ids drawn with repeats", with_dout(rng, inputs, _embedding))]


def _unseen_dropout(rng):
    shape, p = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5)), float(rng.uniform(0.05, 0.6))
    inputs = {"x": normal(rng, *shape), "keep": rng.random(shape) >= p, "p": p}
    return [Case(f"shape {shape}, p = {p:.2f}", with_dout(rng, inputs, _dropout))]


def _unseen_attention_inputs(rng):
    batch, heads, t_query, t_key, head_dim = (size(rng, 1, 2), size(rng, 1, 3), size(rng, 1, 4),
                                              size(rng, 1, 5), size(rng, 1, 4))
    mask = rng.random((batch, 1, t_query, t_key)) < 0.75
    label = f"B={batch}, H={heads}, Tq={t_query}, Tk={t_key}, Dh={head_dim}, random mask"
    return label, _attention_inputs(rng, batch, heads, t_query, t_key, head_dim, mask)


def _unseen_attention(rng):
    label, inputs = _unseen_attention_inputs(rng)
    return [Case(label, inputs)]


def _unseen_attention_backward(rng):
    label, inputs = _unseen_attention_inputs(rng)
    return [Case(label, with_dout(rng, inputs, _attention))]


def _unseen_split(rng):
    batch, length, heads, head_dim = size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 4), size(rng, 1, 3)
    return [Case(f"B={batch}, T={length}, {heads} heads of {head_dim}",
                 {"x": normal(rng, batch, length, heads * head_dim), "n_heads": heads})]


def _unseen_merge(rng):
    return [Case(case.label, {"x": split_heads_reference(case.inputs["x"], case.inputs["n_heads"])}) for case in _unseen_split(rng)]


def _unseen_multi_head_attention_inputs(rng):
    batch, t_query, t_memory, heads, head_dim = (size(rng, 1, 2), size(rng, 1, 3), size(rng, 1, 4),
                                                 size(rng, 1, 3), size(rng, 1, 3))
    mask = rng.random((batch, 1, 1, t_memory)) < 0.8
    mask[..., 0] = True  # every query sees at least one key
    label = f"B={batch}, Tq={t_query}, Tm={t_memory}, D={heads * head_dim}, {heads} heads, random padding"
    return label, _multi_head_attention_inputs(rng, batch, t_query, t_memory, heads * head_dim, heads, mask)


def _unseen_multi_head_attention(rng):
    label, inputs = _unseen_multi_head_attention_inputs(rng)
    return [Case(label, inputs)]


def _unseen_multi_head_attention_backward(rng):
    label, inputs = _unseen_multi_head_attention_inputs(rng)
    return [Case(label, with_dout(rng, inputs, _multi_head_attention))]


def _unseen_transformer_parameters(rng):
    sizes = {"src_vocab": size(rng, 4, 3000), "tgt_vocab": size(rng, 4, 3000), "d_model": 4 * size(rng, 1, 32),
             "d_ff": 4 * size(rng, 1, 128), "n_layers": size(rng, 1, 6)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _unseen_adam(rng):
    shape, step = (size(rng, 1, 4), size(rng, 1, 4)), size(rng, 1, 3000)
    return [Case(f"step {step}, shape {shape}", {
        "param": normal(rng, *shape), "grad": normal(rng, *shape), "m": 0.1 * normal(rng, *shape),
        "v": 0.1 * rng.random(shape), "step": step, "lr": float(rng.uniform(1e-4, 1e-2)),
        "beta1": float(rng.uniform(0.8, 0.95)), "beta2": float(rng.uniform(0.95, 0.999)), "eps": 1e-8})]


def _unseen_noam(rng):
    warmup = size(rng, 2, 5000)
    steps = sorted({1, warmup - 1, warmup, warmup + 1, *(int(s) for s in rng.integers(1, 4 * warmup, size=4))})
    d_model = 8 * size(rng, 1, 128)
    return [Case(f"d_model={d_model}, warm-up {warmup}", {"step": steps, "d_model": d_model, "warmup_steps": warmup})]


def _unseen_precision(rng):
    words = ["le", "chat", "est", "sur", "tapis"]
    hypothesis = [words[i] for i in rng.integers(0, 3, size=size(rng, 1, 7))]
    references = [[words[i] for i in rng.integers(0, 5, size=size(rng, 2, 7))] for _ in range(size(rng, 1, 3))]
    n = size(rng, 1, 3)
    return [Case(f"{len(hypothesis)} words drawn from 3, {len(references)} reference(s), n={n}",
                 {"hypothesis": hypothesis, "references": references, "n": n})]


def _unseen_entropy(rng):
    shape = (size(rng, 1, 2), size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 6))
    weights = ops.softmax_forward(3 * normal(rng, *shape))[0]
    weights[..., 0, :] = 0.0  # a fully masked query
    weights[..., -1, 1:] = 0.0  # a one-hot row
    weights[..., -1, 0] = 1.0
    return [Case(f"shape {shape}, a fully masked and a one-hot row", {"weights": weights})]


def _unseen_length_penalty(rng):
    return [Case("random lengths and alpha", {"length": [int(n) for n in rng.integers(1, 60, size=5)],
                                               "alpha": float(rng.uniform(0, 2))})]


def _unseen_residual(rng):
    shape, pre_norm = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), bool(rng.integers(2))
    return [Case(f"{'pre' if pre_norm else 'post'}-norm, {shape}", {
        "dout": normal(rng, *shape), "sublayer_backward": _linear_map(rng, shape[-1]),
        "norm_backward": _linear_map(rng, shape[-1]), "dropout_backward": _dropout_map(rng, shape),
        "pre_norm": pre_norm})]


def _unseen_residual_memory(rng):
    shape, pre_norm, memory = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), bool(rng.integers(2)), size(rng, 1, 5)
    return [Case(f"{'pre' if pre_norm else 'post'}-norm, {shape}, memory {memory}", {
        "dout": normal(rng, *shape), "sublayer_backward": _memory_map(rng, shape, memory),
        "norm_backward": _linear_map(rng, shape[-1]), "dropout_backward": _dropout_map(rng, shape),
        "pre_norm": pre_norm})]


def _unseen_stack(rng):
    shape, count, memory = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), size(rng, 1, 4), size(rng, 1, 5)
    return [Case(f"{count} layers, {shape}, memory {memory}", {
        "dout": normal(rng, *shape), "layer_backwards": [_memory_map(rng, shape, memory) for _ in range(count)]})]


EXERCISES: list[Exercise] = [
    Exercise("central_difference", "central_difference(f, x, h) -> the gradient of the scalar f at x", "01",
             _central_difference, _scalar_functions, ("gradient",), unseen=_unseen_scalar_functions,
             library=(numerical_gradient,)),
    Exercise("linear_backward", "linear_backward(x, W, b, dout) -> (dx, dW, db)", "02", _linear_backward,
             _linear_cases, ("dx", "dW", "db"), _linear, ("x", "W", "b"), hints=(hints.summed_over_rows_hint,),
             unseen=_unseen_linear, library=(ops.linear.linear_backward,), points=2),
    Exercise("relu_backward", "relu_backward(x, dout) -> dx", "02", _relu_backward,
             _elementwise_cases(_relu), ("dx",), _relu, ("x",), unseen=_unseen_elementwise(_relu, away_from_zero=True),
             library=(ops.relu.relu_backward,), points=2),
    Exercise("gelu_backward", "gelu_backward(x, dout) -> dx", "02", _gelu_backward,
             _elementwise_cases(_gelu), ("dx",), _gelu, ("x",), unseen=_unseen_elementwise(_gelu),
             library=(ops.gelu.gelu_backward,), points=2),
    Exercise("softmax", "softmax(x) -> probabilities over the last axis", "03", _softmax,
             _softmax_cases, ("probabilities",), unseen=_unseen_softmax,
             library=(ops.softmax.softmax_forward, ops.softmax.log_softmax)),
    Exercise("softmax_backward", "softmax_backward(x, dout) -> dx", "03", _softmax_backward,
             _elementwise_cases(_softmax), ("dx",), _softmax, ("x",), hints=(hints.softmax_diagonal_hint,),
             unseen=_unseen_elementwise(_softmax), library=(ops.softmax.softmax_backward,), points=2),
    Exercise("cross_entropy_backward", "cross_entropy_backward(logits, targets, dloss) -> dlogits", "03",
             _cross_entropy_backward, _loss_cases(False), ("dlogits",), _cross_entropy, ("logits",),
             unseen=_unseen_loss(False), library=(ops.cross_entropy.cross_entropy_backward,), points=2),
    Exercise("smoothed_cross_entropy_backward",
             "smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss) -> dlogits", "03",
             _smoothed_cross_entropy_backward, _loss_cases(True), ("dlogits",), _cross_entropy, ("logits",),
             unseen=_unseen_loss(True), library=(ops.cross_entropy.cross_entropy_backward,), points=2),
    Exercise("layernorm_backward", "layernorm_backward(x, gamma, beta, dout) -> (dx, dgamma, dbeta)", "04",
             _layernorm_backward, _layernorm_cases, ("dx", "dgamma", "dbeta"), _layernorm, ("x", "gamma", "beta"),
             hints=(hints.layernorm_dx_hint, hints.summed_over_rows_hint), unseen=_unseen_layernorm,
             library=(ops.layernorm.layernorm_backward,), points=2),
    Exercise("positional_encoding", "positional_encoding(max_len, d_model) -> (max_len, d_model) table", "05",
             _positional_encoding, lambda rng: [Case("max_len=10, d_model=8", {"max_len": 10, "d_model": 8}),
                                                Case("max_len=1, d_model=2", {"max_len": 1, "d_model": 2}),
                                                Case("max_len=50, d_model=6", {"max_len": 50, "d_model": 6}),
                                                Case("max_len=7, d_model=5: odd", {"max_len": 7, "d_model": 5})],
             ("table",), unseen=_unseen_positional, library=(ops.positional.positional_encoding,)),
    Exercise("padding_mask", "padding_mask(ids) -> boolean (B, 1, 1, T), True where ids != <pad> (0)", "06",
             _padding_mask, _mask_cases, ("mask",), exact=True, hints=(_inverted_mask_hint,),
             unseen=_unseen_padding_mask, library=(ops.masks.padding_mask,)),
    Exercise("causal_mask", "causal_mask(length) -> boolean (T, T), True where key <= query", "06",
             _causal_mask, lambda rng: [Case(f"T={t}", {"length": t}) for t in (1, 2, 5)], ("mask",),
             exact=True, hints=(hints.causal_diagonal_hint, _inverted_mask_hint), unseen=_unseen_causal_mask,
             library=(ops.masks.causal_mask,)),
    Exercise("decoder_mask", "decoder_mask(tgt_ids) -> boolean (B, 1, T, T): padding and causal", "10",
             _decoder_mask, lambda rng: [Case(case.label, {"tgt_ids": case.inputs["ids"]}) for case in _mask_cases(rng)]
             + [Case("a row of padding only", {"tgt_ids": numpy.array([[4, 5, 2], [PAD_ID, PAD_ID, PAD_ID]])})],
             ("mask",), exact=True, hints=(_inverted_mask_hint, hints.causal_diagonal_hint),
             unseen=_unseen_decoder_mask, library=(ops.masks.padding_mask, ops.masks.causal_mask)),
    Exercise("embedding_backward", "embedding_backward(ids, W, dout) -> dW", "05", _embedding_backward,
             _embedding_cases, ("dW",), _embedding, ("W",), hints=(_repeated_id_hint,), unseen=_unseen_embedding,
             library=(ops.embedding.embedding_backward,), points=2),
    Exercise("dropout_backward", "dropout_backward(x, keep, p, dout) -> dx", "09", _dropout_backward,
             _dropout_cases, ("dx",), _dropout, ("x",), unseen=_unseen_dropout,
             library=(ops.dropout.dropout_backward,), points=2),
    Exercise("attention", "attention(q, k, v, mask) -> out", "07", _attention, _attention_cases, ("out",),
             unseen=_unseen_attention, library=(ops.attention.attention_forward,)),
    Exercise("attention_backward", "attention_backward(q, k, v, mask, dout) -> (dq, dk, dv)", "07",
             _attention_backward, _attention_backward_cases, ("dq", "dk", "dv"), _attention, ("q", "k", "v"),
             hints=(hints.attention_backward_hint,), unseen=_unseen_attention_backward,
             library=(ops.attention.attention_backward,), points=2),
    Exercise("split_heads", "split_heads(x, n_heads) -> (B, H, T, D / H)", "08", split_heads_reference, _split_cases,
             ("heads",), hints=(_transpose_forgotten_hint,), unseen=_unseen_split,
             library=(nn.MultiHeadAttention.split_heads,)),
    Exercise("merge_heads", "merge_heads(x) -> (B, T, H * Dh)", "08", merge_heads_reference, _merge_cases, ("merged",),
             hints=(_transpose_forgotten_hint,), unseen=_unseen_merge, library=(nn.MultiHeadAttention.merge_heads,)),
    Exercise("multi_head_attention",
             "multi_head_attention(query, memory, Wq, Wk, Wv, Wo, n_heads, mask) -> out", "08",
             _multi_head_attention, _multi_head_attention_cases, ("out",), unseen=_unseen_multi_head_attention,
             library=(nn.MultiHeadAttention.forward,)),
    Exercise("multi_head_attention_backward",
             "multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout) "
             "-> (dquery, dmemory, dWq, dWk, dWv, dWo)", "08", _multi_head_attention_backward,
             _multi_head_attention_backward_cases, ("dquery", "dmemory", "dWq", "dWk", "dWv", "dWo"),
             _multi_head_attention, ("query", "memory", "Wq", "Wk", "Wv", "Wo"), hints=(_memory_paths_hint,),
             unseen=_unseen_multi_head_attention_backward, library=(nn.MultiHeadAttention.backward,), points=2),
    Exercise("transformer_parameters",
             "transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers) -> int (post-norm, untied)",
             "11", _transformer_parameters, _transformer_parameter_cases, ("count",), exact=True,
             hints=(_parameter_count_hint,), unseen=_unseen_transformer_parameters,
             library=(models.Transformer.__init__, nn.Module.num_params)),
    Exercise("adam_step", "adam_step(param, grad, m, v, step, lr, beta1, beta2, eps) -> (param, m, v)", "12",
             _adam_step, _adam_cases, ("param", "m", "v"), hints=(_adam_step_hint, hints.adam_eps_hint),
             unseen=_unseen_adam, library=(ops.adam.adam_step, optim.Adam.step)),
    Exercise("noam_lr", "noam_lr(step, d_model, warmup_steps) -> learning rate", "12", _noam_lr, _noam_cases,
             ("lr",), call=pointwise("step"), unseen=_unseen_noam, library=(optim.NoamSchedule.__call__,)),
    Exercise("modified_precision", "modified_precision(hypothesis, references, n) -> (matches, total)", "13",
             _modified_precision, _precision_cases, ("matches", "total"), exact=True, hints=(_unclipped_hint,),
             unseen=_unseen_precision, library=(metrics.modified_precision, metrics.bleu)),
    Exercise("attention_entropy", "attention_entropy(weights) -> entropy of each row, in nats", "15",
             metrics.attention_entropy, _entropy_cases, ("entropy",), unseen=_unseen_entropy,
             library=(metrics.attention_entropy,)),
    Exercise("length_penalty", "length_penalty(length, alpha) -> ((5 + length) / 6) ** alpha", "14",
             length_penalty_factor, _length_penalty_cases, ("penalty",), call=pointwise("length"),
             unseen=_unseen_length_penalty, library=(length_penalty_factor,)),
    Exercise("residual_backward",
             "residual_backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm) -> dx", "09",
             ops.residual.residual_backward, _residual_cases, ("dx",), hints=(_identity_path_hint,),
             unseen=_unseen_residual, library=(ops.residual.residual_backward,), points=2),
    Exercise("residual_backward_with_memory",
             "residual_backward_with_memory(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm) "
             "-> (dx, d_memory)", "10", ops.residual.residual_backward_with_memory, _residual_memory_cases,
             ("dx", "d_memory"), hints=(_identity_path_hint,), unseen=_unseen_residual_memory,
             library=(ops.residual.residual_backward_with_memory,), points=2),
    Exercise("stack_backward_with_memory", "stack_backward_with_memory(dout, layer_backwards) -> (dx, d_memory)",
             "10", ops.residual.stack_backward_with_memory, _stack_cases, ("dx", "d_memory"),
             hints=(_memory_summed_hint,), unseen=_unseen_stack,
             library=(ops.residual.stack_backward_with_memory,), points=2),
]
