"""A catalogue of realistic backward bugs ("mutants"), to measure what the checker catches.

Each mutant is one small, named change to a correct backward pass or block: the
kind of mistake that hand-written backward passes (and the peers' issue trackers)
are full of. It is applied without editing the library: ``mutant.applied()``
patches one function or method for the duration of a ``with`` block. The check
that must catch it is named by ``mutant.check``:

    "op:NAME"        check_op(NAME): the op's case of ``OP_CASES`` (padded rows, repeated ids, ...)
    "module:NAME"    check_module on a small float64 block (``MODULE_CASES``)
    "model[:OPTS]"   check_model on the tiny Transformer (OPTS: "pre", "tied", "gelu")
    "optimizer"      check_adam: three Adam steps against the closed-form update

``pattern`` is the diagnosis the report must give for it, when the mistake has a
recognisable shape ("constant factor", "sign", "transposed", "zero", "shape").
``run_mutants`` applies each one in turn and returns, per mutant, whether the full
check caught it, whether the fast directional check caught it, and the diagnosis.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy

from .. import backend, nn, ops, optim
from ..models import Transformer
from ..tokens import PAD_ID
from ..backend import xp
from ..nn import decoder as decoder_module
from ..nn import encoder as encoder_module
from .cases import check_op
from .modules import check_model, check_module
from .report import DEFAULT_TOL, GradcheckReport, _judge

@dataclass(frozen=True)
class Mutant:
    """One realistic backward bug: where it is, what it does, which check must catch it."""

    name: str
    where: str
    bug: str
    target: Any
    attribute: str
    replacement: Callable[[Callable], Callable]  # the original -> the buggy version
    check: str
    pattern: str = ""

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The library with this bug in it, inside the ``with`` block; restored after."""
        original = getattr(self.target, self.attribute)
        setattr(self.target, self.attribute, self.replacement(original))
        try:
            yield
        finally:
            setattr(self.target, self.attribute, original)


# -- the ops ----------------------------------------------------------------------------------------

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


# -- blocks and models -----------------------------------------------------------------------------

def _residual_one_input_not_added(original):
    def backward(dout, sublayer_backward, norm, dropout, pre_norm):
        if pre_norm:
            return norm.backward(sublayer_backward(dropout.backward(dout)))  # the identity path forgotten
        return sublayer_backward(dropout.backward(norm.backward(dout)))
    return backward


def _residual_not_added(original):
    def backward(dout, sublayer_backward, norm, dropout, pre_norm):
        if pre_norm:
            d_input, d_memory = sublayer_backward(dropout.backward(dout))
            return norm.backward(d_input), d_memory  # the identity path forgotten
        d_sum = norm.backward(dout)
        d_input, d_memory = sublayer_backward(dropout.backward(d_sum))
        return d_input, d_memory
    return backward


def _final_norm_skipped(original):
    def backward(self, dout):
        saved, self.norm = self.norm, None  # pre-norm's final layer norm left out of backward
        try:
            return original(self, dout)
        finally:
            self.norm = saved
    return backward


def _tied_embedding_overwritten(original):
    def backward(self, dout):
        self.grad["W"][...] = ops.embedding_backward(dout, self._cache)  # = instead of +=
    return backward


def _decoder_drops_first_layer_memory(original):
    def backward(self, dout):
        d = dout if self.norm is None else self.norm.backward(dout)
        d_memory = 0
        for index, layer in reversed(list(enumerate(self.layers))):
            d, d_layer_memory = layer.backward(d)
            if index != 0:
                d_memory = d_memory + d_layer_memory  # layer 0's cross-attention never reaches the encoder
        return d, d_memory
    return backward


def _memory_value_path_dropped(original):
    def backward(self, dout):
        dq, dk, dv = self._attend_and_project_backward(dout)
        d_query = self.q.backward(self.merge_heads(dq))
        if self.fused:
            d_memory = self._fused_project_backward((dk, xp.zeros_like(dv)), self._memory_cache)
        else:
            d_memory = self.k.backward(self.merge_heads(dk))
            self.v.backward(xp.zeros_like(self.merge_heads(dv)))
        return d_query, d_memory
    return backward


def _fused_key_value_swapped(original):
    def backward(self, dout):
        dq, dk, dv = self._attend_and_project_backward(dout)
        return self._fused_project_backward((dq, dv, dk), self._qkv_cache)  # k and v gradients swapped
    return backward


def _heads_merged_in_wrong_order(original):
    def merge(self, x):
        batch, heads, length, head_dim = x.shape
        return x.reshape(batch, length, heads * head_dim)  # no transpose: heads and time mixed
    return merge


def _embedding_scale_forgotten(original):
    def backward(self, d, table, dropout):
        table.backward(dropout.backward(d))  # forward multiplies by sqrt(d_model); backward forgets it
    return backward


def _adam_bias_correction_next_step(original):
    def update(self, param, grad, state):
        self.step_count += 1
        try:
            original(self, param, grad, state)  # the bias correction of step t + 1
        finally:
            self.step_count -= 1
    return update


def _adam_without_bias_correction(original):
    def update(self, param, grad, state):
        beta1, beta2 = self.betas
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= beta1
        m += (1 - beta1) * grad
        v *= beta2
        v += (1 - beta2) * grad * grad
        param -= self.lr * m / (xp.sqrt(v) + self.eps)
    return update


# -- the checks the mutants face ---------------------------------------------------------------------

def _module_inputs(rng: numpy.random.Generator, batch: int, length: int, d_model: int) -> Any:
    return rng.standard_normal((batch, length, d_model))


def _padding(batch: int, length: int) -> Any:
    ids = numpy.ones((batch, length), dtype=numpy.int64)
    ids[-1, length // 2:] = PAD_ID  # the last sequence is half padding
    return backend.asarray(ids)


def _self_attention_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.SelfAttention(8, 2, rng=rng, dtype=numpy.float64)
    mask = ops.padding_mask(_padding(2, 4)) & ops.causal_mask(4)
    return module, {"x": _module_inputs(rng, 2, 4, 8), "mask": mask}


def _cross_attention_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.MultiHeadAttention(8, 2, rng=rng, dtype=numpy.float64)
    return module, {"query": _module_inputs(rng, 2, 3, 8), "memory": _module_inputs(rng, 2, 4, 8),
                    "mask": ops.padding_mask(_padding(2, 4))}


def _feedforward_case(seed: int) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.FeedForward(6, 10, activation="gelu", rng=rng, dtype=numpy.float64)
    return module, {"x": _module_inputs(rng, 2, 3, 6)}


def _encoder_layer_case(seed: int, pre_norm: bool = False) -> tuple[nn.Module, dict]:
    rng = numpy.random.default_rng(seed)
    module = nn.EncoderLayer(8, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=pre_norm,
                             activation="gelu", rng=rng, dtype=numpy.float64)
    return module, {"x": _module_inputs(rng, 2, 4, 8), "mask": ops.padding_mask(_padding(2, 4))}


MODULE_CASES: dict[str, Callable[[int], tuple[nn.Module, dict]]] = {
    "self_attention": _self_attention_case,
    "cross_attention": _cross_attention_case,
    "feedforward": _feedforward_case,
    "encoder_layer": _encoder_layer_case,
    "encoder_layer_pre": lambda seed: _encoder_layer_case(seed, pre_norm=True),
}

_OP_VARIANTS = {"linear_square": ("linear", {"d_in": 4, "d_out": 4})}  # a transposed dW keeps its shape
_MODEL_OPTIONS = {"pre": {"norm": "pre"}, "tied": {"tie_embeddings": True}, "gelu": {"activation": "gelu"}}


def check_adam(seed: int = 0, steps: int = 3, tol: float = DEFAULT_TOL) -> GradcheckReport:
    """``steps`` updates of ``optim.Adam`` against the closed-form update with bias correction, in float64.

    The row compares the total change of the weights, so that the error is relative to the update.
    """
    rng = numpy.random.default_rng(seed)
    layer = nn.Linear(4, 3, rng=rng, dtype=numpy.float64, bias=False)
    adam = optim.Adam(layer, lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    start = backend.to_numpy(layer.W).copy()
    expected, m, v = start.copy(), numpy.zeros_like(start), numpy.zeros_like(start)
    for step in range(1, steps + 1):
        grad = rng.standard_normal(start.shape)
        layer.grad["W"][...] = backend.asarray(grad)
        adam.step()
        m = 0.9 * m + 0.1 * grad
        v = 0.98 * v + 0.02 * grad * grad
        expected -= 1e-2 * (m / (1 - 0.9**step)) / (numpy.sqrt(v / (1 - 0.98**step)) + 1e-9)
    change = backend.to_numpy(layer.W) - start
    return _judge("adam", [(f"W change over {steps} steps", tuple(start.shape), change, expected - start, "")], tol)


MODEL_ENTRIES = 8  # entries per tensor in the full model check of a mutant (all 88 tensors, in seconds)


def run_check(check: str, seed: int = 0, directions: int | None = None) -> GradcheckReport:
    """The check named by a mutant's ``check`` field (see the module's docstring).

    The model check samples ``MODEL_ENTRIES`` entries of every tensor (all of them would
    take 15 s per mutant); ``directions`` switches blocks and models to the fast check.
    """
    kind, _, option = check.partition(":")
    if kind == "op":
        name, sizes = _OP_VARIANTS.get(option, (option, {}))
        return check_op(name, seed=seed, **sizes)
    if kind == "module":
        module, inputs = MODULE_CASES[option](seed)
        return check_module(module, inputs, name=option, seed=seed, directions=directions)
    if kind == "model":
        entries = None if directions else MODEL_ENTRIES
        return check_model(seed=seed, directions=directions, max_entries=entries, **_MODEL_OPTIONS.get(option, {}))
    if kind == "optimizer":
        return check_adam(seed)
    raise ValueError(f"run_check: unknown check {check!r}")


MUTANTS: list[Mutant] = [
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
    Mutant("residual: identity path not added", "nn.residual (encoder)", "dx = the sub-layer path only",
           encoder_module, "residual_backward", _residual_one_input_not_added, "module:encoder_layer"),
    Mutant("residual with memory: identity path not added", "nn.residual (decoder cross-attention)",
           "dx = the cross-attention path only", decoder_module, "residual_backward_with_memory",
           _residual_not_added, "model"),
    Mutant("pre-norm: final layer norm skipped in backward", "nn.Encoder.backward", "the encoder's final "
           "norm is applied in forward but not in backward", encoder_module.Encoder, "backward",
           _final_norm_skipped, "model:pre"),
    Mutant("tied embeddings: gradient overwritten", "nn.Embedding.backward", "dW = ... instead of +=, "
           "losing the output projection's share", nn.Embedding, "backward", _tied_embedding_overwritten,
           "model:tied"),
    Mutant("decoder: memory gradient dropped in one layer", "nn.Decoder.backward", "layer 0's d_memory not "
           "added", decoder_module.Decoder, "backward", _decoder_drops_first_layer_memory, "model"),
    Mutant("cross-attention: value path missing from d_memory", "nn.MultiHeadAttention.backward",
           "d_memory only through the keys", nn.MultiHeadAttention, "backward", _memory_value_path_dropped,
           "module:cross_attention", "zero"),
    Mutant("self-attention: k and v gradients swapped", "nn.SelfAttention.backward", "the fused projection "
           "gets (dq, dv, dk)", nn.SelfAttention, "backward", _fused_key_value_swapped, "module:self_attention"),
    Mutant("heads merged without the transpose", "nn.MultiHeadAttention.merge_heads", "(B, H, T, Dh) "
           "reshaped straight to (B, T, D)", nn.MultiHeadAttention, "merge_heads", _heads_merged_in_wrong_order,
           "module:self_attention"),
    Mutant("embeddings: sqrt(d_model) scale forgotten", "models.Transformer._embed_backward", "the "
           "embedding gradient is not multiplied by sqrt(d_model)", Transformer, "_embed_backward",
           _embedding_scale_forgotten, "model", "constant factor"),
    Mutant("adam: bias correction of the next step", "optim.Adam", "1 - beta^(t+1) instead of 1 - beta^t",
           optim.Adam, "_update", _adam_bias_correction_next_step, "optimizer"),
    Mutant("adam: no bias correction", "optim.Adam", "m and v used uncorrected", optim.Adam, "_update",
           _adam_without_bias_correction, "optimizer"),
]


@dataclass
class MutantResult:
    """What the checks said about one mutant."""

    mutant: Mutant
    caught: bool
    caught_fast: bool | None
    diagnosis: str
    report: GradcheckReport


def run_mutants(mutants: list[Mutant] | None = None, seed: int = 0, fast: bool = True,
                tol: float | None = None) -> list[MutantResult]:
    """Apply each mutant and run its check (and, for blocks and models, the fast directional check)."""
    results = []
    for mutant in mutants or MUTANTS:
        with mutant.applied():
            report = _with_tolerance(run_check(mutant.check, seed), tol)
            fast_report = None
            if fast and mutant.check.partition(":")[0] in ("module", "model"):
                fast_report = _with_tolerance(run_check(mutant.check, seed, directions=2), tol)
        diagnosis = _diagnosis(report)
        results.append(MutantResult(mutant, not report.passed,
                                    None if fast_report is None else not fast_report.passed, diagnosis, report))
    return results


def _hint(note: str) -> str:
    """The diagnosis part of a row's note (not the sampling or resolution remarks)."""
    parts = [part for part in note.split("; ") if not part.endswith(("entries", "direction(s)"))]
    return parts[-1] if parts else ""


def _diagnosis(report: GradcheckReport) -> str:
    """``"3 tensor(s) wrong (q, k, v); q: <its hint>"``: which tensors failed, and the most telling hint
    (a recognisable pattern before a mere "wrong at k of n entries")."""
    failures = report.failures
    if not failures:
        return ""
    names = [row.tensor for row in failures]
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    telling = sorted(failures, key=lambda row: _hint(row.note).startswith("wrong at") or not _hint(row.note))
    return f"{len(names)} tensor(s) wrong ({shown}); {telling[0].tensor}: {_hint(telling[0].note)}"


def _with_tolerance(report: GradcheckReport, tol: float | None) -> GradcheckReport:
    """The same report judged with a looser tolerance (to show which mutants a weaker checker lets through)."""
    if tol is None:
        return report
    weakened = GradcheckReport(tol=tol)
    for row in report.results:
        passed = row.passed or (numpy.isfinite(row.max_rel_error) and row.max_rel_error < tol)
        weakened.results.append(type(row)(row.op, row.tensor, row.shape, row.max_rel_error, passed,
                                          row.worst_index, row.note))
    return weakened


def results_table(results: list[MutantResult]) -> str:
    """One line per mutant: caught or ESCAPED, by which check, fast check, and the diagnosis."""
    header = ("mutant", "where", "check", "caught", "fast", "diagnosis")
    rows = [(r.mutant.name, r.mutant.where, r.mutant.check, "yes" if r.caught else "ESCAPED",
             "-" if r.caught_fast is None else ("yes" if r.caught_fast else "ESCAPED"),
             r.diagnosis) for r in results]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
             for row in [header, *rows]]
    caught = sum(r.caught for r in results)
    fast = [r.caught_fast for r in results if r.caught_fast is not None]
    lines.append(f"caught {caught} of {len(results)} mutants ({100 * caught / len(results):.0f}%); "
                 f"the fast directional check caught {sum(fast)} of the {len(fast)} block and model mutants")
    return "\n".join(lines)
