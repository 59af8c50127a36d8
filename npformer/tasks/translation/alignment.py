"""Attention against the truth: word alignments read off a trained translator, scored against gold.

A word alignment says which source token each target token comes from. The embedded corpus knows
it (``data.toy_corpus``'s ``Alignment``); a trained model only suggests it. For a sentence pair fed
through the model with teacher forcing, every explanation below is a matrix ``S (Tt + 1, Ts)``, one
row per decoder position (row ``i`` *produces* French token ``i``; the last row produces
``<eos>``), one column per English token, and the alignment it proposes links French token ``i``
to ``argmax_j S[i, j]``:

* **one head**: the cross-attention weights of layer ``l``, head ``h``;
* **the head average**: the mean over the heads of one layer;
* **attention rollout** (Abnar and Zuidema, 2020), extended here to the encoder-decoder. A residual
  block outputs ``x + Attention(x)``, so half of what a position carries is its own input:
  the encoder's rollout is ``R_enc = prod over layers of (A / 2 + I / 2)`` (``A`` averaged over
  heads, applied from the first layer up). The share of each source token in each decoder
  position, ``R (Tt, Ts)``, starts at 0 and goes through decoder layer ``l`` as::

      self-attention:   R <- (D_l / 2 + I / 2) R        (mixing decoder positions)
      cross-attention:  R <- R / 2 + C_l R_enc / 2     (half stays, half is read from the source)

  and ``S = R``. The rest of each row, ``(1/2)^L`` after ``L`` layers, is the decoder's own
  input: each row of ``R`` sums to ``1 - (1/2)^L``;
* **gradient x input saliency** (as in Ding et al., 2019): for row ``i``, the gradient of
  ``log p(y_i)`` with respect to each source token's embedding ``e_j = E[x_j] sqrt(D)``, multiplied
  by that embedding elementwise, and the length of the result: ``S[i, j] = || dlog p(y_i) / de_j * e_j ||``.
  (Summing the product over the dimensions instead, ``|g . e|``, lets signs cancel; it aligned far
  worse on the embedded corpus, as ``benchmarks/RESULTS.md`` records.) The gradient
  comes from npformer's own backward pass (``Transformer.backward_to_inputs``): the backward that
  trains the model explains it.

``explain(model, ...)`` computes every matrix for a batch of tokenised pairs and
``score_alignments`` turns them into alignment error rates (``metrics.alignment_error_rate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy

from ... import backend, ops
from ...data import Alignment, Vocab, pad_rows, tokenize
from ...metrics import alignment_error_rate
from ...models import Transformer
from ...tokens import BOS_ID, PAD_ID


def argmax_links(scores: numpy.ndarray, n_src: int, n_tgt: int) -> set[tuple[int, int]]:
    """``{(argmax_j scores[i, j], i)}`` for the ``n_tgt`` French tokens over the ``n_src`` English
    ones: each French token linked to the source token with the largest score, as ``(english,
    french)`` pairs, the order of ``Alignment``."""
    rows = numpy.asarray(scores)[:n_tgt, :n_src]
    return {(int(j), i) for i, j in enumerate(rows.argmax(axis=-1))}


def rollout(encoder: Sequence[numpy.ndarray], decoder_self: Sequence[numpy.ndarray],
            cross: Sequence[numpy.ndarray]) -> numpy.ndarray:
    """Attention rollout from decoder positions to source tokens (see the module docstring).

    ``encoder``: one ``(B, H, Ts, Ts)`` map per encoder layer; ``decoder_self``: ``(B, H, Tt, Tt)``
    and ``cross``: ``(B, H, Tt, Ts)`` per decoder layer. Returns ``R (B, Tt, Ts)``.
    """
    def half_residual(weights: numpy.ndarray) -> numpy.ndarray:
        mixed = weights.mean(axis=1) / 2  # (B, T, T): heads averaged
        return mixed + numpy.eye(mixed.shape[-1]) / 2

    batch, _, n_src, _ = encoder[0].shape
    encoder_rollout = numpy.broadcast_to(numpy.eye(n_src), (batch, n_src, n_src))
    for weights in encoder:
        encoder_rollout = half_residual(weights) @ encoder_rollout
    from_source = numpy.zeros((batch, cross[0].shape[2], n_src))
    for self_weights, cross_weights in zip(decoder_self, cross):
        from_source = half_residual(self_weights) @ from_source
        from_source = from_source / 2 + cross_weights.mean(axis=1) @ encoder_rollout / 2
    return from_source


def saliency(model: Transformer, src_ids: Any, tgt_in_ids: Any, tgt_out_ids: Any) -> numpy.ndarray:
    """Gradient x input saliency ``S (B, Tt, Ts)``: ``S[b, i, j] = || dlog p(y_i) / de_j * e_j ||``.

    One backward pass per target position, all in one batch: sentence ``b`` is repeated ``Tt``
    times, copy ``i`` projects only its position ``i`` onto the vocabulary
    (``Transformer.forward``'s ``only_at``, the packed layout) and sends back the gradient of ``log p(y_i)`` alone,
    ``onehot(y_i) - softmax(logits_i)``. The model runs in eval mode; its parameter gradients are
    zeroed afterwards.
    """
    return _saliency_and_maps(model, src_ids, tgt_in_ids, tgt_out_ids)[0]


def _saliency_and_maps(model: Transformer, src_ids: Any, tgt_in_ids: Any,
                       tgt_out_ids: Any) -> tuple[numpy.ndarray, dict[str, list[numpy.ndarray]]]:
    """``saliency`` and, from the same forward pass, every attention map of each sentence
    (``{kind: [(B, H, Tq, Tk) per layer]}``, float64): copy 0 of sentence ``b`` is sentence ``b``
    teacher-forced, so no second pass is needed."""
    src, tgt_in, tgt_out = (numpy.asarray(backend.to_numpy(a)) for a in (src_ids, tgt_in_ids, tgt_out_ids))
    batch, n_tgt = tgt_in.shape
    copies = numpy.repeat(numpy.arange(batch), n_tgt)  # (B * Tt,): sentence of each copy
    rows = numpy.tile(numpy.arange(n_tgt), batch)  # the position each copy explains
    explained = numpy.zeros((len(copies), n_tgt), dtype=bool)
    explained[numpy.arange(len(copies)), rows] = True  # copy k projects its position rows[k] only
    with model.evaluating():
        logits = model.forward(backend.asarray(src[copies]), backend.asarray(tgt_in[copies]),
                               only_at=backend.asarray(explained))  # (B * Tt, V): logits_i of copy i, packed
        maps = {kind: [backend.to_numpy(weights[::n_tgt]).astype(numpy.float64) for weights in layers]
                for kind, layers in model.attention_maps().items()}
        gradient = -backend.to_numpy(ops.softmax_forward(logits.astype(numpy.float64))[0])  # -softmax(logits_i)
        targets = tgt_out[copies, rows]
        gradient[numpy.arange(len(copies)), targets] += 1.0  # d log p(y_i) / d logits_i
        gradient[targets == PAD_ID] = 0.0
        d_src, _ = model.backward_to_inputs(backend.asarray(gradient.astype(logits.dtype)))
        model.zero_grad()
    embeddings = backend.to_numpy(model.src_embed.W)[src[copies]] * model.embed_scale  # (B * Tt, Ts, D)
    scores = numpy.linalg.norm(backend.to_numpy(d_src).astype(numpy.float64) * embeddings, axis=-1)
    return scores.reshape(batch, n_tgt, -1), maps


@dataclass
class AlignmentScores:
    """Alignment error rates (0 = the gold alignment, 1 = none of it) of every explanation.

    ``heads[l][h]``: layer ``l``, head ``h``; ``layer_average[l]``: heads averaged; ``rollout``,
    ``saliency``; ``pairs``: how many were scored.
    """

    heads: list[list[float]]
    layer_average: list[float]
    rollout: float
    saliency: float
    pairs: int

    def _each_head(self) -> list[tuple[int, int, float]]:
        return [(layer, head, aer) for layer, row in enumerate(self.heads) for head, aer in enumerate(row)]

    def best_head(self) -> tuple[int, int, float]:
        return min(self._each_head(), key=lambda item: item[2])

    def worst_head(self) -> tuple[int, int, float]:
        return max(self._each_head(), key=lambda item: item[2])

    def rows(self) -> list[tuple[str, float]]:
        """``(name, AER)`` for every explanation, in the order of ``table``."""
        named = [(f"layer {layer}, head {head}", aer) for layer, head, aer in self._each_head()]
        named += [(f"layer {l}, head average", aer) for l, aer in enumerate(self.layer_average)]
        return named + [("rollout", self.rollout), ("saliency (gradient x input)", self.saliency)]

    def table(self) -> str:
        """A Markdown table, one row per explanation, the best and the worst head marked."""
        best, worst = self.best_head(), self.worst_head()
        lines = [f"AER on {self.pairs} sentence pairs (lower is better; 0 = the gold alignment)", "",
                 "| explanation | AER |", "| --- | ---: |"]
        for layer, head, aer in self._each_head():
            mark = " (best head)" if (layer, head) == best[:2] else " (worst head)" if (layer, head) == worst[:2] else ""
            lines.append(f"| layer {layer}, head {head}{mark} | {aer:.3f} |")
        for layer, aer in enumerate(self.layer_average):
            lines.append(f"| layer {layer}, head average | {aer:.3f} |")
        lines.append(f"| rollout | {self.rollout:.3f} |")
        lines.append(f"| saliency (gradient x input) | {self.saliency:.3f} |")
        return "\n".join(lines)


def score_alignments(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, pairs: Sequence[tuple[str, str]],
                     golds: Sequence[Alignment], batch_size: int = 32, progress: bool = False) -> AlignmentScores:
    """Teacher-force every pair (English, French), read each explanation's alignment, and score it
    against ``golds`` (one ``Alignment`` per pair, indices into ``tokenize`` of each side)."""
    from tqdm.auto import tqdm

    if len(pairs) != len(golds):
        raise ValueError(f"score_alignments: {len(pairs)} pairs but {len(golds)} gold alignments")
    if not pairs:
        raise ValueError("score_alignments: no sentence pairs to score")
    config = model.config
    n_layers, n_heads = config.n_layers, config.n_heads
    found: dict[str, list[set]] = {"rollout": [], "saliency": []}
    head_links = [[[] for _ in range(n_heads)] for _ in range(n_layers)]
    average_links = [[] for _ in range(n_layers)]
    for start in tqdm(range(0, len(pairs), batch_size), desc="alignments", disable=not progress):
        chunk = pairs[start:start + batch_size]
        sources = [tokenize(english, "en")[: config.max_len] for english, _ in chunk]
        targets = [tokenize(french, "fr")[: config.max_len - 1] for _, french in chunk]
        explained = explain(model, src_vocab, tgt_vocab, sources, targets)
        for b, (source, target) in enumerate(zip(sources, targets)):
            n_src, n_tgt = len(source), len(target)
            for layer, weights in enumerate(explained["cross"]):
                for head in range(n_heads):
                    head_links[layer][head].append(argmax_links(weights[b, head], n_src, n_tgt))
                average_links[layer].append(argmax_links(weights[b].mean(axis=0), n_src, n_tgt))
            found["rollout"].append(argmax_links(explained["rollout"][b], n_src, n_tgt))
            found["saliency"].append(argmax_links(explained["saliency"][b], n_src, n_tgt))
    golds = list(golds)
    return AlignmentScores(
        heads=[[alignment_error_rate(links, golds) for links in layer] for layer in head_links],
        layer_average=[alignment_error_rate(links, golds) for links in average_links],
        rollout=alignment_error_rate(found["rollout"], golds),
        saliency=alignment_error_rate(found["saliency"], golds),
        pairs=len(pairs))


def explain(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, sources: Sequence[list[str]],
            targets: Sequence[list[str]]) -> dict[str, Any]:
    """Every explanation of a batch of tokenised pairs, teacher-forced, padded to the longest:
    ``{"cross": [(B, H, Tt + 1, Ts) per layer], "rollout": (B, Tt + 1, Ts), "saliency": (B, Tt + 1,
    Ts)}``, float64 host arrays; row ``i`` produces French token ``i``, the last real row ``<eos>``."""
    src = pad_rows([src_vocab.encode(tokens) for tokens in sources])
    tgt_ids = [tgt_vocab.encode(tokens) for tokens in targets]
    tgt_in = pad_rows([[BOS_ID] + ids for ids in tgt_ids])
    tgt_out = pad_rows([ids + [PAD_ID] for ids in tgt_ids])  # <eos> is not explained
    scores, maps = _saliency_and_maps(model, src, tgt_in, tgt_out)  # one forward and one backward pass
    return {"cross": maps["cross"], "rollout": rollout(maps["encoder"], maps["decoder"], maps["cross"]),
            "saliency": scores}


def gold_test_split(run: Any) -> tuple[list[tuple[str, str]], list[Alignment]]:
    """A run's test pairs and their gold alignments; only a run on the embedded corpus has them,
    stored beside its splits when it started (``RunFolder.alignments``)."""
    from .run_folder import RunFolder

    options = run.config.get("train", {})
    if options.get("data") is not None:
        raise ValueError(f"gold alignments exist only for the embedded corpus; this run was trained on "
                         f"{options['data']}")
    folder = RunFolder(run.folder)
    golds = folder.alignments().get("test")
    if golds is None:
        raise ValueError(f"{run.folder} holds no gold alignments ({folder.path('alignments.json')}): runs on the "
                         f"embedded corpus store them when they start; train the run again to have them")
    pairs = folder.split("test")
    if len(golds) != len(pairs):
        raise ValueError(f"{folder.path('alignments.json')} is damaged: {len(golds)} test alignments for "
                         f"{len(pairs)} test pairs")
    return pairs, golds
