"""Cutting images into patches (the Vision Transformer's "words"), and the inverse for backward.

Shapes: ``images (B, C, H, W)`` with ``H`` and ``W`` multiples of ``patch`` ->
``(B, N, C * patch * patch)`` with ``N = (H / patch) * (W / patch)`` patches in row-major order.

It is a pure rearrangement: every pixel lands in exactly one patch. So the backward pass is the
inverse rearrangement of the upstream gradient: no arithmetic at all.
"""

from __future__ import annotations

from typing import Any

from ._validate import check_float, check_ndim


def patches_forward(images: Any, patch: int) -> tuple[Any, dict]:
    """``(B, C, H, W)`` -> ``(B, N, C * patch * patch)``."""
    op = "patches_forward"
    check_float(op, "images", images)
    check_ndim(op, "images", images, 4, "(B, C, H, W)")
    if isinstance(patch, bool) or not isinstance(patch, int) or patch < 1:
        raise ValueError(f"{op}: patch must be a positive int, got {patch!r}")
    batch, channels, height, width = images.shape
    if height % patch or width % patch:
        raise ValueError(f"{op}: images must have H and W divisible by patch = {patch}, "
                         f"got H = {height}, W = {width}")
    rows, cols = height // patch, width // patch
    grid = images.reshape(batch, channels, rows, patch, cols, patch)
    out = grid.transpose(0, 2, 4, 1, 3, 5).reshape(batch, rows * cols, channels * patch * patch)
    return out, {"shape": tuple(images.shape), "patch": patch}


def patches_backward(dout: Any, cache: dict) -> Any:
    """The inverse rearrangement: ``(B, N, C * patch * patch)`` -> ``(B, C, H, W)``."""
    batch, channels, height, width = cache["shape"]
    patch = cache["patch"]
    rows, cols = height // patch, width // patch
    grid = dout.reshape(batch, rows, cols, channels, patch, patch)
    return grid.transpose(0, 3, 1, 4, 2, 5).reshape(batch, channels, height, width)
