"""Byte-pair encoding: words as sequences of learned subword pieces (Sennrich et al., 2016).

**Learning.** Start from every word of the training text split into characters,
each word weighted by how often it occurs. Count every pair of neighbouring
symbols; merge the most frequent pair into one new symbol everywhere; repeat
``n_merges`` times. The merges, in order, are the whole model::

    counts {low: 5, lower: 2, newest: 6, widest: 3}
    merge 1: e + s   -> es       (9 times: newest, widest)
    merge 2: es + t␣ -> est␣     (9)
    merge 3: l + o   -> lo       (7)   ...

Ties go to the pair that sorts first, so the same text always gives the same
merges. Learning stops early when no pair occurs twice.

**The end of a word.** The last character of every word carries a marker, a
space (written ``␣`` above): ``t␣`` ends a word, ``t`` does not. So ``est␣``
(a word ending) and ``est`` (inside ``estimate``) are different pieces, and
joining pieces back into words is exact: a word ends exactly at the piece that
ends with the marker. No word contains a space (``tokenize`` splits on every
kind of space), so the marker is never ambiguous.

**Encoding** a word replays the merges: among its neighbouring pairs, merge the
one learned first, everywhere in the word; repeat until no pair is a merge.
Each distinct word is segmented once and cached, so encoding a corpus costs a
dictionary lookup per word after the first time.

``BPEVocab`` is a ``Vocab`` whose tokens are pieces: ``encode(words)`` gives one
id per piece and ``decode(ids)`` gives words back, so code written for word
vocabularies (batching, decoding, ``detokenize``) runs unchanged. Its pieces are
the four special tokens, every character of the training text with and without
the marker, and every merge: a word made of characters seen in training never
needs ``<unk>``.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, defaultdict
from typing import Iterable, Mapping

from ..tokens import BOS_ID, EOS_ID, SPECIAL_TOKENS, UNK_ID
from .vocab import Vocab

END = " "  # appended to the last character of every word; no word contains a space

Pair = tuple[str, str]


def word_symbols(word: str) -> list[str]:
    """``"chat"`` -> ``["c", "h", "a", "t␣"]``: characters, the last one marked."""
    if not word:
        raise ValueError("bpe: a word must have at least one character")
    return list(word[:-1]) + [word[-1] + END]


def merge_pair(symbols: list[str], pair: Pair) -> list[str]:
    """Every non-overlapping occurrence of ``pair``, left to right, as one symbol."""
    first, second = pair
    merged, index = [], 0
    while index < len(symbols):
        if index + 1 < len(symbols) and symbols[index] == first and symbols[index + 1] == second:
            merged.append(first + second)
            index += 2
        else:
            merged.append(symbols[index])
            index += 1
    return merged


def learn_merges(word_counts: Mapping[str, int], n_merges: int) -> list[Pair]:
    """The first ``n_merges`` merges of BPE on ``{word: count}`` (fewer if no pair occurs twice).

    The pair counts are kept up to date as words change, and a heap finds the most
    frequent pair, so a merge costs work in proportion to the words that contain it,
    not to the whole vocabulary.
    """
    if isinstance(n_merges, bool) or not isinstance(n_merges, int) or n_merges < 0:
        raise ValueError(f"learn_merges: n_merges must be an integer >= 0, got {n_merges!r}")
    words = [word_symbols(word) for word in word_counts]
    counts = [int(count) for count in word_counts.values()]
    pair_counts: Counter = Counter()
    words_with: defaultdict[Pair, set[int]] = defaultdict(set)
    for index, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += counts[index]
            words_with[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[Pair] = []
    while len(merges) < n_merges and heap:
        negative_count, pair = heapq.heappop(heap)
        if -negative_count != pair_counts.get(pair, 0):
            continue  # a stale entry: this pair's count has changed since it was pushed
        if -negative_count < 2:
            break
        merges.append(pair)
        changed: set[Pair] = set()
        for index in words_with.pop(pair):
            old = words[index]
            new = merge_pair(old, pair)
            for old_pair in zip(old, old[1:]):
                pair_counts[old_pair] -= counts[index]
                changed.add(old_pair)
            for new_pair in zip(new, new[1:]):
                pair_counts[new_pair] += counts[index]
                words_with[new_pair].add(index)
                changed.add(new_pair)
            words[index] = new
        for changed_pair in changed:
            count = pair_counts[changed_pair]
            if count > 0:
                heapq.heappush(heap, (-count, changed_pair))
            else:
                del pair_counts[changed_pair]
    return merges


class BPE:
    """Segments words with a list of merges (learned by ``learn_merges``)."""

    def __init__(self, merges: Iterable[Pair]) -> None:
        self.merges = [tuple(pair) for pair in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, list[str]] = {}

    def segment(self, word: str) -> list[str]:
        """``word`` as pieces, the last one ending with ``END``; joined, they give ``word + END``."""
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = word_symbols(word)
            while len(pieces) > 1:
                first_learned = min(zip(pieces, pieces[1:]), key=lambda pair: self.ranks.get(pair, len(self.ranks)))
                if first_learned not in self.ranks:
                    break
                pieces = merge_pair(pieces, first_learned)
            self._cache[word] = pieces
        return pieces


def join_pieces(pieces: Iterable[str]) -> list[str]:
    """Pieces -> words: a word ends at each piece that ends with ``END``; a last unfinished word
    (a model stopped mid-word) is kept as it is."""
    words, current = [], ""
    for piece in pieces:
        current += piece
        if current.endswith(END):
            words.append(current[: -len(END)])
            current = ""
    if current:
        words.append(current)
    return words


class BPEVocab(Vocab):
    """A vocabulary of BPE pieces that encodes words and decodes back to words."""

    saved_key = "merges"  # ``Vocab.load`` gives a document with merges to ``from_saved``

    def __init__(self, tokens: list[str], merges: Iterable[Pair]) -> None:
        super().__init__(tokens)
        self.bpe = BPE(merges)

    @classmethod
    def from_saved(cls, saved: dict) -> "BPEVocab":
        """What ``save`` wrote: ``{"tokens": [...], "merges": [[first, second], ...]}``."""
        merges = saved["merges"]
        if not isinstance(merges, list) or not all(
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)
                for pair in merges):
            raise ValueError("its 'merges' must be a list of [first, second] pairs of strings")
        return cls(saved["tokens"], [tuple(pair) for pair in merges])

    @property
    def merges(self) -> list[Pair]:
        return self.bpe.merges

    @classmethod
    def learn(cls, sentences: Iterable[list[str]], n_merges: int) -> "BPEVocab":
        """From tokenised training sentences (one language, or both for a joint vocabulary)."""
        word_counts = Counter(word for sentence in sentences for word in sentence)
        merges = learn_merges(word_counts, n_merges)
        alphabet = sorted({char for word in word_counts for char in word})
        pieces = [char for char in alphabet] + [char + END for char in alphabet]
        pieces += [first + second for first, second in merges]
        pieces = [piece for piece in dict.fromkeys(pieces) if piece not in SPECIAL_TOKENS]
        return cls(list(SPECIAL_TOKENS) + pieces, merges)

    def pieces(self, words: list[str]) -> list[str]:
        """The piece strings that ``encode(words)`` gives ids for."""
        return [piece for word in words for piece in self.bpe.segment(word)]

    def encode(self, tokens: list[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Words -> piece ids (a piece never seen in training, from a new character, is ``<unk>``)."""
        ids = [self.index.get(piece, UNK_ID) for piece in self.pieces(tokens)]
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Piece ids -> words, up to the first ``<eos>``, without ``<pad>`` and ``<bos>``."""
        return join_pieces(super().decode(ids))

    def join(self, tokens: list[str]) -> list[str]:
        """Pieces -> words (``join_pieces``)."""
        return join_pieces(tokens)

    def whole_word(self, word: str) -> str:
        """``word`` as one word-final piece (it need not be in the vocabulary)."""
        return word + END

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps({"tokens": self.tokens, "merges": [list(pair) for pair in self.merges]},
                                  ensure_ascii=False))  # dumps: C's encoder

