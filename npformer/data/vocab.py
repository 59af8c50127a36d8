"""``Vocab``: tokens <-> integer ids, with the four special tokens first.

Ids 0, 1, 2, 3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` in every
vocabulary; the rest are the training tokens seen at least ``min_freq`` times,
most frequent first (ties in first-seen order), at most ``max_size`` in all.
Unknown tokens encode to ``<unk>``.

``Vocab.load`` reads back every kind of vocabulary without this module importing
the others: a subclass whose saved document holds more than the tokens names that
key (``saved_key``) and reads the document itself (``from_saved``), and defining the
subclass registers it. ``BPEVocab`` (``npformer.data.bpe``, imported with
``npformer.data``) saves its ``"merges"``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable

from ..tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID


class Vocab:
    saved_key: str | None = None  # a subclass: the key its saved document holds besides "tokens"
    _kinds: dict[str, type["Vocab"]] = {}  # saved_key -> the subclass that reads such documents

    def __init_subclass__(cls, **options: object) -> None:
        super().__init_subclass__(**options)
        if cls.saved_key is not None:
            Vocab._kinds[cls.saved_key] = cls

    def __init__(self, tokens: list[str]) -> None:
        if tuple(tokens[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"Vocab: tokens must start with {SPECIAL_TOKENS}, got {tokens[:4]}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("Vocab: tokens must be distinct")
        self.tokens = list(tokens)
        self.index = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 1,
              max_size: int | None = None) -> "Vocab":
        """From tokenised training sentences (never from validation or test)."""
        if min_freq < 1:
            raise ValueError(f"Vocab.build: min_freq must be >= 1, got {min_freq}")
        counts = Counter(token for sentence in sentences for token in sentence)
        ranked = [t for t, c in counts.most_common() if c >= min_freq and t not in SPECIAL_TOKENS]
        if max_size is not None:
            if max_size < len(SPECIAL_TOKENS):
                raise ValueError(f"Vocab.build: max_size must be >= {len(SPECIAL_TOKENS)}, got {max_size}")
            ranked = ranked[: max_size - len(SPECIAL_TOKENS)]
        return cls(list(SPECIAL_TOKENS) + ranked)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: list[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self.index.get(token, UNK_ID) for token in tokens]
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to the first ``<eos>``, without ``<pad>`` and ``<bos>``."""
        tokens = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            tokens.append(self.tokens[i])
        return tokens

    def pieces(self, words: list[str]) -> list[str]:
        """The tokens that ``encode(words)`` gives ids for: the words themselves (``BPEVocab``
        splits them into pieces)."""
        return list(words)

    def join(self, tokens: list[str]) -> list[str]:
        """The words that a sequence of this vocabulary's tokens spells: the tokens themselves
        (``BPEVocab`` joins pieces)."""
        return list(tokens)

    def whole_word(self, word: str) -> str:
        """The token that stands for all of ``word`` (copied from the source in place of ``<unk>``)."""
        return word

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps({"tokens": self.tokens}, ensure_ascii=False))  # dumps: C's encoder

    @classmethod
    def load(cls, path: str) -> "Vocab":
        """A saved vocabulary: a ``BPEVocab`` when the file holds merges, else a word ``Vocab``."""
        with open(path, encoding="utf-8") as file:
            return cls.from_dict(json.load(file))

    @staticmethod
    def from_dict(saved: dict) -> "Vocab":
        """What ``save`` wrote: ``{"tokens": [...]}``, plus ``"merges"`` for a ``BPEVocab`` (read by
        the subclass whose ``saved_key`` the document holds, ``from_saved``).
        Raises ``KeyError``/``TypeError``/``ValueError`` for a document that is neither."""
        kind = next((kind for key, kind in Vocab._kinds.items() if key in saved), Vocab)
        return kind.from_saved(saved)

    @classmethod
    def from_saved(cls, saved: dict) -> "Vocab":
        """The vocabulary of a saved document of this kind: ``{"tokens": [...]}`` here; a subclass
        that saves more (its ``saved_key``) reads it back in its own ``from_saved``."""
        return cls(saved["tokens"])
