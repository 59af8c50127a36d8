"""The sinusoidal positional encoding of Vaswani et al. (2017), section 3.5.

For position ``p`` and column pair ``i`` (``0 <= 2i < d_model``)::

    PE[p, 2i]     = sin(p / 10000^(2i / d_model))
    PE[p, 2i + 1] = cos(p / 10000^(2i / d_model))

Even columns hold sines and odd columns cosines, each pair sharing one
frequency; the wavelengths grow geometrically from ``2 pi`` to
``10000 * 2 pi``. With an odd ``d_model`` the last column is a sine with no
partner. The table has no parameters and no gradient: it is added to the
scaled token embeddings.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import get_default_dtype, xp


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"positional_encoding: {name} must be a positive int, got {value!r}")


def positional_encoding(max_len: int, d_model: int, dtype: Any = None) -> Any:
    """The ``(max_len, d_model)`` sinusoid table, in ``dtype`` (default: the backend's).

    Computed in float64 and then cast, so float32 tables are correctly rounded.
    """
    _check_positive_int("max_len", max_len)
    _check_positive_int("d_model", d_model)
    positions = xp.arange(max_len, dtype=xp.float64)[:, None]  # (max_len, 1)
    pair_index = xp.arange(0, d_model, 2, dtype=xp.float64)  # the "2i" of each pair
    frequencies = xp.exp(-math.log(10000.0) * pair_index / d_model)  # 1 / 10000^(2i/d)
    angles = positions * frequencies  # (max_len, ceil(d_model / 2))

    table = xp.empty((max_len, d_model), dtype=xp.float64)
    table[:, 0::2] = xp.sin(angles)
    table[:, 1::2] = xp.cos(angles[:, : d_model // 2])
    return table.astype(dtype or get_default_dtype())
