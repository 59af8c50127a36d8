"""Greedy and beam-search decoding on the KV-cached decoder.

Both searches are batched: every source sentence of the batch (and, for beam
search, every beam) advances one token per step through
``Transformer.decode_step``, which reuses the keys and values of earlier
positions. A sequence stops at ``<eos>``; the search stops when every
sequence has, or at ``max_len`` tokens.

Beam search keeps the ``beam_size`` best partial translations by total log
probability, and picks the final one with the length penalty of GNMT (Wu et
al., 2016), so that longer translations are not punished merely for having
more terms::

    score = log P(y | x) / lp(y),   lp(y) = ((5 + |y|) / 6) ^ alpha     (alpha = 0.6)

``alpha`` is ``length_penalty`` everywhere (``--length-penalty`` on the command line); its default,
``LENGTH_PENALTY``, is GNMT's 0.6.
"""

from __future__ import annotations

from typing import Any

from ... import backend, ops, threads
from ...backend import xp
from ...models import Transformer
from ...tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from .attention_record import AttentionRecord

LENGTH_PENALTY = 0.6  # GNMT's alpha: the default of every search
# The beam of the translations a user reads: every command's --beam, attention_of, and the test
# translations of a training run. Translator.translate stays greedy unless asked (beam_size=1 is
# its default: the validation BLEU of every evaluation point, where speed matters more).
BEAM_SIZE = 4
NEVER_OUTPUT = (PAD_ID, BOS_ID)  # no target sequence holds them: a search never produces them


def _next_logits(model: Transformer, cache: Any, tokens: Any, record: AttentionRecord | None,
                 no_unk: Any = None) -> Any:
    """One ``decode_step``, with the tokens no translation contains ruled out, and ``<unk>`` in the
    rows where ``no_unk`` (boolean, one per row) is True (and its attention kept in ``record``)."""
    logits = model.decode_step(cache, tokens)
    if record is not None:
        record.read_step(model)
    logits[:, list(NEVER_OUTPUT)] = -xp.inf
    if no_unk is not None:
        logits[no_unk, UNK_ID] = -xp.inf
    return logits


def _rows_without_unk(unk_allowed: Any, copies: int = 1) -> Any:
    """The boolean row mask of ``_next_logits`` from one flag per source (each row repeated ``copies``
    times, one per beam); None when every source may write ``<unk>``."""
    if unk_allowed is None:
        return None
    return xp.repeat(~xp.asarray(unk_allowed, dtype=bool), copies)


def _strip(rows: Any) -> list[list[int]]:
    """Id rows -> lists that stop before the first ``<eos>`` and hold no ``<pad>``."""
    out = []
    for row in backend.to_numpy(rows).tolist():
        ids = []
        for token in row:
            if token == EOS_ID:
                break
            if token != PAD_ID:
                ids.append(token)
        out.append(ids)
    return out


@threads.with_blas_on_one_thread_when(ops.holds_blas)
def greedy_decode(model: Transformer, src_ids: Any, max_len: int,
                  record: AttentionRecord | None = None, unk_allowed: Any = None) -> list[list[int]]:
    """The most probable next token at each step. Returns one id list per source (no <eos>).

    ``record``: an ``AttentionRecord`` that keeps every step's attention (row ``b``: source ``b``).
    ``unk_allowed``: one flag per source; where False, ``<unk>`` is never written (the best known
    token is); None allows it everywhere.
    The model runs in eval mode and is put back in the mode it had.
    """
    batch = src_ids.shape[0]
    tokens = xp.full(batch, BOS_ID, dtype=xp.int64)
    finished = xp.zeros(batch, dtype=bool)
    no_unk = _rows_without_unk(unk_allowed)
    outputs = []
    with model.evaluating():
        cache = model.start_decoding(src_ids, max_len=max_len)
        if record is not None:
            record.read_encoder(model)
        for _ in range(max_len):
            tokens = _next_logits(model, cache, tokens, record, no_unk).argmax(axis=-1)
            tokens = xp.where(finished, PAD_ID, tokens)
            outputs.append(tokens)
            finished |= tokens == EOS_ID
            if bool(finished.all()):
                break
    return _strip(xp.stack(outputs, axis=1))


def length_penalty_factor(length: Any, alpha: float) -> Any:
    """GNMT's length penalty (Wu et al., 2016, eq. 14): ``((5 + length) / 6) ** alpha``.

    Beam search ranks finished hypotheses by ``log P / length_penalty_factor``: with
    ``alpha = 0`` the raw log-probability, which favours short outputs (every token
    adds a negative term); larger ``alpha`` favours longer ones.
    """
    return ((5.0 + length) / 6.0) ** alpha


def top_k_log_probs(logits: Any, k: int) -> tuple[Any, Any]:
    """The ``k`` most probable next tokens of each row of ``logits (N, V)`` (any order) and their
    log probabilities in float64: ``z - logsumexp(z)`` (``ops.logsumexp``), computed for the k
    chosen tokens only, without a full ``(N, V)`` log-softmax. Rows are split over threads
    (``threads.parallel_rows``)."""
    n_rows, vocab = logits.shape
    k = min(k, vocab)
    tokens = xp.empty((n_rows, k), dtype=xp.int64)
    log_probs = xp.empty((n_rows, k), dtype=xp.float64)

    def best_of(rows: slice) -> None:
        z = logits[rows]
        top = xp.argpartition(z, vocab - k, axis=-1)[:, vocab - k:]
        tokens[rows] = top
        log_probs[rows] = xp.take_along_axis(z, top, axis=-1).astype(xp.float64) - ops.logsumexp(z, dtype=xp.float64)

    threads.parallel_rows(best_of, n_rows, row_size=vocab)
    return tokens, log_probs


@threads.with_blas_on_one_thread_when(ops.holds_blas)
def beam_search(model: Transformer, src_ids: Any, beam_size: int, max_len: int,
                length_penalty: float = LENGTH_PENALTY, record: AttentionRecord | None = None,
                unk_allowed: Any = None) -> list[list[int]]:
    """Beam search with the GNMT length penalty. Returns one id list per source (no <eos>).

    ``record``: an ``AttentionRecord`` that keeps every step's attention and the beams kept; the
    chosen translation of source ``b`` is its row ``record.final_rows[b]``. ``unk_allowed``: as
    for ``greedy_decode``.
    The model runs in eval mode and is put back in the mode it had.
    """
    if beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1, got {beam_size}")
    with model.evaluating():
        batch, beams = src_ids.shape[0], beam_size
        cache = model.start_decoding(src_ids, max_len=max_len)
        if record is not None:
            record.read_encoder(model)
        cache = cache.select(xp.repeat(xp.arange(batch), beams))  # row b * beams + k: beam k of b
        scores = xp.full((batch, beams), -xp.inf, dtype=xp.float64)
        scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
        tokens = xp.full(batch * beams, BOS_ID, dtype=xp.int64)
        finished = xp.zeros(batch * beams, dtype=bool)
        lengths = xp.zeros(batch * beams, dtype=xp.int64)
        history = xp.zeros((batch * beams, 0), dtype=xp.int64)
        no_unk = _rows_without_unk(unk_allowed, beams)
        for _ in range(max_len):
            # The k best of beams x vocab continuations hold at most k of any one beam, so each
            # beam offers only its own k best tokens: k x k candidates per sentence, not k x V.
            top_tokens, top_log_probs = top_k_log_probs(_next_logits(model, cache, tokens, record, no_unk), beams)
            # A finished beam can only continue with <pad>, at no cost: its score stays.
            top_tokens[finished, 0], top_log_probs[finished, 0], top_log_probs[finished, 1:] = PAD_ID, 0.0, -xp.inf
            offered = top_tokens.shape[1]
            candidates = (scores.reshape(-1, 1) + top_log_probs).reshape(batch, beams * offered)
            best = xp.argsort(-candidates, axis=-1, kind="stable")[:, :beams]
            scores = xp.take_along_axis(candidates, best, axis=-1)
            rows = (xp.arange(batch)[:, None] * beams + best // offered).reshape(-1)
            tokens = xp.take_along_axis(top_tokens.reshape(batch, beams * offered), best, axis=-1).reshape(-1)
            history = xp.concatenate([history[rows], tokens[:, None]], axis=1)
            was_finished = finished[rows]
            lengths = lengths[rows] + ~was_finished
            finished = was_finished | (tokens == EOS_ID)
            cache = cache.select(rows, same_sources=True)  # a beam stays in its sentence: memory as it is
            if record is not None:
                record.reorder(rows)
            if bool(finished.all()):
                break
    chosen_rows = xp.arange(batch) * beams + (
        scores / length_penalty_factor(lengths.reshape(batch, beams), length_penalty)).argmax(axis=-1)
    if record is not None:
        record.final_rows = backend.to_numpy(chosen_rows).tolist()
    return _strip(history[chosen_rows])
