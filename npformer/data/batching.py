"""Token ids and padded, length-bucketed batches.

An example is a pair of id lists: the source, and the target with ``<bos>``
in front and ``<eos>`` at the end. A batch pads them into::

    src     (B, Ts)   source ids, 0 = <pad>
    tgt_in  (B, Tt)   <bos> y1 ... yn        (the decoder input)
    tgt_out (B, Tt)   y1 ... yn <eos>        (what each position must predict)

The model builds its masks from the padding (``ops.padding_mask``,
``ops.causal_mask``).

Batches hold examples of similar length (sorted by length, ties in random
order) and are filled up to a **token budget**: ``B * max(Ts, Tt) <= budget``,
so short sentences make big batches and long ones small batches, and little
compute goes to padding. The order of the batches is shuffled. Everything
random comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from ..tokens import BOS_ID, EOS_ID, PAD_ID
from .tokenizer import tokenize
from .vocab import Vocab


@dataclass
class Batch:
    src: numpy.ndarray
    tgt_in: numpy.ndarray
    tgt_out: numpy.ndarray

    @property
    def n_target_tokens(self) -> int:
        return int((self.tgt_out != PAD_ID).sum())

    @property
    def n_tokens(self) -> int:
        """Real source plus target tokens."""
        return int((self.src != PAD_ID).sum()) + self.n_target_tokens


def encode_pairs(pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab,
                 max_len: int, src_lang: str = "en", tgt_lang: str = "fr") -> list[tuple[list[int], list[int]]]:
    """Tokenise and encode; sources and targets are cut to fit ``max_len`` positions."""
    return [encode_tokens(tokenize(source, src_lang), tokenize(target, tgt_lang), src_vocab, tgt_vocab, max_len)
            for source, target in pairs]


def encode_tokens(src_tokens: list[str], tgt_tokens: list[str], src_vocab: Vocab, tgt_vocab: Vocab,
                  max_len: int) -> tuple[list[int], list[int]]:
    """One tokenised pair -> (source ids, ``<bos>`` target ids ``<eos>``), cut to ``max_len`` positions."""
    src_ids = src_vocab.encode(src_tokens)[:max_len]
    tgt_ids = tgt_vocab.encode(tgt_tokens)[: max_len - 1]
    return src_ids, [BOS_ID] + tgt_ids + [EOS_ID]


def pad_rows(rows: list[list[int]], min_length: int = 1) -> numpy.ndarray:
    """Id lists of different lengths -> one ``(N, T)`` int64 matrix, ``<pad>`` after each row.

    ``T`` is the longest row's length (at least ``min_length``).
    """
    length = max([min_length, *map(len, rows)])
    ids = numpy.full((len(rows), length), PAD_ID, dtype=numpy.int64)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
    return ids


def pad_batch(examples: list[tuple[list[int], list[int]]]) -> Batch:
    """Pad a list of (source ids, <bos> target <eos> ids) into a ``Batch``."""
    src = pad_rows([src_ids for src_ids, _ in examples])
    tgt = pad_rows([tgt_ids for _, tgt_ids in examples], min_length=2)
    return Batch(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:])


def make_batches(examples: list[tuple[list[int], list[int]]], token_budget: int,
                 rng: numpy.random.Generator | None = None) -> list[Batch]:
    """Length-bucketed batches of at most ``token_budget`` padded positions each.

    With ``rng`` the examples of equal length and the order of the batches are
    shuffled; without it, the batches come in length order (for evaluation).
    """
    if not examples:
        return []
    lengths = numpy.array([max(len(src), len(tgt) - 1) for src, tgt in examples])
    if token_budget < lengths.max():
        raise ValueError(
            f"make_batches: token_budget must be at least the longest example ({lengths.max()}), "
            f"got {token_budget}"
        )
    order = numpy.arange(len(examples)) if rng is None else rng.permutation(len(examples))
    order = order[numpy.argsort(lengths[order], kind="stable")]
    batches, current, longest = [], [], 0
    for index in order:
        length = lengths[index]
        if current and (len(current) + 1) * max(longest, length) > token_budget:
            batches.append(pad_batch([examples[i] for i in current]))
            current, longest = [], 0
        current.append(index)
        longest = max(longest, length)
    batches.append(pad_batch([examples[i] for i in current]))
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches
