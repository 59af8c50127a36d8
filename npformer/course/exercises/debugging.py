"""The exercises of lessons 21-22: reading a gradient check, two bugs of the zoo fixed.

    lesson 21   failing_tensors: a gradient check's verdict, from the analytic and numeric gradients
    lesson 22   scaled_scores (bug 4 of the zoo) and token_accuracy (bug 11), fixed

The verdict of a gradient check has its own classic mistakes (a NaN gradient that passes, 0/0 at a
masked entry, the mean error instead of the worst, an absolute error, ``>`` for ``>=``), and the
hint recomputes the verdict under each wrong rule. The zoo's buggy functions are among the wrong
solutions of lesson 22, named by their hints.
"""

from __future__ import annotations

import math
import warnings

import numpy

from ...gradcheck import report as gradcheck_report
from ...tokens import PAD_ID
from .. import zoo
from ..hints import explains
from .base import Case, Exercise, WrongSolution, normal, size

# == lesson 21: reading a gradient check ==========================================================

def _entry_errors(analytic, numeric, floor=1e-12):
    analytic, numeric = numpy.asarray(analytic, dtype=numpy.float64), numpy.asarray(numeric, dtype=numpy.float64)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return numpy.abs(analytic - numeric) / numpy.maximum(numpy.abs(analytic) + numpy.abs(numeric), floor)


def _failing_tensors(analytic, numeric, tol):
    """npformer's rule (``gradcheck.relative_error``: a NaN counts as an infinite error)."""
    return sorted(name for name in analytic
                  if gradcheck_report.relative_error(analytic[name], numeric[name])[0] >= tol)


def _positions(names, listed):
    """A list of names as their positions in ``names`` (-1 for a name that is not one of them)."""
    if isinstance(listed, str) or not hasattr(listed, "__iter__"):
        raise TypeError(f"return a list of names (e.g. ['k', 'q']), not {type(listed).__name__} {listed!r}")
    return numpy.array([names.index(name) if name in names else -1 for name in listed], dtype=int)


def _as_positions(result, inputs):
    """The names returned, as positions in the sorted names, so that the grader compares them exactly."""
    return (_positions(sorted(inputs["analytic"]), result),)


def _worst(analytic, numeric):
    """The worst entry's error, a NaN counting as infinite."""
    errors = _entry_errors(analytic, numeric)
    return numpy.max(numpy.where(numpy.isnan(errors), numpy.inf, errors))


def _failing_rule(analytic, numeric, tol):
    """The right rule without npformer's functions (a wrong rule below builds on it)."""
    return sorted(name for name in analytic if _worst(analytic[name], numeric[name]) >= tol)


# The wrong rules: each one a mistake of the verdict (they are the wrong solutions, and the hint
# recomputes each one to name the student's).

def _nan_passes(analytic, numeric, tol):
    return sorted(name for name in analytic if _entry_errors(analytic[name], numeric[name]).max() >= tol)


def _nan_skipped(analytic, numeric, tol):
    return sorted(name for name in analytic if numpy.nanmax(_entry_errors(analytic[name], numeric[name])) >= tol)


def _no_floor(analytic, numeric, tol):
    return sorted(name for name in analytic if not _entry_errors(analytic[name], numeric[name], 0.0).max() < tol)


def _mean_error(analytic, numeric, tol):
    return sorted(name for name in analytic
                  if not numpy.mean(_entry_errors(analytic[name], numeric[name])) < tol)


def _strictly_above(analytic, numeric, tol):
    return sorted(name for name in analytic if _worst(analytic[name], numeric[name]) > tol)


def _dict_order(analytic, numeric, tol):
    return [name for name in analytic if name in _failing_rule(analytic, numeric, tol)]


def _absolute_error(analytic, numeric, tol):
    return sorted(name for name in analytic
                  if not numpy.abs(numpy.asarray(analytic[name]) - numpy.asarray(numeric[name])).max() < tol)


def _over_numeric(analytic, numeric, tol):
    def worst(a, n):
        a, n = numpy.asarray(a, dtype=numpy.float64), numpy.asarray(n, dtype=numpy.float64)
        with numpy.errstate(divide="ignore", invalid="ignore"):
            errors = numpy.abs(a - n) / numpy.maximum(numpy.abs(n), 1e-12)
        return numpy.max(numpy.where(numpy.isnan(errors), numpy.inf, errors))
    return sorted(name for name in analytic if worst(analytic[name], numeric[name]) >= tol)


def _whole_tensor(analytic, numeric, tol):
    def error(a, n):
        a, n = numpy.asarray(a, dtype=numpy.float64), numpy.asarray(n, dtype=numpy.float64)
        return numpy.abs(a - n).max() / max(numpy.abs(a).max() + numpy.abs(n).max(), 1e-12)
    return sorted(name for name in analytic if not error(analytic[name], numeric[name]) < tol)


_NAN_LEFT_OUT = ("a tensor whose analytic gradient holds a NaN is left out: max() of an array with a NaN is NaN "
                 "(and NaN >= tol is False), nanmax skips it; count a NaN as an infinite error (a NaN gradient "
                 "never passes)")
_WRONG_RULES = [
    (_nan_passes, _NAN_LEFT_OUT),
    (_nan_skipped, _NAN_LEFT_OUT),
    (_no_floor, "a right tensor is listed: where both gradients are exactly 0 (a padded position, an unused "
                "row) the error is 0/0 = NaN; the denominator max(|a| + |n|, 1e-12) makes it 0"),
    (_strictly_above, "a tensor whose worst error is exactly tol is left out: a tensor passes only below tol, "
                      "so it fails when its error is >= tol"),
    (_over_numeric, "a relative error over |n| alone: divide by |a| + |n|, which is symmetric and never "
                    "more than 1"),
    (_dict_order, "the right names in the dicts' order: return them sorted (sorted(names))"),
    (_mean_error, "the mean error of a tensor, not its worst entry: a tensor wrong at one entry fails (the "
                  "verdict is the worst entry's error)"),
    (_absolute_error, "an absolute error |a - n|: it lists right tensors of large entries and misses wrong "
                      "ones of small entries; divide by |a| + |n| (a relative error)"),
    (_whole_tensor, "one relative error for the whole tensor (its largest |a - n| over its largest entries): "
                    "a small entry wrong by a factor hides behind the large ones; take the error entry by "
                    "entry, then the worst"),
]


def _failing_tensors_hint(got, expected, inputs, output):
    names = sorted(inputs["analytic"])
    analytic, numeric, tol = inputs["analytic"], inputs["numeric"], inputs["tol"]
    got_positions = [int(position) for position in numpy.ravel(got)]
    for rule, words in _WRONG_RULES:
        with numpy.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # nanmax of an all-NaN tensor
            if list(_positions(names, rule(analytic, numeric, tol))) == got_positions:
                return words
    listed = [names[position] if 0 <= position < len(names) else None for position in got_positions]
    if None in listed:
        return f"a name that is not a key of the dicts (the names are {names})"
    right = [names[int(position)] for position in numpy.ravel(expected)]
    extra, missing = sorted(set(listed) - set(right)), sorted(set(right) - set(listed))
    if len(set(listed)) < len(listed):
        return "a name listed twice"
    if not extra and not missing:
        return "the right names in the wrong order: return them sorted (sorted(names))"
    parts = ([f"lists {', '.join(extra)}, which pass(es)"] if extra else []) + (
        [f"leaves out {', '.join(missing)}, which fail(s)"] if missing else [])
    return " and ".join(parts)


def _right(rng, numeric, tol):
    """``numeric`` with relative errors far below ``tol``: a right gradient, as a check sees it."""
    return numeric * (1 + 1e-3 * tol * rng.uniform(-1, 1, numeric.shape))


def _failing_cases(rng):
    tol = 1e-6
    # 1. attention: dK without its 1/sqrt(3), one entry of dQ off by 2e-5 of itself, and one small entry of
    #    dV (1e-4 beside entries of about 1e3) twice too large
    n_q, n_k, n_v = normal(rng, 2, 2, 3, 3), normal(rng, 2, 2, 3, 3), 1e3 * normal(rng, 2, 2, 3, 3)
    a_q = _right(rng, n_q, tol)
    worst = numpy.unravel_index(numpy.argmax(numpy.abs(n_q)), n_q.shape)
    a_q[worst] = n_q[worst] * (1 + 2e-5)
    n_v[1, 0, 2, 1] = 1e-4
    a_v = _right(rng, n_v, tol)
    a_v[1, 0, 2, 1] = 2e-4
    attention = ({"q": a_q, "k": math.sqrt(3) * n_k, "v": a_v}, {"q": n_q, "k": n_k, "v": n_v})
    # 2. cross-entropy's logits with a fully padded row (both exactly 0), W of size 1e5 right, b of size 1e-8 wrong
    n_logits, n_W, n_b = normal(rng, 2, 3, 4), 1e5 * normal(rng, 3, 4), 1e-8 * normal(rng, 4)
    n_logits[1] = 0.0
    scales = ({"logits": _right(rng, n_logits, tol), "W": _right(rng, n_W, tol), "b": 2 * n_b},
              {"logits": n_logits, "W": n_W, "b": n_b})
    # 3. a NaN in dx (a fully masked row), dgamma's worst error exactly tol = 0.25, dbeta's 0.2
    n_dx = normal(rng, 2, 3)
    a_dx = n_dx.copy()
    a_dx[1, 2] = numpy.nan
    edges = ({"dx": a_dx, "dgamma": numpy.array([1.25, 1.0, -2.0]), "dbeta": numpy.array([0.075, 3.0])},
             {"dx": n_dx, "dgamma": numpy.array([0.75, 1.0, -2.0]), "dbeta": numpy.array([0.05, 3.0])})
    # 4. a model's tensors, all right: an embedding with unused rows (both exactly 0), a layer of size 1e4
    n_embed, n_layer, n_head = normal(rng, 5, 3), 1e4 * normal(rng, 3, 3), normal(rng, 3, 2)
    n_embed[[0, 3]] = 0.0
    model = ({name: _right(rng, n, tol) for name, n in (("src_embed", n_embed), ("encoder.W1", n_layer),
                                                          ("decoder.Wo", n_head))},
             {"src_embed": n_embed, "encoder.W1": n_layer, "decoder.Wo": n_head})
    return [Case("q, k, v, tol 1e-6: dk without its 1/sqrt(3), one entry of dq 2e-5 off, a small entry of dv "
                 "doubled", {"analytic": attention[0], "numeric": attention[1], "tol": tol}),
            Case("logits, W, b, tol 1e-6: a fully padded row (both 0), W of size 1e5, b of size 1e-8 doubled",
                 {"analytic": scales[0], "numeric": scales[1], "tol": tol}),
            Case("dx, dgamma, dbeta, tol 0.25: a NaN in dx, dgamma's error exactly 0.25",
                 {"analytic": edges[0], "numeric": edges[1], "tol": 0.25}),
            Case("a model's tensors, tol 1e-6, all right: unused embedding rows, a layer of size 1e4",
                 {"analytic": model[0], "numeric": model[1], "tol": tol})]


_TENSOR_NAMES = ["x", "W", "b", "gamma", "beta", "q", "k", "v", "Wq", "Wo", "src_embed", "tgt_embed", "pos",
                 "encoder.W1", "decoder.W2"]


def _unseen_failing(rng):
    tol = float(10.0 ** -int(rng.integers(2, 7)))
    names = [str(name) for name in rng.choice(_TENSOR_NAMES, size=size(rng, 1, 5), replace=False)]
    analytic, numeric, kinds = {}, {}, []
    for name in names:
        shape = tuple(size(rng, 1, 4) for _ in range(size(rng, 1, 3)))
        n = 10.0 ** rng.uniform(-3, 3) * normal(rng, *shape)
        kind = ["right", "right with zeros", "a factor", "the sign", "one entry", "a NaN"][int(rng.integers(6))]
        if kind == "right with zeros":
            n.reshape(-1)[: max(1, n.size // 2)] = 0.0
        a = _right(rng, n, tol)
        entry = numpy.unravel_index(int(rng.integers(n.size)), shape)
        if kind == "a factor":
            a = n * float(rng.choice([2.0, 0.5, math.sqrt(n.shape[-1] + 1)]))
        elif kind == "the sign":
            a = -n
        elif kind == "one entry":
            a[entry] = n[entry] * (1 + 100 * tol * float(rng.choice([-1, 1])))
        elif kind == "a NaN":
            a[entry] = numpy.nan
        analytic[name], numeric[name] = a, n
        kinds.append(f"{name} {kind}")
    return [Case(f"tol {tol:g}: {', '.join(kinds)}", {"analytic": analytic, "numeric": numeric, "tol": tol})]


def _lazy_failing_tensors(analytic, numeric, tol):
    from ...gradcheck import relative_error
    return sorted(name for name in analytic if relative_error(analytic[name], numeric[name])[0] >= tol)


# == lesson 22: bugs of the zoo, fixed =============================================================

def _scores_cases(rng):
    def make(batch, heads, t_query, t_key, head_dim):
        return {"q": normal(rng, batch, heads, t_query, head_dim), "k": normal(rng, batch, heads, t_key, head_dim)}
    return [Case("B=2, H=4, Tq=3, Tk=5, Dh=2: four heads, cross-attention lengths", make(2, 4, 3, 5, 2)),
            Case("B=1, H=1, Tq=4, Tk=4, Dh=3: one head (d_model = d_head)", make(1, 1, 4, 4, 3)),
            Case("B=2, H=2, Tq=3, Tk=3, Dh=5: self-attention", make(2, 2, 3, 3, 5))]


def _unseen_scores(rng):
    batch, heads, t_query, t_key, head_dim = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 1, 5), size(rng, 1, 5),
                                              size(rng, 1, 5))
    return [Case(f"B={batch}, H={heads}, Tq={t_query}, Tk={t_key}, Dh={head_dim}",
                 {"q": normal(rng, batch, heads, t_query, head_dim), "k": normal(rng, batch, heads, t_key, head_dim)})]


def _scores_hint(got, expected, inputs, output):
    q, k = inputs["q"], inputs["k"]
    heads, head_dim = q.shape[1], q.shape[-1]
    raw = q @ k.swapaxes(-1, -2)
    if heads > 1 and explains(raw / math.sqrt(heads * head_dim), got):
        return (f"divided by sqrt(d_model) = sqrt({heads} x {head_dim}), the model's width (bug 4): the dot "
                f"products are over one head's {head_dim} numbers, so divide by sqrt(d_head) = sqrt({head_dim})")
    if head_dim > 1 and explains(raw, got):
        return "no scale: divide the dot products by sqrt(d_head), so that they keep a variance near 1"
    if head_dim > 1 and explains(raw / head_dim, got):
        return "divided by d_head: divide by its square root, the standard deviation of a dot product of d_head terms"
    if q.shape[-2] == k.shape[-2] and explains(k @ q.swapaxes(-1, -2) / math.sqrt(head_dim), got):
        return "K Q^T (bug 3): row i of the scores must hold query i against every key, Q K^T"
    return ""


def _accuracy_cases(rng):
    targets = zoo.padded_targets()
    rows, columns = numpy.nonzero(targets != PAD_ID)
    predicted = numpy.full(targets.shape, PAD_ID)
    predicted[rows[::2], columns[::2]] = targets[rows[::2], columns[::2]]   # every other real token right
    padded = rng.integers(4, 9, size=(3, 4))
    padded[0] = PAD_ID          # a row of padding only
    padded[2, 1:] = PAD_ID      # one real token
    return [Case("the lesson's batch, half of it <pad>: right on every other real token",
                 {"logits": 2.0 * numpy.eye(12)[predicted] + 0.1 * normal(rng, 4, 10, 12), "targets": targets}),
            Case("the same batch: <pad> predicted everywhere", {"logits": numpy.eye(12)[numpy.zeros((4, 10), int)],
                                                                 "targets": targets}),
            Case("B=1, T=1, no padding: right", {"logits": numpy.array([[[0.1, 0.2, 0.0, 0.0, 2.0, 0.3]]]),
                                                 "targets": numpy.array([[4]])}),
            Case("B=3, T=4, V=9: a row of padding only, a row of one token", {"logits": normal(rng, 3, 4, 9),
                                                                              "targets": padded})]


def _unseen_accuracy(rng):
    batch, length, vocab = size(rng, 1, 4), size(rng, 1, 8), size(rng, 5, 12)
    lengths = rng.integers(0, length + 1, size=batch)
    lengths[int(rng.integers(batch))] = max(1, lengths.max())    # at least one real token in the batch
    targets = rng.integers(1, vocab, size=(batch, length))
    targets[numpy.arange(length)[None, :] >= lengths[:, None]] = PAD_ID
    logits = normal(rng, batch, length, vocab)
    logits[..., PAD_ID] += 1.5    # a model that often predicts <pad>
    right = rng.random((batch, length)) < 0.5
    logits[right, targets[right]] += 4.0   # and often the right token
    return [Case(f"B={batch}, T={length}, V={vocab}, lengths {lengths.tolist()}",
                 {"logits": logits, "targets": targets})]


def _accuracy_hint(got, expected, inputs, output):
    logits, targets = inputs["logits"], inputs["targets"]
    correct = logits.argmax(axis=-1) == targets
    real = targets != PAD_ID
    if explains(correct.mean(), got):
        return ("the mean over every position, <pad> included (bug 11): a model that predicts <pad> is right "
                "there for free; average over the real tokens only (targets != <pad>)")
    if explains((correct & real).sum() / targets.size, got):
        return "the right real tokens divided by every position: divide by the number of real tokens"
    with numpy.errstate(invalid="ignore", divide="ignore"):
        per_row = (correct & real).sum(axis=-1) / real.sum(axis=-1)
    if real.any() and explains(numpy.nanmean(per_row), got):
        return ("a mean of the sentences' accuracies: a sentence of 2 tokens then weighs as much as one of 10; "
                "count every real token once (all right tokens / all real tokens)")
    predicted_real = logits.argmax(axis=-1) != PAD_ID
    if predicted_real.any() and explains(correct[predicted_real].mean(), got):
        return ("the positions where the model predicts a real token: count the positions whose target is a "
                "real token (targets != <pad>), whatever the model predicts there")
    return ""


# == the table ======================================================================================
EXERCISES: list[Exercise] = [
    Exercise("failing_tensors", "failing_tensors(analytic, numeric, tol) -> sorted list of the names whose worst "
             "relative error is >= tol", "21", _failing_tensors, _failing_cases, ("failing",), exact=True,
             hints=(_failing_tensors_hint,), convert=_as_positions, unseen=_unseen_failing),
    Exercise("scaled_scores", "scaled_scores(q, k) -> (B, H, Tq, Tk) scores Q K^T / sqrt(d_head)", "22",
             zoo.scaled_scores_fixed, _scores_cases, ("scores",), hints=(_scores_hint,), unseen=_unseen_scores),
    Exercise("token_accuracy", "token_accuracy(logits, targets) -> share of the real (non-<pad>) targets "
             "predicted by the argmax", "22", zoo.accuracy_fixed, _accuracy_cases, ("accuracy",),
             hints=(_accuracy_hint,), unseen=_unseen_accuracy),
]


# == wrong solutions ==================================================================================
def _accuracy_per_sentence(logits, targets):
    real = targets != PAD_ID
    correct = (logits.argmax(axis=-1) == targets) & real
    rows = real.any(axis=-1)
    return float((correct.sum(axis=-1)[rows] / real.sum(axis=-1)[rows]).mean())


def _accuracy_by_prediction(logits, targets):
    predicted = logits.argmax(axis=-1)
    kept = predicted != PAD_ID              # the positions where the model predicts a real token
    return float((predicted == targets)[kept].mean()) if kept.any() else 0.0


W = WrongSolution
WRONG_SOLUTIONS: list[WrongSolution] = [
    W("failing_tensors", "a NaN gradient passes (max of a NaN is NaN)", _nan_passes, "NaN"),
    W("failing_tensors", "nanmax: the NaN skipped", _nan_skipped, "NaN"),
    W("failing_tensors", "no floor: 0/0 at entries where both are 0", _no_floor, "0/0"),
    W("failing_tensors", "the mean error, not the worst", _mean_error, "worst entry"),
    W("failing_tensors", "> tol instead of >= tol", _strictly_above, "exactly tol"),
    W("failing_tensors", "the names in the dicts' order, not sorted", _dict_order, "sorted"),
    W("failing_tensors", "an absolute error", _absolute_error, "absolute"),
    W("failing_tensors", "relative to |n| only", _over_numeric, "|n| alone"),
    W("failing_tensors", "one relative error for the whole tensor", _whole_tensor, "entry by entry"),
    W("failing_tensors", "npformer's relative_error", _lazy_failing_tensors, "npformer's own"),

    W("scaled_scores", "the zoo's bug 4: sqrt(d_model)", zoo.scaled_scores_buggy, "sqrt(d_model)"),
    W("scaled_scores", "no scale", lambda q, k: q @ k.swapaxes(-1, -2), "no scale"),
    W("scaled_scores", "divided by d_head, not its square root", lambda q, k: q @ k.swapaxes(-1, -2) / q.shape[-1],
      "square root"),
    W("scaled_scores", "the zoo's bug 3: K Q^T", lambda q, k: k @ q.swapaxes(-1, -2) / math.sqrt(q.shape[-1]),
      "K Q^T"),
    W("scaled_scores", "a pass-through to the zoo's fixed version", lambda q, k: zoo.scaled_scores_fixed(q, k),
      "npformer's own"),
    W("token_accuracy", "the zoo's bug 11: <pad> counted", zoo.accuracy_buggy, "<pad> included"),
    W("token_accuracy", "right real tokens over every position",
      lambda logits, targets: float(((logits.argmax(-1) == targets) & (targets != PAD_ID)).sum() / targets.size),
      "number of real tokens"),
    W("token_accuracy", "a mean of the sentences' accuracies", _accuracy_per_sentence, "sentences' accuracies"),
    W("token_accuracy", "real tokens judged by the prediction, not the target", _accuracy_by_prediction,
      "whose target"),
    W("token_accuracy", "a pass-through to the zoo's fixed version", lambda logits, targets: zoo.accuracy_fixed(
        logits, targets), "npformer's own"),
]
