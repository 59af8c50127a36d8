"""Lesson 20: the Vision Transformer's embedding and its backward pass, and question 1's token count.

The embedding, from the images to the encoder's input (``models.VisionTransformer``'s first steps)::

    patches = patches(images, p)                      (B, N, C p^2)   (lesson 20's rearrangement)
    tokens = patches @ W + b                          (B, N, D)       (a linear layer)
    seq = [cls_token, tokens] along the positions     (B, N + 1, D)   (the class token first, the same for every image)
    out = seq + pos                                   (B, N + 1, D)   (pos (N + 1, D), learned)

``vit_embedding_backward`` returns the gradients of all five inputs that have one; a patches variant
(``variants.patches``) changes the rearrangement, so it changes ``dimages`` and ``dW`` here too.
``vit_token_count`` (question 1): how many tokens the encoder reads, from ``ops.patches_forward``'s shape.
"""

from __future__ import annotations

import numpy

from ... import ops
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size


def vit_embedding(images, patch_size, W, b, cls_token, pos, arrange=None):
    """The embedding's output (B, N + 1, D); ``arrange(images, p) -> (B, N, C p^2)`` is npformer's
    patches unless given."""
    patches = ops.patches_forward(images, patch_size)[0] if arrange is None else arrange(images, patch_size)
    tokens = patches @ W + b
    cls = numpy.broadcast_to(cls_token, (tokens.shape[0], 1, tokens.shape[2]))
    return numpy.concatenate([cls, tokens], axis=1) + pos


def _embedding_backward(images, patch_size, W, b, cls_token, pos, dout):
    """(dimages, dW, db, dcls_token (1, 1, D), dpos (N + 1, D)) by npformer's ops."""
    patches, patch_cache = ops.patches_forward(images, patch_size)
    _, linear_cache = ops.linear_forward(patches, W, b)
    d_patches, dW, db = ops.linear_backward(dout[:, 1:], linear_cache)
    return (ops.patches_backward(d_patches, patch_cache), dW, db, dout[:, :1].sum(axis=0, keepdims=True),
            dout.sum(axis=0))


def _embedding_inputs(rng, batch, channels, side, patch_size, width, across=None):
    """Images ``side`` pixels high and ``across`` wide (default: square), cut into p x p patches."""
    across = side if across is None else across
    patches = (side // patch_size) * (across // patch_size)
    inputs = {"images": normal(rng, batch, channels, side, across), "patch_size": patch_size,
              "W": normal(rng, channels * patch_size**2, width) / 3, "b": normal(rng, width),
              "cls_token": normal(rng, 1, 1, width), "pos": normal(rng, patches + 1, width)}
    return {**inputs, "dout": normal(rng, batch, patches + 1, width)}


def _embedding_cases(rng):
    return [Case("B=2, C=1, 4 x 4 images in 2 x 2 patches, D=3", _embedding_inputs(rng, 2, 1, 4, 2, 3)),
            Case("B=3, C=3, 6 x 6 images in 3 x 3 patches, D=5", _embedding_inputs(rng, 3, 3, 6, 3, 5)),
            Case("B=1, C=2, one patch covering the image, D=4", _embedding_inputs(rng, 1, 2, 2, 2, 4))]


def _unseen_embedding(rng):
    patch_size = size(rng, 1, 3)
    side, across = patch_size * size(rng, 1, 3), patch_size * size(rng, 1, 4)
    batch, channels, width = size(rng, 1, 3), size(rng, 1, 3), size(rng, 2, 6)
    return [Case(f"B={batch}, C={channels}, {side} x {across} images in {patch_size} x {patch_size} patches, "
                 f"D={width}", _embedding_inputs(rng, batch, channels, side, patch_size, width, across))]


def _embedding_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return Hint(f"{output} has shape {got.shape}, not {expected.shape}: a parameter's gradient has its shape")
    batch = inputs["images"].shape[0]
    if output in ("dcls_token", "dpos") and batch > 1 and numpy.allclose(got * batch, expected, rtol=1e-6):
        return Hint(f"{output} is {batch} times too small (B = {batch}): every image adds its own share")
    if output == "dpos" and numpy.allclose(got[0], expected[0]) and not numpy.allclose(got[1:], expected[1:]):
        return Hint("dpos is right at the class token's position, wrong at the patches' positions")
    if output in ("dW", "db", "dimages"):
        return Hint(f"{output} is wrong although the parameters it depends on only reach the patches' "
                    "positions of out: which rows of dout reach them?")
    return ""


# -- question 1: how many tokens the encoder reads ---------------------------------------------------------

def _token_count(height, width, patch_size):
    """N + 1: the patches of one (1, 1, height, width) image, counted by ops.patches_forward, and the class token."""
    return int(ops.patches_forward(numpy.zeros((1, 1, height, width)), patch_size)[0].shape[1]) + 1


def _count_cases(rng):
    return [Case("8 x 8 images, 2 x 2 patches (the lesson's)", {"height": 8, "width": 8, "patch_size": 2}),
            Case("8 x 8 images, 4 x 4 patches (the question's)", {"height": 8, "width": 8, "patch_size": 4}),
            Case("224 x 224 images, 16 x 16 patches (ViT-Base)", {"height": 224, "width": 224, "patch_size": 16}),
            Case("6 x 12 images, 3 x 3 patches", {"height": 6, "width": 12, "patch_size": 3})]


def _unseen_count(rng):
    patch_size = size(rng, 1, 16)
    sizes = {"height": patch_size * size(rng, 1, 20), "width": patch_size * size(rng, 1, 20), "patch_size": patch_size}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _count_hint(got, expected, inputs, output):
    got = int(round(float(numpy.asarray(got))))
    if got == expected - 1:
        return Hint(f"{got} is the number of patches: the encoder reads one token more than that")
    if got == inputs["height"] * inputs["width"] // inputs["patch_size"] + 1:
        return Hint(f"{got} shrinks like 1/p when the patches grow, where each patch covers p^2 pixels")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("vit_embedding_backward", "vit_embedding_backward(images, patch_size, W, b, cls_token, pos, dout) -> "
             "(dimages (B, C, H, W), dW (C p^2, D), db (D,), dcls_token (1, 1, D), dpos (N + 1, D)): out = "
             "[cls_token, patches(images) @ W + b] + pos, dout (B, N + 1, D)", "20", _embedding_backward,
             _embedding_cases, ("dimages", "dW", "db", "dcls_token", "dpos"), vit_embedding,
             ("images", "W", "b", "cls_token", "pos"), hints=(_embedding_hint,), one_token=("cls_token",),
             unseen=_unseen_embedding, points=2),
    Exercise("vit_token_count", "vit_token_count(height, width, patch_size) -> int: the tokens the encoder reads",
             "20", _token_count, _count_cases, ("tokens",), exact=True, hints=(_count_hint,), unseen=_unseen_count,
             question=1),
]

TEXTBOOK: dict[str, str] = {
    "vit_embedding_backward": "dpos = dout.sum(0); dcls_token = dout[:, :1].sum(0, keepdims=True); "
                              "d_tokens = dout[:, 1:]; dW = patches^T d_tokens (over B and N), db = d_tokens.sum((0, 1)); "
                              "dimages = patches_backward(images, p, d_tokens @ W.T)",
}


# -- the mistakes students make ---------------------------------------------------------------------------

def _numpy_embedding(images, patch_size, W, b, cls_token, pos, dout, patch_rows=slice(1, None)):
    """The embedding's gradients in NumPy, as a student writes them; ``patch_rows``: the rows of dout the
    patches' tokens are read from."""
    batch, channels, height, width = images.shape
    p = patch_size
    grid = images.reshape(batch, channels, height // p, p, width // p, p).transpose(0, 2, 4, 1, 3, 5)
    patches = grid.reshape(batch, -1, channels * p * p)
    d_tokens = dout[:, patch_rows]
    rows = patches.reshape(-1, patches.shape[-1])
    d_patches = (d_tokens @ W.T).reshape(grid.shape)
    dimages = d_patches.transpose(0, 3, 1, 4, 2, 5).reshape(images.shape)
    return (dimages, rows.T @ d_tokens.reshape(-1, W.shape[1]), d_tokens.sum(axis=(0, 1)),
            dout[:, :1].sum(axis=0, keepdims=True), dout.sum(axis=0))


def _position_per_image(images, patch_size, W, b, cls_token, pos, dout):
    dimages, dW, db, dcls, _ = _numpy_embedding(images, patch_size, W, b, cls_token, pos, dout)
    return dimages, dW, db, dcls, dout.mean(axis=0)


def _class_row_into_the_patches(images, patch_size, W, b, cls_token, pos, dout):
    return _numpy_embedding(images, patch_size, W, b, cls_token, pos, dout, patch_rows=slice(0, -1))


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("vit_embedding_backward", "the positions' gradient averaged over the images", _position_per_image,
                  "times too small"),
    WrongSolution("vit_embedding_backward", "the patches' gradient read from rows 0 .. N - 1 of dout",
                  _class_row_into_the_patches, "which rows of dout"),
    WrongSolution("vit_token_count", "the class token forgotten",
                  lambda height, width, patch_size: (height // patch_size) * (width // patch_size), "number of patches"),
]
