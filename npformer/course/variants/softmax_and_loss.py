"""The variants of softmax (lesson 3: its Jacobian and its backward pass) and of the loss (lesson 3:
cross-entropy, with and without label smoothing).

The lesson's forms, over the last axis (n entries, V classes)::

    p = softmax(x),  p_i = exp(x_i) / sum_j exp(x_j)
    loss = mean over the positions whose target is not <pad> of -sum_j q_j log p_j,  p = softmax(z),
    q = (1 - eps) onehot(target) + eps / V   (eps = label_smoothing; 0 without smoothing)

Softmax's forward marks nothing with ``node``: its step is the Jacobian of the whole forward. The loss's
forwards mark the two intermediates its steps differentiate: ``position_loss`` (one number per position,
``cross_entropy_d_position_losses``) and ``log_p`` (the log-probabilities, ``cross_entropy_d_log_probs``
and ``smoothed_cross_entropy_d_log_probs``). Only the class weights change ``dL/dposition_loss``, and the
temperature and the z-loss leave ``dL/dlog_p`` as the lesson's (the temperature acts before log p, the
z-loss's term reads the logits, not log p), so the three steps are practice under variants.
"""

from __future__ import annotations

import numpy

from ...tokens import PAD_ID
from .base import Family, Variant, keep


def _softmax(x):
    exp = numpy.exp(x - x.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def _log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(axis=-1, keepdims=True))


def with_temperature(x, node=keep):
    return _softmax(x / 2.0)


def log_softmax(x, node=keep):
    return _log_softmax(x)


def plus_one(x, node=keep):
    top = numpy.maximum(x.max(axis=-1, keepdims=True), 0.0)
    exp = numpy.exp(x - top)
    return exp / (numpy.exp(-top) + exp.sum(axis=-1, keepdims=True))


def taylor(x, node=keep):
    f = 1.0 + x + x * x / 2.0
    return f / f.sum(axis=-1, keepdims=True)



SOFTMAX = Family(
    "softmax", ("softmax_jacobian", "softmax_backward"),
    (Variant("temperature", "p = softmax(x / T) with the temperature T = 2", with_temperature),
             Variant("log-softmax", "the output is log p: log_softmax(x)_i = x_i - log sum_j exp(x_j)", log_softmax),
             Variant("plus-one", "p_i = exp(x_i) / (1 + sum_j exp(x_j)): a 1 added to the denominator", plus_one),
     Variant("taylor", "p_i = f(x_i) / sum_j f(x_j) with f(x) = 1 + x + x^2 / 2 (the Taylor softmax)",
             taylor)),
    nodes={"softmax_jacobian": "jacobian"})


# -- the loss -------------------------------------------------------------------------------------------

def _smoothed_targets(targets, vocab, label_smoothing):
    onehot = numpy.eye(vocab)[targets]
    return (1 - label_smoothing) * onehot + label_smoothing / vocab


def _mean_over_kept(per_position, targets, weights=None):
    kept = targets != PAD_ID
    weights = kept * (1.0 if weights is None else weights)
    total = weights.sum()
    return float((per_position * weights).sum() / total) if total > 0 else 0.0


def _mean_loss(log_p, targets, label_smoothing, node, per_position, weights=None):
    """The mean over the kept positions of ``per_position(q, log_p)``, ``log_p`` and the per-position
    losses marked with ``node``."""
    log_p = node("log_p", log_p)
    q = _smoothed_targets(targets, log_p.shape[-1], label_smoothing)
    return _mean_over_kept(node("position_loss", per_position(q, log_p)), targets, weights)


def _cross_entropy(q, log_p):
    return -(q * log_p).sum(axis=-1)


def loss_with_temperature(logits, targets, label_smoothing=0.0, node=keep):
    return _mean_loss(_log_softmax(logits / 2.0), targets, label_smoothing, node, _cross_entropy)


def class_weighted(logits, targets, label_smoothing=0.0, node=keep):
    weights = 1.0 + (targets % 3) / 2.0
    return _mean_loss(_log_softmax(logits), targets, label_smoothing, node, _cross_entropy, weights)


def focal(logits, targets, label_smoothing=0.0, node=keep):
    return _mean_loss(_log_softmax(logits), targets, label_smoothing, node,
                      lambda q, log_p: -(q * (1 - numpy.exp(log_p)) ** 2 * log_p).sum(axis=-1))


def z_loss(logits, targets, label_smoothing=0.0, node=keep):
    top = logits.max(axis=-1)
    log_z = top + numpy.log(numpy.exp(logits - top[..., None]).sum(axis=-1))
    return _mean_loss(_log_softmax(logits), targets, label_smoothing, node,
                      lambda q, log_p: _cross_entropy(q, log_p) + 0.1 * log_z ** 2)



CROSS_ENTROPY = Family(
    "cross_entropy", ("cross_entropy_d_position_losses", "cross_entropy_d_log_probs", "cross_entropy_backward",
                      "smoothed_cross_entropy_d_log_probs", "smoothed_cross_entropy_backward"),
    (Variant("temperature", "p = softmax(z / T), the lesson's softmax of the logits divided by the temperature "
                            "T = 2; the rest as in the lesson", loss_with_temperature),
     Variant("class-weighted", "each kept position counts w_t = 1 + (t mod 3) / 2 times (t its target): loss = "
                               "sum w_t loss_pos / sum w_t over the kept positions", class_weighted),
     Variant("focal", "loss_pos = -sum_j q_j (1 - p_j)^2 log p_j (the focal loss, gamma = 2)", focal),
     Variant("z-loss", "loss_pos = -sum_j q_j log p_j + 0.1 (log sum_j exp(z_j))^2 (PaLM's z-loss added)",
             z_loss)),
    nodes={"cross_entropy_d_position_losses": "position_loss", "cross_entropy_d_log_probs": "log_p",
           "smoothed_cross_entropy_d_log_probs": "log_p"},
    practice=("cross_entropy_d_position_losses", "cross_entropy_d_log_probs", "smoothed_cross_entropy_d_log_probs"))
