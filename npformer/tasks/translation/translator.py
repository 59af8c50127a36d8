"""``Translator``: sentences in, translations out: tokenise, encode, search, decode, detokenise.

``translations(sentences)`` returns one ``Translation`` per sentence: everything the one decoding
of that sentence produced (the source as typed and as read, the ids and tokens as decoded, the
words copied for ``<unk>``, the text, and every attention map of the decoded sequence).
``translate(sentences)`` is the same decoding, strings only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy

from ... import backend
from ...data import Vocab, detokenize, pad_batch, tokenize
from ...data.bpe import BPEVocab
from ...data.final_mark import ENDS as SENTENCE_ENDS, GUESS, ends_with_a_mark, final_mark as english_final_mark
from ...data.truecase import Truecaser, typed_without_case
from ...models import Transformer
from ...tokens import BOS_ID, EOS_ID, UNK_ID
from .attention_record import AttentionRecord
from .decoding import LENGTH_PENALTY, beam_search, greedy_decode
from .input_notes import knows_no_word
from .result import Translation, piece_labels



def _word_count(tokens: Sequence[str]) -> int:
    return sum(any(character.isalnum() for character in token) for token in tokens)


@dataclass(frozen=True)
class SourceReading:
    """One sentence as the translator reads it (``Translator.read``): made once, then read by the
    unknown-word notes, the length notes and the translation.

    ``typed`` / ``read``: its words as typed, and as the model reads them (the run's style, names read
    in place of unknown ones); ``ids``: the ``Ts`` ids the encoder reads (the first ``max_len`` of the
    sentence's ``pieces``); per id, ``word_index`` (the word it is a piece of), ``labels`` and
    ``copyable`` (whether a target ``<unk>`` may copy its word); ``names``: name read -> the unknown
    words it stands for; ``unknown``: the words never seen, as typed; ``words``: how many words;
    ``parts``: the sentence as ``translate`` reads it, whole or split, and ``part_words`` their words.
    """

    sentence: str
    typed: tuple[str, ...]
    read: tuple[str, ...]
    ids: tuple[int, ...]
    pieces: int
    word_index: tuple[int, ...]
    labels: tuple[str, ...]
    copyable: tuple[bool, ...]
    names: dict[str, str]
    unknown: tuple[str, ...]
    words: int
    parts: tuple[str, ...]
    part_words: tuple[int, ...]


class Translator:
    """Sentences in, sentences out: tokenise, encode, search, decode, detokenise.

    **Input as people type it.** A model knows its training text's style: the
    embedded corpus is lower-case, and it and Tatoeba end every sentence with ``.``, ``?`` or ``!``.
    With ``lowercase=True`` the source is lower-cased before it is encoded, and with
    ``final_mark="."`` a sentence without a final ``. ! ?`` gets a full stop, so "I like the dog" is
    read as "i like the dog."; with ``final_mark="guess"`` (what ``npformer train`` records for both)
    it gets the mark its word order asks for (``data.final_mark``: "what time is it" -> "what time is
    it?", "I am tired" -> "I am tired.").
    ``Translator.from_run(run)`` takes both from the run's ``config.json``.
    Tatoeba is written in sentence case: with a ``truecaser`` (``data.truecase``, learned from the
    training split; a run's ``truecase.json``), a sentence typed without case, all in lower case or
    all in capitals, is read in the case of the training text ("WHERE IS TOM?" -> "Where is Tom?");
    a sentence typed with capitals is read as typed.

    **Names.** A piece model has no ``<unk>`` to copy, and spells a name it never saw out of
    pieces, rarely letter for letter. With a ``truecaser``, a capitalised word the training text
    never held ("Zorvan") is read as a name the model copies well (``truecaser.names``: "Tom") and
    written back in its place in the translation (``Translation.copies`` says where).

    **Long input.** ``translate`` splits a sentence longer than anything the model was trained on
    (``trained_words``: the run's ``--max-words``) at its sentence ends, and any part longer than the
    model's ``max_len`` at word boundaries, translates the parts and joins them; ``length_notes``
    says so. ``translations`` decodes each sentence whole, and warns when it must cut one.

    **What ``<unk>`` copies.** A target ``<unk>`` is replaced by a source word (as typed): of the
    words that may be copied (``copyable``: a number, a name, or a word the source vocabulary does
    not know either), the one that the last cross-attention layer (averaged over heads) attended to
    most when the decoder produced it. So names and other unknown words pass through instead of
    printing ``<unk>``, and a word the model knows in English is translated, never copied into
    the French: in a sentence with nothing to copy, the search may not write ``<unk>`` at all and
    takes the best known token instead. ``unknown_words`` lists the unknown words, and
    ``Translation.copies`` says what was copied from where.

    **One reading.** ``read(sentence)`` reads a sentence once (a ``SourceReading``: its tokens,
    pieces, ids, unknown words and parts); ``unknown_words``, ``length_notes``, ``translate`` and
    ``translations`` take readings as well as strings, so ``npformer translate`` reads each once.
    """

    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                 src_lang: str = "en", tgt_lang: str = "fr", lowercase: bool = False,
                 final_mark: str | None = None, truecaser: Truecaser | None = None,
                 trained_words: int | None = None) -> None:
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.lowercase, self.final_mark = lowercase, final_mark
        self.truecaser, self.trained_words = truecaser, trained_words

    @classmethod
    def for_config(cls, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, config: dict,
                   truecaser: Truecaser | None = None) -> "Translator":
        """A translator with the input style a run's ``config.json`` records (none in older runs)
        and the longest sentences it was trained on (``--max-words``, on Tatoeba)."""
        style = config.get("input", {})
        return cls(model, src_vocab, tgt_vocab, lowercase=style.get("lowercase", False),
                   final_mark=style.get("final_mark"), truecaser=truecaser,
                   trained_words=config.get("data", {}).get("long_words") or config.get("data", {}).get("max_words"))

    @classmethod
    def from_run(cls, run: Any) -> "Translator":
        """The translator of a loaded run (``load_run``), with its input style and truecaser."""
        return cls.for_config(run.model, run.src_vocab, run.tgt_vocab, run.config, getattr(run, "truecaser", None))

    def source_tokens(self, sentence: str) -> tuple[list[str], list[str]]:
        """``(as typed, as the model reads them)``: the tokens of ``sentence``, and the same tokens
        lower-cased, truecased (when typed without case) and ended with ``final_mark``, as the
        run's style asks."""
        return self._styled(tokenize(sentence, self.src_lang) or ["."])

    def _styled(self, typed: list[str]) -> tuple[list[str], list[str]]:
        """``source_tokens`` of a sentence's tokens (at least one)."""
        if self.lowercase:
            read = [token.lower() for token in typed]
        elif self.truecaser is not None and typed_without_case(typed):
            read = self.truecaser.truecase(typed)
        else:
            read = list(typed)
        if self.final_mark and not ends_with_a_mark(typed):
            mark = english_final_mark(typed) if self.final_mark == GUESS else self.final_mark
            typed, read = typed + [mark], read + [mark]
        return typed, read

    def parts(self, sentence: str) -> list[str]:
        """``sentence`` as ``translate`` reads it: whole, or, when it has more words than
        ``trained_words`` or more pieces than the model's ``max_len``, split after each sentence end
        and then at word boundaries into parts of at most ``max_len`` pieces (nothing is dropped)."""
        return list(self.read(sentence).parts)

    def _parts(self, sentence: str, written: list[str], pieces: list[int]) -> tuple[list[str], list[int]]:
        """``parts(sentence)`` and the words of each, from the sentence's tokens as written and the
        number of pieces each is read as."""
        limit = self.model.config.max_len - (1 if self.final_mark else 0)   # a part may get a final mark
        too_many_words = self.trained_words is not None and _word_count(written) > self.trained_words
        if not too_many_words and sum(pieces) <= limit:
            return [sentence], [_word_count(written)]
        parts, chunk, size = [], [], 0
        for token, count in zip(written, pieces):
            if chunk and size + count > limit:
                parts.append(chunk)
                chunk, size = [], 0
            chunk.append(token)
            size += count
            if token in SENTENCE_ENDS:
                parts.append(chunk)
                chunk, size = [], 0
        parts += [chunk] if chunk else []
        return [detokenize(part, self.src_lang) for part in parts], [_word_count(part) for part in parts]

    def length_notes(self, sentences: Sequence[str | SourceReading]) -> list[str]:
        """One line for each sentence longer than what the model was trained on (``trained_words``)
        or than it can read (``max_len`` pieces), saying what ``translate`` does with it."""
        readings = self._readings(sentences, "length_notes")
        notes = [self.length_note(reading, number) for number, reading in enumerate(readings, start=1)]
        return [note for note in notes if note is not None]

    def length_note(self, reading: SourceReading, number: int) -> str | None:
        """``length_notes``'s line for one sentence (its ``read``ing), numbered ``number``; None
        when the model reads it whole and was trained on sentences as long."""
        words, parts = reading.words, reading.parts
        trained = self.trained_words is not None and words > self.trained_words
        if len(parts) == 1 and not trained:
            return None
        limit = f"more than the {self.trained_words} of the longest sentences the model was trained on" \
            if trained else "more than the model reads at once"
        if len(parts) == 1:
            return f"sentence {number} has {words} words, {limit}, and no sentence end to split it at: " \
                   f"it is translated whole and may lose some of its meaning (shorter sentences translate better)"
        note = f"sentence {number} has {words} words, {limit}: translated in {len(parts)} parts"
        longest = max(reading.part_words)
        if self.trained_words is not None and longest > self.trained_words:
            note += f", the longest of {longest} words, which may lose some of its meaning"
        return note

    @property
    def _names_stand_in(self) -> bool:
        """Whether known names stand in for unknown ones: a piece model (no ``<unk>`` to copy) with
        a truecaser (which knows the training text's words)."""
        return self.truecaser is not None and isinstance(self.src_vocab, BPEVocab)

    def unknown_words(self, sentences: Sequence[str | SourceReading]) -> list[str]:
        """The source words (as typed, each once, in order) that the vocabulary does not hold; for a
        piece model with a truecaser, the words of letters its training text never held."""
        return list(dict.fromkeys(word for reading in self._readings(sentences, "unknown_words")
                                  for word in reading.unknown))

    def copyable(self, typed: list[str], read: list[str], known: list[bool] | None = None) -> list[bool]:
        """Which words of a source (as typed, as read) a target ``<unk>`` may copy: a number (a word
        with a digit), a name (a capital letter, and a lower-case form the vocabulary does not know:
        "Tom", "Zorvan", not "The" at the start of a sentence; "I" is not a name), or a word the
        source vocabulary does not know either. Any other word the model knows and should
        translate: copying it would put English into the French ("halves" -> "halves").
        ``known``: whether the vocabulary knows each word read, when the caller has encoded them."""
        def knows(word: str) -> bool:
            return UNK_ID not in self.src_vocab.encode([word])

        flags = []
        for typed_word, read_known in zip(typed, known or [knows(word) for word in read]):
            number = any(character.isdigit() for character in typed_word)
            name = typed_word[:1].isupper() and typed_word != "I" and not knows(typed_word.lower())
            flags.append(number or name or not read_known)
        return flags

    def translate(self, sentences: Sequence[str | SourceReading], beam_size: int = 1,
                  length_penalty: float = LENGTH_PENALTY, batch_size: int = 64, max_len: int | None = None,
                  progress: bool = False) -> list[str]:
        """The translations of ``sentences`` (strings, or their ``read``ings) as strings, in order:
        ``translations(...)``'s texts, a long sentence translated in ``parts`` joined by spaces (no
        attention map is kept beyond what copying an ``<unk>`` reads); a sentence that holds no word
        the model knows ("🍕", ``input_notes.knows_no_word``) as typed."""
        readings = self._readings(sentences, "translate")
        unread = [knows_no_word(self, reading) for reading in readings]   # left as typed
        parts = [[] if left else [reading] if reading.parts == (reading.sentence,) else
                 [self.read(part) for part in reading.parts] for reading, left in zip(readings, unread)]
        found = iter(self._search([part for sentence in parts for part in sentence], beam_size, length_penalty,
                                  batch_size, max_len, progress, keep_attention=False))
        return [reading.sentence.strip() if left else " ".join(next(found).text for _ in sentence)
                for reading, left, sentence in zip(readings, unread, parts)]

    def translations(self, sentences: Sequence[str | SourceReading], beam_size: int = 1,
                     length_penalty: float = LENGTH_PENALTY, batch_size: int = 64, max_len: int | None = None,
                     progress: bool = False) -> list[Translation]:
        """One ``Translation`` per sentence (a string, or its ``read``ing), in order; ``beam_size=1``
        is greedy search.

        Each sentence is read once and decoded once; its attention maps are recorded during
        that decoding. ``length_penalty``: beam search's alpha (``decoding``; larger prefers longer
        translations). ``max_len``: the longest output (default: twice the source plus 10, at most
        the model's ``max_len``). ``progress``: a bar over the batches (``tqdm.auto``: a widget in
        Jupyter)."""
        return self._search(self._readings(sentences, "translations"), beam_size, length_penalty, batch_size,
                            max_len, progress, keep_attention=True)

    def _search(self, sources: list[SourceReading], beam_size: int, length_penalty: float, batch_size: int,
                max_len: int | None, progress: bool, keep_attention: bool) -> list[Translation]:
        """``translations``; with ``keep_attention=False`` each result's ``attention`` holds only the
        last layer's cross-attention (``AttentionRecord(full=False)``)."""
        from tqdm.auto import tqdm   # here, not at the top: importing npformer starts no progress bar

        if beam_size < 1:
            raise ValueError(f"Translator.translations: beam_size must be >= 1, got {beam_size}")
        results: list[Translation] = []
        starts = range(0, len(sources), batch_size)
        for start in tqdm(starts, disable=not progress, unit="batch", leave=False,
                          desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})"):
            results += self._translate_batch(sources[start:start + batch_size], beam_size, length_penalty,
                                             max_len, keep_attention)
        return results

    def stand_ins(self, read: list[str]) -> list[tuple[int, int, str]]:
        """The names read in place of unknown ones, as ``(first word, last word, name)``: each run of
        capitalised words the training text never held (``truecaser.knows``: "Angela Merkel") or
        held too seldom to spell (``truecaser.rare_names``: "Berlin"), in a piece model, gets one name
        of ``truecaser.names`` that the sentence does not hold ("Tom");
        none without a truecaser, or once the names run out."""
        if not self._names_stand_in:
            return []
        free = iter([name for name in self.truecaser.names if name not in read])
        spans: list[tuple[int, int, str]] = []
        for index, word in enumerate(read):
            if not (word[:1].isupper() and word.isalpha() and
                    (not self.truecaser.knows(word) or word in self.truecaser.rare_names)):
                continue
            if spans and spans[-1][1] == index - 1:          # the run goes on: "Angela" "Merkel"
                spans[-1] = (spans[-1][0], index, spans[-1][2])
            elif (name := next(free, None)) is not None:
                spans.append((index, index, name))
        return spans

    def read(self, sentence: str) -> SourceReading:
        """``sentence`` read once, for the notes and the translation: its tokens (``source_tokens``),
        the names read in place of unknown ones (``stand_ins``: the first word of a run reads the
        name, the others are not read), its pieces and ids, its unknown words and its ``parts``."""
        written = tokenize(sentence, self.src_lang)
        typed, read = self._styled(written or ["."])
        names, unread, span_labels = {}, set(), {}
        for first, last, name in self.stand_ins(read):
            names[name] = " ".join(read[first:last + 1])
            span_labels[first] = " ".join(typed[first:last + 1])
            read[first] = name
            unread.update(range(first + 1, last + 1))
        kept = [index for index in range(len(read)) if index not in unread]
        pieces = {index: self.src_vocab.pieces([read[index]]) for index in kept}   # each word's pieces
        ids = self.src_vocab.encode([read[index] for index in kept])              # their ids, in one call
        word_index, labels = [], []
        for index in kept:
            word_index += [index] * len(pieces[index])
            if index in span_labels:
                labels += [span_labels[index]] * len(pieces[index])   # the name typed, not the one read
            else:
                labels += [typed[index]] if len(pieces[index]) == 1 else piece_labels(pieces[index])  # "Zor", "·van"
        unseen = {index for index, piece_id in zip(word_index, ids) if piece_id == UNK_ID}
        if self._names_stand_in:
            unknown = [word for word in typed if word.isalpha() and not self.truecaser.knows(word)]
        else:
            unknown = [typed[index] for index in sorted(unseen)]
        may_copy = self.copyable(typed, read, known=[index not in unseen for index in range(len(read))])
        read_pieces = [len(pieces.get(index, ())) for index in range(len(written))]   # per word written; unread: 0
        parts, part_words = self._parts(sentence, written, read_pieces)
        limit = self.model.config.max_len
        return SourceReading(
            sentence=sentence, typed=tuple(typed), read=tuple(read), ids=tuple(ids[:limit]), pieces=len(ids),
            word_index=tuple(word_index[:limit]), labels=tuple(labels[:limit]),
            copyable=tuple(may_copy[index] for index in word_index[:limit]), names=names, unknown=tuple(unknown),
            words=_word_count(written), parts=tuple(parts), part_words=tuple(part_words))

    def _readings(self, sentences: Sequence[str | SourceReading], method: str) -> list[SourceReading]:
        """Each sentence's reading: a ``SourceReading`` as it is, a string read (``read``)."""
        if isinstance(sentences, str):
            raise TypeError(f"Translator.{method}: sentences must be a list of strings, got a str")
        return [sentence if isinstance(sentence, SourceReading) else self.read(sentence) for sentence in sentences]

    def _translate_batch(self, sources: list[SourceReading], beam_size: int, length_penalty: float,
                         max_len: int | None, keep_attention: bool) -> list[Translation]:
        limit = self.model.config.max_len
        for source in sources:
            if source.pieces > limit:
                warnings.warn(f"Translator.translations: {source.sentence[:40]!r}... has {source.pieces} pieces; "
                              f"the model reads at most {limit}, so the rest is cut (translate() splits it instead)",
                              stacklevel=4)
        src = backend.asarray(pad_batch([(list(source.ids), [BOS_ID, EOS_ID]) for source in sources]).src)
        longest = max(len(source.ids) for source in sources)
        max_len = min(max_len or 2 * longest + 10, limit)
        record = AttentionRecord(full=keep_attention)
        unk_allowed = backend.asarray([any(source.copyable) for source in sources])  # else never <unk>
        if beam_size == 1:
            hypotheses = greedy_decode(self.model, src, max_len, record=record, unk_allowed=unk_allowed)
        else:
            hypotheses = beam_search(self.model, src, beam_size, max_len, length_penalty, record=record,
                                     unk_allowed=unk_allowed)
        final_rows = record.final_rows or list(range(len(sources)))
        return [self._result(source, ids, record, row, index, max_len)
                for index, (source, ids, row) in enumerate(zip(sources, hypotheses, final_rows))]

    def _result(self, source: SourceReading, output_ids: list[int], record: AttentionRecord,
                row: int, index: int, max_len: int) -> Translation:
        """One sentence's ``Translation`` from its decoded ids and the recorded attention."""
        ended = len(output_ids) < max_len  # a search stops early only at <eos>
        attention = record.trace(row, index, len(output_ids) + ended, len(source.ids))
        tokens = [self.tgt_vocab.tokens[i] for i in output_ids]
        copied_tokens, copies = list(tokens), {}
        if UNK_ID in output_ids:
            looked_at = attention["cross"][-1].mean(axis=0)  # last layer, heads averaged: (Tt, Ts)
            may_copy = numpy.array(source.copyable)         # (Ts,): the words an <unk> may copy
            for position, token_id in enumerate(output_ids):
                if token_id == UNK_ID:
                    copies[position] = int(numpy.where(may_copy, looked_at[position], -numpy.inf).argmax())
                    word = source.typed[source.word_index[copies[position]]]
                    copied_tokens[position] = self.tgt_vocab.whole_word(word)
        labels = piece_labels(copied_tokens, isinstance(self.tgt_vocab, BPEVocab))
        for position, label in enumerate(labels):
            # a name read in place of an unknown one, written as a whole word: the unknown one instead
            if label in source.names and copied_tokens[position] == self.tgt_vocab.whole_word(label):
                labels[position] = source.names[label]
                copied_tokens[position] = self.tgt_vocab.whole_word(labels[position])
                word = source.read.index(label)
                if word in source.word_index:
                    copies[position] = source.word_index.index(word)
        text = detokenize(self.tgt_vocab.join(copied_tokens), self.tgt_lang)
        return Translation(sentence=source.sentence, text=text, source_typed=list(source.typed),
                           source_read=list(source.read), source_ids=list(source.ids),
                           source_labels=list(source.labels), output_ids=list(output_ids), output_tokens=tokens,
                           output_labels=labels, copies=copies, ended=ended, attention=attention)
