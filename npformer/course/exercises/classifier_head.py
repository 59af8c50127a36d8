"""Lesson 17: the classifier head's backward pass, composed from the student's pieces.

The head of the encoder-only classifier, from the encoder's outputs to the loss::

    pooled = masked mean of x over the real tokens      (B, D)   (lesson 17's pool)
    logits = pooled @ W + b                             (B, C)   (lesson 2's linear layer)
    loss = mean over the B sentences of -log softmax(logits)[label]   (lesson 3's loss; no label ignored)

``classifier_head_backward(x, mask, W, b, labels, dloss)`` returns ``(dx, dW, db)``: the student walks the
chain back through the three pieces they derived, so a pool variant (``variants.pooling``) changes the
answer here too. The reference is npformer's ops, backward through the same chain.
"""

from __future__ import annotations

import numpy

from ... import ops
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size


def head_loss(x, mask, W, b, labels, pool=None):
    """The head's forward: the mean cross-entropy of the linear layer on the pooled vectors (a 0-d array);
    ``pool(x, mask) -> (B, D)`` is the lesson's masked mean unless given."""
    pooled = ops.masked_mean_pool_forward(x, mask)[0] if pool is None else pool(x, mask)
    return ops.cross_entropy_forward(pooled @ W + b, labels, ignore_index=None)[0]


def _head_backward(x, mask, W, b, labels, dloss):
    """(dx (B, T, D), dW (D, C), db (C,)) by npformer's ops, backward through pool, linear and loss."""
    pooled, pool_cache = ops.masked_mean_pool_forward(x, mask)
    logits, linear_cache = ops.linear_forward(pooled, W, b)
    _, loss_cache = ops.cross_entropy_forward(logits, labels, ignore_index=None)
    d_pooled, dW, db = ops.linear_backward(ops.cross_entropy_backward(dloss, loss_cache), linear_cache)
    return ops.masked_mean_pool_backward(d_pooled, pool_cache), dW, db


def _head_inputs(rng, lengths, length, features, classes):
    mask = numpy.arange(length)[None, :] < numpy.asarray(lengths)[:, None]
    x = normal(rng, len(lengths), length, features)
    x[~mask] = 50.0                                       # padding holds large values: the mask must matter
    return {"x": x, "mask": mask, "W": normal(rng, features, classes) / 2, "b": normal(rng, classes),
            "labels": rng.integers(0, classes, size=len(lengths)), "dloss": float(1 + rng.random())}


def _head_cases(rng):
    return [Case("B=3, T=5, D=4, C=3: a padded tail, a full sentence, one real token",
                 _head_inputs(rng, [3, 5, 1], 5, 4, 3)),
            Case("B=2, T=4, D=3, C=2: a sentence of padding only", _head_inputs(rng, [4, 0], 4, 3, 2)),
            Case("B=1, T=1, D=2, C=4: one token", _head_inputs(rng, [1], 1, 2, 4))]


def _unseen_head(rng):
    batch, length, features, classes = size(rng, 1, 5), size(rng, 1, 6), size(rng, 1, 6), size(rng, 2, 5)
    lengths = [size(rng, 0, length) for _ in range(batch)]
    return [Case(f"B={batch}, T={length}, D={features}, C={classes}, lengths {lengths}",
                 _head_inputs(rng, lengths, length, features, classes))]


def _head_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return Hint(f"{output} has shape {got.shape}, where it should be {expected.shape}, the shape of "
                    f"{ {'dx': 'x', 'dW': 'W', 'db': 'b'}[output] }")
    batch = len(inputs["labels"])
    if batch > 1 and numpy.allclose(got, expected * batch, rtol=1e-6):
        return Hint(f"{output} is {batch} times too large (B = {batch}): the loss is a mean over the sentences")
    if output == "dx":
        padded = ~inputs["mask"]
        if numpy.any(got[padded] != 0):
            return Hint("dx is not zero at padding, where x does not reach the loss")
        return Hint("dx is wrong at the real tokens; compare one sentence's rows: they should be equal, "
                    "each the same share of what the pooled vector receives")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("classifier_head_backward", "classifier_head_backward(x, mask, W, b, labels, dloss) -> (dx (B, T, D), "
             "dW (D, C), db (C,)): x (B, T, D), mask (B, T) True at a real token, W (D, C), b (C,), labels (B,) "
             "in [0, C), dloss a number; loss = mean over the sentences of the cross-entropy of "
             "masked_mean(x) @ W + b", "17", _head_backward, _head_cases, ("dx", "dW", "db"), head_loss,
             ("x", "W", "b"), hints=(_head_hint,), unseen=_unseen_head, points=2),
]

TEXTBOOK: dict[str, str] = {
    "classifier_head_backward": "pooled = masked_mean(x); p = softmax(pooled @ W + b); "
                                "dlogits = dloss * (p - onehot(labels)) / B; dW = pooled.T @ dlogits; "
                                "db = dlogits.sum(0); dx = masked_mean_pool_backward(x, mask, dlogits @ W.T)",
}


# -- the mistakes students make ---------------------------------------------------------------------------

def _numpy_head(x, mask, W, b, labels, dloss, spread=None, per_sentence=True):
    """The head's gradients in NumPy, as a student writes them; ``spread`` the mask the pool's gradient uses."""
    counts = numpy.maximum(mask.sum(axis=1, keepdims=True), 1)
    pooled = (x * mask[:, :, None]).sum(axis=1) / counts
    logits = pooled @ W + b
    probs = numpy.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    d_logits = (probs - numpy.eye(W.shape[1])[labels]) * dloss / (len(labels) if per_sentence else 1)
    spread = mask if spread is None else spread
    d_pooled = d_logits @ W.T
    dx = spread[:, :, None] * (d_pooled / numpy.maximum(spread.sum(axis=1, keepdims=True), 1))[:, None, :]
    return dx, pooled.T @ d_logits, d_logits.sum(axis=0)


def _summed_over_sentences(x, mask, W, b, labels, dloss):
    return _numpy_head(x, mask, W, b, labels, dloss, per_sentence=False)


def _pooled_over_every_position(x, mask, W, b, labels, dloss):
    return _numpy_head(x, mask, W, b, labels, dloss, spread=numpy.ones_like(mask))


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("classifier_head_backward", "the loss summed over the sentences, not averaged",
                  _summed_over_sentences, "times too large"),
    WrongSolution("classifier_head_backward", "the pool's gradient spread over the padding too",
                  _pooled_over_every_position, "not zero at padding"),
]
