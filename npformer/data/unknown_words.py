"""Teaching a word-level translator to copy what it does not know: aligned word pairs hidden as ``<unk>``.

A word vocabulary maps every word it lacks to ``<unk>``. At translation time the
``Translator`` replaces each ``<unk>`` the model writes by the source word its
cross-attention points at, so a name it never saw can pass through. But a model
writes ``<unk>`` only if its training targets held ``<unk>``, facing an
``<unk>`` in the source. The embedded corpus has no rare words at all, so a model
trained on it never does, and renders a new name as some word it knows.

The remedy: while training, **hide some aligned word pairs**. A word pair
``(source position i, target position j)`` that translate one another becomes
``<unk>`` on both sides, each pair with probability ``rate``, drawn anew each
epoch. The model then learns the pattern the translator needs: an ``<unk>`` in
the source is written as an ``<unk>`` in the target, at the place where that word
belongs, with attention on it.

Which pairs translate one another (``copy_links``):

* with a gold alignment (the embedded corpus, ``toy_corpus().alignments``): the
  sure links that are one to one (``cat``-``chat``; not ``not``-``ne``/``pas``);
* without one (Tatoeba): words written the same on both sides, once each, with a
  letter or a digit in them: names and numbers (``Tom``-``Tom``, ``1989``-``1989``).

Positions count the tokens of ``tokenize``; the target's count starts after
``<bos>`` (``encode_pairs`` puts it in front), so link ``(i, j)`` hides
``src_ids[i]`` and ``tgt_ids[j + 1]``.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy

from ..tokens import UNK_ID
from .toy_corpus import Alignment

Link = tuple[int, int]


def copy_links(src_tokens: Sequence[str], tgt_tokens: Sequence[str], alignment: Alignment | None = None) -> list[Link]:
    """The word pairs ``(source index, target index)`` of one sentence pair that translate one another.

    With ``alignment``: its sure links whose source token has no other sure link and whose target
    token has no other sure link. Without: tokens written identically on both sides, occurring
    once on each side, holding a letter or a digit. Sorted by source index.
    """
    if alignment is not None:
        per_source = Counter(source for source, _ in alignment.sure)
        per_target = Counter(target for _, target in alignment.sure)
        return sorted((s, t) for s, t in alignment.sure
                      if per_source[s] == 1 and per_target[t] == 1 and s < len(src_tokens) and t < len(tgt_tokens))
    in_source, in_target = Counter(src_tokens), Counter(tgt_tokens)
    where_in_target = {token: index for index, token in enumerate(tgt_tokens)}
    return [(index, where_in_target[token]) for index, token in enumerate(src_tokens)
            if in_source[token] == 1 and in_target[token] == 1 and any(c.isalnum() for c in token)]


def hide_links(examples: Sequence[tuple[list[int], list[int]]], links: Sequence[Sequence[Link]], rate: float,
               rng: numpy.random.Generator) -> list[tuple[list[int], list[int]]]:
    """A copy of ``examples`` (source ids, ``<bos>`` target ``<eos>`` ids) in which each link
    ``(i, j)`` of ``links[n]`` is, with probability ``rate``, ``<unk>`` at ``src[i]`` and at
    ``tgt[j + 1]``. Links cut off by ``encode_pairs``'s length limit are skipped; the examples
    given are not changed. One draw per link, in order, so the same ``rng`` state gives the same
    result (a resumed run rebuilds its epoch exactly)."""
    if len(links) != len(examples):
        raise ValueError(f"hide_links: {len(examples)} examples but links for {len(links)}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"hide_links: rate must be in [0, 1], got {rate}")
    counts = numpy.fromiter(map(len, links), dtype=numpy.int64, count=len(links))
    hidden = rng.random(int(counts.sum())) < rate
    ends = numpy.cumsum(counts)
    result = list(examples)
    for n in numpy.unique(numpy.searchsorted(ends, numpy.flatnonzero(hidden), side="right")):
        src_ids, tgt_ids = list(examples[n][0]), list(examples[n][1])
        for (source, target), hide in zip(links[n], hidden[ends[n] - counts[n]: ends[n]]):
            if hide and source < len(src_ids) and target + 1 < len(tgt_ids) - 1:
                src_ids[source] = UNK_ID
                tgt_ids[target + 1] = UNK_ID
        result[n] = (src_ids, tgt_ids)
    return result


def swap_in_words(pairs: Sequence[tuple[str, str]], links: Sequence[Sequence[Link]], words: Sequence[str],
                  src_lang: str = "en", tgt_lang: str = "fr") -> tuple[list[tuple[str, str]], list[str]]:
    """New sentence pairs with an unseen word on both sides: in each pair that has a link, the
    first link's two words become ``words[k % len(words)]`` (``k`` counts the pairs changed).
    Pairs without a link are left out. Returns the new pairs and the word each one holds; a
    translator that passes unknown words through should write that word in its translation."""
    from .tokenizer import detokenize, tokenize

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
