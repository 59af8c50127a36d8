"""Grouped-query attention, GQA (Ainslie et al., 2023): fewer key/value heads than query heads.

``n_heads`` query heads share ``n_kv_heads`` key/value heads (``n_kv_heads`` divides ``n_heads``):
query head ``h`` reads key/value head ``h // G``, with ``G = n_heads / n_kv_heads`` query heads per
group. ``n_kv_heads = n_heads`` is multi-head attention; ``n_kv_heads = 1`` is multi-query
attention (Shazeer, 2019). What it saves is the KV cache of generation: ``G`` times fewer keys and
values to store and read at every step.

Shapes: ``q (B, H, Tq, Dh)``, ``k (B, Hkv, Tk, Dh)``, ``v (B, Hkv, Tk, Dv)``, ``mask`` as in
``attention_forward``. Forward: repeat each key/value head ``G`` times along the head axis, then
ordinary attention (``ops/attention.py``)::

    k_rep = repeat(k, G, axis=1)          (B, H, Tk, Dh), k_rep[:, h] = k[:, h // G]
    v_rep = repeat(v, G, axis=1)          (B, H, Tk, Dv)
    out   = attention(q, k_rep, v_rep, mask)          (B, H, Tq, Dv)

Backward. Attention's backward gives ``dk_rep`` and ``dv_rep``, one per query head. Key/value head
``j`` was used by the ``G`` query heads ``jG .. jG + G - 1``, so its gradient is the sum of theirs
(a value used several times receives the sum of the gradients of every use)::

    dk[:, j] = sum_{g < G} dk_rep[:, j G + g]       (B, Hkv, Tk, Dh)
    dv[:, j] = sum_{g < G} dv_rep[:, j G + g]       (B, Hkv, Tk, Dv)
"""

from __future__ import annotations

from typing import Any

from ..backend import xp
from ._validate import check_float, check_ndim, check_same_dtype
from .attention import attention_backward, attention_forward


def check_grouped_inputs(q: Any, k: Any, v: Any) -> None:
    """The checks of ``grouped_query_attention_forward`` before attention's own (the mask is attention's)."""
    op = "grouped_query_attention_forward"
    for name, value in (("q", q), ("k", k), ("v", v)):
        check_float(op, name, value)
        check_ndim(op, name, value, 4, "(B, H, T, Dh)" if name == "q" else "(B, Hkv, T, Dh)")
    check_same_dtype(op, ("q", "k", "v"), (q, k, v))
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"{op}: k must have shape (B, Hkv, Tk, Dh) = ({q.shape[0]}, Hkv, Tk, {q.shape[3]}) to match "
                         f"q {tuple(q.shape)}, got {tuple(k.shape)}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"{op}: the key/value heads Hkv = {kv_heads} (k {tuple(k.shape)}) must divide "
                         f"the query heads H = {heads} (q {tuple(q.shape)})")
    if tuple(v.shape[:3]) != tuple(k.shape[:3]):
        raise ValueError(f"{op}: v must have shape (B, Hkv, Tk, Dv) = ({', '.join(map(str, k.shape[:3]))}, Dv) "
                         f"to match k {tuple(k.shape)}, got {tuple(v.shape)}")


def grouped_query_attention_forward(q: Any, k: Any, v: Any, mask: Any = None) -> tuple[Any, dict]:
    """Attention of ``H`` query heads over ``Hkv`` shared key/value heads.

    Args:
        q: queries, ``(B, H, Tq, Dh)``.
        k: keys, ``(B, Hkv, Tk, Dh)``; ``Hkv`` divides ``H``.
        v: values, ``(B, Hkv, Tk, Dv)``.
        mask: boolean, broadcastable to ``(B, H, Tq, Tk)``, True = may attend; None = all.

    Returns:
        ``out (B, H, Tq, Dv)`` and the cache; ``cache["weights"]`` is the ``(B, H, Tq, Tk)``
        attention matrix, one per query head.
    """
    check_grouped_inputs(q, k, v)
    group = q.shape[1] // k.shape[1]
    k_rep = xp.repeat(k, group, axis=1)                           # (B, H, Tk, Dh)
    v_rep = xp.repeat(v, group, axis=1)                           # (B, H, Tk, Dv)
    out, attention_cache = attention_forward(q, k_rep, v_rep, mask)   # (B, H, Tq, Dv)
    return out, {"attention": attention_cache, "group": group, "weights": attention_cache["weights"]}


def grouped_query_attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
    """Gradients ``(dq, dk, dv)`` of ``grouped_query_attention_forward``, shaped like ``q, k, v``."""
    group = cache["group"]
    dq, dk_rep, dv_rep = attention_backward(dout, cache["attention"])   # dk_rep, dv_rep: (B, H, Tk, .)
    batch, heads, k_len = dk_rep.shape[:3]
    dk = dk_rep.reshape(batch, heads // group, group, k_len, -1).sum(axis=2)   # (B, Hkv, Tk, Dh)
    dv = dv_rep.reshape(batch, heads // group, group, k_len, -1).sum(axis=2)   # (B, Hkv, Tk, Dv)
    return dq, dk, dv
