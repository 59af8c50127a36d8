"""GPU form of ``npformer.ops.embedding``'s backward: one scatter-add kernel.

What changes: the textbook ``add.at`` (and the CPU fast form's sort and ``reduceat``) become
``cupyx.scatter_add``, which adds each upstream row into its token's row of ``dW`` with atomic
additions, so repeated ids sum as in the twin (in another order: equal up to rounding).
"""

from __future__ import annotations

from typing import Any

from ...backend import xp


def embedding_backward(dout: Any, cache: dict) -> Any:
    """``dW (V, D)``; see ``npformer.ops.embedding.embedding_backward``."""
    import cupyx

    vocab_size, d_model = cache["table_shape"]
    dW = xp.zeros((vocab_size, d_model), dtype=cache["dtype"])
    ids = cache["ids"].reshape(-1)
    if ids.size:
        cupyx.scatter_add(dW, ids, dout.reshape(-1, d_model))
    return dW
