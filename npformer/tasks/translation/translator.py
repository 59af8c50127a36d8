"""``Translator``: sentences in, sentences out: tokenise, encode, search, decode, detokenise."""

from __future__ import annotations

from typing import Any, Sequence

import numpy

from ... import backend
from ...data import Vocab, detokenize, pad_batch, tokenize
from ...models import Transformer
from ...tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from .decoding import beam_search, greedy_decode


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
        # Decoder input position p predicts output token p, so <bos> + all but the last token
        # suffice (and fit max_len even when the search used every position).
        tgt_in = pad_batch([([PAD_ID], [BOS_ID] + hypotheses[r]) for r in rows]).tgt_in
        with self.model.evaluating():
            self.model.forward(src[backend.asarray(numpy.array(rows))], backend.asarray(tgt_in))
        cross = backend.to_numpy(self.model.attention_maps()["decoder_cross"][-1]).mean(axis=1)
        for i, row in enumerate(rows):
            for position, token_id in enumerate(hypotheses[row]):
                if token_id == UNK_ID:
                    # decoder input position `position` predicts output token `position`
                    aligned = int(cross[i, position, : len(source_tokens[row])].argmax())
                    words[row][position] = source_tokens[row][aligned]
