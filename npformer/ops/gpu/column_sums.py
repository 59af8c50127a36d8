"""Sums over rows as a matrix-vector product: ``ones (N,) @ rows (N, D) -> (D,)``.

The gradient of a bias, and layer norm's ``dgamma`` and ``dbeta``, sum an ``(N, D)`` array over its
rows. CuPy's ``sum(axis=0)`` plans a reduction kernel on every call, which costs the host more time
than the GPU spends summing; cuBLAS's matrix-vector product does the same sum, in a fixed order
(the same result on every run), for less. The vector of ones is kept, per dtype, at the largest
length asked for so far.
"""

from __future__ import annotations

from typing import Any

from ...backend import xp

_ones: dict[Any, Any] = {}


def column_sums(rows: Any) -> Any:
    """``rows (N, D)`` -> ``(D,)``, the sum of the rows."""
    count = rows.shape[0]
    ones = _ones.get(rows.dtype)
    if ones is None or ones.shape[0] < count:
        ones = _ones[rows.dtype] = xp.ones(max(count, 1024), dtype=rows.dtype)
    return ones[:count] @ rows
