"""The auto-graded parts of lesson 14's open questions (its ``## Exercises`` list), each posed as a function
of the question's setting so that its reference is computed here, never stored:

    question 1  kv_cache_counts(length) -> (positions, products, positions_ratio, products_ratio): what one
                layer (and one head) does over a translation of ``length`` tokens with the cache, and the
                ratios of the uncached counts to these
    question 3  sample_with_temperature(logits, temperature, u) -> tokens (B,): one decoding step's draw from
                softmax(z / tau), row by row, by the uniform draws ``u``
    question 4  length_penalty_choices(log_probs, lengths, alphas) -> (mean_lengths, changed): the final
                choice among each sentence's finished hypotheses at each alpha

Question 2 (beam search with a beam of one against greedy search, on the pretrained translator) is a
check the student runs: it keeps its rubric, as do question 1's timings and the reasons asked for.
"""

from __future__ import annotations

import math

import numpy

from ...tasks.translation.decoding import length_penalty_factor
from .. import hints
from .base import Case, Exercise, WrongSolution, size
from .language_models import sample_token_reference

# -- question 1: what the cache saves --------------------------------------------------------------------

def _kv_cache_counts(length):
    """Step t (1 to T) runs t positions and t x t query-key products without the cache, 1 and t with it."""
    steps = numpy.arange(1, length + 1)
    positions = (int(steps.sum()), int(steps.size))          # (without, with)
    products = (int((steps * steps).sum()), int(steps.sum()))
    return positions[1], products[1], positions[0] / positions[1], products[0] / products[1]


def _counts_cases(rng):
    return [Case(f"T={length}", {"length": length}) for length in (1, 2, 24, 64)]


def _unseen_counts(rng):
    length = size(rng, 3, 500)
    return [Case(f"T={length}", {"length": length})]


def _counts_hint(got, expected, inputs, output):
    length, got = inputs["length"], float(got)
    if output == "products" and length > 1 and got == length:
        return hints.Hint(f"products grows like T: {length} products over {length} steps, one per step (only "
                          "T = 1 passes)", "the new query meets every cached key and its own: t products at step t")
    if output.endswith("ratio") and got < 1 <= float(expected):
        return hints.Hint(f"{output} is below 1: the cache would do more work than the decoder without it",
                          "the ratio is the uncached count over the cached one")
    return ""


# -- question 3: sampling with a temperature -------------------------------------------------------------

def _probabilities(logits, temperature):
    return hints.softmax(numpy.asarray(logits, dtype=numpy.float64) / temperature)


def _sample_with_temperature(logits, temperature, u):
    """Each row's first token whose cumulative probability under softmax(z / tau) exceeds its u (lesson 18's
    ``sample_token``, row by row)."""
    return numpy.array([sample_token_reference(row, temperature, draw) for row, draw in zip(logits, u)])


def _draws(rng, logits, temperature):
    """One uniform draw per row, at least 1e-6 from every boundary of its row's CDF (where rounding decides)."""
    cdf = numpy.cumsum(_probabilities(logits, temperature), axis=-1)
    draws = []
    for row in cdf:
        u = float(rng.random())
        while numpy.any(numpy.abs(row - u) <= 1e-6) or u <= 1e-6:
            u = float(rng.random())
        draws.append(u)
    return numpy.array(draws)


def _sampling_case(rng, label, logits, temperature):
    return Case(label, {"logits": logits, "temperature": temperature, "u": _draws(rng, logits, temperature)})


def _sampling_cases(rng):
    return [_sampling_case(rng, "B=3, V=6, tau = 1", rng.standard_normal((3, 6)) * 2, 1.0),
            _sampling_case(rng, "B=2, V=5, tau = 0.5, logits near 1000", 1000 + rng.standard_normal((2, 5)), 0.5),
            _sampling_case(rng, "B=4, V=4, tau = 1e-8: the greedy limit", rng.standard_normal((4, 4)), 1e-8),
            _sampling_case(rng, "B=2, V=7, tau = 3", rng.standard_normal((2, 7)) * 2, 3.0)]


def _unseen_sampling(rng):
    batch, vocab, temperature = size(rng, 1, 6), size(rng, 2, 30), float(rng.uniform(0.3, 3.0))
    return [_sampling_case(rng, f"B={batch}, V={vocab}, tau = {temperature:.2f}",
                           rng.standard_normal((batch, vocab)) * 2, temperature)]


def _sampling_hint(got, expected, inputs, output):
    logits, temperature = numpy.asarray(inputs["logits"], dtype=numpy.float64), inputs["temperature"]
    if numpy.array_equal(got, logits.argmax(axis=-1)):
        return hints.Hint(f"your tokens are each row's largest logit, whatever u: right at tau = 1e-8, not at "
                          f"tau = {temperature:g}", "draw from softmax(z / tau) by the cumulative probabilities")
    if temperature != 1 and numpy.array_equal(got, _sample_with_temperature(logits, 1 / temperature, inputs["u"])):
        return hints.Hint(f"your draws follow softmax(z tau), which is softmax(z / tau) only at tau = 1 (this case: "
                          f"tau = {temperature:g})", "divide the logits by tau")
    ignored = temperature != 1 and numpy.array_equal(got, _sample_with_temperature(logits, 1.0, inputs["u"]))
    unshifted = numpy.abs(logits / temperature).max() > 700 and numpy.array_equal(
        got, _softmax_without_shift(logits, temperature, inputs["u"]))
    if ignored and not unshifted:  # where both explain the tokens, another case tells them apart
        return hints.Hint(f"your draws follow softmax(z), whatever tau (this case: tau = {temperature:g})",
                          "divide the logits by tau before the softmax")
    if unshifted and not ignored:
        return hints.Hint("wrong where the logits are near 1000: exp of such a number overflows in float64",
                          "subtract each row's largest logit before exp (softmax does not change)")
    return ""


# -- question 4: the length penalty's choice --------------------------------------------------------------

def _length_penalty_choices(log_probs, lengths, alphas):
    """At each alpha, each sentence's hypothesis of the best log P / lp(|y|): the mean of their lengths, and
    the number of sentences whose choice at the last alpha differs from the one at the first."""
    chosen = [numpy.argmax(log_probs / length_penalty_factor(lengths, alpha), axis=-1) for alpha in alphas]
    rows = numpy.arange(len(lengths))
    mean_lengths = numpy.array([lengths[rows, index].mean() for index in chosen])
    return mean_lengths, int((chosen[0] != chosen[-1]).sum())


def _hypotheses(rng, sentences, beam):
    """Finished hypotheses: lengths 2 to 20 (<eos> counted), log P about -0.6 per token, with noise."""
    lengths = rng.integers(2, 21, size=(sentences, beam))
    return {"log_probs": -0.6 * lengths * rng.uniform(0.7, 1.3, size=(sentences, beam)), "lengths": lengths}


def _choice_cases(rng):
    return [Case("12 sentences, 4 hypotheses each, alpha = 0, 0.6, 1",
                 {**_hypotheses(rng, 12, 4), "alphas": numpy.array([0.0, 0.6, 1.0])}),
            Case("1 sentence, 1 hypothesis, alpha = 0, 1",
                 {**_hypotheses(rng, 1, 1), "alphas": numpy.array([0.0, 1.0])}),
            Case("30 sentences, 2 hypotheses each, alpha = 0, 0.3, 0.6, 1, 2",
                 {**_hypotheses(rng, 30, 2), "alphas": numpy.array([0.0, 0.3, 0.6, 1.0, 2.0])})]


def _unseen_choices(rng):
    sentences, beam = size(rng, 2, 40), size(rng, 2, 6)
    alphas = numpy.sort(numpy.concatenate([[0.0], rng.uniform(0.1, 2.0, size=size(rng, 1, 4))]))
    return [Case(f"{sentences} sentences, {beam} hypotheses each, {len(alphas)} alphas",
                 {**_hypotheses(rng, sentences, beam), "alphas": alphas})]


def _choices_hint(got, expected, inputs, output):
    if output != "mean_lengths" or got.shape != expected.shape or len(got) < 2:
        return ""
    if math.isclose(got[0], expected[0]) and numpy.all(numpy.diff(got) <= 0) and got[-1] < expected[-1]:
        return hints.Hint("right at alpha = 0, and the mean length falls as alpha grows: a larger alpha makes "
                          "your choice shorter", "the score is log P divided by lp(|y|), not multiplied")
    if math.isclose(got[0], expected[0]):
        return hints.Hint("right at alpha = 0 only: at the other alphas your penalty ranks these lengths "
                          "differently from lp(|y|) = ((5 + |y|) / 6)^alpha", "lp(|y|) = ((5 + |y|) / 6)^alpha")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("kv_cache_counts",
             "kv_cache_counts(length) -> (positions, products, positions_ratio, products_ratio): with the KV "
             "cache, the positions through one layer and the query-key products of one layer and head over a "
             "translation of T = length tokens; then the counts without the cache divided by these", "14",
             _kv_cache_counts, _counts_cases, ("positions", "products", "positions_ratio", "products_ratio"),
             exact=True, hints=(_counts_hint,), unseen=_unseen_counts, question=1),
    Exercise("sample_with_temperature",
             "sample_with_temperature(logits, temperature, u) -> tokens (B,) ints: logits (B, V), u (B,) in (0, 1); "
             "row b's token is the first whose cumulative probability under softmax(logits[b] / temperature) "
             "exceeds u[b]", "14", _sample_with_temperature, _sampling_cases, ("tokens",), exact=True,
             hints=(_sampling_hint,), unseen=_unseen_sampling, question=3),
    Exercise("length_penalty_choices",
             "length_penalty_choices(log_probs, lengths, alphas) -> (mean_lengths (A,), changed int): log_probs and "
             "lengths (N, K), each sentence's K finished hypotheses, lengths with <eos>; at each alpha the "
             "hypothesis of the best log P / ((5 + |y|) / 6)^alpha; changed: sentences whose choice at alphas[-1] "
             "differs from alphas[0]'s", "14", _length_penalty_choices, _choice_cases, ("mean_lengths", "changed"),
             hints=(_choices_hint,), unseen=_unseen_choices, question=4),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _counts_one_product_per_step(length):
    return length, length, (length + 1) / 2, length * (length + 1) * (2 * length + 1) / 6 / length


def _counts_ratios_inverted(length):
    return length, length * (length + 1) // 2, 2 / (length + 1), 3 / (2 * length + 1)


def _greedy_tokens(logits, temperature, u):
    return numpy.argmax(logits, axis=-1)


def _softmax_without_shift(logits, temperature, u):
    p = numpy.exp(numpy.asarray(logits, dtype=float) / temperature)
    cdf = numpy.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    return (cdf < numpy.asarray(u)[:, None]).sum(axis=-1)


def _temperature_multiplied(logits, temperature, u):
    z = numpy.asarray(logits, dtype=float) * temperature
    p = numpy.exp(z - z.max(axis=-1, keepdims=True))
    cdf = numpy.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    return numpy.minimum((cdf < numpy.asarray(u)[:, None]).sum(axis=-1), p.shape[-1] - 1)


def _choices(log_probs, lengths, alphas, score):
    chosen = [numpy.argmax(score(log_probs, lengths, alpha), axis=-1) for alpha in alphas]
    means = numpy.array([numpy.take_along_axis(lengths, c[:, None], 1).mean() for c in chosen])
    return means, int((chosen[0] != chosen[-1]).sum())


def _penalty_multiplied(log_probs, lengths, alphas):
    return _choices(log_probs, lengths, alphas, lambda lp, n, a: lp * ((5 + n) / 6) ** a)


def _penalty_unsmoothed(log_probs, lengths, alphas):
    return _choices(log_probs, lengths, alphas, lambda lp, n, a: lp / n.astype(float) ** a)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("kv_cache_counts", "one query-key product per cached step", _counts_one_product_per_step,
                  "products grows like T"),
    WrongSolution("kv_cache_counts", "the ratios the wrong way up", _counts_ratios_inverted, "is below 1"),
    WrongSolution("sample_with_temperature", "argmax kept (greedy)", _greedy_tokens, "largest logit"),
    WrongSolution("sample_with_temperature", "exp without the row maximum subtracted", _softmax_without_shift,
                  "overflows"),
    WrongSolution("sample_with_temperature", "logits multiplied by tau", _temperature_multiplied, "softmax(z tau)"),
    WrongSolution("length_penalty_choices", "log P multiplied by the penalty", _penalty_multiplied,
                  "the mean length falls"),
    WrongSolution("length_penalty_choices", "|y|^alpha without GNMT's smoothing", _penalty_unsmoothed,
                  "right at alpha = 0 only"),
]
