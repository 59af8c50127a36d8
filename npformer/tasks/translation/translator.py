"""``Translator``: sentences in, translations out: tokenise, encode, search, decode, detokenise.

``translations(sentences)`` returns one ``Translation`` per sentence: everything the one decoding
of that sentence produced (the source as typed and as read, the ids and tokens as decoded, the
words copied for ``<unk>``, the text, and every attention map of the decoded sequence).
``translate(sentences)`` is the same decoding, strings only.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy
from tqdm.auto import tqdm

from ... import backend
from ...data import Vocab, detokenize, pad_batch, tokenize
from ...models import Transformer
from ...tokens import BOS_ID, EOS_ID, UNK_ID
from .attention_record import AttentionRecord
from .decoding import LENGTH_PENALTY, beam_search, greedy_decode
from .result import Translation, piece_label


SENTENCE_ENDS = (".", "!", "?", "...", "…")


class Translator:
    """Sentences in, sentences out: tokenise, encode, search, decode, detokenise.

    **Input as people type it.** A model knows its training text's style: the
    embedded corpus is lower-case and every sentence ends with a full stop or a
    question mark. With ``lowercase=True`` the source is lower-cased before it is
    encoded, and with ``final_mark="."`` a sentence without a final ``. ! ?``
    gets one, so "I like the dog" is read as "i like the dog.".
    ``Translator.from_run(run)`` takes both from the run's ``config.json``.

    **What ``<unk>`` copies.** A target ``<unk>`` is replaced by a source word (as typed): of the
    words that may be copied (``copyable``: a number, a name, or a word the source vocabulary does
    not know either), the one that the last cross-attention layer (averaged over heads) attended to
    most when the decoder produced it. So names and other unknown words pass through instead of
    printing ``<unk>``, and a word the model knows in English is translated, never copied into
    the French: in a sentence with nothing to copy, the search may not write ``<unk>`` at all and
    takes the best known token instead. ``unknown_words`` lists the unknown words, and
    ``Translation.copies`` says what was copied from where.
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
        """The translator of a loaded run (``load_run``), with its input style."""
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

    def copyable(self, typed: list[str], read: list[str]) -> list[bool]:
        """Which words of a source (as typed, as read) a target ``<unk>`` may copy: a number (a word
        with a digit), a name (a capital letter, and a lower-case form the vocabulary does not know:
        "Tom", "Zorvan", not "The" at the start of a sentence; "I" is not a name), or a word the
        source vocabulary does not know either. Any other word the model knows and should
        translate: copying it would put English into the French ("halves" -> "halves")."""
        def known(word: str) -> bool:
            return UNK_ID not in self.src_vocab.encode([word])

        flags = []
        for typed_word, read_word in zip(typed, read):
            number = any(character.isdigit() for character in typed_word)
            name = typed_word[:1].isupper() and typed_word != "I" and not known(typed_word.lower())
            flags.append(number or name or not known(read_word))
        return flags

    def translate(self, sentences: Sequence[str], beam_size: int = 1, length_penalty: float = LENGTH_PENALTY,
                  batch_size: int = 64, max_len: int | None = None, progress: bool = False) -> list[str]:
        """The translations of ``sentences`` as strings, in order (``translations(...)``'s texts; no
        attention map is kept beyond what copying an ``<unk>`` reads)."""
        return [found.text for found in self._search(sentences, beam_size, length_penalty, batch_size,
                                                     max_len, progress, keep_attention=False)]

    def translations(self, sentences: Sequence[str], beam_size: int = 1, length_penalty: float = LENGTH_PENALTY,
                     batch_size: int = 64, max_len: int | None = None, progress: bool = False) -> list[Translation]:
        """One ``Translation`` per sentence, in order; ``beam_size=1`` is greedy search.

        Each sentence is encoded once and decoded once; its attention maps are recorded during
        that decoding. ``length_penalty``: beam search's alpha (``decoding``; larger prefers longer
        translations). ``max_len``: the longest output (default: twice the source plus 10, at most
        the model's ``max_len``). ``progress``: a bar over the batches (``tqdm.auto``: a widget in
        Jupyter)."""
        return self._search(sentences, beam_size, length_penalty, batch_size, max_len, progress, keep_attention=True)

    def _search(self, sentences: Sequence[str], beam_size: int, length_penalty: float, batch_size: int,
                max_len: int | None, progress: bool, keep_attention: bool) -> list[Translation]:
        """``translations``; with ``keep_attention=False`` each result's ``attention`` holds only the
        last layer's cross-attention (``AttentionRecord(full=False)``)."""
        if isinstance(sentences, str):
            raise TypeError("Translator.translations: sentences must be a list of strings, got a str")
        if beam_size < 1:
            raise ValueError(f"Translator.translations: beam_size must be >= 1, got {beam_size}")
        results: list[Translation] = []
        starts = range(0, len(sentences), batch_size)
        for start in tqdm(starts, disable=not progress, unit="batch", leave=False,
                          desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})"):
            chunk = list(sentences[start:start + batch_size])
            results += self._translate_batch(chunk, beam_size, length_penalty, max_len, keep_attention)
        return results

    def _read_source(self, sentence: str) -> dict[str, list]:
        """The source of one sentence: words as typed and as read, and per id its word and label."""
        typed, read = self.source_tokens(sentence)
        ids, word_index, labels = [], [], []
        for index, (typed_word, read_word) in enumerate(zip(typed, read)):
            pieces = self.src_vocab.pieces([read_word])
            ids += self.src_vocab.encode([read_word])
            word_index += [index] * len(pieces)
            labels += [typed_word] if len(pieces) == 1 else [piece_label(piece) for piece in pieces]
        limit = self.model.config.max_len
        copyable_words = self.copyable(typed, read)
        return {"typed": typed, "read": read, "ids": ids[:limit], "word_index": word_index[:limit],
                "labels": labels[:limit], "copyable": [copyable_words[index] for index in word_index[:limit]]}

    def _translate_batch(self, sentences: list[str], beam_size: int, length_penalty: float,
                         max_len: int | None, keep_attention: bool) -> list[Translation]:
        sources = [self._read_source(sentence) for sentence in sentences]
        src = backend.asarray(pad_batch([(source["ids"], [BOS_ID, EOS_ID]) for source in sources]).src)
        longest = max(len(source["ids"]) for source in sources)
        max_len = min(max_len or 2 * longest + 10, self.model.config.max_len)
        record = AttentionRecord(full=keep_attention)
        unk_allowed = backend.asarray([any(source["copyable"]) for source in sources])  # else never <unk>
        if beam_size == 1:
            hypotheses = greedy_decode(self.model, src, max_len, record=record, unk_allowed=unk_allowed)
        else:
            hypotheses = beam_search(self.model, src, beam_size, max_len, length_penalty, record=record,
                                     unk_allowed=unk_allowed)
        final_rows = record.final_rows or list(range(len(sentences)))
        return [self._result(sentence, source, ids, record, row, index, max_len)
                for index, (sentence, source, ids, row) in enumerate(zip(sentences, sources, hypotheses, final_rows))]

    def _result(self, sentence: str, source: dict, output_ids: list[int], record: AttentionRecord,
                row: int, index: int, max_len: int) -> Translation:
        """One sentence's ``Translation`` from its decoded ids and the recorded attention."""
        ended = len(output_ids) < max_len  # a search stops early only at <eos>
        attention = record.trace(row, index, len(output_ids) + ended, len(source["ids"]))
        tokens = [self.tgt_vocab.tokens[i] for i in output_ids]
        copied_tokens, copies = list(tokens), {}
        if UNK_ID in output_ids:
            looked_at = attention["cross"][-1].mean(axis=0)  # last layer, heads averaged: (Tt, Ts)
            may_copy = numpy.array(source["copyable"])      # (Ts,): the words an <unk> may copy
            for position, token_id in enumerate(output_ids):
                if token_id == UNK_ID:
                    copies[position] = int(numpy.where(may_copy, looked_at[position], -numpy.inf).argmax())
                    word = source["typed"][source["word_index"][copies[position]]]
                    copied_tokens[position] = self.tgt_vocab.whole_word(word)
        text = detokenize(self.tgt_vocab.join(copied_tokens), self.tgt_lang)
        return Translation(sentence=sentence, text=text, source_typed=source["typed"], source_read=source["read"],
                           source_ids=source["ids"], source_labels=source["labels"], output_ids=list(output_ids),
                           output_tokens=tokens, output_labels=[piece_label(token) for token in copied_tokens],
                           copies=copies, ended=ended, attention=attention)
