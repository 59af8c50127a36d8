"""The exercises of lesson 14's searches: greedy search, one step of beam search, the whole beam search.

The searches take the model as a function, ``next_log_probs(prefixes) -> (n, V)``: for each of
``n`` prefixes (the tokens written so far, without ``<bos>``) the log-probabilities of the next
token. In the cases it is a made-up model, ``ToyModel``, whose next-token distribution is drawn
from the prefix itself, so that a small vocabulary and a short ``max_len`` allow an exhaustive
search to check the reference against; in lesson 14 it is a Transformer.

The rules are npformer's (``tasks.translation.decoding``): a hypothesis ends at ``<eos>``, which
counts in its length but is not returned; a finished hypothesis stays in the beam with its score
and competes for the beam's places; the search stops when every hypothesis in the beam has
finished, or after ``max_len`` tokens; the final choice is the best ``log p / lp(length)``. Ties
go to the candidate listed first: the earlier beam, then the smaller token id (a stable sort).
"""

from __future__ import annotations

import itertools

import numpy

from ...tasks.translation import decoding
from ...tasks.translation.decoding import length_penalty_factor
from .base import Case, Exercise, WrongSolution, normal, size

# -- a made-up model ------------------------------------------------------------------------------


class ToyModel:
    """``next_log_probs(prefixes) -> (n, V)`` of a made-up model: each prefix's next-token
    log-probabilities are a log-softmax of logits drawn from a generator seeded by the prefix,
    so the same prefix always gets the same row. ``sharpness`` scales the logits (a more
    confident model); ``eos_bias`` is added to the logit of ``<eos>`` (shorter hypotheses)."""

    def __init__(self, seed: int, vocab: int, eos: int, sharpness: float = 1.5, eos_bias: float = 0.0) -> None:
        self.seed, self.vocab, self.eos = seed, vocab, eos
        self.sharpness, self.eos_bias = sharpness, eos_bias

    def row(self, prefix) -> numpy.ndarray:
        tokens = [int(token) for token in prefix]
        rng = numpy.random.default_rng([self.seed, len(tokens), *tokens])
        logits = self.sharpness * rng.standard_normal(self.vocab)
        logits[self.eos] += self.eos_bias
        logits = logits - logits.max()
        return logits - numpy.log(numpy.exp(logits).sum())

    def __call__(self, prefixes) -> numpy.ndarray:
        return numpy.array([self.row(prefix) for prefix in prefixes], dtype=numpy.float64).reshape(-1, self.vocab)

    def __repr__(self) -> str:
        return f"ToyModel(seed={self.seed}, vocab={self.vocab}, eos={self.eos})"


def exhaustive_search(next_log_probs, vocab: int, max_len: int, alpha: float, eos: int) -> list[int]:
    """The exact best hypothesis: every sequence of up to ``max_len`` tokens (ending at ``<eos>``,
    or cut at ``max_len``) scored by ``log p / lp(length)``. ``vocab ** max_len`` of them: tiny cases only."""
    words = [token for token in range(vocab) if token != eos]
    best, best_score = None, -numpy.inf
    for length in range(max_len + 1):
        for tokens in itertools.product(words, repeat=length):
            ended = length < max_len  # shorter than max_len: it must end with <eos>
            steps = list(tokens) + ([eos] if ended else [])
            log_p = sum(float(next_log_probs([steps[:i]])[0, token]) for i, token in enumerate(steps))
            score = log_p / length_penalty_factor(len(steps), alpha) if steps else -numpy.inf
            if score > best_score:
                best, best_score = list(tokens), score
    return best


# -- greedy search --------------------------------------------------------------------------------

def _greedy_search(next_log_probs, max_len, eos):
    tokens = []
    for _ in range(max_len):
        token = int(numpy.argmax(next_log_probs([tokens])[0]))
        if token == eos:
            break
        tokens.append(token)
    return numpy.array(tokens, dtype=numpy.int64)


def _greedy_cases(rng):
    return [Case("V=5, max_len=6, <eos> = 2 after 3 tokens", {"next_log_probs": ToyModel(5, 5, 2, eos_bias=0.5),
                                                              "max_len": 6, "eos": 2}),
            Case("<eos> first: the empty translation", {"next_log_probs": ToyModel(7, 4, 0, eos_bias=3.0), "max_len": 5,
                                                        "eos": 0}),
            Case("no <eos> within max_len=4: cut at max_len", {"next_log_probs": ToyModel(1, 6, 5, eos_bias=-9.0),
                                                             "max_len": 4, "eos": 5}),
            Case("max_len=1", {"next_log_probs": ToyModel(2, 3, 1, eos_bias=-9.0), "max_len": 1, "eos": 1})]


def _unseen_greedy(rng):
    vocab, max_len = size(rng, 2, 8), size(rng, 1, 8)
    eos, seed, bias = int(rng.integers(vocab)), int(rng.integers(10**6)), float(rng.uniform(-1, 1.5))
    return [Case(f"V={vocab}, max_len={max_len}, <eos> = {eos}",
                 {"next_log_probs": ToyModel(seed, vocab, eos, eos_bias=bias), "max_len": max_len, "eos": eos})]


def _greedy_variant(inputs, keep_eos=False, through_eos=False, steps=None):
    """Greedy search with one of the classic mistakes, for the hints."""
    next_log_probs, max_len, eos = inputs["next_log_probs"], inputs["max_len"], inputs["eos"]
    tokens = []
    for _ in range(max_len if steps is None else steps):
        token = int(numpy.argmax(next_log_probs([tokens])[0]))
        if token == eos and not through_eos:
            if keep_eos:
                tokens.append(token)
            break
        tokens.append(token)
    return [token for token in tokens if token != eos] if through_eos else tokens


def _greedy_hint(got, expected, inputs, output):
    got = [int(token) for token in got]
    if got == _greedy_variant(inputs, keep_eos=True):
        return "the <eos> is in the output: stop at it, but leave it out of the returned tokens"
    if got == _greedy_variant(inputs, through_eos=True):
        return "the search went on after <eos>: a translation ends at its first <eos>"
    if inputs["max_len"] > 1 and got == _greedy_variant(inputs, steps=inputs["max_len"] - 1):
        return "one step short: max_len counts the tokens written, <eos> included (range(max_len) steps)"
    return ""


# -- one step of beam search ------------------------------------------------------------------------

def _beam_step(scores, log_probs, beam_size):
    candidates = (numpy.asarray(scores, dtype=numpy.float64)[:, None] + log_probs).reshape(-1)
    best = numpy.argsort(-candidates, kind="stable")[:beam_size]
    vocab = log_probs.shape[1]
    return candidates[best], best // vocab, best % vocab


def _log_softmax(rng, rows, vocab, scale=1.5):
    logits = scale * normal(rng, rows, vocab)
    logits -= logits.max(axis=-1, keepdims=True)
    return logits - numpy.log(numpy.exp(logits).sum(axis=-1, keepdims=True))


def _beam_step_cases(rng):
    same_row = _log_softmax(rng, 1, 5)
    one_parent = _log_softmax(rng, 3, 6)
    one_parent[0] = numpy.log(numpy.array([0.3, 0.25, 0.2, 0.15, 0.06, 0.04]))
    dead = _log_softmax(rng, 3, 4)
    return [
        Case("3 beams, V=5, beam_size=3", {"scores": numpy.array([-1.2, -0.4, -2.5]),
                                           "log_probs": _log_softmax(rng, 3, 5), "beam_size": 3}),
        Case("ties: 2 beams with equal scores and equal rows", {"scores": numpy.array([-0.7, -0.7]),
                                                                 "log_probs": numpy.repeat(same_row, 2, axis=0),
                                                                 "beam_size": 4}),
        Case("the best 3 all come from beam 0", {"scores": numpy.array([-0.1, -3.0, -3.5]), "log_probs": one_parent,
                                                 "beam_size": 3}),
        Case("first step: beams 1 and 2 at -inf", {"scores": numpy.array([0.0, -numpy.inf, -numpy.inf]),
                                                   "log_probs": dead, "beam_size": 3}),
        Case("beam_size=1: greedy", {"scores": numpy.array([-0.5, -0.2]), "log_probs": _log_softmax(rng, 2, 7),
                                     "beam_size": 1}),
    ]


def _unseen_beam_step(rng):
    beams, vocab = size(rng, 1, 6), size(rng, 2, 9)
    beam_size = size(rng, 1, min(beams * vocab, 8))
    return [Case(f"{beams} beams, V={vocab}, beam_size={beam_size}",
                 {"scores": -3 * rng.random(beams), "log_probs": _log_softmax(rng, beams, vocab),
                  "beam_size": beam_size})]


def _beam_step_hint(got, expected, inputs, output):
    scores, log_probs, beam_size = inputs["scores"], numpy.asarray(inputs["log_probs"]), inputs["beam_size"]
    vocab, beams = log_probs.shape[1], log_probs.shape[0]
    _, parents, tokens = _beam_step(scores, log_probs, beam_size)
    order = numpy.argsort(-(scores[:, None] + log_probs).reshape(-1), kind="stable")[:beam_size]
    if output == "scores" and numpy.array_equal(got, log_probs[parents, tokens]):
        return "the new scores are the last token's log-probability only: add the parent beam's score (log p adds up)"
    flat = numpy.argsort(-log_probs.reshape(-1), kind="stable")[:beam_size]
    lone = {"scores": log_probs.reshape(-1)[flat], "parents": flat // vocab, "tokens": flat % vocab}[output]
    if not numpy.array_equal(lone, expected) and numpy.array_equal(got, lone):
        return "ranked by the next token's log-probability alone: rank by the beam's score plus it"
    if output in ("parents", "tokens") and beams != vocab:
        swapped = order // beams if output == "parents" else order % beams
        if numpy.array_equal(got, swapped):
            return "the flat index unravelled with the number of beams: parent = index // V, token = index % V"
    candidates = (scores[:, None] + log_probs).reshape(-1)
    reverse = numpy.argsort(candidates, kind="stable")[::-1][:beam_size]
    reversed_ties = {"scores": candidates[reverse], "parents": reverse // vocab, "tokens": reverse % vocab}[output]
    if numpy.array_equal(got, reversed_ties) and not numpy.array_equal(reversed_ties, expected):
        return ("ties broken towards the later candidate: on equal scores the earlier beam, then the smaller "
                "token id, comes first (a stable sort of -candidates; argsort(candidates)[::-1] reverses the ties)")
    return ""


# -- the whole search ---------------------------------------------------------------------------------

def _beam_search(next_log_probs, beam_size, max_len, alpha, eos, penalised=True, eos_in_length=True):
    """The reference: candidates listed beam by beam (a finished hypothesis as itself, a live one as
    its extensions in token order), the ``beam_size`` best kept by a stable sort."""
    beam = [([], 0.0, False)]  # (tokens without <eos>, log p, finished)
    for _ in range(max_len):
        if all(finished for _, _, finished in beam):
            break
        live = [tokens for tokens, _, finished in beam if not finished]
        rows = iter(numpy.asarray(next_log_probs(live), dtype=numpy.float64))
        candidates = []
        for tokens, score, finished in beam:
            if finished:
                candidates.append((tokens, score, True))
                continue
            for token, log_p in enumerate(next(rows)):
                ended = token == eos
                candidates.append((tokens if ended else tokens + [token], score + float(log_p), ended))
        order = numpy.argsort(-numpy.array([score for _, score, _ in candidates]), kind="stable")[:beam_size]
        beam = [candidates[i] for i in order]
    lengths = numpy.array([len(tokens) + (finished and eos_in_length) for tokens, _, finished in beam])
    scores = numpy.array([score for _, score, _ in beam])
    final = scores / length_penalty_factor(lengths, alpha) if penalised else scores
    return numpy.array(beam[int(numpy.argmax(final))][0], dtype=numpy.int64)


def _search_case(label, seed, vocab, eos, beam_size, max_len, alpha, eos_bias=0.0, sharpness=1.5):
    return Case(label, {"next_log_probs": ToyModel(seed, vocab, eos, sharpness, eos_bias), "beam_size": beam_size,
                        "max_len": max_len, "alpha": alpha, "eos": eos})


def _beam_search_cases(rng):
    return [
        _search_case("V=6, beam 4, max_len 6, alpha 1", 373, 6, 1, 4, 6, 1.0, eos_bias=0.5, sharpness=2.0),
        _search_case("V=4, beam 2, max_len 4: greedy's answer is not the best", 73, 4, 2, 2, 4, 0.6, eos_bias=-1.0),
        _search_case("V=3, beam 15 holds every hypothesis of max_len 3: the exact best", 197, 3, 1, 15, 3, 0.6),
        _search_case("V=5, alpha 1: the length penalty changes the choice", 47, 5, 0, 3, 5, 1.0, eos_bias=1.0,
                     sharpness=2.5),
        _search_case("beam 1: greedy search", 0, 4, 3, 1, 5, 0.6),
    ]


def _unseen_beam_search(rng):
    vocab, max_len, beam_size = size(rng, 2, 6), size(rng, 1, 6), size(rng, 1, 6)
    eos, alpha = int(rng.integers(vocab)), float(rng.uniform(0, 1.5))
    return [_search_case(f"V={vocab}, beam {beam_size}, max_len {max_len}, alpha {alpha:.2f}, <eos> = {eos}",
                         int(rng.integers(10**6)), vocab, eos, beam_size, max_len, alpha,
                         eos_bias=float(rng.uniform(-0.5, 1.5)), sharpness=float(rng.uniform(1.0, 3.0)))]


def _beam_search_hint(got, expected, inputs, output):
    got = [int(token) for token in got]
    arguments = {key: inputs[key] for key in ("next_log_probs", "beam_size", "max_len", "alpha", "eos")}
    if got == _beam_search(**arguments, penalised=False).tolist():
        return ("the raw log-probability chose the final hypothesis: divide each one's log p by the length "
                "penalty lp(length) before the final choice")
    if got == _beam_search(**arguments, eos_in_length=False).tolist():
        return "the length without the <eos>: a finished hypothesis's length counts its <eos>"
    greedy = _greedy_search(inputs["next_log_probs"], inputs["max_len"], inputs["eos"]).tolist()
    if inputs["beam_size"] > 1 and got == greedy:
        return "greedy search's answer: keep the beam_size best candidates at each step, not one"
    if got[-1:] == [inputs["eos"]]:
        return "the <eos> is in the output: it ends the hypothesis but is not returned"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("greedy_search", "greedy_search(next_log_probs, max_len, eos) -> the tokens, without <eos>", "14",
             _greedy_search, _greedy_cases, ("tokens",), exact=True, hints=(_greedy_hint,), unseen=_unseen_greedy),
    Exercise("beam_step", "beam_step(scores, log_probs, beam_size) -> (scores, parents, tokens)", "14",
             _beam_step, _beam_step_cases, ("scores", "parents", "tokens"), exact=True, hints=(_beam_step_hint,),
             unseen=_unseen_beam_step),
    Exercise("beam_search", "beam_search(next_log_probs, beam_size, max_len, alpha, eos) -> the best hypothesis's "
             "tokens, without <eos>", "14", _beam_search, _beam_search_cases, ("tokens",), exact=True,
             hints=(_beam_search_hint,), unseen=_unseen_beam_search, points=2),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _greedy_keeps_eos(next_log_probs, max_len, eos):
    tokens = []
    for _ in range(max_len):
        tokens.append(int(numpy.argmax(next_log_probs([tokens])[0])))
        if tokens[-1] == eos:
            break
    return tokens


def _greedy_through_eos(next_log_probs, max_len, eos):
    tokens = []
    for _ in range(max_len):
        tokens.append(int(numpy.argmax(next_log_probs([tokens])[0])))
    return [token for token in tokens if token != eos]


def _greedy_one_short(next_log_probs, max_len, eos):
    tokens = []
    while len(tokens) < max_len - 1:
        token = int(numpy.argmax(next_log_probs([tokens])[0]))
        if token == eos:
            break
        tokens.append(token)
    return tokens


def _beam_step_scores_ignored(scores, log_probs, beam_size):
    flat = numpy.argsort(-log_probs.reshape(-1), kind="stable")[:beam_size]
    vocab = log_probs.shape[1]
    return scores[flat // vocab] + log_probs.reshape(-1)[flat], flat // vocab, flat % vocab


def _beam_step_not_cumulative(scores, log_probs, beam_size):
    candidates = scores[:, None] + log_probs
    flat = numpy.argsort(-candidates.reshape(-1), kind="stable")[:beam_size]
    parents, tokens = numpy.unravel_index(flat, log_probs.shape)
    return log_probs[parents, tokens], parents, tokens


def _beam_step_reversed(scores, log_probs, beam_size):
    candidates = (scores[:, None] + log_probs).reshape(-1)
    best = numpy.argsort(candidates, kind="stable")[::-1][:beam_size]
    return candidates[best], best // log_probs.shape[1], best % log_probs.shape[1]


def _beam_step_unravel_by_beams(scores, log_probs, beam_size):
    candidates = (scores[:, None] + log_probs).reshape(-1)
    best = numpy.argsort(-candidates, kind="stable")[:beam_size]
    return candidates[best], best // len(scores), best % len(scores)


def _beam_step_best_of_each(scores, log_probs, beam_size):
    """Each beam's own best token, then the best of those: never two children of one beam."""
    tokens = log_probs.argmax(axis=1)
    candidates = scores + log_probs[numpy.arange(len(scores)), tokens]
    parents = numpy.argsort(-candidates, kind="stable")[:beam_size]
    return candidates[parents], parents, tokens[parents]


def _beam_search_variant(**options):
    def search(next_log_probs, beam_size, max_len, alpha, eos):
        return _student_beam_search(next_log_probs, beam_size, max_len, alpha, eos, **options)
    return search


def _student_beam_search(next_log_probs, beam_size, max_len, alpha, eos, penalised=True, eos_in_length=True,
                         forget_finished=False, eos_ends=True):
    """Beam search as a student writes it, with the flags to make one classic mistake."""
    hypotheses, scores, finished = [[]], numpy.zeros(1), numpy.zeros(1, dtype=bool)
    for _ in range(max_len):
        if finished.all():
            break
        rows = numpy.asarray(next_log_probs([hypotheses[i] for i in numpy.flatnonzero(~finished)]))
        log_probs = numpy.full((len(hypotheses), rows.shape[1]), -numpy.inf)
        log_probs[~finished] = rows
        log_probs[finished, eos] = 0.0
        candidates = (scores[:, None] + log_probs).reshape(-1)
        best = numpy.argsort(-candidates, kind="stable")[:beam_size]
        best = best[numpy.isfinite(candidates[best])]
        parents, tokens = best // rows.shape[1], best % rows.shape[1]
        ended = finished[parents] | ((tokens == eos) & eos_ends)
        hypotheses = [hypotheses[p] if finished[p] or (t == eos and eos_ends) else hypotheses[p] + [int(t)]
                      for p, t in zip(parents, tokens)]
        scores, finished = candidates[best], ended
        if forget_finished:
            keep = ~finished
            hypotheses, scores, finished = [h for h, k in zip(hypotheses, keep) if k], scores[keep], finished[keep]
            if not hypotheses:
                break
    pool = list(zip(hypotheses, scores, finished))
    if not pool:
        return []
    lengths = numpy.array([len(h) + (f and eos_in_length) for h, _, f in pool])
    final = numpy.array([s for _, s, _ in pool])
    if penalised:
        final = final / ((5 + lengths) / 6) ** alpha
    return [token for token in pool[int(numpy.argmax(final))][0] if token != eos]


def _lazy_beam_search(next_log_probs, beam_size, max_len, alpha, eos):
    """Hands the search to npformer's beam step (``top_k_log_probs``) for the candidates."""
    hypotheses = [[]]
    for _ in range(max_len):
        tokens, _ = decoding.top_k_log_probs(numpy.asarray(next_log_probs(hypotheses)), 1)
        hypotheses = [h + [int(t)] for h, t in zip(hypotheses, tokens[:, 0])]
    return hypotheses[0]


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("greedy_search", "the <eos> returned with the tokens", _greedy_keeps_eos, "leave it out"),
    WrongSolution("greedy_search", "goes on after <eos>", _greedy_through_eos, "after <eos>"),
    WrongSolution("greedy_search", "max_len - 1 steps", _greedy_one_short, "one step short"),

    WrongSolution("beam_step", "ranked by the next token's log-probability alone", _beam_step_scores_ignored,
                  "log-probability alone"),
    WrongSolution("beam_step", "the new scores without the beam's score", _beam_step_not_cumulative,
                  "add the parent beam's score"),
    WrongSolution("beam_step", "argsort(candidates)[::-1]: ties to the later beam", _beam_step_reversed,
                  "ties broken towards the later candidate"),
    WrongSolution("beam_step", "the flat index unravelled with the number of beams", _beam_step_unravel_by_beams,
                  "index // V"),
    WrongSolution("beam_step", "each beam's best token only", _beam_step_best_of_each),

    WrongSolution("beam_search", "the final choice without the length penalty", _beam_search_variant(penalised=False),
                  "length penalty"),
    WrongSolution("beam_search", "the length without the <eos>", _beam_search_variant(eos_in_length=False),
                  "counts its <eos>"),
    WrongSolution("beam_search", "finished hypotheses dropped from the beam and forgotten",
                  _beam_search_variant(forget_finished=True)),
    WrongSolution("beam_search", "<eos> does not end a hypothesis", _beam_search_variant(eos_ends=False)),
    WrongSolution("beam_search", "greedy: the best token of the best hypothesis, one step at a time",
                  lambda next_log_probs, beam_size, max_len, alpha, eos:
                  _greedy_search(next_log_probs, max_len, eos).tolist(), "greedy search's answer"),
    WrongSolution("beam_search", "npformer's top_k_log_probs for the candidates", _lazy_beam_search, "npformer's own"),
]
