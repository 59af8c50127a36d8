"""Training the Vision Transformer on generated images: four shapes at random places.

Each 8 x 8 grey image holds one shape at a random position, plus noise: a horizontal bar, a
vertical bar, a diagonal, or a hollow square. Nothing needs downloading, the classes are
unambiguous, and a model must combine patches to tell them apart (one 2 x 2 patch of a bar looks
like one of a square's sides).
"""

from __future__ import annotations

import time
from typing import Any

import numpy

from .. import backend
from ..models import VisionTransformer, ViTConfig
from ..training import fit

SHAPES = ("horizontal bar", "vertical bar", "diagonal", "hollow square")


def make_shapes(count: int, rng: numpy.random.Generator, size: int = 8, noise: float = 0.15):
    """``count`` images ``(count, 1, size, size)`` in float32 and their labels ``0..3``."""
    images = rng.normal(0.0, noise, size=(count, 1, size, size)).astype(numpy.float32)
    labels = rng.integers(0, len(SHAPES), size=count)
    for image, label in zip(images[:, 0], labels):
        length = int(rng.integers(4, size + 1))
        row, col = (int(v) for v in rng.integers(0, size - length + 1, size=2))
        if label == 0:
            image[int(rng.integers(0, size)), col:col + length] += 1.0
        elif label == 1:
            image[row:row + length, int(rng.integers(0, size))] += 1.0
        elif label == 2:
            steps = numpy.arange(length)
            image[row + steps, col + (steps if rng.random() < 0.5 else length - 1 - steps)] += 1.0
        else:
            side = max(length, 3)
            row, col = min(row, size - side), min(col, size - side)
            image[row, col:col + side] += 1.0
            image[row + side - 1, col:col + side] += 1.0
            image[row:row + side, col] += 1.0
            image[row:row + side, col + side - 1] += 1.0
    return images, labels


def train_vit(steps: int = 400, batch: int = 64, seed: int = 0, **config: Any) -> dict:
    rng = numpy.random.default_rng(seed)
    train_images, train_labels = make_shapes(4000, rng)
    test_images, test_labels = make_shapes(1000, rng)
    model = VisionTransformer(ViTConfig(**config), seed=seed)

    def next_batch(step: int) -> tuple:
        rows = rng.integers(0, len(train_images), size=batch)
        return backend.asarray(train_images[rows]), backend.asarray(train_labels[rows])

    start = time.perf_counter()
    losses = fit(model, next_batch, steps, ignore_index=None, betas=(0.9, 0.999))
    with model.evaluating():
        predictions = backend.to_numpy(model.forward(backend.asarray(test_images)).argmax(-1))
    return {"model": model, "test_accuracy": float((predictions == test_labels).mean()), "losses": losses,
            "test_images": test_images, "test_labels": test_labels, "predictions": predictions,
            "seconds": time.perf_counter() - start, "parameters": model.num_params()}
