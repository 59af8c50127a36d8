"""The grader's own test: realistic wrong solutions to every exercise, each of which it must fail.

Each ``WrongSolution`` is a mistake students make (a sign, a missing sum over a broadcast axis,
a transpose, a forgotten scale, ``eps`` in the wrong place, a mask forgotten, the diagonal-only
softmax Jacobian, an off-by-one in a step count, a lazy pass-through to npformer's own answer),
written as a student would write it. ``hint``, when set, is words the grader's report must
contain: the classic mistakes must be named, not only caught.

    python -m npformer.course.wrong_solutions      # the table, and the catch rate

``benchmarks/RESULTS.md`` records the rate; ``tests/test_wrong_solutions.py`` requires 100%.
This module holds near-solutions, so it is for instructors and contributors: the student
edition of the lessons never shows them.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import ops
from .exercises import MODULES, WrongSolution
from .exercises.attention_pieces import merge_heads_reference as merge_heads
from .exercises.attention_pieces import split_heads_reference as split_heads
from .grader import ExerciseReport, check
from .hints import layernorm_x_hat, softmax

PAD = 0


# -- pieces the wrong solutions share (each right on its own) ----------------------------------------

def _layernorm_parts(x, gamma, dout, eps=1e-5):
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    return rstd, layernorm_x_hat(x, eps), dout * gamma


def _rows(a):
    return a.reshape(-1, a.shape[-1])


def _weights(q, k, mask, scale=True):
    scores = q @ k.swapaxes(-1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(-1, keepdims=True)
    return weights / np.where(total > 0, total, 1)


def _attention_grads(q, k, v, mask, dout, diagonal=False, transpose_dk=True, scale_grads=True):
    weights = _weights(q, k, mask)
    d_weights = dout @ v.swapaxes(-1, -2)
    if diagonal:
        d_scores = weights * (1 - weights) * d_weights
    else:
        d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
    scale = 1 / np.sqrt(q.shape[-1]) if scale_grads else 1.0
    dk = (d_scores.swapaxes(-1, -2) if transpose_dk else d_scores) @ q * scale
    return d_scores @ k * scale, dk, weights.swapaxes(-1, -2) @ dout


def _loss_grad(logits, targets, dloss, smoothing=0.0, per_token=True, zero_padding=True, classes=None):
    p = softmax(logits)
    vocab = logits.shape[-1]
    target = np.eye(vocab)[targets] * (1 - smoothing) + smoothing / (classes or vocab)
    real = (targets != PAD)[..., None]
    grad = (p - target) * (real if zero_padding else 1)
    return grad * dloss / (max(real.sum(), 1) if per_token else targets.size)


def _adam(param, grad, m, v, step, lr, beta1, beta2, eps, correction_step=None, eps_inside=False):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    t = step if correction_step is None else correction_step
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    denominator = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
    return param - lr * m_hat / denominator, m, v


def _mha_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout, paths=("k", "v"), no_wo=False):
    q, k, v = split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), split_heads(memory @ Wv, n_heads)
    context = merge_heads(_weights(q, k, mask) @ v)
    d_context = split_heads(dout if no_wo else dout @ Wo.T, n_heads)
    dq, dk, dv = (merge_heads(d) for d in _attention_grads(q, k, v, mask, d_context))
    flat_memory, flat_query = _rows(memory), _rows(query)
    dmemory = sum(d @ W.T for name, d, W in (("k", dk, Wk), ("v", dv, Wv)) if name in paths)
    return (dq @ Wq.T, dmemory, flat_query.T @ _rows(dq), flat_memory.T @ _rows(dk), flat_memory.T @ _rows(dv),
            _rows(context).T @ _rows(dout))


def _positional(max_len, d_model, swap=False, exponent_of_i=False):
    positions = np.arange(max_len)[:, None]
    pair_index = np.arange(0, d_model, 2)
    frequencies = 10000.0 ** (-(pair_index / 2 if exponent_of_i else pair_index) / d_model)
    table = np.zeros((max_len, d_model))
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    table[:, 0::2] = first(positions * frequencies)
    table[:, 1::2] = second(positions * frequencies)[:, : d_model // 2]
    return table


def _transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers, biases=True, norms=(2, 3), tied=False):
    bias = 1 if biases else 0
    attention = 4 * (d_model * d_model + bias * d_model)
    feed_forward = 2 * d_model * d_ff + bias * (d_ff + d_model)
    encoder = attention + feed_forward + norms[0] * 2 * d_model
    decoder = 2 * attention + feed_forward + norms[1] * 2 * d_model
    output = 0 if tied else d_model * tgt_vocab + tgt_vocab
    return n_layers * (encoder + decoder) + (src_vocab + tgt_vocab) * d_model + output


def _clipped(hypothesis, references, n, clip=True):
    def grams(words):
        counts = {}
        for i in range(len(words) - n + 1):
            counts[tuple(words[i:i + n])] = counts.get(tuple(words[i:i + n]), 0) + 1
        return counts
    hyp = grams(hypothesis)
    best = {}
    for reference in references:
        for gram, count in grams(reference).items():
            best[gram] = max(best.get(gram, 0), count)
    matches = sum(min(count, best.get(gram, 0)) if clip else (count if gram in best else 0) for gram, count in hyp.items())
    return matches, max(len(hypothesis) - n + 1, 0)


def _lazy_linear(x, W, b, dout):
    return ops.linear_backward(dout, ops.linear_forward(x, W, b)[1])


def _lazy_softmax(x, dout):
    return ops.softmax_backward(dout, ops.softmax_forward(x)[1])


def _lazy_layernorm(x, gamma, beta, dout):
    from ..ops.layernorm import layernorm_backward, layernorm_forward  # bound before grading: still caught
    return layernorm_backward(dout, layernorm_forward(x, gamma, beta)[1])


def _lazy_attention(q, k, v, mask, dout):
    return ops.attention_backward(dout, ops.attention_forward(q, k, v, mask)[1])


def _lazy_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    from .. import models
    config = models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1, d_ff=d_ff,
                                      n_layers=n_layers, max_len=8)
    return models.Transformer(config).num_params()


def _lazy_adam(*args):
    return ops.adam_step(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])


# -- the catalogue -------------------------------------------------------------------------------------

def _central_forward_difference(f, x, h):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    base = f(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        grad[i] = (f(x) - base) / h
        x[i] -= h
    return grad


def _central_without_two(f, x, h):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        above = f(x)
        x[i] = old - h
        grad[i] = (above - f(x)) / h
        x[i] = old
    return grad


def _central_not_restored(f, x, h):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        above = f(x)
        x[i] -= 2 * h
        grad[i] = (above - f(x)) / (2 * h)
    return grad


def _library_numerical_gradient(f, x, h):
    from ..gradcheck.engine import numerical_gradient
    x = np.array(x, dtype=np.float64)
    return numerical_gradient(lambda: np.asarray(f(x)), x, np.asarray(1.0))


def _layernorm_backward(x, gamma, beta, dout, variance_term=True, sign=-1, mean_term=True, d_gamma="sum"):
    rstd, x_hat, g = _layernorm_parts(x, gamma, dout)
    dx = g - (g.mean(-1, keepdims=True) if mean_term else 0)
    if variance_term:
        dx = dx + sign * x_hat * (g * x_hat).mean(-1, keepdims=True)
    d_model = x.shape[-1]
    if d_gamma == "sum":
        dgamma = _rows(dout * x_hat).sum(0)
    elif d_gamma == "mean":
        dgamma = _rows(dout * x_hat).mean(0)
    else:
        dgamma = dout * x_hat
    return rstd * dx, dgamma, dout.reshape(-1, d_model).sum(0)


def catalogue() -> list[WrongSolution]:
    """Every wrong solution: this module's, then each exercise module's ``WRONG_SOLUTIONS``."""
    return _lessons_1_to_15() + [wrong for module in MODULES for wrong in getattr(module, "WRONG_SOLUTIONS", [])]


def _lessons_1_to_15() -> list[WrongSolution]:
    """The wrong solutions to the exercises of lessons 1-15."""
    W = WrongSolution
    return [
        W("central_difference", "forward difference (error ~ h)", _central_forward_difference),
        W("central_difference", "divides by h instead of 2h", _central_without_two, "factor"),
        W("central_difference", "the nudged entry is never put back", _central_not_restored),
        W("central_difference", "npformer's numerical_gradient", _library_numerical_gradient, "npformer's own"),

        W("linear_backward", "dW = dout^T x (transposed)", lambda x, W_, b, dout: (
            dout @ W_.T, _rows(dout).T @ _rows(x), _rows(dout).sum(0))),
        W("linear_backward", "db summed over the batch only", lambda x, W_, b, dout: (
            dout @ W_.T, _rows(x).T @ _rows(dout), dout.sum(0)), "broadcast"),
        W("linear_backward", "db averaged over positions", lambda x, W_, b, dout: (
            dout @ W_.T, _rows(x).T @ _rows(dout), _rows(dout).mean(0)), "not a mean"),
        W("linear_backward", "dx = dout W (no transpose)", lambda x, W_, b, dout: (
            dout @ W_, _rows(x).T @ _rows(dout), _rows(dout).sum(0))),
        W("linear_backward", "a pass-through to npformer's", _lazy_linear, "npformer's own"),

        W("relu_backward", "the mask inverted (x < 0)", lambda x, dout: dout * (x < 0)),
        W("relu_backward", "returns the mask without dout", lambda x, dout: (x > 0).astype(float)),
        W("gelu_backward", "the derivative of x * Phi(x) without the x * phi(x) term",
          lambda x, dout: dout * 0.5 * (1 + ops.erf(x / np.sqrt(2)))),
        W("gelu_backward", "the tanh approximation's derivative", lambda x, dout: dout * (
            0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
            + 0.5 * x * (1 - np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)) ** 2)
            * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x**2))),

        W("softmax", "no max subtracted (overflows near 1000)", lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
        W("softmax", "normalised over the first axis", lambda x: np.exp(x - x.max(0, keepdims=True))
          / np.exp(x - x.max(0, keepdims=True)).sum(0, keepdims=True)),
        W("softmax_backward", "only the diagonal of the Jacobian",
          lambda x, dout: dout * softmax(x) * (1 - softmax(x)), "diagonal"),
        W("softmax_backward", "the row sum without p", lambda x, dout: softmax(x) * (
            dout - dout.sum(-1, keepdims=True)), "sum to zero"),
        W("softmax_backward", "a pass-through to npformer's", _lazy_softmax, "npformer's own"),

        W("cross_entropy_backward", "averaged over every position, padding included",
          lambda logits, targets, dloss: _loss_grad(logits, targets, dloss, per_token=False)),
        W("cross_entropy_backward", "padding not zeroed",
          lambda logits, targets, dloss: _loss_grad(logits, targets, dloss, zero_padding=False), "padded"),
        W("cross_entropy_backward", "dloss forgotten", lambda logits, targets, dloss: _loss_grad(logits, targets, 1.0),
          "factor"),
        W("smoothed_cross_entropy_backward", "smoothing over V - 1 classes", lambda logits, targets, s, dloss:
          _loss_grad(logits, targets, dloss, s, classes=logits.shape[-1] - 1)),
        W("smoothed_cross_entropy_backward", "smoothing forgotten",
          lambda logits, targets, s, dloss: _loss_grad(logits, targets, dloss)),

        W("layernorm_backward", "the variance term dropped",
          lambda x, gamma, beta, dout: _layernorm_backward(x, gamma, beta, dout, variance_term=False), "x_hat"),
        W("layernorm_backward", "the variance term with the wrong sign",
          lambda x, gamma, beta, dout: _layernorm_backward(x, gamma, beta, dout, sign=1), "x_hat"),
        W("layernorm_backward", "the mean term dropped",
          lambda x, gamma, beta, dout: _layernorm_backward(x, gamma, beta, dout, mean_term=False), "sum to zero"),
        W("layernorm_backward", "dgamma not summed over rows",
          lambda x, gamma, beta, dout: _layernorm_backward(x, gamma, beta, dout, d_gamma="none"), "broadcast"),
        W("layernorm_backward", "dgamma averaged over rows",
          lambda x, gamma, beta, dout: _layernorm_backward(x, gamma, beta, dout, d_gamma="mean"), "not a mean"),
        W("layernorm_backward", "a pass-through to npformer's", _lazy_layernorm, "npformer's own"),

        W("positional_encoding", "sin and cos swapped", lambda max_len, d_model: _positional(max_len, d_model, swap=True)),
        W("positional_encoding", "exponent i instead of 2i",
          lambda max_len, d_model: _positional(max_len, d_model, exponent_of_i=True)),
        W("padding_mask", "True at the padding (inverted)", lambda ids: (ids == PAD)[:, None, None, :], "inverted"),
        W("padding_mask", "shape (B, T) without the broadcast axes", lambda ids: ids != PAD),
        W("causal_mask", "PyTorch's convention (True = hidden)",
          lambda length: np.triu(np.ones((length, length), dtype=bool), k=1), "inverted"),
        W("causal_mask", "the diagonal hidden (key < query)",
          lambda length: np.tril(np.ones((length, length), dtype=bool), k=-1), "diagonal"),
        W("decoder_mask", "padding forgotten", lambda ids: np.broadcast_to(
            np.tril(np.ones((ids.shape[1],) * 2, dtype=bool)), (ids.shape[0], 1, ids.shape[1], ids.shape[1]))),
        W("decoder_mask", "causal part forgotten", lambda ids: np.broadcast_to(
            (ids != PAD)[:, None, None, :], (ids.shape[0], 1, ids.shape[1], ids.shape[1]))),
        W("decoder_mask", "padding applied to the queries", lambda ids: (ids != PAD)[:, None, :, None]
          & np.tril(np.ones((ids.shape[1],) * 2, dtype=bool))),

        W("embedding_backward", "dW[ids] = dout (repeats overwrite)", lambda ids, W_, dout: _overwrite(ids, W_, dout),
          "add.at"),
        W("embedding_backward", "the gradient of W summed over the vocabulary",
          lambda ids, W_, dout: np.broadcast_to(_rows(dout).sum(0), W_.shape).copy()),
        W("dropout_backward", "the 1/(1-p) scale forgotten", lambda x, keep, p, dout: dout * keep, "factor"),
        W("dropout_backward", "the mask forgotten", lambda x, keep, p, dout: dout / (1 - p)),

        W("attention", "no 1/sqrt(d) scale", lambda q, k, v, mask: _weights(q, k, mask, scale=False) @ v),
        W("attention", "the mask forgotten", lambda q, k, v, mask: _weights(q, k, None) @ v),
        W("attention", "NaN on a fully masked query", _attention_without_guard, "NaN"),
        W("attention_backward", "only the diagonal of the softmax Jacobian",
          lambda q, k, v, mask, dout: _attention_grads(q, k, v, mask, dout, diagonal=True), "diagonal"),
        W("attention_backward", "dk from dS, not dS^T (transposed)",
          lambda q, k, v, mask, dout: _attention_grads(q, k, v, mask, dout, transpose_dk=False), "transpose"),
        W("attention_backward", "the 1/sqrt(d) scale forgotten in dq and dk",
          lambda q, k, v, mask, dout: _attention_grads(q, k, v, mask, dout, scale_grads=False), "1/sqrt(d_head)"),
        W("attention_backward", "a pass-through to npformer's", _lazy_attention, "npformer's own"),

        W("split_heads", "a bare reshape", lambda x, n_heads: x.reshape(
            x.shape[0], n_heads, x.shape[1], x.shape[2] // n_heads), "bare reshape"),
        W("split_heads", "heads taken from interleaved columns", lambda x, n_heads: x.reshape(
            x.shape[0], x.shape[1], x.shape[2] // n_heads, n_heads).transpose(0, 3, 1, 2)),
        W("merge_heads", "a bare reshape", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "bare reshape"),
        W("multi_head_attention", "no output projection", lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: merge_heads(
            _weights(split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), mask) @ split_heads(memory @ Wv, n_heads))),
        W("multi_head_attention", "keys and values from the query, not the memory",
          lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: merge_heads(_weights(
              split_heads(query @ Wq, n_heads), split_heads(query @ Wk, n_heads), None) @ split_heads(query @ Wv, n_heads)) @ Wo),
        W("multi_head_attention_backward", "dmemory from the values' path only",
          lambda *args: _mha_backward(*args, paths=("v",)), "values' path"),
        W("multi_head_attention_backward", "dmemory from the keys' path only",
          lambda *args: _mha_backward(*args, paths=("k",)), "keys' path"),
        W("multi_head_attention_backward", "Wo skipped on the way back", lambda *args: _mha_backward(*args, no_wo=True)),

        W("transformer_parameters", "no biases", lambda *sizes: _transformer_parameters(*sizes, biases=False)),
        W("transformer_parameters", "the final layer norms of a pre-norm model",
          lambda *sizes: _transformer_parameters(*sizes) + 2 * 2 * sizes[2], "d_model"),
        W("transformer_parameters", "the output layer tied to the embedding",
          lambda *sizes: _transformer_parameters(*sizes, tied=True)),
        W("transformer_parameters", "npformer's model counted", _lazy_parameters, "npformer's own"),

        W("adam_step", "no bias correction", lambda *args: _adam(*args, correction_step=10**9), "no bias correction"),
        W("adam_step", "bias correction with step - 1 (off by one)",
          lambda *args: _adam(*args, correction_step=args[4] - 1), "step - 1"),
        W("adam_step", "bias correction with step + 1 (off by one)",
          lambda *args: _adam(*args, correction_step=args[4] + 1), "step + 1"),
        W("adam_step", "eps under the square root", lambda *args: _adam(*args, eps_inside=True), "under the square root"),
        W("adam_step", "v from |grad|, not its square", _adam_v_from_abs),
        W("adam_step", "a pass-through to npformer's", _lazy_adam, "npformer's own"),
        W("noam_lr", "the warm-up's minimum with the wrong exponent",
          lambda step, d_model, warmup_steps: d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.0)),
        W("noam_lr", "no d_model factor", lambda step, d_model, warmup_steps: min(step**-0.5, step * warmup_steps**-1.5)),
        W("noam_lr", "the step counted from 0", lambda step, d_model, warmup_steps: d_model**-0.5 * min(
            max(step - 1, 1e-9)**-0.5, (step - 1) * warmup_steps**-1.5)),

        W("modified_precision", "matches not clipped", lambda h, r, n: _clipped(h, r, n, clip=False), "not clipped"),
        W("modified_precision", "the total counts the reference's n-grams",
          lambda h, r, n: (_clipped(h, r, n)[0], max(len(r[0]) - n + 1, 0))),
        W("attention_entropy", "-sum(w log w) with no guard for zeros", _entropy_direct, "NaN"),
        W("attention_entropy", "in bits (log2)", lambda w: -np.sum(np.where(w > 0, w * np.log2(np.where(w > 0, w, 1)), 0), -1)),
        W("length_penalty", "(5 + length)^alpha / 6", lambda length, alpha: (5 + length) ** alpha / 6),
        W("length_penalty", "length^alpha (no smoothing)", lambda length, alpha: float(length) ** alpha),

        W("residual_backward", "the identity path forgotten", _residual_without_identity, "identity path"),
        W("residual_backward", "the post-norm formula for both kinds", _residual_always_post, "pre-norm"),
        W("residual_backward_with_memory", "d_memory dropped", _residual_memory_dropped),
        W("stack_backward_with_memory", "only the last layer's memory gradient", _stack_last_memory, "every layer"),
        W("stack_backward_with_memory", "layers undone first to last", _stack_wrong_order),
    ]


def _adam_v_from_abs(param, grad, m, v, step, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * np.abs(grad)
    return param - lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps), m, v


def _overwrite(ids, W, dout):
    grad = np.zeros_like(W, dtype=np.float64)
    grad[ids.reshape(-1)] = _rows(dout)
    return grad


def _attention_without_guard(q, k, v, mask):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        return weights / weights.sum(-1, keepdims=True) @ v


def _entropy_direct(weights):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(weights * np.log(weights), axis=-1)


def _residual_without_identity(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        return norm_backward(sublayer_backward(dropout_backward(dout)))
    return sublayer_backward(dropout_backward(norm_backward(dout)))


def _residual_always_post(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    d_sum = norm_backward(dout)
    return d_sum + sublayer_backward(dropout_backward(d_sum))


def _residual_memory_dropped(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    d_sum = dout if pre_norm else norm_backward(dout)
    d_input, d_memory = sublayer_backward(dropout_backward(d_sum))
    if pre_norm:
        return dout + norm_backward(d_input), np.zeros_like(d_memory)
    return d_sum + d_input, np.zeros_like(d_memory)


def _stack_last_memory(dout, layer_backwards):
    d_memory = None
    for layer_backward in reversed(layer_backwards):
        dout, d_memory = layer_backward(dout)
    return dout, d_memory


def _stack_wrong_order(dout, layer_backwards):
    d_memory = 0
    for layer_backward in layer_backwards:
        dout, d_layer_memory = layer_backward(dout)
        d_memory = d_memory + d_layer_memory
    return dout, d_memory


# -- running it ---------------------------------------------------------------------------------------

@dataclass
class Outcome:
    wrong: WrongSolution
    report: ExerciseReport

    @property
    def caught(self) -> bool:
        return not self.report.passed

    @property
    def named(self) -> bool:
        """The hint's words are in the report (always True for a mistake without expected words)."""
        return not self.wrong.hint or self.wrong.hint in str(self.report)


def run(unseen_seed: int = 0) -> list[Outcome]:
    """Grade every wrong solution (the unseen cases drawn with ``unseen_seed``)."""
    outcomes = []
    with np.errstate(all="ignore"):
        for wrong in catalogue():
            outcomes.append(Outcome(wrong, check(wrong.exercise, wrong.function, strict=False, unseen_seed=unseen_seed)))
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    lines = ["| exercise | mistake | caught | named |", "|---|---|---|---|"]
    for outcome in outcomes:
        named = "-" if not outcome.wrong.hint else ("yes" if outcome.named else "NO")
        lines.append(f"| {outcome.wrong.exercise} | {outcome.wrong.mistake} | "
                     f"{'yes' if outcome.caught else 'NO'} | {named} |")
    caught = sum(outcome.caught for outcome in outcomes)
    expected = [outcome for outcome in outcomes if outcome.wrong.hint]
    lines.append(f"\n{len(outcomes)} wrong solutions to {len({o.wrong.exercise for o in outcomes})} exercises: "
                 f"{caught} caught ({100 * caught / len(outcomes):.0f}%); "
                 f"{sum(o.named for o in expected)} of the {len(expected)} classic ones named by their hint")
    return "\n".join(lines)


def main() -> int:
    outcomes = run()
    print(table(outcomes))
    return 0 if all(o.caught and o.named for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
