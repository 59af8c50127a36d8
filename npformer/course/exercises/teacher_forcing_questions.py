"""The checkable part of lesson 23's open questions.

    answer_offsets   lesson 23, question 3: for a decoder given ``decoder_input`` and asked for ``targets``,
                     how far back each position finds its target among the inputs the causal mask lets it see

Posed as a function of the question's setting (any pair of input and target rows), so its reference is
computed here, never stored.
"""

from __future__ import annotations

import numpy

from ...tokens import BOS_ID, EOS_ID, PAD_ID
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, size


def _answer_offsets(decoder_input, targets):
    """(B, T) ints: for position t with a target other than <pad>, the smallest d >= 0 such that
    decoder_input[b, t - d] == targets[b, t]; -1 where no input at positions 0..t holds it, and where the
    target is <pad>."""
    decoder_input, targets = numpy.asarray(decoder_input), numpy.asarray(targets)
    offsets = numpy.full(targets.shape, -1, dtype=numpy.int64)
    for row, column in zip(*numpy.nonzero(targets != PAD_ID)):
        seen_backwards = decoder_input[row, column::-1]  # positions t, t - 1, ..., 0: what the causal mask allows
        found = numpy.flatnonzero(seen_backwards == targets[row, column])
        if found.size:
            offsets[row, column] = found[0]
    return offsets


def _padded(rows, length):
    ids = numpy.full((len(rows), length), PAD_ID, dtype=numpy.int64)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
    return ids


def _pairs(sentences, length):
    """Sentences of word ids -> (tgt_in, tgt_out), each (B, length), as data.pad_batch cuts them."""
    full = _padded([[BOS_ID, *words, EOS_ID] for words in sentences], length + 1)
    return full[:, :-1], full[:, 1:]


def _offset_cases(rng):
    tgt_in, tgt_out = _pairs([[7, 8, 9, 10], [11, 12], [13, 7, 13, 14]], 6)  # row 3 repeats a word
    return [Case("B=3, T=6, the shifted pairs: position t's target comes after its input (a repeated word too)",
                 {"decoder_input": tgt_in, "targets": tgt_out}),
            Case("the wrong way: tgt_out as the input, tgt_in as the targets",
                 {"decoder_input": tgt_out, "targets": tgt_in}),
            Case("no shift: the same rows as input and targets", {"decoder_input": tgt_out, "targets": tgt_out}),
            Case("targets two positions ahead, a word seen three positions back",
                 {"decoder_input": _padded([[1, 5, 6, 5, 7, 8, 2]], 7), "targets": _padded([[6, 5, 7, 5, 2]], 7)})]


def _unseen_offsets(rng):
    batch, length = size(rng, 1, 4), size(rng, 2, 9)
    sentences = [[int(word) for word in rng.integers(5, 9, size=size(rng, 0, length - 1))] for _ in range(batch)]
    tgt_in, tgt_out = _pairs(sentences, length)
    shift = int(rng.integers(-1, 3))  # targets shifted by -1, 0, 1 or 2 positions against the input
    full = numpy.concatenate([tgt_in, tgt_out[:, -1:]], axis=1)
    targets = numpy.full_like(tgt_in, PAD_ID)
    for column in range(length):
        if 0 <= column + shift < full.shape[1]:
            targets[:, column] = full[:, column + shift]
    return [Case(f"B={batch}, T={length}, words 5-8 (repeats), targets {shift} ahead",
                 {"decoder_input": tgt_in, "targets": targets})]


def _student_offsets(decoder_input, targets, causal=True, nearest=True, skip_pad=True, as_index=False):
    offsets = numpy.full(targets.shape, -1)
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            if skip_pad and targets[b, t] == PAD_ID:
                continue
            where = numpy.flatnonzero(decoder_input[b, : t + 1] == targets[b, t]) if causal else \
                numpy.flatnonzero(decoder_input[b] == targets[b, t])
            if where.size:
                j = where[numpy.argmin(numpy.abs(t - where))] if nearest else where[0]
                offsets[b, t] = j if as_index else abs(t - j)
    return offsets


def _offsets_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    decoder_input, targets = numpy.asarray(inputs["decoder_input"]), numpy.asarray(inputs["targets"])
    asked = targets != PAD_ID
    if numpy.any(got[~asked] != -1):
        return Hint("positions whose target is <pad>, where nothing is asked, get an offset other than -1",
                    "skip the <pad> targets: -1 there")
    hidden = asked & (expected == -1) & (got >= 0)
    if numpy.any(hidden):
        return Hint("an offset is given where no input at positions 0..t holds the target: the token is there only "
                    "at a later position, which the causal mask hides from position t",
                    "search decoder_input[b, :t + 1] only")
    if numpy.array_equal(got, _student_offsets(decoder_input, targets, as_index=True)):
        return Hint("your offsets are where the input is, counted from position 0, not how far back from t",
                    "t - j, not j")
    if numpy.all((got == expected) | (got > expected)):
        return Hint("where the target appears more than once among the visible inputs, your offset counts to a "
                    "farther one", "the nearest: the first match going back from t")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("answer_offsets", "answer_offsets(decoder_input (B, T), targets (B, T)) -> (B, T) ints: how far back "
             "position t sees its target, -1 where it cannot (or nothing is asked)", "23", _answer_offsets,
             _offset_cases, ("offsets",), exact=True, hints=(_offsets_hint,), unseen=_unseen_offsets, question=3),
]

W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("answer_offsets", "searches the whole row: the causal mask forgotten", lambda decoder_input, targets:
      _student_offsets(decoder_input, targets, causal=False), "causal mask hides"),
    W("answer_offsets", "the first match from position 0, not the nearest", lambda decoder_input, targets:
      _student_offsets(decoder_input, targets, nearest=False), "farther one"),
    W("answer_offsets", "<pad> targets searched too", lambda decoder_input, targets:
      _student_offsets(decoder_input, targets, skip_pad=False), "<pad>, where nothing is asked"),
    W("answer_offsets", "the input's index, not the distance back", lambda decoder_input, targets:
      _student_offsets(decoder_input, targets, as_index=True), "counted from position 0"),
]
