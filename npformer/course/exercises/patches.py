"""The exercises of lesson 20: patch embeddings, an image cut into patches, and the way back.

    lesson 20   patches_forward, patches_backward: an image cut into patches, and the way back; its step,
                patches_destination: where each pixel lands in the patches (the rearrangement's index map)

Patch extraction is a pure rearrangement, so its mistakes are arrangements too: a bare reshape,
the channels last inside a patch, the patches numbered down the columns, the forward's transpose
applied again on the way back. The hints recompute each wrong arrangement from the inputs.
"""

from __future__ import annotations

import numpy

from ... import ops
from ..hints import explains
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout

# == lesson 20: patches ============================================================================

def _patches(images, patch_size):
    return ops.patches_forward(images, patch_size)[0]


def _patches_backward(images, patch_size, dout):
    return ops.patches_backward(dout, ops.patches_forward(images, patch_size)[1])


def _image_cases(rng):
    return [("B=1, C=1, 4 x 4, p=2: the lesson's image", lambda r: {
                "images": numpy.arange(16.0).reshape(1, 1, 4, 4), "patch_size": 2}),
            ("B=2, C=3, 4 x 6, p=2: three channels, 2 x 3 patches", lambda r: {
                "images": normal(r, 2, 3, 4, 6), "patch_size": 2}),
            ("B=1, C=2, 3 x 3, p=3: one patch", lambda r: {"images": normal(r, 1, 2, 3, 3), "patch_size": 3}),
            ("B=2, C=1, 2 x 3, p=1: every pixel a patch", lambda r: {
                "images": normal(r, 2, 1, 2, 3), "patch_size": 1})]


def _patches_cases(rng):
    return [Case(label, make(rng)) for label, make in _image_cases(rng)]


def _patches_backward_cases(rng):
    return backward_cases(rng, _patches, _image_cases(rng))


def _unseen_image(rng):
    batch, channels, rows, cols, patch = (size(rng, 1, 3), size(rng, 1, 3), size(rng, 1, 3), size(rng, 1, 3),
                                          size(rng, 1, 3))
    label = f"B={batch}, C={channels}, {rows * patch} x {cols * patch}, p={patch}"
    return label, {"images": normal(rng, batch, channels, rows * patch, cols * patch), "patch_size": patch}


def _unseen_patches(rng):
    label, inputs = _unseen_image(rng)
    return [Case(label, inputs)]


def _unseen_patches_backward(rng):
    label, inputs = _unseen_image(rng)
    return [Case(label, with_dout(rng, inputs, _patches))]


def _grid(images, patch):
    """``(B, C, H, W)`` -> ``(B, C, rows, p, cols, p)``: channel, patch row, row inside the patch,
    patch column, column inside the patch."""
    batch, channels, height, width = images.shape
    return images.reshape(batch, channels, height // patch, patch, width // patch, patch)


def _arranged(images, patch, axes):
    """The patches with the grid's axes in the order ``axes`` (npformer's: (0, 2, 4, 1, 3, 5))."""
    batch, channels, height, width = images.shape
    count = (height // patch) * (width // patch)
    return _grid(images, patch).transpose(axes).reshape(batch, count, channels * patch * patch)


def _unarranged(dout, images, patch, axes):
    """The inverse of ``_arranged(images, patch, axes)``, applied to ``dout``."""
    batch, channels, height, width = images.shape
    shape = numpy.array([batch, channels, height // patch, patch, width // patch, patch])
    grid = dout.reshape(tuple(shape[list(axes)]))
    return grid.transpose(numpy.argsort(axes)).reshape(images.shape)


_RIGHT = (0, 2, 4, 1, 3, 5)
_LAYOUTS = [
    ((0, 2, 4, 3, 5, 1), "the channels last inside a patch, (row, column, channel), as einops' "
                         "'b c (h p1) (w p2) -> b (h w) (p1 p2 c)' writes it: npformer's patch is "
                         "images[b, :, rows, columns].reshape(-1), channel first"),
    ((0, 4, 2, 1, 3, 5), "the patches numbered down the columns first: number them row by row, left to "
                         "right and then top to bottom (patch n sits at row n // (W / p), column n % (W / p))"),
    ((0, 2, 4, 1, 5, 3), "the pixels inside a patch taken column by column: inside a patch, row by row "
                         "(the transpose of the patch)"),
]


def _destination(images, patch_size):
    """For each pixel of ``images (B, C, H, W)``, the flat index in ``patches.reshape(-1)`` of the entry it
    becomes (the forward's index map, pixel -> its patch n and its place k: b N C p^2 + n C p^2 + k)."""
    numbered = numpy.arange(images.size, dtype=numpy.float64).reshape(images.shape)
    source = _patches(numbered, patch_size).reshape(-1).astype(numpy.int64)     # entry m holds pixel source[m]
    destination = numpy.empty(images.size, dtype=numpy.float64)
    destination[source] = numpy.arange(images.size)
    return destination.reshape(images.shape)


def _destination_cases(rng):
    return [Case(label, make(rng)) for label, make in _image_cases(rng)]


def _source_map(images, patch):
    """For each entry of the patches, the flat index of the pixel it holds, shaped like the image."""
    return _arranged(numpy.arange(images.size, dtype=numpy.float64).reshape(images.shape), patch, _RIGHT).reshape(
        images.shape)


def _destination_of(images, patch, axes):
    source = _arranged(numpy.arange(images.size, dtype=numpy.float64).reshape(images.shape), patch, axes)
    destination = numpy.empty(images.size)
    destination[source.reshape(-1).astype(numpy.int64)] = numpy.arange(images.size)
    return destination.reshape(images.shape)


def _destination_hint(got, expected, inputs, output):
    images, patch = inputs["images"], inputs["patch_size"]
    if got.shape != expected.shape:
        return ""
    if not numpy.array_equal(numpy.sort(got, axis=None), numpy.arange(images.size)):
        return ("your numbers are not a permutation of 0 .. B C H W - 1: every pixel lands in one entry of the "
                "patches, and every entry holds one pixel")
    if explains(_source_map(images, patch), got):
        return ("the map the other way: entry m of the patches holds pixel number m of your result; the step asks, "
                "for each pixel, the entry it becomes")
    for axes, words in _LAYOUTS:
        if explains(_destination_of(images, patch, axes), got):
            return words
    return ""


def _patches_hint(got, expected, inputs, output):
    images, patch = inputs["images"], inputs["patch_size"]
    if got.shape != expected.shape:
        return ""
    if explains(images.reshape(expected.shape), got):
        return ("a bare reshape of the image: a row of its result is a run of pixels along one image row, "
                "not a p x p square; reshape to (B, C, H/p, p, W/p, p), transpose, then reshape")
    for axes, words in _LAYOUTS:
        if explains(_arranged(images, patch, axes), got):
            return words
    if numpy.allclose(numpy.sort(got, axis=None), numpy.sort(expected, axis=None), rtol=0, atol=1e-12):
        return "every pixel is there, but in the wrong place: check the order of the transpose's axes"
    return ""


def _patches_backward_hint(got, expected, inputs, output):
    images, patch, dout = inputs["images"], inputs["patch_size"], inputs["dout"]
    if got.shape != expected.shape:
        return ""
    if explains(dout.reshape(images.shape), got):
        return ("a bare reshape of dout: pixel number i of the image (counted row by row) gets dout's entry number "
                "i, not the entry that pixel was moved to")
    batch, channels, height, width = images.shape
    again = dout.reshape(batch, height // patch, width // patch, channels, patch, patch).transpose(_RIGHT)
    if explains(again.reshape(images.shape), got):
        return ("the forward's transpose (0, 2, 4, 1, 3, 5) applied again: applied twice it is (0, 4, 3, 2, 1, 5), "
                "not the identity, so the axes do not come back where they were (no inverse permutation)")
    for axes, words in _LAYOUTS:
        if explains(_unarranged(dout, images, patch, axes), got):
            return "the inverse of another layout: " + words
    if numpy.allclose(numpy.sort(got, axis=None), numpy.sort(expected, axis=None), rtol=0, atol=1e-12):
        return ("every entry of dout is there, but some in the wrong place: a pixel's gradient is the entry of "
                "dout at the place that pixel was moved to (your step's map)")
    return ""


# == the table ======================================================================================
EXERCISES: list[Exercise] = [
    Exercise("patches_forward", "patches_forward(images, patch_size) -> (B, N, C * patch_size^2) patches", "20",
             _patches, _patches_cases, ("patches",), hints=(_patches_hint,), unseen=_unseen_patches),
    Exercise("patches_destination", "patches_destination(images, patch_size) -> (B, C, H, W): for each pixel, "
             "the index in patches.reshape(-1) of the entry it becomes", "20", _destination, _destination_cases,
             ("destination",), hints=(_destination_hint,), unseen=_unseen_patches),
    Exercise("patches_backward", "patches_backward(images, patch_size, dout) -> dimages", "20",
             _patches_backward, _patches_backward_cases, ("dimages",), _patches, ("images",),
             hints=(_patches_backward_hint,), unseen=_unseen_patches_backward, points=2),
]


# The backward pass derived through the forward's index map first.
DERIVATIONS: dict[str, tuple[str, ...]] = {"patches_backward": ("patches_destination",)}

# npformer's compact form, shown once patches_backward passes.
TEXTBOOK: dict[str, str] = {
    "patches_backward": ("dimages = dout.reshape(B, H/p, W/p, C, p, p).transpose(0, 3, 1, 4, 2, 5).reshape(B, C, H, W): "
                         "the forward's transpose (0, 2, 4, 1, 3, 5) undone by its inverse permutation; "
                         "or dout.reshape(-1)[destination]"),
}


# == wrong solutions ==================================================================================

def _lazy_patches(images, patch_size):
    return ops.patches_forward(images, patch_size)[0]


def _lazy_patches_backward(images, patch_size, dout):
    from ...ops.patches import patches_backward, patches_forward  # bound before grading: still caught
    return patches_backward(dout, patches_forward(images, patch_size)[1])


def _forward_transpose_again(images, patch_size, dout):
    batch, channels, height, width = images.shape
    grid = dout.reshape(batch, height // patch_size, width // patch_size, channels, patch_size, patch_size)
    return grid.transpose(0, 2, 4, 1, 3, 5).reshape(images.shape)


def _destination_per_image(images, patch_size):
    return _destination_of(images, patch_size, _RIGHT) % (images[0].size)


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("patches_destination", "the map the other way (the pixel each entry holds)",
      lambda images, p: _source_map(images, p), "the map the other way"),
    W("patches_destination", "the channels last inside a patch",
      lambda images, p: _destination_of(images, p, (0, 2, 4, 3, 5, 1)), "channels last"),
    W("patches_destination", "numbered within each image only", _destination_per_image, "not a permutation"),
    W("patches_forward", "a bare reshape", lambda images, p: images.reshape(
        images.shape[0], -1, images.shape[1] * p * p), "bare reshape"),
    W("patches_forward", "the channels last inside a patch (einops' p1 p2 c)",
      lambda images, p: _arranged(images, p, (0, 2, 4, 3, 5, 1)), "channels last"),
    W("patches_forward", "the patches numbered down the columns",
      lambda images, p: _arranged(images, p, (0, 4, 2, 1, 3, 5)), "down the columns"),
    W("patches_forward", "each patch transposed", lambda images, p: _arranged(images, p, (0, 2, 4, 1, 5, 3))),
    W("patches_forward", "a pass-through to npformer's", _lazy_patches, "npformer's own"),
    W("patches_backward", "a bare reshape of dout", lambda images, p, dout: dout.reshape(images.shape),
      "bare reshape"),
    W("patches_backward", "the forward's transpose applied again", _forward_transpose_again, "not the identity"),
    W("patches_backward", "the inverse of the channels-last layout",
      lambda images, p, dout: _unarranged(dout, images, p, (0, 2, 4, 3, 5, 1)), "channels last"),
    W("patches_backward", "a pass-through to npformer's", _lazy_patches_backward, "npformer's own"),
]
