"""The pieces of the grader's wrong solutions (``course.wrong_solutions``): each mistake a function,
written as a student would write it, and the right helpers they share.

This module holds near-solutions, so it is for instructors and contributors: the student edition
of the lessons never shows them.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from .exercises.attention_pieces import merge_heads_reference as merge_heads
from .exercises.attention_pieces import split_heads_reference as split_heads
from .hints import layernorm_x_hat, softmax

PAD = 0


# -- pieces the wrong solutions share (each right on its own) ----------------------------------------

def _layernorm_parts(x, gamma, dout, eps=1e-5):
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    return rstd, layernorm_x_hat(x, eps), dout * gamma


def rows(a):
    return a.reshape(-1, a.shape[-1])


def attention_weights(q, k, mask, scale=True):
    scores = q @ k.swapaxes(-1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(-1, keepdims=True)
    return weights / np.where(total > 0, total, 1)


def attention_grads(q, k, v, mask, dout, diagonal=False, transpose_dk=True, scale_grads=True):
    weights = attention_weights(q, k, mask)
    d_weights = dout @ v.swapaxes(-1, -2)
    if diagonal:
        d_scores = weights * (1 - weights) * d_weights
    else:
        d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
    scale = 1 / np.sqrt(q.shape[-1]) if scale_grads else 1.0
    dk = (d_scores.swapaxes(-1, -2) if transpose_dk else d_scores) @ q * scale
    return d_scores @ k * scale, dk, weights.swapaxes(-1, -2) @ dout


def loss_grad(logits, targets, dloss, smoothing=0.0, per_token=True, zero_padding=True, classes=None):
    p = softmax(logits)
    vocab = logits.shape[-1]
    target = np.eye(vocab)[targets] * (1 - smoothing) + smoothing / (classes or vocab)
    real = (targets != PAD)[..., None]
    grad = (p - target) * (real if zero_padding else 1)
    return grad * dloss / (max(real.sum(), 1) if per_token else targets.size)


def adam(param, grad, m, v, step, lr, beta1, beta2, eps, correction_step=None, eps_inside=False):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    t = step if correction_step is None else correction_step
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    denominator = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
    return param - lr * m_hat / denominator, m, v


def mha_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout, paths=("k", "v"), no_wo=False):
    q, k, v = split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), split_heads(memory @ Wv, n_heads)
    context = merge_heads(attention_weights(q, k, mask) @ v)
    d_context = split_heads(dout if no_wo else dout @ Wo.T, n_heads)
    dq, dk, dv = (merge_heads(d) for d in attention_grads(q, k, v, mask, d_context))
    flat_memory, flat_query = rows(memory), rows(query)
    dmemory = sum(d @ W.T for name, d, W in (("k", dk, Wk), ("v", dv, Wv)) if name in paths)
    return (dq @ Wq.T, dmemory, flat_query.T @ rows(dq), flat_memory.T @ rows(dk), flat_memory.T @ rows(dv),
            rows(context).T @ rows(dout))


def positional(max_len, d_model, swap=False, exponent_of_i=False):
    positions = np.arange(max_len)[:, None]
    pair_index = np.arange(0, d_model, 2)
    frequencies = 10000.0 ** (-(pair_index / 2 if exponent_of_i else pair_index) / d_model)
    table = np.zeros((max_len, d_model))
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    table[:, 0::2] = first(positions * frequencies)
    table[:, 1::2] = second(positions * frequencies)[:, : d_model // 2]
    return table


def transformer_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers, biases=True, norms=(2, 3), tied=False):
    bias = 1 if biases else 0
    attention = 4 * (d_model * d_model + bias * d_model)
    feed_forward = 2 * d_model * d_ff + bias * (d_ff + d_model)
    encoder = attention + feed_forward + norms[0] * 2 * d_model
    decoder = 2 * attention + feed_forward + norms[1] * 2 * d_model
    output = 0 if tied else d_model * tgt_vocab + tgt_vocab
    return n_layers * (encoder + decoder) + (src_vocab + tgt_vocab) * d_model + output


def clipped(hypothesis, references, n, clip=True):
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


def lazy_linear(x, W, b, dout):
    return ops.linear_backward(dout, ops.linear_forward(x, W, b)[1])


def lazy_softmax(x, dout):
    return ops.softmax_backward(dout, ops.softmax_forward(x)[1])


def lazy_layernorm(x, gamma, beta, dout):
    from ..ops.layernorm import layernorm_backward, layernorm_forward  # bound before grading: still caught
    return layernorm_backward(dout, layernorm_forward(x, gamma, beta)[1])


def lazy_attention(q, k, v, mask, dout):
    return ops.attention_backward(dout, ops.attention_forward(q, k, v, mask)[1])


def lazy_parameters(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    from .. import models
    config = models.TransformerConfig(src_vocab, tgt_vocab, d_model=d_model, n_heads=1, d_ff=d_ff,
                                      n_layers=n_layers, max_len=8)
    return models.Transformer(config).num_params()


def lazy_adam(*args):
    return ops.adam_step(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])


# -- the catalogue -------------------------------------------------------------------------------------

def central_forward_difference(f, x, h):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    base = f(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        grad[i] = (f(x) - base) / h
        x[i] -= h
    return grad


def central_without_two(f, x, h):
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


def central_not_restored(f, x, h):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        above = f(x)
        x[i] -= 2 * h
        grad[i] = (above - f(x)) / (2 * h)
    return grad


def library_numerical_gradient(f, x, h):
    from ..gradcheck.engine import numerical_gradient
    x = np.array(x, dtype=np.float64)
    return numerical_gradient(lambda: np.asarray(f(x)), x, np.asarray(1.0))


def layernorm_grads(x, gamma, beta, dout, variance_term=True, sign=-1, mean_term=True, d_gamma="sum"):
    rstd, x_hat, g = _layernorm_parts(x, gamma, dout)
    dx = g - (g.mean(-1, keepdims=True) if mean_term else 0)
    if variance_term:
        dx = dx + sign * x_hat * (g * x_hat).mean(-1, keepdims=True)
    d_model = x.shape[-1]
    if d_gamma == "sum":
        dgamma = rows(dout * x_hat).sum(0)
    elif d_gamma == "mean":
        dgamma = rows(dout * x_hat).mean(0)
    else:
        dgamma = dout * x_hat
    return rstd * dx, dgamma, dout.reshape(-1, d_model).sum(0)


def adam_v_from_abs(param, grad, m, v, step, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * np.abs(grad)
    return param - lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps), m, v


def overwrite(ids, W, dout):
    grad = np.zeros_like(W, dtype=np.float64)
    grad[ids.reshape(-1)] = rows(dout)
    return grad


def attention_without_guard(q, k, v, mask):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        return weights / weights.sum(-1, keepdims=True) @ v


def entropy_direct(weights):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(weights * np.log(weights), axis=-1)


def residual_without_identity(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        return norm_backward(sublayer_backward(dropout_backward(dout)))
    return sublayer_backward(dropout_backward(norm_backward(dout)))


def residual_always_post(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    d_sum = norm_backward(dout)
    return d_sum + sublayer_backward(dropout_backward(d_sum))


def residual_memory_dropped(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    d_sum = dout if pre_norm else norm_backward(dout)
    d_input, d_memory = sublayer_backward(dropout_backward(d_sum))
    if pre_norm:
        return dout + norm_backward(d_input), np.zeros_like(d_memory)
    return d_sum + d_input, np.zeros_like(d_memory)


def stack_last_memory(dout, layer_backwards):
    d_memory = None
    for layer_backward in reversed(layer_backwards):
        dout, d_memory = layer_backward(dout)
    return dout, d_memory


def stack_wrong_order(dout, layer_backwards):
    d_memory = 0
    for layer_backward in layer_backwards:
        dout, d_layer_memory = layer_backward(dout)
        d_memory = d_memory + d_layer_memory
    return dout, d_memory
