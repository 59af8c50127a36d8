"""The checkable parts of lessons 25-26's open questions.

    tied_embedding_gradient  lesson 25, question 3: the gradient of a tied embedding table, the sum of its
                             two uses (the input lookup, scaled by sqrt(D), and the output projection)
    reference_streams        lesson 26, question 3: test pairs grouped by source sentence into the
                             reference streams that metrics.bleu takes

Each is posed as a function of the question's setting, so its reference is computed here, never stored.
"""

from __future__ import annotations

import math

import numpy

from ..hints import Hint, explains
from .base import Case, Exercise, WrongSolution, normal, size

# -- lesson 25, question 3: a tied table's gradient ---------------------------------------------------------

def _embedding_share(ids, d_embedded, vocab):
    d_model = d_embedded.shape[-1]
    grad = numpy.zeros((vocab, d_model))
    numpy.add.at(grad, numpy.asarray(ids).reshape(-1), d_embedded.reshape(-1, d_model) * math.sqrt(d_model))
    return grad


def _output_share(hidden, d_logits):
    return d_logits.reshape(-1, d_logits.shape[-1]).T @ hidden.reshape(-1, hidden.shape[-1])


def _tied_embedding_gradient(ids, d_embedded, hidden, d_logits):
    """dE (V, D) for a table E used twice: x = E[ids] * sqrt(D) + PE, logits = hidden @ E^T + b."""
    return _embedding_share(ids, d_embedded, d_logits.shape[-1]) + _output_share(hidden, d_logits)


def _tied_inputs(rng, batch, length, vocab, d_model, ids=None):
    ids = rng.integers(0, vocab, size=(batch, length)) if ids is None else ids
    return {"ids": ids, "d_embedded": normal(rng, batch, length, d_model), "hidden": normal(rng, batch, length, d_model),
            "d_logits": normal(rng, batch, length, vocab)}


def _tied_cases(rng):
    return [Case("B=2, T=3, V=7, D=4: ids 2 and 5 repeated, ids 0, 4 and 6 never looked up",
                 _tied_inputs(rng, 2, 3, 7, 4, numpy.array([[2, 5, 2], [1, 5, 3]]))),
            Case("B=1, T=1, V=3, D=9: one token", _tied_inputs(rng, 1, 1, 3, 9, numpy.array([[1]]))),
            Case("B=3, T=5, V=6, D=16", _tied_inputs(rng, 3, 5, 6, 16))]


def _unseen_tied(rng):
    batch, length, vocab, d_model = size(rng, 1, 3), size(rng, 1, 6), size(rng, 2, 9), size(rng, 1, 8)
    return [Case(f"B={batch}, T={length}, V={vocab}, D={d_model}", _tied_inputs(rng, batch, length, vocab, d_model))]


def _tied_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    ids, d_embedded, hidden, d_logits = (inputs[name] for name in ("ids", "d_embedded", "hidden", "d_logits"))
    embedding, projection = _embedding_share(ids, d_embedded, expected.shape[0]), _output_share(hidden, d_logits)
    d_model = expected.shape[1]
    if explains(embedding, got):
        return Hint("the rows of the ids that never occur in ids are zero, yet every row of the table makes a "
                    "logit", "add the output projection's share, d_logits^T hidden summed over the positions")
    if explains(projection, got):
        return Hint("dE does not change when d_embedded changes, yet the table is looked up at ids",
                    "add the lookup's share: each position's gradient, times sqrt(D), into the row of its id")
    if d_model > 1 and explains(embedding / math.sqrt(d_model) + projection, got):
        return Hint(f"the rows of ids are off by the lookup's part times a constant factor: sqrt(D) = "
                    f"{math.sqrt(d_model):g} would explain it", "the lookup is scaled by sqrt(D), so its gradient is too")
    once = numpy.zeros_like(expected)
    once[numpy.asarray(ids).reshape(-1)] += d_embedded.reshape(-1, d_model) * math.sqrt(d_model)
    if explains(once + projection, got):
        return Hint("the rows of ids that occur more than once are wrong, and the others are right",
                    "numpy.add.at (or a loop): fancy-index += keeps one occurrence of a repeated id")
    return ""


# -- lesson 26, question 3: reference streams ---------------------------------------------------------------

def _reference_streams(english, french):
    """(the distinct English sentences in the order they first appear, the streams): stream k holds each
    sentence's k-th reference (in the order of the pairs), or its last one where it has fewer."""
    references: dict[str, list[str]] = {}
    for source, target in zip(english, french):
        references.setdefault(source, []).append(target)
    distinct = list(references)
    most = max(len(targets) for targets in references.values())
    streams = [[references[source][min(k, len(references[source]) - 1)] for source in distinct] for k in range(most)]
    return distinct, streams


def _strings(values, what):
    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not all(
            isinstance(value, str) for value in values):
        raise TypeError(f"{what} must be a list of strings, got {values!r:.80}")
    return [code for value in values for code in (*map(ord, value), -1)]


def _streams_codes(result, inputs):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError("reference_streams must return (distinct, streams)")
    distinct, streams = result
    if not isinstance(streams, (list, tuple)):
        raise TypeError(f"streams must be a list of lists of strings, got {streams!r:.80}")
    codes = [code for stream in streams for code in (*_strings(stream, "each stream"), -2)]
    return numpy.array(_strings(distinct, "distinct")), numpy.array(codes)


def _pairs_cases(rng):
    english = ["I see.", "Come in.", "I see.", "Hi.", "Come in.", "I see.", "Thanks."]
    french = ["Je vois.", "Entre.", "Je comprends.", "Salut.", "Entrez.", "Ah bon.", "Merci."]
    return [Case("7 pairs, 4 sentences: 3, 2, 1 and 1 references", {"english": english, "french": french}),
            Case("one reference each: one stream", {"english": ["Go.", "Run.", "Stop."],
                                                    "french": ["Va !", "Cours !", "Arrête !"]})]


def _unseen_pairs(rng):
    sentences = [f"sentence {index}." for index in rng.permutation(size(rng, 1, 6))]
    english = [sentences[int(i)] for i in rng.integers(0, len(sentences), size=size(rng, 1, 12))]
    french = [f"phrase {int(i)}." for i in rng.integers(0, 5, size=len(english))]
    return [Case(f"{len(english)} pairs, {len(set(english))} sentences", {"english": english, "french": french})]


def _streams_hint(got, expected, inputs, output):
    english, french = inputs["english"], inputs["french"]
    distinct, streams = _reference_streams(english, french)
    if output == "distinct":
        if explains(numpy.array(_strings(sorted(distinct), "")), got):
            return Hint("the sentences are not in the order in which they first appear among the pairs",
                        "keep the order of first appearance (a dict keeps it), not sorted()")
        return ""
    references = {}
    for source, target in zip(english, french):
        references.setdefault(source, []).append(target)
    padded = [[references[s][k] if k < len(references[s]) else "" for s in distinct] for k in range(len(streams))]
    repeated_first = [[references[s][k] if k < len(references[s]) else references[s][0] for s in distinct]
                      for k in range(len(streams))]
    for candidate, words in ((padded, "a stream holds an empty reference where a sentence has fewer references"),
                             (repeated_first, "where a sentence has fewer references, the repeated one is not its last")):
        if explains(_streams_codes((distinct, candidate), inputs)[1], got):
            return Hint(words, "repeat the sentence's last reference: references[s][min(k, len(references[s]) - 1)]")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("tied_embedding_gradient", "tied_embedding_gradient(ids (B, T), d_embedded (B, T, D), hidden "
             "(B, T, D), d_logits (B, T, V)) -> dE (V, D)", "25", _tied_embedding_gradient, _tied_cases, ("dE",),
             hints=(_tied_hint,), unseen=_unseen_tied, question=3),
    Exercise("reference_streams", "reference_streams(english, french) -> (distinct sentences, reference streams)",
             "26", _reference_streams, _pairs_cases, ("distinct", "streams"), exact=True, hints=(_streams_hint,),
             convert=_streams_codes, unseen=_unseen_pairs, question=3),
]


# -- the mistakes students make -----------------------------------------------------------------------------

def _tied_student(ids, d_embedded, hidden, d_logits, lookup=True, output=True, scale=True, add_at=True):
    vocab, d_model = d_logits.shape[-1], hidden.shape[-1]
    grad = numpy.zeros((vocab, d_model))
    rows = d_embedded.reshape(-1, d_model) * (math.sqrt(d_model) if scale else 1.0)
    if lookup and add_at:
        numpy.add.at(grad, ids.reshape(-1), rows)
    elif lookup:
        grad[ids.reshape(-1)] += rows  # a repeated id keeps one of its rows
    if output:
        grad += d_logits.reshape(-1, vocab).T @ hidden.reshape(-1, d_model)
    return grad


def _streams_student(english, french, order=True, fill="last"):
    references = {}
    for source, target in zip(english, french):
        references.setdefault(source, []).append(target)
    distinct = list(references) if order else sorted(references)
    most = max(len(targets) for targets in references.values())
    pick = {"last": lambda refs, k: refs[min(k, len(refs) - 1)],
            "empty": lambda refs, k: refs[k] if k < len(refs) else "",
            "first": lambda refs, k: refs[k] if k < len(refs) else refs[0]}[fill]
    return distinct, [[pick(references[source], k) for source in distinct] for k in range(most)]


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("tied_embedding_gradient", "the lookup's share only", lambda ids, d_embedded, hidden, d_logits: _tied_student(
        ids, d_embedded, hidden, d_logits, output=False), "never occur in ids"),
    W("tied_embedding_gradient", "the output projection's share only", lambda ids, d_embedded, hidden, d_logits:
      _tied_student(ids, d_embedded, hidden, d_logits, lookup=False), "does not change when d_embedded"),
    W("tied_embedding_gradient", "sqrt(D) forgotten", lambda ids, d_embedded, hidden, d_logits: _tied_student(
        ids, d_embedded, hidden, d_logits, scale=False), "constant factor"),
    W("tied_embedding_gradient", "fancy-index +=: repeated ids counted once", lambda ids, d_embedded, hidden, d_logits:
      _tied_student(ids, d_embedded, hidden, d_logits, add_at=False), "occur more than once"),

    W("reference_streams", "sentences sorted", lambda english, french: _streams_student(english, french, order=False),
      "order in which they first appear"),
    W("reference_streams", "an empty reference where a sentence has fewer", lambda english, french: _streams_student(
        english, french, fill="empty"), "empty reference"),
    W("reference_streams", "the first reference repeated, not the last", lambda english, french: _streams_student(
        english, french, fill="first"), "not its last"),
]
