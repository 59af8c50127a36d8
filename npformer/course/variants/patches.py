"""The variants of lesson 20's patches: the Vision Transformer's images cut into patches, in another
order.

The lesson's form: ``images (B, C, H, W)`` -> ``(B, N, C * p * p)``, the ``N = (H / p) (W / p)``
patches in row-major order (left to right, then down), each flattened channel by channel, then row by
row of its pixels.

Every variant is a rearrangement too, so its step, ``patches_destination`` (for each pixel, the index in
``patches.reshape(-1)`` of the entry it becomes), is the gradient with respect to ``images`` of
``sum(forward(images) * numbered)``, ``numbered`` holding each entry's own flat index: the grader's
differences of ``sum`` over the step's forward (``base._upstream``: no upstream gradient, ones).
"""

from __future__ import annotations

import numpy

from .base import Family, Variant, keep


def _grid(images, patch_size):
    batch, channels, height, width = images.shape
    return images.reshape(batch, channels, height // patch_size, patch_size, width // patch_size, patch_size)


def _flat(grid, order):
    arranged = grid.transpose(order)
    return arranged.reshape(arranged.shape[0], arranged.shape[1] * arranged.shape[2], -1)


def _arrangement(order):
    def forward(images, patch_size, node=keep):
        return _flat(_grid(images, patch_size), order)
    return forward


def _numbered(forward):
    """The step's forward: each entry of the patches times its own flat index."""
    def numbered(images, patch_size, node=keep):
        patches = forward(images, patch_size)
        return patches * numpy.arange(patches.size, dtype=numpy.float64).reshape(patches.shape)
    return numbered


def _embedding(forward):
    """Lesson 20's embedding (projection, class token, positions) on this arrangement of the patches."""
    def embedding(images, patch_size, W, b, cls_token, pos, node=keep):
        tokens = forward(images, patch_size) @ W + b                         # (B, N, D)
        cls = numpy.broadcast_to(cls_token, (tokens.shape[0], 1, tokens.shape[2]))
        return numpy.concatenate([cls, tokens], axis=1) + pos
    return embedding


def _variant(name, statement, order):
    forward = _arrangement(order)
    return Variant(name, statement, forward, {"patches_destination": _numbered(forward),
                                              "vit_embedding_backward": _embedding(forward)})


PATCHES = Family("patches", ("patches_destination", "patches_backward", "vit_embedding_backward"), (
    _variant("column-major", "the patches numbered down each column first, then across; each flattened "
                             "as in the lesson", (0, 4, 2, 1, 3, 5)),
    _variant("channels-last", "each patch flattened pixel by pixel, the C channels of a pixel together "
                              "(order (row, column, channel)); the patches in the lesson's order",
             (0, 2, 4, 3, 5, 1)),
    _variant("both-orders", "the patches numbered down each column first, each flattened pixel by pixel "
                            "with a pixel's channels together", (0, 4, 2, 3, 5, 1)),
    _variant("columns-inside", "each patch flattened channel by channel, and inside a channel column by "
                               "column (each p x p square transposed); the patches in the lesson's order",
             (0, 2, 4, 1, 5, 3))),
    nodes={"patches_destination": "images"})
