"""What a translator can tell a person about what they typed, before translating it: one line each.

* **No word it knows** (``knows_no_word``): "🍕", "xyzzy", "42". The model would only guess ("🍕"
  came out as "Au moment, au moment, ..."), so ``Translator.translate`` leaves such a sentence as
  typed, and the note says so.
* **The target language typed by mistake** (``looks_like_target``): "Je ne parle pas anglais." The
  translator's own two vocabularies tell the languages apart: a French sentence has more words the
  French vocabulary holds whole than words the English training text holds, and at least half its
  words are whole French words. On the shipped ``fra``'s test split this took none of the 6,328
  English sentences for French and found 6,272 of the French ones (``tests/test_prompt_input.py``).
  npformer's trained language identifier (``tasks.language_id``) is not used: it would have to be
  trained at every start.
* **Longer than the model was trained on** (``Translator.length_notes``).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...data import tokenize


LANGUAGES = {"en": "English", "fr": "French"}


def _words(tokens: Sequence[str]) -> list[str]:
    """The tokens that are words: those with a letter (not marks, numbers or emoji)."""
    return [token for token in tokens if any(character.isalpha() for character in token)]


def holds_whole(vocab: Any, word: str) -> bool:
    """Whether ``vocab`` has ``word`` as one token of its own (a whole word, not letters or ``<unk>``)."""
    return vocab.whole_word(word) in vocab.index


def known_words(translator: Any, reading: Any) -> list[str]:
    """The words of a sentence (its ``Translator.read`` reading) that the training text held: in the
    truecaser's list of its words where the run has one, else those the source vocabulary read
    without ``<unk>`` (the reading's ``unknown`` words left out)."""
    if translator.truecaser is not None:
        return [word for word in _words(reading.typed) if translator.truecaser.knows(word)]
    return [word for word in _words(reading.typed) if word not in reading.unknown]


def knows_no_word(translator: Any, reading: Any) -> bool:
    """Whether a sentence (its reading) holds no word that the training text held ("🍕", "xyzzy")."""
    return not known_words(translator, reading)


def looks_like_target(translator: Any, reading: Any) -> bool:
    """Whether a sentence (its reading) reads as the language the model translates into (see the
    module docstring): its words as that language's tokenizer splits them ("J'ai" -> "J'", "ai")."""
    target_words = _words(tokenize(reading.sentence, translator.tgt_lang))
    in_target = sum(holds_whole(translator.tgt_vocab, word) or holds_whole(translator.tgt_vocab, word.lower())
                    for word in target_words)
    return in_target > len(known_words(translator, reading)) and 2 * in_target >= len(target_words)


def input_note(translator: Any, reading: Any, number: int) -> str | None:
    """The line for sentence ``number`` (its reading) when the model cannot read it as it should:
    the target language typed by mistake, or no word the model knows; None when it can."""
    source, target = (LANGUAGES.get(code, code) for code in (translator.src_lang, translator.tgt_lang))
    unread = knows_no_word(translator, reading)
    if looks_like_target(translator, reading):
        return f"sentence {number} looks like {target}: this model translates {source} into " + \
            (f"{target}, so it is left as typed" if unread else f"{target}, so expect a poor translation")
    return f"sentence {number} holds no word the model knows, so it is left as typed" if unread else None
