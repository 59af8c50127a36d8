"""What a translator can tell a person about what they typed, before translating it: one line each.

* **No word it knows** (``knows_no_word``): "🍕", "xyzzy", "42". The model would only guess ("🍕"
  came out as "Au moment, au moment, ..."), so ``Translator.translate`` leaves such a sentence as
  typed, and the note says so.
* **The target language typed by mistake** (``looks_like_target``): "Je ne parle pas anglais." The
  translator's own two vocabularies tell the languages apart: a French sentence has more words the
  French vocabulary holds whole than words the English training text holds, and at least half its
  words are whole French words. On the shipped ``fra``'s test split this took none of the 6,328
  English sentences for French and found 6,272 of the French ones (``tests/test_typed_input.py``).
  npformer's trained language identifier (``tasks.language_id``) is not used: it would have to be
  trained at every start.
* **Longer than the model was trained on** (``Translator.length_notes``).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...data import tokenize


def _words(tokens: Sequence[str]) -> list[str]:
    return [token for token in tokens if any(character.isalpha() for character in token)]


def holds_whole(vocab: Any, word: str) -> bool:
    """Whether ``vocab`` has ``word`` as one token of its own (a whole word, not letters or ``<unk>``)."""
    return vocab.whole_word(word) in vocab.index


def knows_source_word(translator: Any, word: str) -> bool:
    """Whether the model's training text held ``word`` (the truecaser's list, or the source vocabulary)."""
    if translator.truecaser is not None:
        return translator.truecaser.knows(word)
    return holds_whole(translator.src_vocab, word.lower() if translator.lowercase else word)


def knows_no_word(translator: Any, reading: Any) -> bool:
    """Whether a sentence (its ``Translator.read`` reading) holds no word (a token with a letter) that
    the training text held."""
    return not any(knows_source_word(translator, word) for word in _words(reading.typed))


def looks_like_target(translator: Any, reading: Any) -> bool:
    """Whether a sentence (its reading) reads as the language the model translates into (see the
    module docstring): its words as that language's tokenizer splits them ("J'ai" -> "J'", "ai")."""
    target_words = _words(tokenize(reading.sentence, translator.tgt_lang))
    in_target = sum(holds_whole(translator.tgt_vocab, word) or holds_whole(translator.tgt_vocab, word.lower())
                    for word in target_words)
    in_source = sum(knows_source_word(translator, word) for word in _words(reading.typed))
    return in_target > in_source and 2 * in_target >= len(target_words)


LANGUAGES = {"en": "English", "fr": "French"}


def input_notes(translator: Any, readings: Sequence[Any]) -> dict[int, str]:
    """A line for each sentence (a ``Translator.read`` reading) the model cannot read as it should,
    by its index: the target language typed by mistake, or no word the model knows ("sentence N
    ...", from 1)."""
    notes = {}
    source, target = (LANGUAGES.get(code, code) for code in (translator.src_lang, translator.tgt_lang))
    for index, reading in enumerate(readings):
        unread = knows_no_word(translator, reading)
        if looks_like_target(translator, reading):
            notes[index] = f"sentence {index + 1} looks like {target}: this model translates {source} into " + \
                (f"{target}, so it is left as typed" if unread else f"{target}, so expect a poor translation")
        elif unread:
            notes[index] = f"sentence {index + 1} holds no word the model knows, so it is left as typed"
    return notes
