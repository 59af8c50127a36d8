"""Training and measuring: the tiny task, the training bugs (8, 9, 11) and the two sanity checks.

The tiny task is reversing four tokens (``reversal_batch``) with a one-layer Transformer
(``tiny_transformer``) trained by Adam (``fit``). On it: 8 the decoder input not shifted, 9 a softmax
layer then a loss "from logits", 11 accuracy that counts padding; and the sanity checks
``loss_at_initialisation`` (near ln V) and ``overfit_one_batch`` (the loss on one batch driven to near 0).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ... import ops, optim
from ...models import Transformer, TransformerConfig
from ...tasks.translation import greedy_decode
from ...tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS


# -- the tiny task that the training bugs and the sanity checks train on -------------------------

def reversal_batch(rng: np.random.Generator, size: int, vocab: int, length: int = 4) -> tuple:
    """``src (size, length)``: random ordinary tokens; ``tgt (size, length + 2)``: ``<bos>``, the
    source reversed, ``<eos>``. Every sentence has the same length: no padding."""
    src = rng.integers(len(SPECIAL_TOKENS), vocab, size=(size, length))
    tgt = np.concatenate([np.full((size, 1), BOS_ID), src[:, ::-1], np.full((size, 1), EOS_ID)], axis=1)
    return src, tgt


def tiny_transformer(vocab: int, seed: int = 0) -> Transformer:
    """One layer, ``d_model = 16``, two heads, no dropout: trains in a second."""
    config = TransformerConfig(vocab, vocab, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=16,
                               dropout=0.0)
    return Transformer(config, seed=seed)


def fit(model: Any, batches: Any, loss_and_gradient: Callable, lr: float = 1e-2) -> list[float]:
    """Adam on ``(src, tgt_in, tgt_out)`` batches; ``loss_and_gradient(logits, tgt_out) ->
    (loss, dlogits)``. Returns the loss of every step (before its update)."""
    optimizer = optim.Adam(model, lr=lr)
    losses = []
    for src, tgt_in, tgt_out in batches:
        loss, dlogits = loss_and_gradient(model.forward(src, tgt_in), tgt_out)
        model.zero_grad()
        model.backward(dlogits)
        optimizer.step()
        losses.append(loss)
    return losses


# == training and measuring =======================================================================

# -- 8. the decoder input not shifted -------------------------------------------------------------

def decoder_pairs_buggy(tgt_ids: np.ndarray) -> tuple:
    """``tgt_ids (B, T)`` = ``<bos> y_1 ... y_n <eos>`` -> ``(decoder input, targets)``."""
    return tgt_ids, tgt_ids                        # input t is target t: copy it


def decoder_pairs_fixed(tgt_ids: np.ndarray) -> tuple:
    return tgt_ids[:, :-1], tgt_ids[:, 1:]         # input t is target t - 1: predict the next


REVERSAL_VOCAB = 12      # the four special tokens and eight words
TRAINING_STEPS = 200     # with Adam at 1e-2 on batches of 32: the shifted model learns the task


@functools.lru_cache(maxsize=None)
def train_reversal(decoder_pairs: Callable, steps: int = TRAINING_STEPS) -> tuple:
    """A tiny Transformer trained to reverse four tokens, on fresh batches whose decoder input and
    targets come from ``decoder_pairs``. Returns ``(model, losses)``. Cached: the lesson and the
    tests ask for the same run several times (treat the model as read-only)."""
    rng = np.random.default_rng(0)
    model = tiny_transformer(REVERSAL_VOCAB)
    batches = ((src, *decoder_pairs(tgt)) for src, tgt in
               (reversal_batch(rng, 32, REVERSAL_VOCAB) for _ in range(steps)))
    return model, fit(model, batches, loss_fixed)


def teacher_forced_and_generated(model: Transformer, decoder_pairs: Callable) -> tuple[float, float]:
    """On 200 new sentences, the share reversed exactly: with the true decoder input (teacher
    forcing: every argmax right) and by greedy generation from ``<bos>``."""
    src, tgt = reversal_batch(np.random.default_rng(1), 200, REVERSAL_VOCAB)
    tgt_in, tgt_out = decoder_pairs(tgt)
    with model.evaluating():
        teacher_forced = (model.forward(src, tgt_in).argmax(axis=-1) == tgt_out).all(axis=-1).mean()
    generated = greedy_decode(model, src, max_len=tgt.shape[1])
    exact = [out == row[1:-1].tolist() for out, row in zip(generated, tgt)]
    return float(teacher_forced), float(np.mean(exact))


def generation_gap(decoder_pairs: Callable) -> float:
    """Teacher-forced exact match minus generated exact match after training: what the training
    loss promises and generation does not deliver. Near 0 when right."""
    teacher_forced, generated = teacher_forced_and_generated(train_reversal(decoder_pairs)[0], decoder_pairs)
    return teacher_forced - generated


# -- 9. a softmax layer, then a loss "from logits" ------------------------------------------------

def loss_buggy(logits: Any, targets: Any) -> tuple[float, Any]:
    """``(loss, dlogits)`` of the mean cross-entropy, ``<pad>`` targets ignored."""
    probabilities, softmax_cache = ops.softmax_forward(logits)       # the model's softmax layer
    loss, cache = ops.cross_entropy_forward(probabilities, targets)  # softmaxes again
    return float(loss), ops.softmax_backward(ops.cross_entropy_backward(1.0, cache), softmax_cache)


def loss_fixed(logits: Any, targets: Any) -> tuple[float, Any]:
    loss, cache = ops.cross_entropy_forward(logits, targets)         # one softmax, inside the loss
    return float(loss), ops.cross_entropy_backward(1.0, cache)


def loss_floor(loss_and_gradient: Callable) -> float:
    """The loss of a perfect prediction (logit 30 on the right word, 0 elsewhere; V = 12). A
    right and certain model costs nothing: near 0 when right. Twice softmaxed, the certain
    probability 1 becomes ``e / (e + V - 1)``."""
    targets = np.random.default_rng(0).integers(len(SPECIAL_TOKENS), 12, size=(4, 5))
    return loss_and_gradient(30.0 * np.eye(12)[targets], targets)[0]


# -- 11. accuracy that counts padding -------------------------------------------------------------

def accuracy_buggy(logits: np.ndarray, targets: np.ndarray) -> float:
    return float((logits.argmax(axis=-1) == targets).mean())          # every position, <pad> too


def accuracy_fixed(logits: np.ndarray, targets: np.ndarray) -> float:
    real = targets != PAD_ID
    return float((logits.argmax(axis=-1) == targets)[real].mean())    # real tokens only


def padded_targets() -> np.ndarray:
    """Four target rows of 2, 3, 5 and 10 real tokens, padded to 10: half the batch is ``<pad>``."""
    targets = np.full((4, 10), PAD_ID)
    for row, length in enumerate((2, 3, 5, 10)):
        targets[row, :length] = np.arange(length) % 8 + len(SPECIAL_TOKENS)
    return targets


def accuracy_of_knowing_nothing(accuracy: Callable) -> float:
    """The accuracy credited to a model that predicts ``<pad>`` everywhere, on ``padded_targets()``.
    It gets no real token right: 0 when right."""
    targets = padded_targets()
    return accuracy(np.eye(12)[np.full(targets.shape, PAD_ID)], targets)


# == sanity checks ================================================================================

SANITY_VOCAB = 64        # large enough that the initial loss sits close to ln V


def loss_at_initialisation(model: Transformer, src: Any, tgt: Any) -> float:
    """The mean cross-entropy of an untrained model on ``(src, tgt)`` (``tgt`` with ``<bos>`` and
    ``<eos>``). Its logits are small and nearly alike, so it should sit near ``ln V``, a uniform
    guess; well above means the logits start too large (a bad initialisation)."""
    with model.evaluating():
        loss, _ = ops.cross_entropy_forward(model.forward(src, tgt[:, :-1]), tgt[:, 1:])
    return float(loss)


@functools.lru_cache(maxsize=None)
def overfit_one_batch(loss_and_gradient: Callable = loss_fixed, steps: int = 300) -> tuple[float, ...]:
    """The losses of a tiny Transformer trained ``steps`` times on one batch of 16 reversals
    (``V = SANITY_VOCAB``). Any model that can learn must drive them to near 0. Cached."""
    src, tgt = reversal_batch(np.random.default_rng(5), 16, SANITY_VOCAB)
    model = tiny_transformer(SANITY_VOCAB)
    return tuple(fit(model, [(src, tgt[:, :-1], tgt[:, 1:])] * steps, loss_and_gradient))
