"""``Transformer.summary()``: a table of output shapes, parameter counts and FLOPs.

FLOPs count the matrix products only, ``2 m n k`` for an ``(m, k) @ (k, n)``
product (a multiply and an add per term); layer norms, softmaxes and
activations are a few operations per element and negligible next to them.
With ``D = d_model``, ``F = d_ff``, ``H`` heads, batch ``B``, a query length
``Tq`` and a key length ``Tk``, the forward pass costs::

    Linear d_in -> d_out on B*T rows:   2 * B*T * d_in * d_out
    attention scores q @ k^T:           2 * B * Tq * Tk * D      (H heads of Dh = D/H)
    weights @ v:                        2 * B * Tq * Tk * D
    multi-head attention:               4 projections + the two products above
    feed-forward:                       2 * B*T * D * F * 2

The backward pass of every product costs two products of the same size (the
gradient of each operand), so backward = 2 x forward and a training step
about 3 x forward.

Parameter counts are read from the modules themselves; the test suite checks
them against the closed forms ``4 (D^2 + D)`` per attention block,
``2 D F + F + D`` per feed-forward block and ``2 D`` per layer norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..nn import GroupedQueryAttention, MultiHeadAttention, SelfAttention, SwiGLUFeedForward


@dataclass
class SummaryRow:
    name: str
    output_shape: tuple
    params: int
    forward_flops: int


def _linear_flops(rows: int, d_in: int, d_out: int) -> int:
    return 2 * rows * d_in * d_out


def _attention_flops(batch: int, q_len: int, k_len: int, d_model: int, kv_width: int | None = None) -> int:
    """Four projections plus scores and the weighted sum, over all heads; ``k`` and ``v`` are
    ``kv_width`` wide (grouped-query attention's ``Hkv Dh``; default ``d_model``)."""
    kv_width = d_model if kv_width is None else kv_width
    projections = 2 * _linear_flops(batch * q_len, d_model, d_model)  # q and o
    projections += 2 * _linear_flops(batch * k_len, d_model, kv_width)  # k and v
    return projections + 2 * (2 * batch * q_len * k_len * d_model)


def _sublayer_flops(sublayer: Any, batch: int, length: int, memory_length: int) -> int:
    """The forward FLOPs of one sub-layer on ``batch * length`` rows (cross-attention reads
    ``memory_length`` keys)."""
    rows = batch * length
    if isinstance(sublayer, GroupedQueryAttention):                 # k and v are Hkv Dh wide
        return _attention_flops(batch, length, length, sublayer.q.d_in, sublayer.k.d_out)
    if isinstance(sublayer, MultiHeadAttention):
        keys = length if isinstance(sublayer, SelfAttention) else memory_length
        return _attention_flops(batch, length, keys, sublayer.d_model)
    if isinstance(sublayer, SwiGLUFeedForward):                     # gate, up and down
        return 3 * _linear_flops(rows, *sublayer.W_gate.shape)
    return 2 * _linear_flops(rows, sublayer.fc1.d_in, sublayer.fc1.d_out)      # FeedForward


def layer_rows(prefix: str, layer: Any, batch: int, length: int, memory_length: int = 0) -> list[SummaryRow]:
    """The rows of one layer, read from its list of residual blocks (``layer.sublayers``) in
    data-flow order: the norm before its sub-layer in pre-norm, after it in post-norm."""
    names = {id(module): name for name, module in layer.children()}
    shape = (batch, length, int(layer.sublayers[0].norm.gamma.shape[0]))
    rows = []
    for residual in layer.sublayers:
        sublayer_row = SummaryRow(f"{prefix}.{names[id(residual.sublayer)]}", shape, residual.sublayer.num_params(),
                                  _sublayer_flops(residual.sublayer, batch, length, memory_length))
        norm_row = SummaryRow(f"{prefix}.{names[id(residual.norm)]}", shape, residual.norm.num_params(), 0)
        rows += [norm_row, sublayer_row] if residual.pre_norm else [sublayer_row, norm_row]
    return rows


def summary_rows(model: Any, batch: int, src_len: int, tgt_len: int) -> list[SummaryRow]:
    """One row per module that owns parameters or computes, in data-flow order."""
    c = model.config
    D = c.d_model
    rows = [
        SummaryRow("src_embed", (batch, src_len, D), model.src_embed.num_params(), 0),
        SummaryRow("tgt_embed", (batch, tgt_len, D), model.tgt_embed.num_params(), 0),
    ]
    for index, layer in enumerate(model.encoder.layers):
        rows += layer_rows(f"encoder.layers.{index}", layer, batch, src_len)
    if model.encoder.norm is not None:
        rows.append(SummaryRow("encoder.norm", (batch, src_len, D), model.encoder.norm.num_params(), 0))
    for index, layer in enumerate(model.decoder.layers):
        rows += layer_rows(f"decoder.layers.{index}", layer, batch, tgt_len, src_len)
    if model.decoder.norm is not None:
        rows.append(SummaryRow("decoder.norm", (batch, tgt_len, D), model.decoder.norm.num_params(), 0))
    tied = " (W tied to tgt_embed)" if c.tie_embeddings else ""
    rows.append(SummaryRow(f"out_proj{tied}", (batch, tgt_len, c.tgt_vocab),
                           model.out_proj.num_params(),
                           _linear_flops(batch * tgt_len, D, c.tgt_vocab)))
    return rows


def _giga(flops: int) -> str:
    return f"{flops / 1e9:,.3f}"


def counted_params(rows: list[SummaryRow], model: Any) -> int:
    """The parameters the rows count, which must be the model's: every parameter in exactly one row."""
    total_params = sum(row.params for row in rows)
    if total_params != model.num_params():
        raise RuntimeError(f"summary counts {total_params} parameters, the model has {model.num_params()}")
    return total_params


def summarize(model: Any, batch: int, src_len: int, tgt_len: int) -> str:
    """The summary table as text."""
    rows = summary_rows(model, batch, src_len, tgt_len)
    total_params = counted_params(rows, model)
    forward = sum(row.forward_flops for row in rows)
    name_width = max(len(row.name) for row in rows)
    shape_width = max(len(str(row.output_shape)) for row in rows)
    header = (f"{'module':<{name_width}}  {'output shape':<{shape_width}}  "
              f"{'params':>12}  {'fwd GFLOP':>10}")
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row.name:<{name_width}}  {str(row.output_shape):<{shape_width}}  "
                     f"{row.params:>12,}  {_giga(row.forward_flops):>10}")
    c = model.config
    lines += [
        "-" * len(header),
        f"total parameters: {total_params:,}",
        f"FLOPs for batch {batch}, source length {src_len}, target length {tgt_len} "
        f"(matrix products, 2mnk):",
        f"  forward  {_giga(forward)} GFLOP",
        f"  backward {_giga(2 * forward)} GFLOP (2 x forward)",
        f"  training step {_giga(3 * forward)} GFLOP",
        f"config: d_model={c.d_model}, n_heads={c.n_heads}, d_ff={c.d_ff}, n_layers={c.n_layers}, "
        f"vocab {c.src_vocab}/{c.tgt_vocab}, norm={c.norm}, activation={c.activation}, "
        f"tie_embeddings={c.tie_embeddings}",
    ]
    return "\n".join(lines)


def modern_summary_rows(model: Any, batch: int, length: int) -> list[SummaryRow]:
    """``summary_rows`` for ``ModernLanguageModel``: its blocks' rows, and the tied head, which owns
    no parameter."""
    c = model.config
    shape = (batch, length, c.d_model)
    rows = [SummaryRow("tok_embed", shape, model.tok_embed.num_params(), 0)]
    for index, block in enumerate(model.blocks):
        rows += layer_rows(f"blocks.{index}", block, batch, length)
    rows += [SummaryRow("norm", shape, model.norm.num_params(), 0),
             SummaryRow("head (W tied to tok_embed)", (batch, length, c.vocab), 0,
                        _linear_flops(batch * length, c.d_model, c.vocab))]
    return rows


def summarize_modern(model: Any, batch: int, length: int, optimizer: Any = None) -> str:
    """The table of ``modern_summary_rows`` as text, the KV cache's size against full heads, and the
    optimizer's parameter groups when ``optimizer`` has them (``optim.AdamW.describe_groups``)."""
    rows = modern_summary_rows(model, batch, length)
    total_params = counted_params(rows, model)
    forward = sum(row.forward_flops for row in rows)
    name_width = max(len(row.name) for row in rows)
    lines = [f"{'module':<{name_width}}  {'params':>10}  {'fwd GFLOP':>10}"]
    lines += [f"{row.name:<{name_width}}  {row.params:>10,}  {_giga(row.forward_flops):>10}" for row in rows]
    c = model.config
    head_dim = c.d_model // c.n_heads
    cached, full = 2 * c.n_layers * c.n_kv_heads * head_dim, 2 * c.n_layers * c.n_heads * head_dim
    lines += [
        f"total parameters: {total_params:,}",
        f"FLOPs for batch {batch}, length {length} (matrix products, 2mnk): forward {_giga(forward)} GFLOP, "
        f"training step {_giga(3 * forward)} GFLOP",
        f"KV cache: {cached:,} numbers per position ({c.n_kv_heads} key/value heads), "
        f"{full:,} with {c.n_heads} full heads ({full // cached}x)",
        f"config: d_model={c.d_model}, n_heads={c.n_heads}, n_kv_heads={c.n_kv_heads}, d_ff={c.d_ff}, "
        f"n_layers={c.n_layers}, vocab {c.vocab}, max_len={c.max_len}",
    ]
    if optimizer is not None and hasattr(optimizer, "describe_groups"):
        lines.append(optimizer.describe_groups())
    return "\n".join(lines)
