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

import numpy as np

from .exercises import MODULES, WrongSolution
from .grader import ExerciseReport, check
from .exercises.attention_pieces import merge_heads_reference as merge_heads
from .exercises.attention_pieces import split_heads_reference as split_heads
from .hints import softmax
from .wrong_solution_parts import (PAD, adam, adam_v_from_abs, attention_grads, attention_weights,
                                   attention_without_guard, central_forward_difference, central_not_restored,
                                   central_without_two, clipped, entropy_direct, layernorm_grads, lazy_adam,
                                   lazy_attention, lazy_layernorm, lazy_linear, lazy_parameters, lazy_softmax,
                                   library_numerical_gradient, loss_grad, mha_backward, overwrite, positional,
                                   residual_always_post, residual_memory_dropped, residual_without_identity, rows,
                                   stack_last_memory, stack_wrong_order, transformer_parameters)


def catalogue() -> list[WrongSolution]:
    """Every wrong solution: this module's, then each exercise module's ``WRONG_SOLUTIONS``."""
    return (_gradients_and_basic_ops() + _positions_masks_and_dropout() + _attention_to_decoding()
            + [wrong for module in MODULES for wrong in getattr(module, "WRONG_SOLUTIONS", [])])


def _gradients_and_basic_ops() -> list[WrongSolution]:
    """Finite differences, linear, ReLU, GELU, softmax, the loss, layer norm (lessons 1-4)."""
    W = WrongSolution
    return [
        W("central_difference", "forward difference (error ~ h)", central_forward_difference),
        W("central_difference", "divides by h instead of 2h", central_without_two, "factor"),
        W("central_difference", "the nudged entry is never put back", central_not_restored),
        W("central_difference", "npformer's numerical_gradient", library_numerical_gradient, "npformer's own"),

        W("linear_backward", "dW = dout^T x (transposed)", lambda x, W_, b, dout: (
            dout @ W_.T, rows(dout).T @ rows(x), rows(dout).sum(0))),
        W("linear_backward", "db summed over the batch only", lambda x, W_, b, dout: (
            dout @ W_.T, rows(x).T @ rows(dout), dout.sum(0)), "broadcast"),
        W("linear_backward", "db averaged over positions", lambda x, W_, b, dout: (
            dout @ W_.T, rows(x).T @ rows(dout), rows(dout).mean(0)), "not a mean"),
        W("linear_backward", "dx = dout W (no transpose)", lambda x, W_, b, dout: (
            dout @ W_, rows(x).T @ rows(dout), rows(dout).sum(0))),
        W("linear_backward", "a pass-through to npformer's", lazy_linear, "npformer's own"),

        W("relu_backward", "the mask inverted (x < 0)", lambda x, dout: dout * (x < 0)),
        W("relu_backward", "returns the mask without dout", lambda x, dout: (x > 0).astype(float),
          "does not change when dout does"),
        W("relu_backward", "the mask taken from dout", lambda x, dout: np.maximum(dout, 0), "does not depend on x"),
        W("gelu_backward", "the derivative of x * Phi(x) without the x * phi(x) term",
          lambda x, dout: dout * 0.5 * (1 + np.vectorize(math.erf)(x / np.sqrt(2))), "wrong in between"),
        W("gelu_backward", "the tanh approximation's derivative", lambda x, dout: dout * (
            0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
            + 0.5 * x * (1 - np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)) ** 2)
            * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x**2)), "close to this GELU"),

        W("softmax", "no max subtracted (overflows near 1000)", lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
        W("softmax", "normalised over the first axis", lambda x: np.exp(x - x.max(0, keepdims=True))
          / np.exp(x - x.max(0, keepdims=True)).sum(0, keepdims=True)),
        W("softmax_backward", "only the diagonal of the Jacobian",
          lambda x, dout: dout * softmax(x) * (1 - softmax(x)), "diagonal"),
        W("softmax_backward", "the row sum without p", lambda x, dout: softmax(x) * (
            dout - dout.sum(-1, keepdims=True)), "sum to zero"),
        W("softmax_backward", "the row sum over the first axis", lambda x, dout: softmax(x) * (
            dout - (dout * softmax(x)).sum(0, keepdims=True)), "along axis 0"),
        W("softmax_backward", "a pass-through to npformer's", lazy_softmax, "npformer's own"),

        W("cross_entropy_backward", "averaged over every position, padding included",
          lambda logits, targets, dloss: loss_grad(logits, targets, dloss, per_token=False)),
        W("cross_entropy_backward", "padding not zeroed",
          lambda logits, targets, dloss: loss_grad(logits, targets, dloss, zero_padding=False), "padded"),
        W("cross_entropy_backward", "dloss forgotten", lambda logits, targets, dloss: loss_grad(logits, targets, 1.0),
          "factor"),
        W("smoothed_cross_entropy_backward", "smoothing over V - 1 classes", lambda logits, targets, s, dloss:
          loss_grad(logits, targets, dloss, s, classes=logits.shape[-1] - 1)),
        W("smoothed_cross_entropy_backward", "smoothing forgotten",
          lambda logits, targets, s, dloss: loss_grad(logits, targets, dloss)),

        W("layernorm_backward", "the variance term dropped",
          lambda x, gamma, beta, dout: layernorm_grads(x, gamma, beta, dout, variance_term=False), "x_hat"),
        W("layernorm_backward", "the variance term with the wrong sign",
          lambda x, gamma, beta, dout: layernorm_grads(x, gamma, beta, dout, sign=1), "x_hat"),
        W("layernorm_backward", "the mean term dropped",
          lambda x, gamma, beta, dout: layernorm_grads(x, gamma, beta, dout, mean_term=False), "sum to zero"),
        W("layernorm_backward", "dgamma not summed over rows",
          lambda x, gamma, beta, dout: layernorm_grads(x, gamma, beta, dout, d_gamma="none"), "broadcast"),
        W("layernorm_backward", "dgamma averaged over rows",
          lambda x, gamma, beta, dout: layernorm_grads(x, gamma, beta, dout, d_gamma="mean"), "not a mean"),
        W("layernorm_backward", "a pass-through to npformer's", lazy_layernorm, "npformer's own"),
    ]


def _positions_masks_and_dropout() -> list[WrongSolution]:
    """Positions, masks, the embedding and dropout (lessons 5, 6, 9, 10)."""
    W = WrongSolution
    return [
        W("positional_encoding", "sin and cos swapped", lambda max_len, d_model: positional(max_len, d_model, swap=True)),
        W("positional_encoding", "exponent i instead of 2i",
          lambda max_len, d_model: positional(max_len, d_model, exponent_of_i=True), "columns 0 and 1 are right"),
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

        W("embedding_backward", "dW[ids] = dout (repeats overwrite)", lambda ids, W_, dout: overwrite(ids, W_, dout),
          "occur more than once"),
        W("embedding_backward", "the gradient of W summed over the vocabulary",
          lambda ids, W_, dout: np.broadcast_to(rows(dout).sum(0), W_.shape).copy()),
        W("dropout_backward", "the 1/(1-p) scale forgotten", lambda x, keep, p, dout: dout * keep, "factor"),
        W("dropout_backward", "the mask forgotten", lambda x, keep, p, dout: dout / (1 - p)),
    ]


def _attention_to_decoding() -> list[WrongSolution]:
    """Attention, heads, parameters, Adam and the schedule, BLEU, entropy, length penalty, residuals
    (lessons 7-15)."""
    W = WrongSolution
    return [
        W("attention", "no 1/sqrt(d) scale", lambda q, k, v, mask: attention_weights(q, k, mask, scale=False) @ v),
        W("attention", "the mask forgotten", lambda q, k, v, mask: attention_weights(q, k, None) @ v),
        W("attention", "NaN on a fully masked query", attention_without_guard, "NaN"),
        W("attention_backward", "only the diagonal of the softmax Jacobian",
          lambda q, k, v, mask, dout: attention_grads(q, k, v, mask, dout, diagonal=True), "diagonal"),
        W("attention_backward", "dk from dS, not dS^T (transposed)",
          lambda q, k, v, mask, dout: attention_grads(q, k, v, mask, dout, transpose_dk=False), "transpose"),
        W("attention_backward", "the 1/sqrt(d) scale forgotten in dq and dk",
          lambda q, k, v, mask, dout: attention_grads(q, k, v, mask, dout, scale_grads=False), "1/sqrt(d_head)"),
        W("attention_backward", "a pass-through to npformer's", lazy_attention, "npformer's own"),

        W("split_heads", "a bare reshape", lambda x, n_heads: x.reshape(
            x.shape[0], n_heads, x.shape[1], x.shape[2] // n_heads), "a reshape alone"),
        W("split_heads", "heads taken from interleaved columns", lambda x, n_heads: x.reshape(
            x.shape[0], x.shape[1], x.shape[2] // n_heads, n_heads).transpose(0, 3, 1, 2), "spaced H apart"),
        W("merge_heads", "a bare reshape", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "a reshape alone"),
        W("merge_heads", "features interleaved across heads", lambda x: x.transpose(0, 2, 3, 1).reshape(
            x.shape[0], x.shape[2], -1), "interleaved"),
        W("multi_head_attention", "scores scaled by 1/sqrt(D), not 1/sqrt(Dh)",
          lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: merge_heads(attention_weights(
              split_heads(query @ Wq, n_heads) / np.sqrt(n_heads), split_heads(memory @ Wk, n_heads), mask)
              @ split_heads(memory @ Wv, n_heads)) @ Wo, "depends on the number of heads"),
        W("multi_head_attention", "no output projection", lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: merge_heads(
            attention_weights(split_heads(query @ Wq, n_heads), split_heads(memory @ Wk, n_heads), mask) @ split_heads(memory @ Wv, n_heads))),
        W("multi_head_attention", "keys and values from the query, not the memory",
          lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: merge_heads(attention_weights(
              split_heads(query @ Wq, n_heads), split_heads(query @ Wk, n_heads), None) @ split_heads(query @ Wv, n_heads)) @ Wo),
        W("multi_head_attention_backward", "dmemory from the values' path only",
          lambda *args: mha_backward(*args, paths=("v",)), "through the values alone"),
        W("multi_head_attention_backward", "dmemory from the keys' path only",
          lambda *args: mha_backward(*args, paths=("k",)), "through the keys alone"),
        W("multi_head_attention_backward", "dWq averaged over the positions", lambda *args: tuple(
            grad / rows(args[0]).shape[0] if index == 2 else grad for index, grad in enumerate(mha_backward(*args))),
          "the number of positions that use the weight"),
        W("multi_head_attention_backward", "Wo skipped on the way back", lambda *args: mha_backward(*args, no_wo=True)),

        W("transformer_parameters", "no biases", lambda *sizes: transformer_parameters(*sizes, biases=False)),
        W("transformer_parameters", "the final layer norms of a pre-norm model",
          lambda *sizes: transformer_parameters(*sizes) + 2 * 2 * sizes[2], "d_model"),
        W("transformer_parameters", "the output layer tied to the embedding",
          lambda *sizes: transformer_parameters(*sizes, tied=True)),
        W("transformer_parameters", "npformer's model counted", lazy_parameters, "npformer's own"),

        W("adam_step", "no bias correction", lambda *args: adam(*args, correction_step=10**9),
          "a factor that tends to 1"),
        W("adam_step", "bias correction with step - 1 (off by one)",
          lambda *args: adam(*args, correction_step=args[4] - 1), "one step behind"),
        W("adam_step", "bias correction with step + 1 (off by one)",
          lambda *args: adam(*args, correction_step=args[4] + 1), "one step ahead"),
        W("adam_step", "eps under the square root", lambda *args: adam(*args, eps_inside=True),
          "wrong where they are tiny"),
        W("adam_step", "eps left out", lambda *args: adam(*args[:-1], 0.0), "does not depend on eps"),
        W("adam_step", "v from |grad|, not its square", adam_v_from_abs),
        W("adam_step", "a pass-through to npformer's", lazy_adam, "npformer's own"),
        W("noam_lr", "the warm-up's minimum with the wrong exponent",
          lambda step, d_model, warmup_steps: d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.0)),
        W("noam_lr", "no d_model factor", lambda step, d_model, warmup_steps: min(step**-0.5, step * warmup_steps**-1.5)),
        W("noam_lr", "the step counted from 0", lambda step, d_model, warmup_steps: d_model**-0.5 * min(
            max(step - 1, 1e-9)**-0.5, (step - 1) * warmup_steps**-1.5)),

        W("modified_precision", "matches not clipped", lambda h, r, n: clipped(h, r, n, clip=False), "not clipped"),
        W("modified_precision", "the total counts the reference's n-grams",
          lambda h, r, n: (clipped(h, r, n)[0], max(len(r[0]) - n + 1, 0))),
        W("attention_entropy", "-sum(w log w) with no guard for zeros", entropy_direct, "NaN"),
        W("attention_entropy", "in bits (log2)", lambda w: -np.sum(np.where(w > 0, w * np.log2(np.where(w > 0, w, 1)), 0), -1)),
        W("length_penalty", "(5 + length)^alpha / 6", lambda length, alpha: (5 + length) ** alpha / 6),
        W("length_penalty", "length^alpha (no smoothing)", lambda length, alpha: float(length) ** alpha),

        W("residual_backward", "the identity path forgotten", residual_without_identity, "identity path"),
        W("residual_backward", "the post-norm formula for both kinds", residual_always_post, "pre-norm"),
        W("residual_backward_with_memory", "d_memory dropped", residual_memory_dropped, "d_memory is zero"),
        W("stack_backward_with_memory", "only the last layer's memory gradient", stack_last_memory,
          "layers of this case read it"),
        W("stack_backward_with_memory", "layers undone first to last", stack_wrong_order, "first layer first"),
    ]


@dataclass
class Outcome:
    wrong: WrongSolution
    report: ExerciseReport

    @property
    def caught(self) -> bool:
        return not self.report.passed

    @property
    def named(self) -> bool:
        """The hint's words are in the report, its hints' fixes shown (always True for a mistake without
        expected words)."""
        return not self.wrong.hint or self.wrong.hint in self.report.with_fixes()

    @property
    def hinted(self) -> bool:
        """The report as a student first reads it (no fix named) says what fails beyond "wrong": a hint
        (a property of the answer), or the error the function raised or was refused with."""
        return bool(self.report.message) or "hint for " in str(self.report)


def run(unseen_seed: int = 0, mistakes: list[str] | None = None) -> list[Outcome]:
    """Grade every wrong solution, or those whose ``mistake`` is in ``mistakes`` (the unseen cases
    drawn with ``unseen_seed``)."""
    outcomes = []
    with np.errstate(all="ignore"):
        for wrong in catalogue():
            if mistakes is not None and wrong.mistake not in mistakes:
                continue
            outcomes.append(Outcome(wrong, check(wrong.exercise, wrong.function, strict=False, unseen_seed=unseen_seed,
                                                 reveal=False)))
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
