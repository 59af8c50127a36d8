"""Greedy and beam-search decoding on the KV-cached decoder, and a string-to-string ``Translator``.

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
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy

from . import backend
from .backend import xp
from .data.batching import pad_batch
from .data.tokenizer import detokenize, tokenize
from .data.vocab import Vocab
from .nn.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Transformer


def _log_softmax(logits: Any) -> Any:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))


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


def greedy_decode(model: Transformer, src_ids: Any, max_len: int) -> list[list[int]]:
    """The most probable next token at each step. Returns one id list per source (no <eos>)."""
    model.eval()
    batch = src_ids.shape[0]
    cache = model.start_decoding(src_ids, max_len=max_len)
    tokens = xp.full(batch, BOS_ID, dtype=xp.int64)
    finished = xp.zeros(batch, dtype=bool)
    outputs = []
    for _ in range(max_len):
        tokens = model.decode_step(cache, tokens).argmax(axis=-1)
        tokens = xp.where(finished, PAD_ID, tokens)
        outputs.append(tokens)
        finished |= tokens == EOS_ID
        if bool(finished.all()):
            break
    return _strip(xp.stack(outputs, axis=1))


def beam_search(model: Transformer, src_ids: Any, beam_size: int, max_len: int,
                length_penalty: float = 0.6) -> list[list[int]]:
    """Beam search with the GNMT length penalty. Returns one id list per source (no <eos>)."""
    if beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1, got {beam_size}")
    model.eval()
    batch, beams = src_ids.shape[0], beam_size
    cache = model.start_decoding(src_ids, max_len=max_len)
    cache = cache.select(xp.repeat(xp.arange(batch), beams))  # row b * beams + k: beam k of b
    scores = xp.full((batch, beams), -xp.inf, dtype=xp.float64)
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
    tokens = xp.full(batch * beams, BOS_ID, dtype=xp.int64)
    finished = xp.zeros(batch * beams, dtype=bool)
    lengths = xp.zeros(batch * beams, dtype=xp.int64)
    history = xp.zeros((batch * beams, 0), dtype=xp.int64)
    for _ in range(max_len):
        log_probs = _log_softmax(model.decode_step(cache, tokens).astype(xp.float64))
        vocab = log_probs.shape[-1]
        # A finished beam can only continue with <pad>, at no cost: its score stays.
        log_probs[finished] = -xp.inf
        log_probs[finished, PAD_ID] = 0.0
        candidates = (scores.reshape(-1, 1) + log_probs).reshape(batch, beams * vocab)
        best = xp.argpartition(-candidates, beams - 1, axis=-1)[:, :beams]  # the top k, unordered
        scores = xp.take_along_axis(candidates, best, axis=-1)
        ranked = xp.argsort(-scores, axis=-1, kind="stable")
        best = xp.take_along_axis(best, ranked, axis=-1)
        scores = xp.take_along_axis(scores, ranked, axis=-1)
        rows = (xp.arange(batch)[:, None] * beams + best // vocab).reshape(-1)
        tokens = (best % vocab).reshape(-1)
        history = xp.concatenate([history[rows], tokens[:, None]], axis=1)
        was_finished = finished[rows]
        lengths = lengths[rows] + ~was_finished
        finished = was_finished | (tokens == EOS_ID)
        cache = cache.select(rows)
        if bool(finished.all()):
            break
    penalty = ((5.0 + lengths.reshape(batch, beams)) / 6.0) ** length_penalty
    chosen = (scores / penalty).argmax(axis=-1)
    return _strip(history[xp.arange(batch) * beams + chosen])


class Translator:
    """Sentences in, sentences out: tokenise, encode, search, decode, detokenise.

    A target ``<unk>`` is replaced by the source word that the last
    cross-attention layer (averaged over heads) attends to most when the
    translation is fed back through the model, so names and other unknown
    words pass through instead of printing ``<unk>``.
    """

    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                 src_lang: str = "en", tgt_lang: str = "fr") -> None:
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.src_lang, self.tgt_lang = src_lang, tgt_lang

    def translate(self, sentences: Sequence[str], beam_size: int = 1, length_penalty: float = 0.6,
                  batch_size: int = 64, max_len: int | None = None) -> list[str]:
        """Translations of ``sentences``, in order; ``beam_size=1`` is greedy search."""
        if isinstance(sentences, str):
            raise TypeError("Translator.translate: sentences must be a list of strings, got a str")
        results: list[str] = []
        for start in range(0, len(sentences), batch_size):
            chunk = list(sentences[start:start + batch_size])
            results += self._translate_batch(chunk, beam_size, length_penalty, max_len)
        return results

    def _translate_batch(self, sentences: list[str], beam_size: int, length_penalty: float,
                         max_len: int | None) -> list[str]:
        limit = self.model.config.max_len
        source_tokens = [tokenize(s, self.src_lang)[:limit] or ["."] for s in sentences]
        encoded = [(self.src_vocab.encode(tokens), [BOS_ID, EOS_ID]) for tokens in source_tokens]
        src = backend.asarray(pad_batch(encoded).src)
        longest = max(len(tokens) for tokens in source_tokens)
        max_len = min(max_len or 2 * longest + 10, limit)
        if beam_size == 1:
            hypotheses = greedy_decode(self.model, src, max_len)
        else:
            hypotheses = beam_search(self.model, src, beam_size, max_len, length_penalty)
        words = [[self.tgt_vocab.tokens[i] for i in ids] for ids in hypotheses]
        unknown_rows = [row for row, ids in enumerate(hypotheses) if UNK_ID in ids]
        if unknown_rows:
            self._replace_unknown(src, hypotheses, words, source_tokens, unknown_rows)
        return [detokenize(tokens, self.tgt_lang) for tokens in words]

    def _replace_unknown(self, src: Any, hypotheses: list[list[int]], words: list[list[str]],
                         source_tokens: list[list[str]], rows: list[int]) -> None:
        tgt_in = pad_batch([([0], [BOS_ID] + hypotheses[r] + [EOS_ID]) for r in rows]).tgt_in
        self.model.forward(src[backend.asarray(numpy.array(rows))], backend.asarray(tgt_in))
        cross = backend.to_numpy(self.model.attention_maps()["decoder_cross"][-1]).mean(axis=1)
        for i, row in enumerate(rows):
            for position, token_id in enumerate(hypotheses[row]):
                if token_id == UNK_ID:
                    # decoder input position `position` predicts output token `position`
                    aligned = int(cross[i, position, : len(source_tokens[row])].argmax())
                    words[row][position] = source_tokens[row][aligned]
