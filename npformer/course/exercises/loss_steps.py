"""The steps of cross-entropy's derivation (lesson 3), each graded on its own before its final exercise.

The loss, written as a chain of named quantities (``ops_backward``'s finals take the same inputs)::

    log_p = log_softmax(logits)                       (..., V)   the log-probabilities
    q = (1 - eps) onehot(target) + eps / V            (..., V)   the target distribution (eps = 0: one-hot)
    loss_pos = -sum_j q_j log_p_j                     (...)      one number per position
    loss = sum of loss_pos over the N positions whose target is not <pad>, / max(N, 1)

A student walks it back from ``dloss``: through the mean over the counted positions
(``cross_entropy_d_position_losses``: dL/dloss_pos), through the per-position loss
(``cross_entropy_d_log_probs``, and ``smoothed_cross_entropy_d_log_probs`` with the smoothed targets:
dL/dlog_p), and, in the final exercise, through the log-softmax. The references here are written
from that chain with NumPy; the finals keep npformer's op as theirs.
"""

from __future__ import annotations

import numpy

from ...tokens import PAD_ID
from .base import Exercise, WrongSolution
from .ops_backward import loss_cases, unseen_loss


def _position_weights(targets, dloss):
    """dL/dloss_pos: dloss / max(N, 1) where the target counts, 0 at <pad>; the shape of targets."""
    counted = numpy.asarray(targets) != PAD_ID
    return dloss * counted / max(int(counted.sum()), 1)


def _target_distribution(targets, vocab, label_smoothing):
    return (1 - label_smoothing) * numpy.eye(vocab)[targets] + label_smoothing / vocab


def _d_position_losses(logits, targets, dloss):
    """dL/dloss_pos, one number per position: the shape of targets."""
    return _position_weights(targets, dloss)


def _d_log_probs(logits, targets, dloss):
    """dL/dlog_p = -dL/dloss_pos * onehot(target): the shape of logits."""
    return -_position_weights(targets, dloss)[..., None] * _target_distribution(targets, logits.shape[-1], 0.0)


def _smoothed_d_log_probs(logits, targets, label_smoothing, dloss):
    """dL/dlog_p = -dL/dloss_pos * q, q the smoothed target distribution: the shape of logits."""
    q = _target_distribution(targets, logits.shape[-1], label_smoothing)
    return -_position_weights(targets, dloss)[..., None] * q


# -- hints: what a wrong answer does, never the fix ---------------------------------------------------

def _counted(inputs):
    return numpy.asarray(inputs["targets"]) != PAD_ID


def _position_hint(got, expected, inputs, output):
    counted = _counted(inputs)
    if got.shape != expected.shape:
        if got.shape == numpy.shape(inputs["logits"]):
            return f"shape {got.shape}: the loss of one position is one number, so this is one per position"
        return ""
    if counted.all() or not counted.any() or numpy.any(got[~counted]):
        return ""
    ratio = got[counted] / expected[counted]
    if numpy.allclose(ratio, counted.sum() / counted.size, rtol=1e-9):
        return (f"right where no target is <pad>, too small where the batch has padding: every counted position "
                f"gets {int(counted.sum())}/{counted.size} of its share here")
    return ""


def _one_hot_hint(got, expected, inputs, output):
    counted = _counted(inputs)
    if got.shape != expected.shape or not counted.any():
        return ""
    away = numpy.abs(expected) == 0
    if numpy.any(got[counted][away[counted]]):
        return ("nonzero away from each position's target: the loss of a position reads one entry of its row of "
                "log p, the target's")
    return ""


def _smoothed_hint(got, expected, inputs, output):
    counted = _counted(inputs)
    if got.shape != expected.shape or not counted.any():
        return ""
    rows_got, rows_expected = got[counted], expected[counted]
    targets = numpy.asarray(inputs["targets"])[counted]
    on_target = numpy.eye(got.shape[-1], dtype=bool)[targets]
    vocab = got.shape[-1]
    if inputs["label_smoothing"] > 0 and not numpy.any(rows_got[~on_target]):
        return ("zero at every entry but the target's: with smoothing, the loss of a position reads every entry "
                "of its row of log p")
    sums = rows_got.sum(axis=-1) / rows_expected.sum(axis=-1)
    if numpy.allclose(sums, sums[0], rtol=1e-9) and not numpy.isclose(sums[0], 1.0, rtol=1e-9):
        return (f"each counted row sums to {sums[0]:.6g} times what it should: your target distribution's rows "
                "do not sum to 1")
    off = rows_got[~on_target] / rows_expected[~on_target]
    if vocab > 2 and numpy.allclose(off, vocab / (vocab - 1), rtol=1e-9):
        return (f"the entries away from the target are V/(V - 1) = {vocab / (vocab - 1):.4g} times too large, "
                "and the target's too small")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("cross_entropy_d_position_losses",
             "cross_entropy_d_position_losses(logits, targets, dloss) -> dL/dloss_pos, shaped like targets", "03",
             _d_position_losses, loss_cases(False), ("d_position_losses",), hints=(_position_hint,),
             unseen=unseen_loss(False)),
    Exercise("cross_entropy_d_log_probs",
             "cross_entropy_d_log_probs(logits, targets, dloss) -> dL/dlog_p, shaped like logits", "03",
             _d_log_probs, loss_cases(False), ("d_log_probs",), hints=(_one_hot_hint,), unseen=unseen_loss(False)),
    Exercise("smoothed_cross_entropy_d_log_probs",
             "smoothed_cross_entropy_d_log_probs(logits, targets, label_smoothing, dloss) -> dL/dlog_p, shaped "
             "like logits", "03", _smoothed_d_log_probs, loss_cases(True), ("d_log_probs",),
             hints=(_smoothed_hint,), unseen=unseen_loss(True)),
]

DERIVATIONS: dict[str, tuple[str, ...]] = {
    "cross_entropy_backward": ("cross_entropy_d_position_losses", "cross_entropy_d_log_probs"),
    "smoothed_cross_entropy_backward": ("smoothed_cross_entropy_d_log_probs",),
}

TEXTBOOK: dict[str, str] = {
    "cross_entropy_backward": ("dlogits = dloss * (p - onehot(t)) * [t != <pad>] / max(N, 1), p = softmax(logits), "
                               "N the number of targets that are not <pad>"),
    "smoothed_cross_entropy_backward": ("dlogits = dloss * (p - q) * [t != <pad>] / max(N, 1), p = softmax(logits), "
                                        "q = (1 - eps) onehot(t) + eps / V"),
}


# -- realistic mistakes ---------------------------------------------------------------------------------

def _averaged_over_every_position(logits, targets, dloss):
    return dloss * (targets != PAD_ID) / targets.size


def _padding_kept(logits, targets, dloss):
    return numpy.full(targets.shape, dloss / max(int((targets != PAD_ID).sum()), 1))


def _d_log_probs_dense(logits, targets, dloss):
    p = numpy.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return _position_weights(targets, dloss)[..., None] * (p - numpy.eye(logits.shape[-1])[targets])


def _d_log_probs_positive(logits, targets, dloss):
    return -_d_log_probs(logits, targets, dloss)


def _smoothing_forgotten(logits, targets, label_smoothing, dloss):
    return _d_log_probs(logits, targets, dloss)


def _smoothing_off_target_only(logits, targets, label_smoothing, dloss):
    vocab = logits.shape[-1]
    onehot = numpy.eye(vocab)[targets]
    q = (1 - label_smoothing) * onehot + label_smoothing / vocab * (1 - onehot)
    return -_position_weights(targets, dloss)[..., None] * q


def _smoothing_over_the_others(logits, targets, label_smoothing, dloss):
    vocab = logits.shape[-1]
    onehot = numpy.eye(vocab)[targets]
    q = (1 - label_smoothing) * onehot + label_smoothing / (vocab - 1) * (1 - onehot)
    return -_position_weights(targets, dloss)[..., None] * q


WRONG_SOLUTIONS = [
    WrongSolution("cross_entropy_d_position_losses", "divided by every position, padding included",
                  _averaged_over_every_position, "where the batch has padding"),
    WrongSolution("cross_entropy_d_position_losses", "padding positions not zeroed", _padding_kept),
    WrongSolution("cross_entropy_d_log_probs", "p - onehot: the gradient of the logits, one step early",
                  _d_log_probs_dense, "away from each position's target"),
    WrongSolution("cross_entropy_d_log_probs", "the sign: +onehot", _d_log_probs_positive),
    WrongSolution("smoothed_cross_entropy_d_log_probs", "smoothing forgotten", _smoothing_forgotten,
                  "every entry but the target's"),
    WrongSolution("smoothed_cross_entropy_d_log_probs", "eps / V given to the other classes only",
                  _smoothing_off_target_only, "do not sum to 1"),
    WrongSolution("smoothed_cross_entropy_d_log_probs", "eps spread over the V - 1 other classes",
                  _smoothing_over_the_others, "V/(V - 1)"),
]
