"""The mutants of the ops: realistic bugs in the backward passes of ``npformer.ops``.

Each ``_name(original)`` builds the buggy backward from the correct one (linear, relu, gelu, softmax,
layer norm, attention, embedding, dropout, cross-entropy and label smoothing, masked mean pool, and
the modern parts: RMSNorm, rotary positions, SwiGLU, grouped-query attention);
``OP_MUTANTS`` names them, each caught by its op's gradient check (``"op:NAME"``).
"""

from __future__ import annotations

import math

from ... import ops
from ...backend import xp
from .mutant import Mutant


def _linear_bias_not_summed(original):
    def backward(dy, cache):
        dx, dW, _ = original(dy, cache)
        return dx, dW, dy  # the bias gradient keeps the batch and time axes
    return backward


def _linear_weight_transposed(original):
    def backward(dy, cache):
        dx, dW, db = original(dy, cache)
        return dx, dW.T, db  # dy^T x instead of x^T dy
    return backward


def _linear_weight_from_one_row(original):
    def backward(dy, cache):
        dx, _, db = original(dy, cache)
        x = cache["x"]
        return dx, x.reshape(-1, x.shape[-1])[-1:].T @ dy.reshape(-1, dy.shape[-1])[-1:], db  # last row only
    return backward


def _relu_passes_everything(original):
    return lambda dout, cache: dout  # the mask of the positive inputs forgotten


def _gelu_without_gaussian_term(original):
    def backward(dout, cache):
        return dout * cache["gate"]  # Phi(x) only; the x * phi(x) term is missing
    return backward


def _softmax_diagonal_only(original):
    def backward(dy, cache):
        probabilities = cache["y"]
        return dy * probabilities * (1 - probabilities)  # the Jacobian's diagonal only
    return backward


def _softmax_without_probability_in_sum(original):
    def backward(dy, cache):
        probabilities = cache["y"]
        return probabilities * (dy - dy.sum(axis=-1, keepdims=True))  # sum(dy), not sum(dy * p)
    return backward


def _layernorm_without_mean_term(original):
    def backward(dy, cache):
        x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
        dx, dgamma, dbeta = original(dy, cache)
        g = dy * gamma
        return rstd * (g - x_hat * (g * x_hat).mean(-1, keepdims=True)), dgamma, dbeta
    return backward


def _layernorm_without_variance_term(original):
    def backward(dy, cache):
        rstd, gamma = cache["rstd"], cache["gamma"]
        dx, dgamma, dbeta = original(dy, cache)
        g = dy * gamma
        return rstd * (g - g.mean(-1, keepdims=True)), dgamma, dbeta
    return backward


def _layernorm_gamma_without_x_hat(original):
    def backward(dy, cache):
        dx, _, dbeta = original(dy, cache)
        return dx, dbeta.copy(), dbeta  # sum(dy) instead of sum(dy * x_hat)
    return backward


def _layernorm_without_eps(original):
    def backward(dy, cache):
        x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
        _, dgamma, dbeta = original(dy, cache)
        rstd = 1.0 / xp.sqrt(1.0 / (rstd * rstd) - cache.get("eps", 1e-5))  # 1/sqrt(var): eps forgotten
        g = dy * gamma
        return rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)), dgamma, dbeta
    return backward


def _gelu_tanh_derivative_for_exact(original):
    def backward(dout, cache):
        x = cache["x"]
        gate = 0.5 * (1.0 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        slope = gate + x * (1 - (2 * gate - 1) ** 2) * 0.5 * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return dout * slope  # the tanh approximation's derivative, under the exact GELU's forward
    return backward


def _attention_scale(which):
    def mutate(original):
        def backward(dout, cache):
            dq, dk, dv = original(dout, cache)
            unscale = 1.0 / cache["scale"]
            return (dq * unscale, dk, dv) if which == "q" else (dq, dk * unscale, dv)
        return backward
    return mutate


def _attention_leaks_into_masked_keys(original):
    def backward(dout, cache):
        q, k = cache["q"], cache["k"]
        scores = q @ k.swapaxes(-1, -2) * cache["scale"]  # recomputed without the mask
        weights = xp.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return original(dout, {**cache, "weights": weights})
    return backward


def _attention_values_not_transposed(original):
    def backward(dout, cache):
        dq, dk, _ = original(dout, cache)
        return dq, dk, cache["weights"] @ dout  # the shapes agree when Tq = Tk
    return backward


def _embedding_overwrites(original):
    def backward(dout, cache):
        vocab, d_model = cache["table_shape"]
        dW = xp.zeros((vocab, d_model), dtype=cache["dtype"])
        dW[cache["ids"].reshape(-1)] = dout.reshape(-1, d_model)  # repeated ids: the last write wins
        return dW
    return backward


def _dropout_without_mask(original):
    def backward(dout, cache):
        keep_scale = cache["keep_scale"]
        return dout if keep_scale is None else dout * keep_scale.max()  # the scale, not the mask
    return backward


def _dropout_without_scale(original):
    def backward(dout, cache):
        keep_scale = cache["keep_scale"]
        return dout if keep_scale is None else dout * (keep_scale > 0)  # the mask, not 1/(1-p)
    return backward


def _cross_entropy_not_averaged(original):
    def backward(dloss, cache):
        return original(dloss, cache) * max(cache["n_kept"], 1)  # a sum, not a mean
    return backward


def _cross_entropy_counts_padding(original):
    def backward(dloss, cache):
        return original(dloss, cache) * max(cache["n_kept"], 1) / cache["kept"].size  # divided by B * T
    return backward


def _cross_entropy_leaks_into_padding(original):
    def backward(dloss, cache):
        return original(dloss, {**cache, "kept": xp.ones_like(cache["kept"])})  # ignored targets count
    return backward


def _added_to_every_class(dlogits, dloss, cache, amount):
    """``dlogits`` plus ``amount`` times each kept position's weight ``dloss / n_kept``, in every class."""
    weight = cache["kept"] * (float(dloss) / max(cache["n_kept"], 1))
    return dlogits + (amount * weight).reshape(dlogits.shape[:-1])[..., None]


def _label_smoothing_without_uniform_term(original):
    def backward(dloss, cache):
        eps, vocab = cache["label_smoothing"], cache["probs"].shape[-1]
        return _added_to_every_class(original(dloss, cache), dloss, cache, eps / vocab)  # eps/V dropped
    return backward


def _label_smoothing_over_other_classes(original):
    def backward(dloss, cache):
        eps, vocab = cache["label_smoothing"], cache["probs"].shape[-1]
        # eps/(V-1) to every class, as if the target got none of it
        return _added_to_every_class(original(dloss, cache), dloss, cache, eps / (vocab - 1) - eps / vocab)
    return backward


def _mean_pool_divides_by_length(original):
    def backward(dout, cache):
        length = cache["weights"].shape[1]
        real = (cache["weights"] > 0).astype(dout.dtype)
        return real[:, :, None] * dout[:, None, :] / length  # divided by T, padding included
    return backward


def _rmsnorm_with_layernorm_mean_term(original):
    def backward(dy, cache):
        _, dgamma = original(dy, cache)
        x_hat, rstd = cache["x_hat"], cache["rstd"]
        g = dy * cache["gamma"]
        dx = rstd * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
        return dx, dgamma  # layer norm's - mean(g) term, for a mean RMSNorm never subtracts
    return backward


def _rmsnorm_without_rstd_term(original):
    def backward(dy, cache):
        _, dgamma = original(dy, cache)
        return cache["rstd"] * dy * cache["gamma"], dgamma  # x_hat's path through rstd forgotten
    return backward


def _rope_rotates_forward(original):
    def backward(dy, cache):
        return original(dy, {"cos": cache["cos"], "sin": -cache["sin"]})  # R(angle), not R(-angle)
    return backward


def _gqa_without_group_sum(original):
    def backward(dout, cache):
        dq, dk, dv = original(dout, cache)
        group = cache["group"]
        dk_rep, dv_rep = ops.attention_backward(dout, cache["attention"])[1:]
        return dq, dk_rep[:, ::group], dv_rep[:, ::group]  # the first query head of each group only
    return backward


def _swiglu_sigmoid_as_silu_derivative(original):
    def backward(dy, cache):
        _, _, dW_up = original(dy, cache)
        d_gate = dy * cache["up"] * cache["sigmoid"]  # silu'(a) = sigmoid(a): the a sigmoid'(a) term lost
        x, W_gate, W_up = cache["x"], cache["W_gate"], cache["W_up"]
        dW_gate = x.reshape(-1, x.shape[-1]).T @ d_gate.reshape(-1, d_gate.shape[-1])
        return d_gate @ W_gate.T + (dy * cache["silu"]) @ W_up.T, dW_gate, dW_up
    return backward


OP_MUTANTS: list[Mutant] = [
    Mutant("linear: bias gradient not summed", "ops.linear_backward", "db = dy, without the sum over the "
           "batch and time axes the bias was broadcast over", ops, "linear_backward",
           _linear_bias_not_summed, "op:linear", "shape"),
    Mutant("linear: weight gradient transposed", "ops.linear_backward", "dW = dy^T x instead of x^T dy",
           ops, "linear_backward", _linear_weight_transposed, "op:linear_square", "transposed"),
    Mutant("linear: weight gradient from one row", "ops.linear_backward", "dW from the last row only (the "
           "sum over rows forgotten)", ops, "linear_backward", _linear_weight_from_one_row, "op:linear"),
    Mutant("relu: mask forgotten", "ops.relu_backward", "dx = dout, also where x < 0", ops,
           "relu_backward", _relu_passes_everything, "op:relu", "zero"),
    Mutant("gelu: Gaussian term missing", "ops.gelu_backward", "gelu'(x) = Phi(x), without x phi(x)",
           ops, "gelu_backward", _gelu_without_gaussian_term, "op:gelu"),
    Mutant("softmax: Jacobian diagonal only", "ops.softmax_backward", "dx = dy p (1 - p)", ops,
           "softmax_backward", _softmax_diagonal_only, "op:softmax"),
    Mutant("softmax: sum without the probabilities", "ops.softmax_backward", "p (dy - sum(dy))",
           ops, "softmax_backward", _softmax_without_probability_in_sum, "op:softmax"),
    Mutant("layer norm: mean term missing", "ops.layernorm_backward", "dx without - mean(g)", ops,
           "layernorm_backward", _layernorm_without_mean_term, "op:layernorm"),
    Mutant("layer norm: variance term missing", "ops.layernorm_backward", "dx without - x_hat mean(g x_hat)",
           ops, "layernorm_backward", _layernorm_without_variance_term, "op:layernorm"),
    Mutant("layer norm: dgamma without x_hat", "ops.layernorm_backward", "dgamma = sum(dy)", ops,
           "layernorm_backward", _layernorm_gamma_without_x_hat, "op:layernorm"),
    Mutant("layer norm: eps forgotten in backward", "ops.layernorm_backward", "1/sqrt(var) in backward "
           "where forward used 1/sqrt(var + eps): small, and large only for rows of small variance",
           ops, "layernorm_backward", _layernorm_without_eps, "op:layernorm"),
    Mutant("gelu: the tanh approximation's derivative", "ops.gelu_backward", "the derivative of the tanh "
           "approximation under the exact (erf) forward", ops, "gelu_backward",
           _gelu_tanh_derivative_for_exact, "op:gelu"),
    Mutant("attention: 1/sqrt(d_k) missing from dQ", "ops.attention_backward", "dq not scaled", ops,
           "attention_backward", _attention_scale("q"), "op:attention", "constant factor"),
    Mutant("attention: 1/sqrt(d_k) missing from dK", "ops.attention_backward", "dk not scaled", ops,
           "attention_backward", _attention_scale("k"), "op:attention", "constant factor"),
    Mutant("attention: gradient leaks into masked keys", "ops.attention_backward", "backward recomputes "
           "the weights without the mask", ops, "attention_backward", _attention_leaks_into_masked_keys,
           "op:attention"),
    Mutant("attention: dV without the transpose", "ops.attention_backward", "dv = weights @ dout", ops,
           "attention_backward", _attention_values_not_transposed, "op:attention"),
    Mutant("embedding: repeated ids overwrite", "ops.embedding_backward", "dW[ids] = dout (fancy-index "
           "assignment keeps one write per repeated id)", ops, "embedding_backward",
           _embedding_overwrites, "op:embedding"),
    Mutant("dropout: mask forgotten", "ops.dropout_backward", "dx = dout / (1 - p) everywhere", ops,
           "dropout_backward", _dropout_without_mask, "op:dropout", "zero"),
    Mutant("dropout: 1/(1-p) forgotten", "ops.dropout_backward", "dx = dout * keep", ops,
           "dropout_backward", _dropout_without_scale, "op:dropout", "constant factor"),
    Mutant("cross-entropy: not divided by the kept targets", "ops.cross_entropy_backward", "the gradient "
           "of the sum, not of the mean", ops, "cross_entropy_backward", _cross_entropy_not_averaged,
           "op:cross_entropy", "constant factor"),
    Mutant("cross-entropy: divided by B * T", "ops.cross_entropy_backward", "the mean counts the ignored "
           "<pad> positions", ops, "cross_entropy_backward", _cross_entropy_counts_padding,
           "op:cross_entropy", "constant factor"),
    Mutant("cross-entropy: gradient at <pad> targets", "ops.cross_entropy_backward", "ignored positions "
           "get a gradient", ops, "cross_entropy_backward", _cross_entropy_leaks_into_padding,
           "op:cross_entropy"),
    Mutant("label smoothing: eps/V term missing", "ops.cross_entropy_backward", "dz = p - (1 - eps) onehot",
           ops, "cross_entropy_backward", _label_smoothing_without_uniform_term, "op:cross_entropy"),
    Mutant("label smoothing: eps/(V-1)", "ops.cross_entropy_backward", "the smoothing mass spread over the "
           "V - 1 other classes in backward, over all V in forward", ops, "cross_entropy_backward",
           _label_smoothing_over_other_classes, "op:cross_entropy"),
    Mutant("masked mean pool: divided by T", "ops.masked_mean_pool_backward", "padding counted in the mean",
           ops, "masked_mean_pool_backward", _mean_pool_divides_by_length, "op:masked_mean_pool"),
    Mutant("rmsnorm: layer norm's mean term", "ops.rmsnorm_backward", "dx with - mean(g), as if the mean were "
           "subtracted", ops, "rmsnorm_backward", _rmsnorm_with_layernorm_mean_term, "op:rmsnorm"),
    Mutant("rmsnorm: path through rstd missing", "ops.rmsnorm_backward", "dx = rstd * g, without "
           "- x_hat mean(g x_hat)", ops, "rmsnorm_backward", _rmsnorm_without_rstd_term, "op:rmsnorm"),
    Mutant("rope: backward rotates the wrong way", "ops.rope_backward", "dy turned by R(angle) instead of "
           "R(-angle)", ops, "rope_backward", _rope_rotates_forward, "op:rope"),
    Mutant("grouped-query attention: no sum over shared heads", "ops.grouped_query_attention_backward",
           "dk, dv from the first query head of each group only", ops, "grouped_query_attention_backward",
           _gqa_without_group_sum, "op:grouped_query_attention"),
    Mutant("swiglu: silu' = sigmoid", "ops.swiglu_backward", "the gate's derivative without a sigmoid'(a)",
           ops, "swiglu_backward", _swiglu_sigmoid_as_silu_derivative, "op:swiglu"),
]
