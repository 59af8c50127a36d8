"""The exercises of lessons 18-19: the decoder-only language model's next word, the masked language model's data.

Lesson 18 draws the next word: top-k filtering and inverse-CDF sampling from a given
uniform draw ``u``, which with ``u = rng.random()`` is exactly what ``LanguageModel.generate``
does with ``rng.choice``. Lesson 19 makes BERT's training data: the 15% / 80-10-10 masking rule of
``tasks.masked_lm.mask_tokens``, made deterministic by handing the function its draws.
"""

from __future__ import annotations

import numpy

from ...tasks.masked_lm import mask_tokens
from ...tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID, UNK_ID
from .. import hints
from .base import Case, Exercise, WrongSolution, normal, size

# -- lesson 18: top-k and sampling ------------------------------------------------------------------------

def _top_k_filter(logits, k):
    """All but the k largest logits set to -inf, as ``LanguageModel.generate`` does it."""
    logits = numpy.array(logits, dtype=numpy.float64)
    if k < len(logits):
        logits[numpy.argsort(logits)[:-k]] = -numpy.inf
    return logits


def _top_k_cases(rng):
    def distinct(count, scale=2.0):
        return scale * rng.permutation(count) + rng.uniform(-0.4, 0.4, size=count)  # no two within 1.2
    negative = distinct(7) - 20.0
    already = distinct(6)
    already[[1, 4]] = -numpy.inf  # filtered before: stays -inf
    return [Case("V=8, k=3", {"logits": distinct(8), "k": 3}),
            Case("V=7, k=2, every logit negative", {"logits": negative, "k": 2}),
            Case("V=5, k=1: only the most probable word", {"logits": distinct(5), "k": 1}),
            Case("V=6 with two -inf already, k=9 > V: nothing to remove",
                 {"logits": already, "k": 9})]


def _unseen_top_k(rng):
    vocab = size(rng, 1, 12)
    k = size(rng, 1, vocab + 2)
    logits = 1.5 * rng.permutation(vocab) + rng.uniform(-0.5, 0.5, size=vocab) + rng.uniform(-5, 5)
    return [Case(f"V={vocab}, k={k}", {"logits": logits, "k": k})]


def _top_k_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    logits, k = numpy.asarray(inputs["logits"], dtype=numpy.float64), inputs["k"]
    kept = int(numpy.isfinite(got).sum())
    right = int(numpy.isfinite(expected).sum())
    if numpy.any(got[~numpy.isfinite(expected)] == 0):
        return ("0 where the answer has -inf: a logit of 0 still has probability exp(0) / sum after the "
                "softmax; -inf is what gives probability 0")
    if kept == right and numpy.array_equal(numpy.isfinite(got), numpy.isfinite(_top_k_filter(-logits, k))):
        return "kept the k smallest logits: the k largest are the last k of an ascending argsort"
    if k >= len(logits) and kept != right:
        return f"k = {k} is at least V = {len(logits)}: then nothing is removed"
    if kept != right and numpy.array_equal(got[numpy.isfinite(got)], logits[numpy.isfinite(got)]):
        return f"kept {kept} logits, not {right}: an off-by-one in the slice of the argsort?"
    return ""


def sample_token_reference(logits, temperature, u):
    """Inverse-CDF sampling: the first token whose cumulative probability exceeds u, as ``rng.choice``
    (and so ``LanguageModel.generate``) draws it from ``u = rng.random()``."""
    probabilities = hints.softmax(numpy.asarray(logits, dtype=numpy.float64) / temperature)
    cdf = numpy.cumsum(probabilities)
    cdf /= cdf[-1]
    return int(numpy.searchsorted(cdf, u, side="right"))


def _draws(rng, logits, temperature, count, extra=()):
    """``count`` uniform draws, each at least 1e-6 away from every boundary of the CDF (where rounding
    could decide the token), sorted, plus ``extra``."""
    cdf = numpy.cumsum(hints.softmax(numpy.asarray(logits, dtype=numpy.float64) / temperature))
    draws = []
    while len(draws) < count:
        u = float(rng.random())
        if numpy.all(numpy.abs(cdf - u) > 1e-6):
            draws.append(u)
    return sorted(draws) + list(extra)


def _sample_cases(rng):
    plain = numpy.array([1.0, 2.5, 0.3, -1.0, 1.8, 0.9])
    large = 1000.0 + numpy.array([0.5, -1.2, 0.0, 0.8, -0.3])
    filtered = numpy.array([-numpy.inf, 1.2, 0.4, -numpy.inf, 0.9, -numpy.inf])
    return [Case("V=6, T=1, ten draws", {"logits": plain, "temperature": 1.0, "u": _draws(rng, plain, 1.0, 10)}),
            Case("V=5, T=0.4 (sharper), logits near 1000: subtract the max",
                 {"logits": large, "temperature": 0.4, "u": _draws(rng, large, 0.4, 10)}),
            Case("V=6, T=2.5 (flatter), three -inf from top-k, u = 0 among the draws",
                 {"logits": filtered, "temperature": 2.5, "u": _draws(rng, filtered, 2.5, 9, extra=[0.0])}),
            Case("V=1: one word, always drawn", {"logits": numpy.array([0.7]), "temperature": 0.8,
                                                "u": [0.0, 0.3, 0.99]})]


def _unseen_sample(rng):
    vocab = size(rng, 2, 12)
    logits = rng.uniform(-3, 3) + 2 * normal(rng, vocab)
    logits[rng.random(vocab) < 0.3] = -numpy.inf
    logits[rng.integers(vocab)] = 1.0  # at least one finite logit
    temperature = float(rng.choice([rng.uniform(0.2, 1.0), rng.uniform(1.0, 3.0)]))
    return [Case(f"V={vocab}, T={temperature:.2f}, some -inf", {
        "logits": logits, "temperature": temperature, "u": _draws(rng, logits, temperature, 12)})]


def _sample_with(logits, temperature, draws, choose):
    return numpy.array([float(choose(numpy.asarray(logits, dtype=numpy.float64), temperature, u)) for u in draws])


def _sample_hint(got, expected, inputs, output):
    logits, temperature, draws = inputs["logits"], inputs["temperature"], inputs["u"]
    if got.shape != expected.shape:
        return ""
    probabilities = hints.softmax(numpy.asarray(logits, dtype=numpy.float64) / temperature)
    tokens = got.astype(int)
    if numpy.all((tokens >= 0) & (tokens < len(probabilities))) and numpy.any(probabilities[tokens] == 0):
        return ("drew a token of probability 0 (a -inf logit): take the first token whose cumulative "
                "probability is strictly greater than u (searchsorted(cdf, u, side='right')); with u = 0, "
                "cdf > u skips the tokens of probability 0")
    if temperature != 1.0:
        for candidate, words in ((lambda z, t, u: sample_token_reference(z, 1.0, u), "temperature ignored"),
                                 (lambda z, t, u: sample_token_reference(z * t * t, t, u), "multiplied by the temperature")):
            if numpy.array_equal(got, _sample_with(logits, temperature, draws, candidate)):
                return f"{words}: the probabilities are softmax(logits / T), so divide by T before the softmax"
    greedy = numpy.all(got == numpy.argmax(probabilities))
    if greedy and len(set(expected.tolist())) > 1:
        return "always the most probable token, whatever u: that is greedy decoding (top-k with k = 1), not a draw"
    with numpy.errstate(over="ignore"):
        overflows = not numpy.all(numpy.isfinite(numpy.exp(numpy.asarray(logits, dtype=numpy.float64) / temperature)))
    if overflows:
        return "exp(logits / T) overflows here: subtract the largest logit first (softmax ignores the shift)"
    return ""


# -- lesson 19: BERT's masking ------------------------------------------------------------------------------

RATE, TO_MASK, TO_RANDOM = 0.15, 0.8, 0.9


def _bert_masking(ids, select_draws, choice_draws, random_ids):
    """``mask_tokens``'s rule, from given draws: a word (id > [MASK]) is selected when its select draw is
    below 0.15; a selected word becomes [MASK] when its choice draw is below 0.8, ``random_ids`` there when
    it is below 0.9, and stays otherwise. Targets: the word where selected, <pad> elsewhere."""
    ids = numpy.asarray(ids)
    selected = (ids > MASK_ID) & (numpy.asarray(select_draws) < RATE)
    targets = numpy.where(selected, ids, PAD_ID)
    inputs = ids.copy()
    inputs[selected & (choice_draws < TO_MASK)] = MASK_ID
    random_word = selected & (choice_draws >= TO_MASK) & (choice_draws < TO_RANDOM)
    inputs[random_word] = numpy.asarray(random_ids)[random_word]
    return inputs, targets


def _masking_inputs(rng, ids, select_draws, choice_draws, vocab_size=30):
    return {"ids": ids, "select_draws": select_draws, "choice_draws": choice_draws,
            "random_ids": rng.integers(MASK_ID + 1, vocab_size, size=ids.shape)}


def _masking_cases(rng):
    # Every token of the first case but two words draws below 0.15: only the words may be selected.
    ids = numpy.array([[BOS_ID, 12, 7, UNK_ID, 9, 9, EOS_ID, PAD_ID],
                       [BOS_ID, 5, 28, 16, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
    choice = numpy.array([[0.5, 0.1, 0.85, 0.3, 0.95, 0.82, 0.2, 0.4],
                          [0.6, 0.7, 0.88, 0.99, 0.05, 0.1, 0.5, 0.9]])
    select = rng.uniform(0, 0.14, size=ids.shape)
    select[0, 5] = select[1, 3] = 0.6  # two words not selected
    first = _masking_inputs(rng, ids, select, choice)
    first["random_ids"][0, 2] = 7  # the random word happens to be the word itself: still a target
    edges = numpy.array([[BOS_ID, 10, 11, 12, 13, 14, 15, EOS_ID]])
    on_edges = _masking_inputs(rng, edges, numpy.array([[0.1, 0.15, 0.1499, 0.0, 0.1, 0.1, 0.2, 0.0]]),
                               numpy.array([[0.0, 0.1, 0.8, 0.9, 0.7999, 0.8999, 0.1, 0.5]]))
    sentences = rng.integers(MASK_ID + 1, 30, size=(4, 10))
    sentences[:, 0], sentences[:, -1] = BOS_ID, EOS_ID
    sentences[1, 6:] = [EOS_ID, PAD_ID, PAD_ID, PAD_ID]
    sentences[3, :] = PAD_ID  # a row of padding only
    typical = _masking_inputs(rng, sentences, rng.random(sentences.shape), rng.random(sentences.shape))
    return [Case("B=2, T=8: <bos>, <eos>, <unk>, <pad>, a repeated word; select draws below 0.15 but two", first),
            Case("draws exactly on the thresholds: 0.15 not selected, 0.8 a random word, 0.9 unchanged", on_edges),
            Case("B=4, T=10, uniform draws, a row of padding only", typical)]


def _unseen_masking(rng):
    batch, length, vocab = size(rng, 1, 5), size(rng, 2, 12), size(rng, 6, 40)
    ids = rng.integers(MASK_ID + 1, vocab, size=(batch, length))
    ids[rng.random(ids.shape) < 0.1] = UNK_ID
    ids[:, 0] = BOS_ID
    for row, end in enumerate(rng.integers(1, length + 1, size=batch)):
        ids[row, end - 1] = EOS_ID
        ids[row, end:] = PAD_ID
    rate = float(rng.uniform(0.15, 0.6))  # more selected than 15%, so that each branch is likely to occur
    inputs = _masking_inputs(rng, ids, rng.random(ids.shape) * RATE / rate, rng.random(ids.shape), vocab)
    return [Case(f"B={batch}, T={length}, V={vocab}, random draws", inputs)]


def _masking_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    ids = numpy.asarray(inputs["ids"])
    special = ids <= MASK_ID
    right_inputs, right_targets = _bert_masking(**inputs)
    selected = right_targets != PAD_ID
    if output == "targets":
        if numpy.any(got[~selected & ~special] != PAD_ID):
            return ("targets must be <pad> (0) wherever nothing is asked: the loss ignores <pad>, so only the "
                    "selected positions count")
        if numpy.any(got[special] != PAD_ID):
            return ("a special token was selected: only words (ids above [MASK] = 4) may be chosen, never "
                    "<pad>, <bos>, <eos>, <unk> or [MASK]")
        if numpy.array_equal(got, numpy.where(selected, right_inputs, PAD_ID)):
            return "targets hold the model's input ([MASK], the random word), not the original word"
    if output == "input_ids":
        if numpy.any(got[special] != ids[special]):
            return ("a special token was changed: only words (ids above [MASK] = 4) may be chosen, never "
                    "<pad>, <bos>, <eos>, <unk> or [MASK]")
        if numpy.array_equal(got, numpy.where(selected, MASK_ID, ids)):
            return ("every selected word became [MASK]: 80% [MASK] (choice draw < 0.8), 10% the random word "
                    "(0.8 <= draw < 0.9), 10% unchanged")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("top_k_filter", "top_k_filter(logits, k) -> logits (V,) with all but the k largest set to -inf",
             "18", _top_k_filter, _top_k_cases, ("filtered",), exact=True, hints=(_top_k_hint,),
             unseen=_unseen_top_k),
    Exercise("sample_token", "sample_token(logits, temperature, u) -> the token drawn from softmax(logits / T)",
             "18", sample_token_reference, _sample_cases, ("token",), exact=True, hints=(_sample_hint,),
             pointwise="u", unseen=_unseen_sample),
    Exercise("bert_masking",
             "bert_masking(ids, select_draws, choice_draws, random_ids) -> (input_ids, targets)", "19",
             _bert_masking, _masking_cases, ("input_ids", "targets"), exact=True, hints=(_masking_hint,),
             unseen=_unseen_masking),
]


# -- the mistakes students make -----------------------------------------------------------------------------

def _top_k_smallest(logits, k):
    logits = numpy.array(logits, dtype=float)
    logits[numpy.argsort(logits)[k:]] = -numpy.inf
    return logits


def _top_k_zero(logits, k):
    logits = numpy.array(logits, dtype=float)
    logits[numpy.argsort(logits)[:-k]] = 0.0
    return logits


def _top_k_length_minus(logits, k):
    logits = numpy.array(logits, dtype=float)
    logits[numpy.argsort(logits)[: len(logits) - k]] = -numpy.inf  # k > V: a negative stop removes words
    return logits


def _top_k_one_too_many(logits, k):
    logits = numpy.array(logits, dtype=float)
    logits[numpy.argsort(logits)[: -k - 1]] = -numpy.inf
    return logits


def _student_cdf(logits, temperature, divide=True, shift=True):
    z = logits / temperature if divide else logits
    with numpy.errstate(over="ignore", invalid="ignore"):
        p = numpy.exp(z - z.max()) if shift else numpy.exp(z)
        return numpy.cumsum(p / p.sum())


def _sample_temperature_ignored(logits, temperature, u):
    cdf = _student_cdf(logits, temperature, divide=False)
    return int(numpy.searchsorted(cdf, u, side="right"))


def _sample_temperature_multiplied(logits, temperature, u):
    cdf = _student_cdf(logits * temperature * temperature, temperature)
    return int(numpy.searchsorted(cdf, u, side="right"))


def _sample_left(logits, temperature, u):
    cdf = _student_cdf(logits, temperature)
    return int((cdf < u).sum())  # u = 0 lands on a token of probability 0


def _sample_greedy(logits, temperature, u):
    return int(numpy.argmax(logits))


def _sample_no_shift(logits, temperature, u):
    cdf = _student_cdf(logits, temperature, shift=False)
    return int(numpy.argmax(cdf > u)) if numpy.any(cdf > u) else len(cdf) - 1


def _student_masking(ids, select_draws, choice_draws, random_ids, candidates=None, every_mask=False):
    """The rule as a student writes it (the reference is unavailable to a graded function)."""
    chosen = (ids > MASK_ID) if candidates is None else candidates
    selected = chosen & (select_draws < 0.15)
    inputs = numpy.where(selected & ((choice_draws < 0.8) | every_mask), MASK_ID, ids)
    random_word = selected & (choice_draws >= 0.8) & (choice_draws < 0.9) & (not every_mask)
    return numpy.where(random_word, random_ids, inputs), numpy.where(selected, ids, PAD_ID)


def _masking_specials(ids, select_draws, choice_draws, random_ids):
    return _student_masking(ids, select_draws, choice_draws, random_ids, candidates=ids != PAD_ID)


def _masking_targets_everywhere(ids, select_draws, choice_draws, random_ids):
    inputs, _ = _student_masking(ids, select_draws, choice_draws, random_ids)
    return inputs, ids.copy()  # the loss would be asked for every token


def _masking_targets_from_inputs(ids, select_draws, choice_draws, random_ids):
    inputs, targets = _student_masking(ids, select_draws, choice_draws, random_ids)
    return inputs, numpy.where(targets != PAD_ID, inputs, PAD_ID)


def _masking_always_mask(ids, select_draws, choice_draws, random_ids):
    return _student_masking(ids, select_draws, choice_draws, random_ids, every_mask=True)


def _lazy_masking(ids, select_draws, choice_draws, random_ids):
    return mask_tokens(ids, numpy.random.default_rng(0), int(ids.max()) + 1)


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("top_k_filter", "keeps the k smallest", _top_k_smallest, "k smallest"),
    W("top_k_filter", "0 instead of -inf", _top_k_zero, "-inf"),
    W("top_k_filter", "argsort[:V - k]: k > V removes words", _top_k_length_minus, "nothing is removed"),
    W("top_k_filter", "keeps k + 1 (off by one)", _top_k_one_too_many, "off-by-one"),

    W("sample_token", "temperature ignored", _sample_temperature_ignored, "temperature ignored"),
    W("sample_token", "logits multiplied by the temperature", _sample_temperature_multiplied, "multiplied"),
    W("sample_token", "cdf < u counted: u = 0 draws a -inf token", _sample_left, "probability 0"),
    W("sample_token", "greedy: the argmax, u unused", _sample_greedy, "greedy"),
    W("sample_token", "no max subtracted: exp overflows near 1000", _sample_no_shift, "subtract the largest logit"),

    W("bert_masking", "special tokens may be selected", _masking_specials, "special token"),
    W("bert_masking", "targets everywhere, not <pad>", _masking_targets_everywhere, "<pad> (0)"),
    W("bert_masking", "targets from the masked input", _masking_targets_from_inputs, "not the original word"),
    W("bert_masking", "every selected word becomes [MASK]", _masking_always_mask, "every selected word"),
    W("bert_masking", "a pass-through to npformer's mask_tokens", _lazy_masking, "npformer's own"),
]
