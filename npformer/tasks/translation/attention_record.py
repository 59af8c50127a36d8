"""The attention weights of one decoding, kept step by step: what ``npformer attention`` shows.

A search runs the encoder once and the decoder one position per step (``Transformer.decode_step``).
At each step every attention block leaves its weights on the module (``model.attention_maps()``):
the decoder's self-attention of the new position over the positions so far, ``(N, H, 1, t + 1)``,
and its cross-attention over the source, ``(N, H, 1, Ts)``. ``AttentionRecord`` copies them after
every step, with the rows that beam search kept (``parents``), and at the end traces one finished
sequence back through those rows. ``AttentionRecord(full=False)`` keeps only what copying an
``<unk>`` reads, the last layer's cross-attention: ``Translator.translate``, which returns text
alone, records that much and no more. The maps it returns are those of the very tokens the decoder
produced, from the one decoding that produced them: no second pass, no re-encoding of the output.

For a causal decoder in eval mode, the weights of position ``t`` computed one step at a time equal
row ``t`` of a teacher-forced forward pass over the same tokens (``tests/test_translation_result.py``
checks it), so the stacked rows are the familiar ``(H, T, T)`` lower-triangular map.
"""

from __future__ import annotations

from typing import Any

import numpy

from ... import backend
from ...models import Transformer


def _host_copy(array: Any) -> numpy.ndarray:
    """A host copy that later steps cannot overwrite (fast ops may reuse their buffers)."""
    return numpy.array(backend.to_numpy(array), copy=True)


class AttentionRecord:
    """What a decoding attended to: ``read_encoder`` once, ``read_step`` after every
    ``decode_step``, ``reorder(rows)`` when a beam search keeps rows ``rows``; then ``trace``.

    ``encoder[l]``: layer ``l``'s encoder self-attention, ``(B, H, Ts, Ts)`` for the B sources;
    ``steps[t][kind][l]``: ``(N, H, Tk)`` for the N rows decoded at step ``t`` (kinds
    ``"decoder"`` and ``"cross"``); ``parents[t]``: for each row after step ``t``, the row of step
    ``t`` it continues (None: the same row); ``final_rows[b]``: the row beam search chose for
    source ``b`` (None after greedy search, whose row ``b`` is source ``b``).
    """

    def __init__(self, full: bool = True) -> None:
        self.full = full  # False: only what copying an <unk> reads, the last layer's cross-attention
        self.encoder: list[numpy.ndarray] = []
        self.steps: list[dict[str, list[numpy.ndarray]]] = []
        self.parents: list[numpy.ndarray | None] = []
        self.final_rows: list[int] | None = None  # beam search: the chosen row of each source

    def read_encoder(self, model: Transformer) -> None:
        """Keep the encoder's self-attention of the sources just encoded (a full record only)."""
        if self.full:
            self.encoder = [_host_copy(weights) for weights in model.attention_maps()["encoder"]]

    def read_step(self, model: Transformer) -> None:
        """Keep the decoder's weights of the position just decoded (one query row per sequence)."""
        maps = model.attention_maps()
        if self.full:
            self.steps.append({kind: [_host_copy(weights[:, :, 0]) for weights in maps[kind]]
                               for kind in ("decoder", "cross")})
        else:
            self.steps.append({"cross": [_host_copy(maps["cross"][-1][:, :, 0])]})
        self.parents.append(None)

    def reorder(self, rows: Any) -> None:
        """After the last step, row ``j`` continues row ``rows[j]`` of that step (beam search)."""
        self.parents[-1] = backend.to_numpy(rows).astype(numpy.int64)

    def trace(self, row: int, source: int, n_positions: int, n_source: int) -> dict[str, list[numpy.ndarray]]:
        """The maps of final row ``row``, decoded from source ``source``: its first ``n_positions``
        decoder positions over its ``n_source`` real source tokens, one array per layer:
        ``"encoder"`` ``(H, Ts, Ts)``, ``"decoder"`` ``(H, Tt, Tt)`` (zero above the diagonal) and
        ``"cross"`` ``(H, Tt, Ts)``. A record made with ``full=False`` gives ``"cross"`` alone, of the
        last layer only (what copying an ``<unk>`` reads)."""
        rows_at_step = [0] * len(self.steps)
        for step in range(len(self.steps) - 1, -1, -1):  # follow the kept rows back to the first step
            parents = self.parents[step]
            row = row if parents is None else int(parents[row])
            rows_at_step[step] = row
        first = self.steps[0]["cross"][0]                                  # (N, H, Ts)
        n_layers, n_heads, dtype = len(self.steps[0]["cross"]), first.shape[1], first.dtype
        cross = [numpy.zeros((n_heads, n_positions, n_source), dtype=dtype) for _ in range(n_layers)]
        decoder = [numpy.zeros((n_heads, n_positions, n_positions), dtype=dtype)
                   for _ in range(n_layers if self.full else 0)]
        for position in range(n_positions):
            step = self.steps[position]
            for layer in range(n_layers):
                cross[layer][:, position] = step["cross"][layer][rows_at_step[position], :, :n_source]
                if self.full:
                    decoder[layer][:, position, : position + 1] = step["decoder"][layer][rows_at_step[position]]
        if not self.full:
            return {"cross": cross}
        encoder = [weights[source, :, :n_source, :n_source] for weights in self.encoder]
        return {"encoder": encoder, "decoder": decoder, "cross": cross}
