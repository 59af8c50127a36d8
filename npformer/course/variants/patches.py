"""The variants of lesson 20's patches: the Vision Transformer's images cut into patches, in another
order or centred.

The lesson's form: ``images (B, C, H, W)`` -> ``(B, N, C * p * p)``, the ``N = (H / p) (W / p)``
patches in row-major order (left to right, then down), each flattened channel by channel, then row by
row of its pixels.
"""

from __future__ import annotations


from .base import Family, Variant, keep


def _grid(images, patch_size):
    batch, channels, height, width = images.shape
    return images.reshape(batch, channels, height // patch_size, patch_size, width // patch_size, patch_size)


def _flat(grid, order):
    arranged = grid.transpose(order)
    return arranged.reshape(arranged.shape[0], arranged.shape[1] * arranged.shape[2], -1)


def column_major(images, patch_size, node=keep):
    return _flat(_grid(images, patch_size), (0, 4, 2, 1, 3, 5))


def channels_last(images, patch_size, node=keep):
    return _flat(_grid(images, patch_size), (0, 2, 4, 3, 5, 1))


def both_orders(images, patch_size, node=keep):
    return _flat(_grid(images, patch_size), (0, 4, 2, 3, 5, 1))


def centred(images, patch_size, node=keep):
    patches = _flat(_grid(images, patch_size), (0, 2, 4, 1, 3, 5))
    return patches - patches.mean(axis=-1, keepdims=True)


PATCHES = Family("patches", ("patches_backward",), (
    Variant("column-major", "the patches numbered down each column first, then across; each flattened "
                            "as in the lesson", column_major),
    Variant("channels-last", "each patch flattened pixel by pixel, the C channels of a pixel together "
                             "(order (row, column, channel)); the patches in the lesson's order",
            channels_last),
    Variant("both-orders", "the patches numbered down each column first, each flattened pixel by pixel "
                           "with a pixel's channels together", both_orders),
    Variant("centred", "each flattened patch minus its own mean (over its C * p * p entries)", centred)))
