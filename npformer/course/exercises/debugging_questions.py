"""The checkable parts of lessons 21-22's open questions.

    relu_difference_quotients  lesson 21, question 3: the checker's finite differences through ReLU's kink
    first_caught_heads         lesson 22, question 1: the first head count at which bug 4's symptom passes a
                               threshold
    first_width_below          lesson 22, question 2: the first width at which layer norm's unbiased standard
                               deviation hides under a threshold
    future_leak                lesson 22, question 4: how much each position's attention output moves when the
                               last position's key and value move, under a given mask
    pad_only_accuracy          lesson 22, question 5: the zoo's inflated accuracy of a model that predicts
                               <pad> everywhere, batch by batch

Each is posed as a function of the question's setting, so its reference is computed here, never stored.
"""

from __future__ import annotations

import itertools
import math

import numpy

from ... import gradcheck
from ...tokens import PAD_ID
from .. import zoo
from ..hints import Hint, explains
from .base import Case, Exercise, WrongSolution, normal, size

# -- lesson 21, question 3: finite differences across ReLU's kink -------------------------------------------

def _relu_difference_quotients(x, h):
    """(D(h), the checker's (4 D(h) - D(2h)) / 3) for ReLU at each entry of x, D the central difference."""
    x = numpy.array(x, dtype=numpy.float64)
    central = (numpy.maximum(x + h, 0) - numpy.maximum(x - h, 0)) / (2 * h)
    checker = gradcheck.numerical_gradient(lambda: numpy.maximum(x, 0), x, numpy.ones_like(x), eps=h)
    return central, checker


def _relu_cases(rng):
    h = gradcheck.DEFAULT_EPS
    near = numpy.array([0.3, -0.5, 0.0, 1.5, -1.2, 0.9, 2.5, -3.0]) * h
    return [Case("h = 3e-4: inputs within h, within 2h and beyond 2h of the kink, and 0 itself",
                 {"x": near, "h": h}),
            Case("h = 0.01, inputs far from the kink: both are ReLU's slope",
                 {"x": numpy.array([0.5, -0.7, 1.3, -2.0]), "h": 0.01}),
            Case("h = 0.1, a grid across the kink", {"x": numpy.linspace(-0.25, 0.25, 11), "h": 0.1})]


def _unseen_relu(rng):
    h = float(10 ** rng.uniform(-4, -1))
    x = h * rng.uniform(-3, 3, size=size(rng, 3, 10))
    return [Case(f"h = {h:.1e}, inputs within 3h of the kink", {"x": x, "h": h})]


def _relu_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    x, h = numpy.asarray(inputs["x"], dtype=numpy.float64), inputs["h"]
    far = numpy.abs(x) > 2 * h
    if explains((x > 0).astype(float), got):
        return Hint(f"{output} is ReLU's slope (0 or 1) at every input, but a difference quotient whose steps "
                    "reach across the kink lies between 0 and 1", "evaluate relu at x + h and x - h, not its derivative")
    if output == "central" and explains((numpy.maximum(x + h, 0) - numpy.maximum(x, 0)) / h, got):
        return Hint("central is 1 at x = 0 and wrong for negative inputs within h of the kink: it does not "
                    "average the two sides of x", "a central difference steps to both sides: f(x + h) - f(x - h), "
                    "over 2h")
    if output == "checker" and numpy.allclose(got[far], expected[far]) and not numpy.allclose(got, expected):
        return Hint("checker is right farther than 2h from the kink and wrong within 2h of it: the two quotients "
                    "are combined with the wrong weights or the wrong steps", "(4 D(h) - D(2h)) / 3, where D(2h) "
                    "is the central difference with the step doubled")
    return ""


# -- lesson 22, question 1: how many heads show bug 4 -------------------------------------------------------

def _first_caught_heads(threshold):
    """The smallest head count H for which bug 4's symptom |ln std| = |ln(1 / sqrt(H))| exceeds ``threshold``."""
    return next(heads for heads in itertools.count(1) if abs(math.log(1 / math.sqrt(heads))) > threshold)


def _clear_thresholds(rng, count, high):
    """Thresholds whose exp(2 t) is at least 1e-6 away from a whole number (where rounding decides)."""
    found = []
    while len(found) < count:
        threshold = float(rng.uniform(0.01, high))
        if abs(math.exp(2 * threshold) - round(math.exp(2 * threshold))) > 1e-6:
            found.append(threshold)
    return found


def _heads_cases(rng):
    return [Case("the zoo's threshold 0.25, and others up to 1.5",
                 {"threshold": [0.25, 0.1, 0.5, 1.0, 1.5]}),
            Case("threshold 0: one head has no symptom at all", {"threshold": [0.0]})]


def _unseen_heads(rng):
    return [Case("random thresholds up to 2", {"threshold": _clear_thresholds(rng, 4, 2.0)})]


def _heads_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    thresholds = numpy.asarray(inputs["threshold"], dtype=float)
    behind = expected - got
    if numpy.any(behind > 1):
        worst = int(numpy.argmax(behind))
        return Hint(f"your head counts fall further behind as the threshold grows ({int(got[worst])} instead of "
                    f"{int(expected[worst])} at threshold {thresholds[worst]:.3g}): the symptom grows more slowly "
                    "with H than your answer assumes", "std = 1 / sqrt(H): |ln std| = ln(H) / 2, not ln H")
    if numpy.any(behind == 1):
        return Hint("at some of your head counts the symptom |ln std| is not above the threshold yet",
                    "the first H with ln(H) / 2 > threshold: strictly above")
    if numpy.any(behind < 0):
        return Hint("for some thresholds a smaller head count already has a symptom above them",
                    "std = 1 / sqrt(H), so |ln std| = ln(H) / 2; the first H above the threshold")
    return ""


# -- lesson 22, question 2: the width at which bug 7 hides --------------------------------------------------

def _unbiased_symptom(width):
    """zoo.not_normalised's measure for rows of ``width`` numbers normalised with the unbiased standard
    deviation, beta = 0 and eps = 0."""
    rows = numpy.random.default_rng(0).uniform(1, 5, (4, 1)) * numpy.random.default_rng(1).standard_normal((4, width))
    normalised = (rows - rows.mean(axis=-1, keepdims=True)) / rows.std(axis=-1, ddof=1, keepdims=True)
    return numpy.abs(normalised.mean(axis=-1)).max() + numpy.abs(normalised.var(axis=-1) - 1).max()


def _first_width_below(threshold):
    """The smallest width D >= 2 at which the symptom is at most ``threshold``."""
    return next(width for width in itertools.count(2) if _unbiased_symptom(width) <= threshold)


def _widths_cases(rng):
    return [Case("thresholds 0.3, 0.07, 0.013, 0.0013", {"threshold": [0.3, 0.07, 0.013, 0.0013]}),
            Case("a threshold above the symptom of D = 2", {"threshold": [0.6]})]


def _unseen_widths(rng):
    thresholds = []
    while len(thresholds) < 3:
        threshold = float(10 ** rng.uniform(-2.7, -0.4))
        if abs(1 / threshold - round(1 / threshold)) > 1e-3:
            thresholds.append(threshold)
    return [Case("random thresholds from 2e-3 to 0.4", {"threshold": thresholds})]


def _widths_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    if len(numpy.unique(got)) == 1 and len(numpy.unique(expected)) > 1:
        return Hint("the same width for every threshold: the symptom does not shrink in your answer",
                    "the unbiased standard deviation leaves each row with variance (D - 1) / D")
    if numpy.all(got >= expected) and numpy.any(got == expected + 1):
        return Hint("for some thresholds the width just before yours already has a symptom at or below them",
                    "the row variance is (D - 1) / D: the symptom is 1 / D, not 1 / (D - 1)")
    if numpy.all(got <= expected) and numpy.any(got < expected):
        return Hint("at some of your widths the symptom is still above the threshold",
                    "the first D with 1 / D <= threshold")
    return ""


# -- lesson 22, question 4: does a position read the last one? ---------------------------------------------

def _attention(q, k, v, mask):
    scores = numpy.where(mask, q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]), -numpy.inf)
    weights = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


def _future_leak(mask, q, k, v):
    """(B, T): the largest absolute change of each position's attention output when the key and the value
    of the last position both move by +1."""
    moved_k, moved_v = numpy.array(k, dtype=float), numpy.array(v, dtype=float)
    moved_k[:, -1] += 1.0
    moved_v[:, -1] += 1.0
    return numpy.abs(_attention(q, moved_k, moved_v, mask) - _attention(q, k, v, mask)).max(axis=-1)


def _leak_inputs(rng, mask, batch=2, width=4):
    length = mask.shape[0]
    return {"mask": mask, "q": normal(rng, batch, length, width), "k": normal(rng, batch, length, width),
            "v": normal(rng, batch, length, width)}


def _leak_cases(rng):
    ones = numpy.ones((5, 5), dtype=bool)
    hidden_last = ones.copy()
    hidden_last[:, -1] = False
    hidden_last[-1, -1] = True  # the last position still reads itself
    band = numpy.abs(numpy.subtract.outer(numpy.arange(6), numpy.arange(6))) <= 1
    return [Case("T=5: np.tril, the causal mask", _leak_inputs(rng, numpy.tril(ones))),
            Case("T=5: np.triu, every position reads the future", _leak_inputs(rng, numpy.triu(ones))),
            Case("T=5: the last key hidden from all but itself", _leak_inputs(rng, hidden_last)),
            Case("T=6, B=1, D=3: a band of width 1", _leak_inputs(rng, band, 1, 3))]


def _unseen_leak(rng):
    length, batch, width = size(rng, 2, 7), size(rng, 1, 3), size(rng, 2, 6)
    mask = rng.random((length, length)) < 0.6
    numpy.fill_diagonal(mask, True)  # every row reads at least itself
    return [Case(f"T={length}, B={batch}, D={width}, a random mask", _leak_inputs(rng, mask, batch, width))]


def _student_leak(mask, q, k, v, scale=True, move_key=True, fill=-1e30):
    def attend(keys, values):
        scores = q @ keys.swapaxes(-1, -2) / (math.sqrt(q.shape[-1]) if scale else 1.0)
        if fill is not None:
            scores = numpy.where(mask, scores, fill)
        weights = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
        return (weights / weights.sum(axis=-1, keepdims=True)) @ values
    moved_k, moved_v = k.copy(), v.copy()
    moved_k[:, -1] += 1.0 if move_key else 0.0
    moved_v[:, -1] += 1.0
    return numpy.abs(attend(moved_k, moved_v) - attend(k, v)).max(axis=-1)


def _leak_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return ""
    reads_last = numpy.asarray(inputs["mask"])[:, -1]
    if numpy.any(numpy.abs(got[:, ~reads_last]) > 1e-12):
        return Hint("a position whose mask row hides the last key (mask[t, -1] False) still moves: it must not "
                    "read the last position at all", "mask the scores (-inf where the mask is False) before the softmax")
    for words, options in (("as if only the last value had moved",
                            {"move_key": False}),
                           ("as if the scores were not scaled", {"scale": False})):
        if explains(_student_leak(**inputs, **options), got):
            return Hint(f"zero where the last key is hidden, but the changes elsewhere are off, {words}",
                        {"move_key": "add 1 to k[:, -1] as well as to v[:, -1]",
                         "scale": "divide the scores by sqrt(D)"}[next(iter(options))])
    return ""


# -- lesson 22, question 5: the inflated accuracy, batch by batch -------------------------------------------

def _pad_only_accuracy(lengths, batch_size):
    """The mean, over batches of ``batch_size`` consecutive sentences (the last one may be smaller), each
    padded to its longest, of ``zoo.accuracy_buggy`` for a model that predicts <pad> everywhere."""
    lengths, scores = numpy.asarray(lengths), []
    for start in range(0, len(lengths), batch_size):
        batch = lengths[start:start + batch_size]
        targets = numpy.where(numpy.arange(batch.max()) < batch[:, None], PAD_ID + 5, PAD_ID)
        logits = numpy.eye(PAD_ID + 6)[numpy.full(targets.shape, PAD_ID)]  # <pad> the most probable everywhere
        scores.append(zoo.accuracy_buggy(logits, targets))
    return float(numpy.mean(scores))


def _pad_cases(rng):
    lengths = rng.integers(1, 41, size=100)
    return [Case("100 sentences of 1 to 40 tokens, at random, batches of 8 (the last one of 4)",
                 {"lengths": lengths, "batch_size": 8}),
            Case("the same sentences sorted by length", {"lengths": numpy.sort(lengths), "batch_size": 8}),
            Case("batches of 3: lengths 5 5 5 | 1 9 2 | 7", {"lengths": numpy.array([5, 5, 5, 1, 9, 2, 7]),
                                                             "batch_size": 3})]


def _unseen_pad(rng):
    count, batch = size(rng, 5, 200), size(rng, 2, 40)
    lengths = rng.integers(1, size(rng, 2, 60) + 1, size=count)
    return [Case(f"{count} sentences, batches of {batch}", {"lengths": lengths, "batch_size": batch})]


def _pad_hint(got, expected, inputs, output):
    lengths, batch = numpy.asarray(inputs["lengths"]), inputs["batch_size"]
    if explains(numpy.zeros(()), got):
        return Hint("0 whatever the batching: that is the right accuracy of such a model, not the zoo's buggy one",
                    "accuracy_buggy counts every position, <pad> included")
    batches = [lengths[start:start + batch] for start in range(0, len(lengths), batch)]
    if explains(1 - sum(b.sum() for b in batches) / sum(len(b) * b.max() for b in batches), got):
        return Hint("a batch's weight in your mean grows with its size in positions; the question averages the "
                    "batches' accuracies", "the mean of one accuracy per batch, each batch weighing the same")
    if explains(numpy.mean([1 - b.mean() / lengths.max() for b in batches]), got):
        return Hint("your number hardly changes when the same sentences are grouped otherwise, yet the padding a "
                    "batch holds depends on the sentences in it", "pad each batch to the longest sentence of that batch")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("relu_difference_quotients", "relu_difference_quotients(x (N,), h) -> (central (N,), checker (N,))",
             "21", _relu_difference_quotients, _relu_cases, ("central", "checker"), hints=(_relu_hint,),
             unseen=_unseen_relu, question=3),
    Exercise("first_caught_heads", "first_caught_heads(threshold) -> the smallest head count H (int) whose "
             "|ln std| of bug 4's scores exceeds threshold", "22", _first_caught_heads, _heads_cases, ("heads",),
             exact=True, hints=(_heads_hint,), pointwise="threshold", unseen=_unseen_heads, question=1),
    Exercise("first_width_below", "first_width_below(threshold) -> the smallest width D (int) at which bug 7 "
             "without beta measures at most threshold", "22", _first_width_below, _widths_cases, ("width",),
             exact=True, hints=(_widths_hint,), pointwise="threshold", unseen=_unseen_widths, question=2),
    Exercise("future_leak", "future_leak(mask (T, T), q, k, v (B, T, D)) -> (B, T) largest change of each "
             "position's output when the last key and value move by 1", "22", _future_leak, _leak_cases,
             ("leak",), hints=(_leak_hint,), unseen=_unseen_leak, question=4),
    Exercise("pad_only_accuracy", "pad_only_accuracy(lengths (N,), batch_size) -> mean accuracy_buggy over the "
             "batches of a model that predicts <pad> everywhere", "22", _pad_only_accuracy, _pad_cases,
             ("accuracy",), hints=(_pad_hint,), unseen=_unseen_pad, question=5),
]


# -- the mistakes students make -----------------------------------------------------------------------------

def _relu_true_slope(x, h):
    slope = (x > 0).astype(float)
    return slope, slope.copy()


def _relu_forward_difference(x, h):
    relu = lambda z: numpy.maximum(z, 0)  # noqa: E731
    one_sided = (relu(x + h) - relu(x)) / h
    return one_sided, (4 * one_sided - (relu(x + 2 * h) - relu(x)) / (2 * h)) / 3


def _relu_weights_swapped(x, h):
    quotient = lambda step: (numpy.maximum(x + step, 0) - numpy.maximum(x - step, 0)) / (2 * step)  # noqa: E731
    return quotient(h), (4 * quotient(2 * h) - quotient(h)) / 3


def _heads_at_least(threshold):
    return next(heads for heads in itertools.count(1) if 0.5 * math.log(heads) >= threshold)


def _heads_std_one_over_h(threshold):
    return next(heads for heads in itertools.count(1) if math.log(heads) > threshold)


def _heads_floor(threshold):
    return max(1, math.floor(math.exp(2 * threshold)))


def _width_one_over_d_minus_one(threshold):
    return math.ceil(1 / threshold) + 1


def _width_floor(threshold):
    return max(2, math.floor(1 / threshold))


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("relu_difference_quotients", "ReLU's derivative instead of the quotients", _relu_true_slope, "between 0 and 1"),
    W("relu_difference_quotients", "forward differences: f(x + h) - f(x) over h", _relu_forward_difference,
      "does not average the two sides"),
    W("relu_difference_quotients", "(4 D(2h) - D(h)) / 3: the steps swapped", _relu_weights_swapped,
      "wrong within 2h"),

    W("first_caught_heads", "at least the threshold, not above it", _heads_at_least, "not above the threshold"),
    W("first_caught_heads", "std taken as 1/H", _heads_std_one_over_h, "fall further behind"),
    W("first_caught_heads", "floor(exp(2 t)): the last count below", _heads_floor, "not above the threshold"),

    W("first_width_below", "symptom taken as 1/(D - 1)", _width_one_over_d_minus_one, "just before yours"),
    W("first_width_below", "floor(1/t): one short", _width_floor, "still above the threshold"),
    W("first_width_below", "no symptom expected: always D = 2", lambda threshold: 2, "the same width"),

    W("future_leak", "the mask ignored", lambda mask, q, k, v: _student_leak(mask, q, k, v, fill=None),
      "hides the last key"),
    W("future_leak", "masked scores set to 0, not -inf", lambda mask, q, k, v: _student_leak(mask, q, k, v, fill=0.0),
      "hides the last key"),
    W("future_leak", "only the value moved", lambda mask, q, k, v: _student_leak(mask, q, k, v, move_key=False),
      "only the last value"),
    W("future_leak", "scores not scaled", lambda mask, q, k, v: _student_leak(mask, q, k, v, scale=False),
      "not scaled"),

    W("pad_only_accuracy", "the right accuracy, not the buggy one", lambda lengths, batch_size: 0.0, "whatever the"),
    W("pad_only_accuracy", "pooled over all positions", lambda lengths, batch_size: 1 - sum(
        lengths[s:s + batch_size].sum() for s in range(0, len(lengths), batch_size)) / sum(
        len(lengths[s:s + batch_size]) * lengths[s:s + batch_size].max() for s in range(0, len(lengths), batch_size)),
      "grows with its size"),
    W("pad_only_accuracy", "every batch padded to the longest sentence of all", lambda lengths, batch_size: float(
        numpy.mean([1 - lengths[s:s + batch_size].mean() / lengths.max()
                    for s in range(0, len(lengths), batch_size)])), "hardly changes when"),
]
