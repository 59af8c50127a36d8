"""Teaching a translator to copy what it does not know: aligned word pairs made unknown in training.

A word vocabulary maps every word it lacks to ``<unk>``. At translation time the
``Translator`` replaces each ``<unk>`` the model writes by the source word its
cross-attention points at, so a name it never saw can pass through. But a model
writes ``<unk>`` only if its training targets held ``<unk>``, facing an
``<unk>`` in the source. The embedded corpus has no rare words at all, so a model
trained on it never does, and renders a new name as some word it knows.

The remedy: while training, **make some aligned word pairs unknown**. A word pair
``(source position i, target position j)`` that translate one another is
replaced on both sides, each pair with probability ``rate``, drawn anew each
epoch:

* with a word vocabulary, by ``<unk>`` (``hide_links``): the model learns that an
  ``<unk>`` in the source is written as an ``<unk>`` in the target, at the place
  where that word belongs, with attention on it;
* with BPE pieces, by an invented word (``invent_links``, ``WordInventor``), the same
  on both sides: a piece model has no ``<unk>`` to copy, so it must learn to copy
  a run of pieces it never saw together, letter group by letter group.

Which pairs translate one another (``copy_links``):

* with a gold alignment (the embedded corpus, ``toy_corpus().alignments``): the
  sure links that are one to one (``cat``-``chat``; not ``not``-``ne``/``pas``);
* without one (Tatoeba): words written the same on both sides, once each, with a
  capital letter or a digit in them: names and numbers (``Tom``-``Tom``,
  ``1989``-``1989``). Lower-case look-alikes are left out: most are cognates, but
  the two most frequent on Tatoeba are false friends (English ``me`` and ``a``
  against French ``me`` and ``a``, "has").

A link's positions count the words of ``tokenize``. With a word vocabulary a word
is one id and the target's ids start with ``<bos>`` (``encode_pairs`` puts it in
front), so link ``(i, j)`` hides ``src_ids[i]`` and ``tgt_ids[j + 1]``; with
pieces, ``invent_links`` changes the words and the pair is encoded again.
"""

from __future__ import annotations

from collections import Counter
from typing import Container, Iterable, Iterator, Sequence

import numpy

from ..tokens import UNK_ID
from .tokenizer import detokenize, tokenize
from .toy_corpus import Alignment

Link = tuple[int, int]


def copy_links(src_tokens: Sequence[str], tgt_tokens: Sequence[str], alignment: Alignment | None = None) -> list[Link]:
    """The word pairs ``(source index, target index)`` of one sentence pair that translate one another.

    With ``alignment``: its sure links whose source token has no other sure link and whose target
    token has no other sure link. Without: tokens written identically on both sides, occurring
    once on each side, holding a capital letter or a digit. Sorted by source index.
    """
    if alignment is not None:
        per_source = Counter(source for source, _ in alignment.sure)
        per_target = Counter(target for _, target in alignment.sure)
        return sorted((s, t) for s, t in alignment.sure
                      if per_source[s] == 1 and per_target[t] == 1 and s < len(src_tokens) and t < len(tgt_tokens))
    in_source, in_target = Counter(src_tokens), Counter(tgt_tokens)
    where_in_target = {token: index for index, token in enumerate(tgt_tokens)}
    return [(index, where_in_target[token]) for index, token in enumerate(src_tokens)
            if in_source[token] == 1 and in_target[token] == 1 and any(c.isupper() or c.isdigit() for c in token)]


def drawn_links(links: Sequence[Sequence[Link]], rate: float, rng: numpy.random.Generator) -> Iterator[tuple[int, list[Link]]]:
    """The links chosen this time: ``(n, the chosen links of pair n)`` for each pair with at least
    one. One draw per link, in order, all at once, so the same ``rng`` state chooses the same
    links (a resumed run rebuilds its epoch exactly)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    counts = numpy.fromiter(map(len, links), dtype=numpy.int64, count=len(links))
    chosen = rng.random(int(counts.sum())) < rate
    ends = numpy.cumsum(counts)
    for n in numpy.unique(numpy.searchsorted(ends, numpy.flatnonzero(chosen), side="right")):
        yield int(n), [link for link, hit in zip(links[n], chosen[ends[n] - counts[n]: ends[n]]) if hit]


def hide_links(examples: Sequence[tuple[list[int], list[int]]], links: Sequence[Sequence[Link]], rate: float,
               rng: numpy.random.Generator) -> list[tuple[list[int], list[int]]]:
    """A copy of ``examples`` (source ids, ``<bos>`` target ``<eos>`` ids) in which each link
    ``(i, j)`` of ``links[n]`` is, with probability ``rate``, ``<unk>`` at ``src[i]`` and at
    ``tgt[j + 1]`` (``drawn_links``). Links cut off by ``encode_pairs``'s length limit are
    skipped; the examples given are not changed."""
    if len(links) != len(examples):
        raise ValueError(f"hide_links: {len(examples)} examples but links for {len(links)}")
    result = list(examples)
    for n, chosen in drawn_links(links, rate, rng):
        src_ids, tgt_ids = list(examples[n][0]), list(examples[n][1])
        for source, target in chosen:
            if source < len(src_ids) and target + 1 < len(tgt_ids) - 1:
                src_ids[source] = UNK_ID
                tgt_ids[target + 1] = UNK_ID
        result[n] = (src_ids, tgt_ids)
    return result


class WordInventor:
    """Made-up words with the letter statistics of a text: a chain of letters in which each
    letter is drawn given the one before.

    ``P(next | previous)`` counts every neighbouring pair of letters over the distinct words of
    ``words`` (lower-cased, alphabetic words only), with a start before the first letter and an
    end after the last. An invented word such as ``"Vertonche"`` then has the clusters and pieces
    of real words (``br``, ``ch``, ``-ent``), which matters: trained on words made of
    consonant-vowel syllables only, a piece model learned to copy names but put vowels between
    clustered consonants (``brannoc`` -> ``baranoc``).

    With ``alphabet``, only words whose letters are all in it are learned from, and a
    capitalised word is drawn again until its capital is in it too, so that every invented word
    is spelled in characters a vocabulary knows (two BPE vocabularies, one per language, know
    different letters).
    """

    def __init__(self, words: Iterable[str], alphabet: Container[str] | None = None) -> None:
        words = sorted({word.lower() for word in words if word.isalpha()})
        if alphabet is not None:
            words = [word for word in words if all(c in alphabet for c in word)]
        self.alphabet = alphabet
        if not words:
            raise ValueError("WordInventor: no alphabetic words to learn letters from")
        self.letters = sorted(set("".join(words)))
        index = {letter: code for code, letter in enumerate(self.letters, start=1)}  # 0: start and end
        counts = numpy.zeros((len(self.letters) + 1, len(self.letters) + 1))
        for word in words:
            codes = [0] + [index[letter] for letter in word] + [0]
            numpy.add.at(counts, (codes[:-1], codes[1:]), 1)
        # Every row has a count: row 0 holds the first letters, and every letter is followed by
        # another or by the end.
        self.cumulative = numpy.cumsum(counts, axis=1)
        self.longest = max(map(len, words))

    def __call__(self, rng: numpy.random.Generator, capital: bool = True, min_len: int = 3, max_len: int = 12) -> str:
        """One word of ``min_len`` to ``max_len`` letters (drawn again until it fits, and its capital
        is in the alphabet, at most 1,000 times)."""
        if not 1 <= min_len <= max_len:
            raise ValueError(f"WordInventor: need 1 <= min_len <= max_len, got {min_len} and {max_len}")
        for _ in range(1000):
            codes, previous = [], 0
            while len(codes) <= max_len:
                row = self.cumulative[previous]
                previous = int(numpy.searchsorted(row, rng.random() * row[-1], side="right"))
                if previous == 0:
                    break
                codes.append(previous)
            if min_len <= len(codes) <= max_len and previous == 0:
                word = "".join(self.letters[code - 1] for code in codes)
                word = word.capitalize() if capital else word
                if self.alphabet is None or word[0] in self.alphabet:
                    return word
        raise ValueError(f"WordInventor: no word of {min_len} to {max_len} letters{' with a known capital' if capital else ''} "
                         f"in 1,000 draws (the longest word learned from has {self.longest})")


def invent_links(token_pairs: Sequence[tuple[list[str], list[str]]], links: Sequence[Sequence[Link]], rate: float,
                 rng: numpy.random.Generator, inventor: WordInventor) -> dict[int, tuple[list[str], list[str]]]:
    """The pairs changed this time, by index: each link ``(i, j)`` of ``links[n]`` is, with
    probability ``rate`` (``drawn_links``), one new word of ``inventor`` at ``source[i]`` and at
    ``target[j]``, capitalised when the source word was. Pairs not in the result are unchanged;
    the token lists given are not changed."""
    if len(links) != len(token_pairs):
        raise ValueError(f"invent_links: {len(token_pairs)} pairs but links for {len(links)}")
    changed = {}
    for n, chosen in drawn_links(links, rate, rng):
        source, target = list(token_pairs[n][0]), list(token_pairs[n][1])
        for i, j in chosen:
            source[i] = target[j] = inventor(rng, capital=source[i][:1].isupper())
        changed[n] = (source, target)
    return changed


def swap_in_words(pairs: Sequence[tuple[str, str]], links: Sequence[Sequence[Link]], words: Sequence[str],
                  src_lang: str = "en", tgt_lang: str = "fr") -> tuple[list[tuple[str, str]], list[str]]:
    """New sentence pairs with an unseen word on both sides: in each pair that has a link, the
    first link's two words become ``words[k % len(words)]`` (``k`` counts the pairs changed).
    Pairs without a link are left out. Returns the new pairs and the word each one holds; a
    translator that passes unknown words through should write that word in its translation."""
    if not words:
        raise ValueError("swap_in_words: no words to swap in")
    if len(links) != len(pairs):
        raise ValueError(f"swap_in_words: {len(pairs)} pairs but links for {len(links)}")
    swapped, inserted = [], []
    for (source, target), pair_links in zip(pairs, links):
        if not pair_links:
            continue
        word = words[len(swapped) % len(words)]
        (source_index, target_index), src_tokens, tgt_tokens = pair_links[0], tokenize(source, src_lang), tokenize(target, tgt_lang)
        src_tokens[source_index] = tgt_tokens[target_index] = word
        swapped.append((detokenize(src_tokens, src_lang), detokenize(tgt_tokens, tgt_lang)))
        inserted.append(word)
    return swapped, inserted
