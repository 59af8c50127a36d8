"""Lesson 3's loss itself, and the auto-graded parts of its open questions.

``smoothed_cross_entropy_loss`` is the forward pass the lesson's derivation walks back: a stable
log-softmax, the smoothed target distribution, one loss per position, the mean over the positions
that are not ``<pad>``; graded against ``ops.cross_entropy_forward``, on logits of 1e4 too.
``smoothing_optimum`` (question 2) is the margin of the correct logit that minimises the smoothed loss
of one row whose other ``V - 1`` logits are 0, and that smallest loss: its reference finds the margin by
bisection on the slope that ``ops.cross_entropy_backward`` gives, so no formula of the answer is stored.
``padding_gradient_scale`` (question 3) is the factor by which dividing by ``B * T`` instead of ``N``
scales a counted position's gradient, measured on npformer's gradients of the two losses.
"""

from __future__ import annotations

import numpy

from ... import ops
from ...tokens import PAD_ID
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size


# -- the loss: forward pass of lesson 3's chain --------------------------------------------------------

def _smoothed_loss(logits, targets, label_smoothing):
    """logits (..., V), targets (...) with <pad> = 0, eps -> the mean smoothed cross-entropy, a float."""
    return float(ops.cross_entropy_forward(logits, targets, ignore_index=PAD_ID, label_smoothing=label_smoothing)[0])


def _targets(rng, batch, length, vocab, pad_fraction):
    targets = rng.integers(1, vocab, size=(batch, length))
    targets[rng.random((batch, length)) < pad_fraction] = PAD_ID
    return targets


def _loss_cases(rng):
    padded = _targets(rng, 3, 5, 7, 0.0)
    padded[0, :] = PAD_ID                      # a row of padding only
    padded[2, 2:] = PAD_ID                     # a padded tail
    return [
        Case("B=3, T=5, V=7, eps 0.1: a row of padding only, a padded tail",
             {"logits": 2 * normal(rng, 3, 5, 7), "targets": padded, "label_smoothing": 0.1}),
        Case("B=2, T=3, V=6, eps 0: no smoothing, no padding",
             {"logits": 2 * normal(rng, 2, 3, 6), "targets": _targets(rng, 2, 3, 6, 0.0), "label_smoothing": 0.0}),
        Case("B=1, T=4, V=5, eps 0.2: logits of about 1e4",
             {"logits": 1e4 * normal(rng, 1, 4, 5), "targets": _targets(rng, 1, 4, 5, 0.0), "label_smoothing": 0.2}),
        Case("B=2, T=2, V=4, eps 0.1: padding only (the loss is 0)",
             {"logits": normal(rng, 2, 2, 4), "targets": numpy.zeros((2, 2), dtype=int), "label_smoothing": 0.1}),
    ]


def _unseen_loss(rng):
    batch, length, vocab = size(rng, 1, 4), size(rng, 1, 6), size(rng, 2, 9)
    scale = float(rng.choice([1.0, 3.0, 3e3]))
    targets = _targets(rng, batch, length, vocab, 0.3)
    targets.flat[0] = int(rng.integers(1, vocab))
    eps = float(rng.uniform(0.0, 0.3))
    return [Case(f"B={batch}, T={length}, V={vocab}, logits of about {scale:g}, eps {eps:.2f}",
                 {"logits": scale * normal(rng, batch, length, vocab), "targets": targets, "label_smoothing": eps})]


def _loss_hint(got, expected, inputs, output):
    got = numpy.asarray(got, dtype=float)
    if got.shape != numpy.shape(expected):
        return Hint(f"shape {got.shape}: the loss is one number, the mean over the positions that count")
    if not numpy.isfinite(got).all():
        return Hint("your loss is not finite, yet every log-probability of a row is a finite number, "
                    "however large the logits: one of them is 0 after the largest logit is taken off")
    targets = numpy.asarray(inputs["targets"])
    counted = int((targets != PAD_ID).sum())
    if counted and counted != targets.size and numpy.isclose(got * targets.size, expected * counted, rtol=1e-9):
        return Hint(f"your loss is the right one times N / (B T) = {counted}/{targets.size}: it falls as the batch "
                    "holds more padding", "the mean is over the positions whose target is not <pad>")
    plain = _smoothed_loss(inputs["logits"], targets, 0.0)
    if inputs["label_smoothing"] > 0 and numpy.isclose(got, plain, rtol=1e-9):
        return Hint("your loss does not change with label_smoothing: it is the one-hot target's loss",
                    "the loss of a position is -sum_j q_j log p_j over the whole row")
    return ""


# -- question 2: the margin smoothing prefers, and the loss there ---------------------------------------

def _row_loss_and_slope(margin, label_smoothing, vocab_size):
    """The smoothed loss of the row (margin, 0, ..., 0) with target 0 counted, and its slope in the margin."""
    row = numpy.zeros((1, vocab_size))
    row[0, 0] = margin
    loss, cache = ops.cross_entropy_forward(row, numpy.array([0]), ignore_index=None, label_smoothing=label_smoothing)
    return float(loss), float(ops.cross_entropy_backward(1.0, cache)[0, 0])


def _smoothing_optimum(label_smoothing, vocab_size):
    """(margin, loss): the margin where the loss's slope crosses 0 (bisection), and the loss there."""
    low, high = -50.0, 50.0
    for _ in range(200):
        middle = (low + high) / 2
        if _row_loss_and_slope(middle, label_smoothing, vocab_size)[1] < 0:
            low = middle
        else:
            high = middle
    margin = (low + high) / 2
    return margin, _row_loss_and_slope(margin, label_smoothing, vocab_size)[0]


def _optimum_cases(rng):
    return [Case("eps 0.1, V = 10 (the figure's)", {"label_smoothing": 0.1, "vocab_size": 10}),
            Case("eps 0.3, V = 10 (the figure's)", {"label_smoothing": 0.3, "vocab_size": 10}),
            Case("eps 0.1, V = 37000 (the paper's vocabulary)", {"label_smoothing": 0.1, "vocab_size": 37000}),
            Case("eps 0.9, V = 2", {"label_smoothing": 0.9, "vocab_size": 2})]


def _unseen_optimum(rng):
    eps, vocab = float(rng.uniform(0.02, 0.6)), size(rng, 2, 50000)
    return [Case(f"eps {eps:.3f}, V = {vocab}", {"label_smoothing": eps, "vocab_size": vocab})]


def _optimum_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got, dtype=float))
    if not numpy.isfinite(got):
        return ""
    eps, vocab = inputs["label_smoothing"], inputs["vocab_size"]
    if output == "margin":
        slope = _row_loss_and_slope(got, eps, vocab)[1]
        return Hint(f"at your margin the loss still {'falls' if slope < 0 else 'rises'} (its slope is {slope:.3g}): "
                    "at the minimum p_t is what the smoothed target gives the correct class")
    if got < float(expected) - 1e-9:
        return Hint(f"your smallest loss {got:.6g} is below the loss at any margin: no margin reaches it")
    if got > float(expected) + 1e-9:
        return Hint(f"your smallest loss {got:.6g} is above the loss at the best margin: a margin does better")
    return ""


# -- question 3: dividing by every position --------------------------------------------------------------

def _padding_gradient_scale(targets):
    """What dividing by B*T instead of N multiplies a counted position's gradient by, read off npformer's
    gradients of the two losses on the same logits (the second counts every position)."""
    counted = (numpy.asarray(targets) != PAD_ID).astype(int)           # target 1 where counted, <pad> elsewhere
    logits = numpy.zeros((*counted.shape, 3))
    by_counted = ops.cross_entropy_backward(1.0, ops.cross_entropy_forward(logits, counted, ignore_index=PAD_ID)[1])
    every = ops.cross_entropy_backward(1.0, ops.cross_entropy_forward(logits, numpy.ones_like(counted),
                                                                       ignore_index=None)[1])
    where = tuple(numpy.argwhere(counted)[0])
    return float(every[where][0] / by_counted[where][0])


def _scale_targets(rng, batch, length, lengths):
    targets = rng.integers(1, 3, size=(batch, length))
    for row, real in enumerate(lengths):
        targets[row, real:] = PAD_ID
    return targets


def _scale_cases(rng):
    return [Case("B=4, T=50: short sentences of 5, 8, 3 and 50 tokens",
                 {"targets": _scale_targets(rng, 4, 50, [5, 8, 3, 50])}),
            Case("B=3, T=6: long sentences, no padding", {"targets": _scale_targets(rng, 3, 6, [6, 6, 6])}),
            Case("B=2, T=10: one real token in all", {"targets": _scale_targets(rng, 2, 10, [1, 0])})]


def _unseen_scale(rng):
    batch, length = size(rng, 1, 6), size(rng, 2, 40)
    lengths = [size(rng, 0, length) for _ in range(batch)]
    lengths[0] = max(lengths[0], 1)
    return [Case(f"B={batch}, T={length}, lengths {lengths}", {"targets": _scale_targets(rng, batch, length, lengths)})]


def _scale_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got, dtype=float))
    if got > 1 + 1e-12:
        return Hint(f"your factor {got:.4g} is above 1, yet B T is at least N: a larger divisor cannot enlarge a "
                    "gradient")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("smoothed_cross_entropy_loss", "smoothed_cross_entropy_loss(logits, targets, label_smoothing) -> "
             "float: logits (..., V), targets (...) integers with <pad> = 0; the mean over the non-<pad> "
             "positions of -sum_j q_j log p_j", "03", _smoothed_loss, _loss_cases, ("loss",),
             hints=(_loss_hint,), unseen=_unseen_loss),
    Exercise("smoothing_optimum", "smoothing_optimum(label_smoothing, vocab_size) -> (margin, smallest loss): "
             "the row (margin, 0, ..., 0), target 0", "03", _smoothing_optimum, _optimum_cases,
             ("margin", "loss"), hints=(_optimum_hint,), unseen=_unseen_optimum, question=2),
    Exercise("padding_gradient_scale", "padding_gradient_scale(targets) -> float: targets (B, T) with <pad> = 0; "
             "what a counted position's gradient is multiplied by when the loss divides by B*T, not N", "03",
             _padding_gradient_scale, _scale_cases, ("factor",), hints=(_scale_hint,), unseen=_unseen_scale,
             question=3),
]


# -- the mistakes students make ----------------------------------------------------------------------------

def _log_of_softmax(logits, targets, label_smoothing):
    with numpy.errstate(over="ignore", divide="ignore", invalid="ignore"):
        probs = numpy.exp(logits) / numpy.exp(logits).sum(axis=-1, keepdims=True)
        vocab = logits.shape[-1]
        q = (1 - label_smoothing) * numpy.eye(vocab)[targets] + label_smoothing / vocab
        losses = -(q * numpy.log(probs)).sum(axis=-1)
    counted = targets != PAD_ID
    return float((losses * counted).sum() / max(int(counted.sum()), 1))


def _stable_log_probs(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(axis=-1, keepdims=True))


def _mean_over_every_position(logits, targets, label_smoothing):
    vocab = logits.shape[-1]
    q = (1 - label_smoothing) * numpy.eye(vocab)[targets] + label_smoothing / vocab
    losses = -(q * _stable_log_probs(logits)).sum(axis=-1)
    return float((losses * (targets != PAD_ID)).sum() / targets.size)


def _smoothing_forgotten(logits, targets, label_smoothing):
    losses = -numpy.take_along_axis(_stable_log_probs(logits), targets[..., None], axis=-1)[..., 0]
    counted = targets != PAD_ID
    return float((losses * counted).sum() / max(int(counted.sum()), 1))


def _numpy_row_loss(margin, label_smoothing, vocab_size):
    """The smoothed loss of the row (margin, 0, ..., 0), target 0, in NumPy."""
    row = numpy.zeros(vocab_size)
    row[0] = margin
    log_probs = _stable_log_probs(row)
    q = numpy.full(vocab_size, label_smoothing / vocab_size)
    q[0] += 1 - label_smoothing
    return float(-(q * log_probs).sum())


def _margin_without_the_one(label_smoothing, vocab_size):
    margin = numpy.log(vocab_size * (1 - label_smoothing) / label_smoothing)
    return margin, _numpy_row_loss(margin, label_smoothing, vocab_size)


def _loss_of_the_target_only(label_smoothing, vocab_size):
    margins = numpy.linspace(-20, 40, 60001)                          # the right margin, searched on a grid
    margin = margins[numpy.argmin([_numpy_row_loss(m, label_smoothing, vocab_size) for m in margins[::100]]) * 100]
    q_target = 1 - label_smoothing + label_smoothing / vocab_size
    return margin, -q_target * numpy.log(q_target)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("smoothed_cross_entropy_loss", "log(softmax(z)): overflows on logits of 1e4", _log_of_softmax,
                  "not finite"),
    WrongSolution("smoothed_cross_entropy_loss", "the mean over every position, padding included",
                  _mean_over_every_position, "N / (B T)"),
    WrongSolution("smoothed_cross_entropy_loss", "the smoothing forgotten", _smoothing_forgotten,
                  "does not change with label_smoothing"),
    WrongSolution("smoothing_optimum", "log(V (1 - eps) / eps): the other logits' share forgotten",
                  _margin_without_the_one, "at your margin the loss still"),
    WrongSolution("smoothing_optimum", "the smallest loss from the correct class's term alone",
                  _loss_of_the_target_only, "below the loss at any margin"),
    WrongSolution("padding_gradient_scale", "B T / N: the factor inverted",
                  lambda targets: targets.size / max(int((targets != PAD_ID).sum()), 1), "above 1"),
]
