"""The exercises of lessons 9 to 15: the encoder and decoder layers' backward passes (dropout, the
residual block, the decoder stack and its memory), the Transformer's parameter count, Adam and its
schedule, BLEU's precision, decoding's length penalty, attention's entropy.

The signatures are natural, as in ``ops_backward``: a backward takes the op's inputs and then
the upstream gradient ``dout``, never one of npformer's caches. The references call
``npformer.ops`` (or ``optim``, ``metrics``, the decoder), themselves checked against finite
differences and against PyTorch. The cases exercise the edges: one position, a single layer, the
first step of Adam, no warm-up, a hypothesis shorter than n, a fully masked attention row; each
draws its inputs from a seeded generator, so a report can be reproduced.
"""

from __future__ import annotations

import math

import numpy

from ... import metrics, models, nn, ops, optim
from ...tasks.translation.decoding import length_penalty_factor
from .. import hints
from ..hints import explains
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout

# -- dropout ---------------------------------------------------------------------------------------

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


# -- residual blocks and the decoder stack (lessons 9 and 10) -------------------------------------------
# The student composes backward passes given as functions. In the cases each is a linear map with
# its own random matrix (the backward of a linear sub-layer, of a norm frozen at a point, of a
# fixed dropout mask), so a mistake in the composition changes the numbers.

def linear_map(rng, d_model, d_out=None):
    """A backward pass that is a linear map of ``d (..., d_model)``, to ``d_out`` wide (default: as wide)."""
    matrix = normal(rng, d_model, d_model if d_out is None else d_out) / math.sqrt(d_model)
    return lambda d: d @ matrix


def dropout_map(rng, shape, p=0.25):
    keep = rng.random(shape) >= p
    return lambda d: d * keep / (1.0 - p)


def _residual_cases(rng):
    cases = []
    for label, shape, pre_norm in (("post-norm, (2, 3, 4)", (2, 3, 4), False), ("pre-norm, (2, 3, 4)", (2, 3, 4), True),
                                   ("post-norm, one position (1, 1, 5)", (1, 1, 5), False),
                                   ("pre-norm, (3, 2, 3)", (3, 2, 3), True)):
        cases.append(Case(label, {"dout": normal(rng, *shape), "sublayer_backward": linear_map(rng, shape[-1]),
                                  "norm_backward": linear_map(rng, shape[-1]),
                                  "dropout_backward": dropout_map(rng, shape), "pre_norm": pre_norm}))
    return cases


def memory_map(rng, shape, memory_length):
    """A cross-attention-like backward: ``d (B, Tq, D)`` -> ``(d_input, d_memory (B, Tk, D))``."""
    to_input, to_memory = linear_map(rng, shape[-1]), normal(rng, shape[1], memory_length)
    return lambda d: (to_input(d), numpy.einsum("bqd,qk->bkd", d, to_memory))


def _residual_memory_cases(rng):
    cases = []
    for label, shape, memory_length, pre_norm in (("post-norm, (2, 3, 4), memory 5", (2, 3, 4), 5, False),
                                                  ("pre-norm, (2, 3, 4), memory 2", (2, 3, 4), 2, True),
                                                  ("post-norm, one position, memory 1", (1, 1, 3), 1, False)):
        cases.append(Case(label, {"dout": normal(rng, *shape), "sublayer_backward": memory_map(rng, shape, memory_length),
                                  "norm_backward": linear_map(rng, shape[-1]),
                                  "dropout_backward": dropout_map(rng, shape), "pre_norm": pre_norm}))
    return cases


def _stack_cases(rng):
    def layers(count, shape, memory_length):
        return [memory_map(rng, shape, memory_length) for _ in range(count)]
    return [Case("3 layers, (2, 3, 4), memory 5", {"dout": normal(rng, 2, 3, 4), "layer_backwards": layers(3, (2, 3, 4), 5)}),
            Case("1 layer, (1, 2, 3), memory 2", {"dout": normal(rng, 1, 2, 3), "layer_backwards": layers(1, (1, 2, 3), 2)}),
            Case("2 layers, (2, 1, 3), memory 4", {"dout": normal(rng, 2, 1, 3), "layer_backwards": layers(2, (2, 1, 3), 4)})]


def _residual_parts(inputs):
    """The block's three backward functions (the sub-layer's gradient to its input only: cross-attention's
    also returns d_memory), ``dout`` and ``pre_norm``."""
    def sublayer(d):
        result = inputs["sublayer_backward"](d)
        return result[0] if isinstance(result, tuple) else result
    return sublayer, inputs["norm_backward"], inputs["dropout_backward"], inputs["dout"], inputs["pre_norm"]


def _identity_path_hint(got, expected, inputs, output):
    """A property of dx that the classic mistakes of a residual block break: a path missing, the block
    taken for the other kind, the backward functions called in the forward pass's order, dropout left
    off the sub-layer's path."""
    if output != "dx":
        return ""
    sublayer, norm, dropout, dout, pre_norm = _residual_parts(inputs)
    kind, other = ("pre-norm", "post-norm") if pre_norm else ("post-norm", "pre-norm")
    only_sublayer = norm(sublayer(dropout(dout))) if pre_norm else sublayer(dropout(norm(dout)))
    if explains(only_sublayer, got):
        return ("dx is exactly what comes back through the sub-layer: the identity path, along which x reaches "
                "the output without passing through the sub-layer, sends nothing")
    if explains(nn.residual_backward(dout, sublayer, norm, dropout, not pre_norm), got):
        return (f"dx is right for a {other} block, and this case is a {kind} one (pre_norm={pre_norm}): in its "
                f"forward pass the norm sits elsewhere")
    in_forward_order = (dout + dropout(sublayer(norm(dout))) if pre_norm
                        else norm(dout + dropout(sublayer(dout))))
    if explains(in_forward_order, got):
        return ("the backward functions are called in the order the forward pass applies their operations, and a "
                "gradient goes back through them in the reverse order")
    without_dropout = nn.residual_backward(dout, sublayer, norm, lambda d: d, pre_norm)
    if not explains(expected, without_dropout) and explains(without_dropout, got):
        return ("dx does not depend on dropout_backward: the entries dropout set to 0 in the forward pass still "
                "send gradient back through the sub-layer")
    return ""


def _memory_hint(got, expected, inputs, output):
    """d_memory of a residual block whose sub-layer reads the memory."""
    if output != "d_memory":
        return ""
    sublayer, norm, dropout, dout, pre_norm = _residual_parts(inputs)
    if not numpy.any(got) and numpy.any(expected):
        return "d_memory is zero, but the sub-layer reads the memory: the loss changes when the memory does"
    skipped_norm = inputs["sublayer_backward"](dropout(dout))[1]
    if not pre_norm and explains(skipped_norm, got):
        return ("d_memory is what the sub-layer sends back from dout itself: in this post-norm block the sub-layer's "
                "output reaches y through the sum and the norm")
    return ""


def _stack_hint(got, expected, inputs, output):
    """The stack's classic mistakes: the memory's gradient from one layer only, the layers undone in the
    forward pass's order."""
    layers = inputs["layer_backwards"]
    if len(layers) < 2:
        return ""
    d_layer, each_layer = inputs["dout"], []
    for layer_backward in reversed(layers):
        d_layer, d_memory = layer_backward(d_layer)
        each_layer.append(d_memory)
    if output == "d_memory" and any(explains(d_memory, got) for d_memory in each_layer):
        return (f"d_memory is what one layer sends back to the memory, and all {len(layers)} layers of this case "
                f"read it")
    d_forward_order = inputs["dout"]
    for layer_backward in layers:
        d_forward_order = layer_backward(d_forward_order)[0]
    if output == "dx" and explains(d_forward_order, got):
        return ("dx is what the layers give when their backward passes are called first layer first: the first "
                "layer's backward then receives the gradient of the last layer's output")
    return ""


# -- the Transformer's parameters ------------------------------------------------------------------

def _transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    config = models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1, d_ff=d_ff,
                                      n_layers=n_layers, max_len=8)
    return models.Transformer(config, seed=0).num_params()


def parameter_count_hint(got, expected, inputs, output):
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
    """What a wrong bias correction does to the update (never the fix)."""
    if output != "param":
        return ""
    for shifted, words in ((inputs["step"] - 1, "behind"), (inputs["step"] + 1, "ahead")):
        if shifted >= 1:
            wrong = _adam_step(*{**inputs, "step": shifted}.values())[0]
            if numpy.allclose(got, wrong, rtol=1e-9, atol=1e-12):
                return (f"your update at step {inputs['step']} is the one the correction of step {shifted} gives: "
                        f"the correction is one step {words} (it matters less as the steps grow)")
    uncorrected = inputs["param"] - inputs["lr"] * (
        (inputs["beta1"] * inputs["m"] + (1 - inputs["beta1"]) * inputs["grad"])
        / (numpy.sqrt(inputs["beta2"] * inputs["v"] + (1 - inputs["beta2"]) * inputs["grad"] ** 2) + inputs["eps"]))
    if numpy.allclose(got, uncorrected, rtol=1e-9, atol=1e-12):
        return ("off on the first steps by a factor that tends to 1 as the step grows (right where the step is "
                "large, as at step 1000): the moments start at 0")
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


# -- attention's entropy ---------------------------------------------------------------------------

def _entropy_cases(rng):
    uniform = numpy.full((1, 1, 2, 4), 0.25)
    one_hot = numpy.zeros((1, 1, 2, 3))
    one_hot[..., 1] = 1.0
    one_hot[0, 0, 1] = 0.0  # a fully masked query: all-zero weights, entropy 0
    return [Case("softmax rows, (2, 3, 4, 5)", {"weights": ops.softmax_forward(2 * normal(rng, 2, 3, 4, 5))[0]}),
            Case("uniform over 4 keys: log 4", {"weights": uniform}),
            Case("one-hot and a fully masked (all-zero) row", {"weights": one_hot})]


# -- the cases a student never sees ----------------------------------------------------------------
# Each draws its shapes and values from the generator the grader seeds afresh for every check.

def _unseen_dropout(rng):
    shape, p = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5)), float(rng.uniform(0.05, 0.6))
    inputs = {"x": normal(rng, *shape), "keep": rng.random(shape) >= p, "p": p}
    return [Case(f"shape {shape}, p = {p:.2f}", with_dout(rng, inputs, _dropout))]


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
        "dout": normal(rng, *shape), "sublayer_backward": linear_map(rng, shape[-1]),
        "norm_backward": linear_map(rng, shape[-1]), "dropout_backward": dropout_map(rng, shape),
        "pre_norm": pre_norm})]


def _unseen_residual_memory(rng):
    shape, pre_norm, memory = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), bool(rng.integers(2)), size(rng, 1, 5)
    return [Case(f"{'pre' if pre_norm else 'post'}-norm, {shape}, memory {memory}", {
        "dout": normal(rng, *shape), "sublayer_backward": memory_map(rng, shape, memory),
        "norm_backward": linear_map(rng, shape[-1]), "dropout_backward": dropout_map(rng, shape),
        "pre_norm": pre_norm})]


def _unseen_stack(rng):
    shape, count, memory = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), size(rng, 1, 4), size(rng, 1, 5)
    return [Case(f"{count} layers, {shape}, memory {memory}", {
        "dout": normal(rng, *shape), "layer_backwards": [memory_map(rng, shape, memory) for _ in range(count)]})]


EXERCISES: list[Exercise] = [
    Exercise("dropout_backward", "dropout_backward(x, keep, p, dout) -> dx", "09", _dropout_backward,
             _dropout_cases, ("dx",), _dropout, ("x",), unseen=_unseen_dropout, points=2),
    Exercise("transformer_parameters",
             "transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers) -> int (post-norm, untied)",
             "11", _transformer_parameters, _transformer_parameter_cases, ("count",), exact=True,
             hints=(parameter_count_hint,), unseen=_unseen_transformer_parameters),
    Exercise("adam_step", "adam_step(param, grad, m, v, step, lr, beta1, beta2, eps) -> (param, m, v)", "12",
             _adam_step, _adam_cases, ("param", "m", "v"), hints=(_adam_step_hint, hints.adam_eps_hint),
             unseen=_unseen_adam),
    Exercise("noam_lr", "noam_lr(step, d_model, warmup_steps) -> learning rate", "12", _noam_lr, _noam_cases,
             ("lr",), pointwise="step", unseen=_unseen_noam),
    Exercise("modified_precision", "modified_precision(hypothesis, references, n) -> (matches, total)", "13",
             _modified_precision, _precision_cases, ("matches", "total"), exact=True, hints=(_unclipped_hint,),
             unseen=_unseen_precision),
    Exercise("attention_entropy", "attention_entropy(weights) -> entropy of each row, in nats", "15",
             metrics.attention_entropy, _entropy_cases, ("entropy",), unseen=_unseen_entropy),
    Exercise("length_penalty", "length_penalty(length, alpha) -> ((5 + length) / 6) ** alpha", "14",
             length_penalty_factor, _length_penalty_cases, ("penalty",), pointwise="length",
             unseen=_unseen_length_penalty),
    Exercise("residual_backward",
             "residual_backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm) -> dx", "09",
             nn.residual_backward, _residual_cases, ("dx",), hints=(_identity_path_hint,),
             unseen=_unseen_residual, points=2),
    Exercise("residual_backward_with_memory",
             "residual_backward_with_memory(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm) "
             "-> (dx, d_memory)", "10", nn.residual_backward_with_memory, _residual_memory_cases,
             ("dx", "d_memory"), hints=(_identity_path_hint, _memory_hint), unseen=_unseen_residual_memory,
             points=2),
    Exercise("stack_backward_with_memory", "stack_backward_with_memory(dout, layer_backwards) -> (dx, d_memory)",
             "10", nn.stack_backward_with_memory, _stack_cases, ("dx", "d_memory"),
             hints=(_stack_hint,), unseen=_unseen_stack, points=2),
]


# What the grader shows once each backward pass passes: npformer's form of it.
TEXTBOOK: dict[str, str] = {
    "dropout_backward": "dx = dout * keep / (1 - p): the forward's mask and scale, applied to dout",
    "residual_backward": ("post-norm: ds = norm_backward(dout), dx = ds + sublayer_backward(dropout_backward(ds)); "
                          "pre-norm: dx = dout + norm_backward(sublayer_backward(dropout_backward(dout)))"),
    "residual_backward_with_memory": ("d_input, d_memory = sublayer_backward(dropout_backward(ds)), ds = "
                                      "norm_backward(dout) (post-norm) or dout (pre-norm); dx = ds + d_input "
                                      "(post-norm) or dout + norm_backward(d_input) (pre-norm)"),
    "stack_backward_with_memory": ("d, d_memory = dout, 0; for each layer, last first: d, d_layer = layer_backward(d), "
                                   "d_memory += d_layer; return d, d_memory"),
}

# -- realistic wrong solutions (beside course.wrong_solutions' catalogue) --------------------------------

def _residual_in_forward_order(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        return dout + dropout_backward(sublayer_backward(norm_backward(dout)))
    return norm_backward(dout + dropout_backward(sublayer_backward(dout)))


def _residual_without_dropout(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        return dout + norm_backward(sublayer_backward(dout))
    d_sum = norm_backward(dout)
    return d_sum + sublayer_backward(d_sum)


def _memory_from_dout(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        d_input, d_memory = sublayer_backward(dropout_backward(dout))
        return dout + norm_backward(d_input), d_memory
    d_sum = norm_backward(dout)
    d_input = sublayer_backward(dropout_backward(d_sum))[0]
    return d_sum + d_input, sublayer_backward(dropout_backward(dout))[1]


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("residual_backward", "the backward functions called in the forward pass's order",
                  _residual_in_forward_order, "reverse order"),
    WrongSolution("residual_backward", "dropout left off the sub-layer's path", _residual_without_dropout,
                  "does not depend on dropout_backward"),
    WrongSolution("residual_backward_with_memory", "post-norm: d_memory from dout, not from the sum's gradient",
                  _memory_from_dout, "through the sum and the norm"),
]
