"""``Translator``: sentences in, sentences out: tokenise, encode, search, decode, detokenise."""

from __future__ import annotations

from typing import Any, Sequence

import numpy
from tqdm.auto import tqdm

from ... import backend
from ...data import Vocab, detokenize, pad_batch, tokenize
from ...models import Transformer
from ...tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from .decoding import beam_search, greedy_decode


SENTENCE_ENDS = (".", "!", "?", "...", "…")


class Translator:
    """Sentences in, sentences out: tokenise, encode, search, decode, detokenise.

    **Input as people type it.** A model knows its training text's style: the
    embedded corpus is lower-case and every sentence ends with a full stop or a
    question mark. With ``lowercase=True`` the source is lower-cased before it is
    encoded, and with ``final_mark="."`` a sentence without a final ``. ! ?``
    gets one, so "I like the dog" is read as "i like the dog.".
    ``Translator.from_run(run)`` takes both from the run's ``config.json``.

    A target ``<unk>`` is replaced by the source word (as typed) that the last
    cross-attention layer (averaged over heads) attends to most when the
    translation is fed back through the model, so names and other unknown
    words pass through instead of printing ``<unk>``; ``unknown_words`` lists them.
    """

    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                 src_lang: str = "en", tgt_lang: str = "fr", lowercase: bool = False,
                 final_mark: str | None = None) -> None:
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.lowercase, self.final_mark = lowercase, final_mark

    @classmethod
    def for_config(cls, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, config: dict) -> "Translator":
        """A translator with the input style a run's ``config.json`` records (none in older runs)."""
        style = config.get("input", {})
        return cls(model, src_vocab, tgt_vocab, lowercase=style.get("lowercase", False),
                   final_mark=style.get("final_mark"))

    @classmethod
    def from_run(cls, run: Any) -> "Translator":
        """The translator of a loaded run (``training.load_run``), with its input style."""
        return cls.for_config(run.model, run.src_vocab, run.tgt_vocab, run.config)

    def source_tokens(self, sentence: str) -> tuple[list[str], list[str]]:
        """``(as typed, as the model reads them)``: the tokens of ``sentence``, and the same tokens
        lower-cased and ended with ``final_mark`` when the run's style asks for it."""
        typed = tokenize(sentence, self.src_lang) or ["."]
        read = [token.lower() for token in typed] if self.lowercase else list(typed)
        if self.final_mark and typed[-1] not in SENTENCE_ENDS:
            typed, read = typed + [self.final_mark], read + [self.final_mark]
        limit = self.model.config.max_len
        return typed[:limit], read[:limit]

    def unknown_words(self, sentences: Sequence[str]) -> list[str]:
        """The source words (as typed, each once, in order) that the vocabulary does not hold."""
        unknown: dict[str, None] = {}
        for sentence in sentences:
            typed, read = self.source_tokens(sentence)
            unknown.update((word, None) for word, token in zip(typed, read) if UNK_ID in self.src_vocab.encode([token]))
        return list(unknown)

    def translate(self, sentences: Sequence[str], beam_size: int = 1, length_penalty: float = 0.6,
                  batch_size: int = 64, max_len: int | None = None, progress: bool = False) -> list[str]:
        """Translations of ``sentences``, in order; ``beam_size=1`` is greedy search.
        ``progress``: a bar over the sentences (``tqdm.auto``: a widget in Jupyter)."""
        if isinstance(sentences, str):
            raise TypeError("Translator.translate: sentences must be a list of strings, got a str")
        results: list[str] = []
        starts = range(0, len(sentences), batch_size)
        for start in tqdm(starts, disable=not progress, unit="batch", leave=False,
                          desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})"):
            chunk = list(sentences[start:start + batch_size])
            results += self._translate_batch(chunk, beam_size, length_penalty, max_len)
        return results

    def _translate_batch(self, sentences: list[str], beam_size: int, length_penalty: float,
                         max_len: int | None) -> list[str]:
        limit = self.model.config.max_len
        typed_and_read = [self.source_tokens(sentence) for sentence in sentences]
        # One entry per source id: the word as typed (a word of several BPE pieces repeats).
        source_tokens = [[word for word, read_word in zip(typed, read) for _ in self.src_vocab.pieces([read_word])][:limit]
                         for typed, read in typed_and_read]
        encoded = [(self.src_vocab.encode(read)[:limit], [BOS_ID, EOS_ID]) for _, read in typed_and_read]
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
        return [detokenize(self.tgt_vocab.join(tokens), self.tgt_lang) for tokens in words]

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
                    words[row][position] = self.tgt_vocab.whole_word(source_tokens[row][aligned])
