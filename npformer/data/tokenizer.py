"""Word-level tokenisation for English and French, and its inverse.

``tokenize(text, lang)``:

1. Unicode NFC, typographic apostrophes (U+2019) to ``'``, and the no-break
   spaces French puts before ``! ? : ;`` and inside guillemets to plain spaces.
2. Punctuation becomes tokens of its own: ``. , ! ? ; : « » " ( ) …`` and the like,
   except a full stop or comma between digits (``3.5``, ``1,000``).
3. French elision: ``l'homme`` -> ``l'`` + ``homme``; likewise ``j' n' d' c' s' m' t'
   qu' jusqu' lorsqu' puisqu'``. Words that merely contain an apostrophe, such as
   ``aujourd'hui``, stay whole. English keeps its contractions whole (``don't``).
4. Hyphenated words stay whole (``est-ce``, ``peut-être``).

``detokenize(tokens, lang)`` writes a normal sentence back: no space after an
elided article, none before ``. ,`` or a closing bracket; in French, one space
before ``! ? : ;`` and inside ``« »`` (the no-break spaces of French typography
as ordinary spaces), in English none.
"""

from __future__ import annotations

import re
import unicodedata

_ELIDED = ("jusqu'", "lorsqu'", "puisqu'", "qu'", "l'", "j'", "n'", "d'", "c'", "s'", "m'", "t'")
_ELISION = re.compile(r"(?i)\b(" + "|".join(re.escape(e) for e in _ELIDED) + r")(?=\w)")
# A full stop or comma between two digits stays inside the number (3.5, 1,000).
_PUNCTUATION = re.compile(r"(\.\.\.|…|[!?;:«»\"()\[\]{}¿¡“”„]|(?<!\d)[.,]|[.,](?!\d))")
_SPACES = re.compile(r"[\s\u00a0\u202f\u2009]+")
_LANGUAGES = ("en", "fr")

_NO_SPACE_BEFORE = {".", ",", ")", "]", "}", "...", "…", "”"}
_NO_SPACE_AFTER = {"(", "[", "{", "“", "¿", "¡"}
_FRENCH_SPACE_BEFORE = {"!", "?", ":", ";", "»"}
_FRENCH_SPACE_AFTER = {"«"}


def _check_language(lang: str) -> None:
    if lang not in _LANGUAGES:
        raise ValueError(f"tokenizer: lang must be one of {_LANGUAGES}, got {lang!r}")


def normalize(text: str) -> str:
    """NFC, straight apostrophes, and every kind of space as one plain space."""
    if not isinstance(text, str):
        raise TypeError(f"tokenizer: text must be a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).replace("\u2019", "'").replace("\u02bc", "'")
    return _SPACES.sub(" ", text).strip()


def tokenize(text: str, lang: str = "en") -> list[str]:
    """Split ``text`` into word and punctuation tokens (see the module docstring)."""
    _check_language(lang)
    text = _PUNCTUATION.sub(r" \1 ", normalize(text))
    if lang == "fr":
        text = _ELISION.sub(r"\1 ", text)
    return text.split()


def detokenize(tokens: list[str], lang: str = "en") -> str:
    """Join tokens into a normally spaced sentence."""
    _check_language(lang)
    pieces: list[str] = []
    glue_next = False  # the previous token forbids a space after it
    for token in tokens:
        if pieces and not glue_next:
            space = token not in _NO_SPACE_BEFORE
            if lang == "en" and token in _FRENCH_SPACE_BEFORE - {"»"}:
                space = False
            if space:
                pieces.append(" ")
        pieces.append(token)
        glue_next = token in _NO_SPACE_AFTER or (
            lang == "fr" and token.endswith("'") and token.lower() in _ELIDED
        )
    return "".join(pieces)
