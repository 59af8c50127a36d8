"""Truecasing: a typed sentence written in the case of the text a model was trained on.

A model learns its training text's spelling, capitals included. Tatoeba's English is written in
sentence case ("Where is the station?"), so the same question typed "where is the station?" or
"WHERE IS THE STATION?" reaches the model as pieces it has rarely or never seen, and the
translation falls apart. Translation systems answer this in one of two ways: train on every case
(augmentation), or bring the input back to the case of the training text (truecasing). npformer
truecases (``benchmarks/RESULTS.md`` has the measurement that chose it).

``Truecaser.learn(sentences)`` reads the training sentences (lists of word tokens) and keeps, for
every word, the form it is usually written in **inside** a sentence, where a capital means
something ("Tom", "Boston", "I", "the"); a word met only first in a sentence is kept in lower case.
``truecase(tokens)`` then writes each word of a typed sentence in that form and gives the first
word a capital, so "WHERE IS TOM?" and "where is tom?" both become "Where is Tom?".

A word the training text never held keeps the case it was typed in, except in a sentence typed all
in capitals, where it becomes a capitalised word ("ZORVAN" -> "Zorvan"): in shouted text an
unknown word is most often a name. ``knows(word)`` says whether the training text held a word in
any case; the ``Translator`` uses it to find the names it has never seen, and ``names`` (the names
the training pairs carry over most often, written the same on both sides: "Tom", "Boston") to stand
in for them while it translates. ``rare_names`` are the names the training text holds too seldom
for a model to have learned their spelling ("Berlin", twice in Tatoeba's training split), which the
pairs copy: the ``Translator`` stands in for them as for unknown ones.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Iterable, Sequence


def _is_word(token: str) -> bool:
    return any(character.isalpha() for character in token)


def _letters(tokens: Sequence[str]) -> str:
    return "".join(character for token in tokens for character in token if character.isalpha())


def typed_without_case(tokens: Sequence[str]) -> bool:
    """Whether a sentence was typed without case: its letters all lower-case or all capitals (the
    sentences ``Translator`` truecases)."""
    letters = _letters(tokens)
    return letters.lower() == letters or letters.upper() == letters


def _shouted(tokens: Sequence[str]) -> bool:
    """All the letters of the sentence are capitals, in more than one letter ("WHERE IS TOM?")."""
    letters = _letters(tokens)
    return len(letters) > 1 and all(character.isupper() for character in letters)


def _capitalised(word: str) -> str:
    """The first letter a capital, the rest as written ("where" -> "Where", "iPhone" -> "IPhone")."""
    return word[:1].upper() + word[1:]


class Truecaser:
    """The usual written form of every word of a training text; see the module docstring.

    ``forms`` maps each word in lower case to the form it is written in inside a sentence;
    ``names`` are the names the training pairs copy most often, most often first; ``rare_names``
    the names they copy but hold fewer than ``RARE`` times.
    """

    RARE = 10

    def __init__(self, forms: dict[str, str], names: Sequence[str] = (), rare_names: Sequence[str] = ()) -> None:
        self.forms, self.names, self.rare_names = forms, list(names), frozenset(rare_names)

    @classmethod
    def learn(cls, token_pairs: Iterable[tuple[Sequence[str], Sequence[str]]], n_names: int = 4) -> "Truecaser":
        """The forms of the words of the source sides of ``token_pairs`` (``(source tokens, target
        tokens)``): each word's most frequent spelling where it is not the sentence's first word
        (ties: the first met); a word met only first in its sentences, in lower case. And the
        ``n_names`` capitalised words of letters found most often on both sides of a pair, of those
        the target writes the same at least 9 times in 10 (not "Mary", often "Marie" in French); of
        those, the ones met fewer than ``RARE`` times are the ``rare_names``."""
        inside: dict[str, Counter] = defaultdict(Counter)
        first_only: set[str] = set()
        copied: Counter = Counter()
        seen: Counter = Counter()
        for tokens, target in token_pairs:
            words = [token for token in tokens if _is_word(token)]
            capitalised = set(word for word in words[1:] if word.isalpha() and word.istitle())
            seen.update(capitalised)
            copied.update(capitalised & set(target))
            for position, word in enumerate(words):
                if position == 0:
                    first_only.add(word.lower())
                else:
                    inside[word.lower()][word] += 1
        forms = {key: counts.most_common(1)[0][0] for key, counts in inside.items()}
        forms.update((key, key) for key in first_only if key not in forms)
        names = [name for name, count in copied.most_common() if count >= 0.9 * seen[name]]
        rare = sorted(name for name in names if seen[name] < cls.RARE)
        return cls(dict(sorted(forms.items())), names[:n_names], rare)

    def knows(self, word: str) -> bool:
        """Did the training text hold ``word``, in any case?"""
        return word.lower() in self.forms

    def truecase(self, tokens: Sequence[str]) -> list[str]:
        """``tokens`` written as the training text writes them: each known word in its usual form,
        an unknown one as typed (capitalised in an all-capitals sentence), the first word with a
        capital."""
        shouted = _shouted(tokens)
        cased = []
        for token in tokens:
            form = self.forms.get(token.lower())
            if form is None:
                form = token.lower().capitalize() if shouted and _is_word(token) else token
            cased.append(form)
        first_word = next((index for index, token in enumerate(cased) if _is_word(token)), None)
        if first_word is not None:
            cased[first_word] = _capitalised(cased[first_word])
        return cased

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps({"kind": "truecaser", "names": self.names, "rare_names": sorted(self.rare_names),
                                   "forms": self.forms},
                                  ensure_ascii=False, separators=(",", ":")))  # dumps: C's encoder

    @classmethod
    def from_dict(cls, document: dict) -> "Truecaser":
        """The truecaser ``save`` wrote (read as JSON); ``ValueError`` when it is not one."""
        forms = document.get("forms") if isinstance(document, dict) else None
        names = document.get("names", []) if isinstance(document, dict) else None
        rare = document.get("rare_names", []) if isinstance(document, dict) else None   # none before issue 65
        if not isinstance(forms, dict) or document.get("kind") != "truecaser" or not isinstance(names, list) or \
                not isinstance(rare, list) or \
                not all(isinstance(text, str) for text in [*forms, *forms.values(), *names, *rare]):
            raise ValueError("not a truecaser (expected {'kind': 'truecaser', 'names': [...], 'rare_names': [...], "
                             "'forms': {word: form}})")
        return cls(forms, names, rare)
