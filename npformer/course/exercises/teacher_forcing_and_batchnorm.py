"""The exercises of lessons 23-24: teacher forcing's shifted decoder input, batch norm with the padding left out.

    shift_right         lesson 23: the decoder's input and targets from the target rows
    batchnorm_forward   lesson 24: batch norm whose statistics leave the padded rows out
    batchnorm_backward  lesson 24: its backward pass (padded rows get no gradient)

The shift's reference is npformer's own (``data.pad_batch``'s ``tgt_in`` and ``tgt_out``); batch
norm's is written here, its statistics taken over the kept rows only.
"""

from __future__ import annotations

import numpy

from ...data import batching
from ...tokens import BOS_ID, EOS_ID, PAD_ID
from ..hints import explains  # a wrong formula that reproduces the output
from .base import Case, Exercise, WrongSolution, backward_cases, normal, size, with_dout

# -- lesson 23: the shifted decoder input ------------------------------------------------------------

def _shift_right(tgt_ids):
    """npformer's shift: ``pad_batch`` of the rows with ``<bos>`` in front (its tgt_in and tgt_out)."""
    rows = [[BOS_ID, *row] for row in numpy.asarray(tgt_ids).tolist()]
    batch = batching.pad_batch([([PAD_ID], row) for row in rows])
    return batch.tgt_in, batch.tgt_out


def _target_rows(rows, length):
    """Word ids per row (None: a row of padding only) -> ``(B, T)`` targets ``y1 .. yn <eos> <pad> ...``."""
    ids = numpy.full((len(rows), length), PAD_ID, dtype=numpy.int64)
    for index, row in enumerate(rows):
        if row is not None:
            ids[index, : len(row) + 1] = [*row, EOS_ID]
    return ids


def _shift_cases(rng):
    return [Case("B=3, T=5: rows of 4, 2 and 1 words (a full row, padded tails)",
                 {"tgt_ids": _target_rows([[7, 5, 9, 4], [6, 11], [8]], 5)}),
            Case("B=1, T=1: a target of <eos> only", {"tgt_ids": _target_rows([[]], 1)}),
            Case("B=2, T=3: repeated ids, and a row of padding only",
                 {"tgt_ids": _target_rows([[5, 5], None], 3)})]


def _unseen_shift(rng):
    batch, length = size(rng, 1, 4), size(rng, 1, 8)
    rows = [None if rng.random() < 0.15 else [int(i) for i in rng.integers(4, 40, size=size(rng, 0, length - 1))]
            for _ in range(batch)]
    return [Case(f"B={batch}, T={length}, random lengths", {"tgt_ids": _target_rows(rows, length)})]


def _shift_hint(got, expected, inputs, output):
    tgt_ids = numpy.asarray(inputs["tgt_ids"])
    batch, length = tgt_ids.shape
    if output == "tgt_out":
        if got.shape == (batch, length - 1) and numpy.array_equal(got, tgt_ids[:, 1:]):
            return ("the targets lost their first column, y1: slicing [:, 1:] is for rows that begin with <bos>; "
                    "these rows are already the targets y1 .. yn <eos>, as they are")
        return ""
    if output != "tgt_in":
        return ""
    if got.shape == (batch, length - 1) and numpy.array_equal(got, tgt_ids[:, :-1]):
        return ("tgt_ids[:, :-1]: that is pad_batch's slicing of rows that begin with <bos>, but these rows have "
                "no <bos> yet: put <bos> in front, then drop the last column")
    if got.shape != expected.shape:
        return ""
    if numpy.array_equal(got, tgt_ids):
        return ("the decoder input is the targets themselves: nothing is shifted, so position t is given the very "
                "token it must predict and learns to copy it (the lesson's model that was not shifted)")
    left = numpy.concatenate([tgt_ids[:, 1:], numpy.full((batch, 1), PAD_ID)], axis=1)
    if numpy.array_equal(got, left):
        return ("shifted the wrong way: position t is given y_{t+2}, a token after the one it must predict; "
                "the input is <bos> followed by the targets, shifted one place to the right")
    if numpy.array_equal(got[:, 1:], expected[:, 1:]) and not (got[:, 0] == BOS_ID).all():
        return ("right from position 1 on, but the first column must be <bos> (id 1) in every row "
                "(numpy.roll wraps the last column round to the front)")
    return ""


# -- lesson 24: batch norm with the padding left out ---------------------------------------------------

BATCHNORM_EPS = 1e-5


def batchnorm_parts(x, keep, eps=BATCHNORM_EPS):
    """The kept rows' mean and 1/std per feature, and x_hat at every position (padded ones too)."""
    keep = numpy.asarray(keep, dtype=bool)
    rows = x[keep]  # (N, D): the kept positions only
    rstd = 1.0 / numpy.sqrt(rows.var(axis=0) + eps)
    return keep, rstd, (x - rows.mean(axis=0)) * rstd


def _batchnorm_forward(x, gamma, beta, keep):
    keep, _, x_hat = batchnorm_parts(x, keep)
    return numpy.where(keep[..., None], gamma * x_hat + beta, 0.0)


def _batchnorm_backward(x, gamma, beta, keep, dout):
    keep, rstd, x_hat = batchnorm_parts(x, keep)
    kept = keep[..., None]
    d_model, count = x.shape[-1], keep.sum()
    g = dout * gamma * kept
    g_mean = g.reshape(-1, d_model).sum(axis=0) / count
    gx_mean = (g * x_hat).reshape(-1, d_model).sum(axis=0) / count
    dx = kept * rstd * (g - g_mean - x_hat * gx_mean)
    dgamma = (dout * x_hat * kept).reshape(-1, d_model).sum(axis=0)
    dbeta = (dout * kept).reshape(-1, d_model).sum(axis=0)
    return dx, dgamma, dbeta


def _batchnorm_inputs(r, keep, d_model, padded_value=None):
    keep = numpy.asarray(keep, dtype=bool)
    x = 1 + 2 * normal(r, *keep.shape, d_model)
    if padded_value is not None:
        x[~keep] = padded_value + normal(r, int((~keep).sum()), d_model)
    return {"x": x, "gamma": 1 + 0.5 * normal(r, d_model), "beta": normal(r, d_model), "keep": keep}


def _batchnorm_shapes():
    return [
        ("B=2, T=3, D=4: a padded tail", lambda r: _batchnorm_inputs(r, [[1, 1, 1], [1, 0, 0]], 4)),
        ("B=3, T=2, D=3: a sentence of padding only", lambda r: _batchnorm_inputs(r, [[1, 1], [0, 0], [1, 1]], 3)),
        ("B=1, T=4, D=1: nothing padded, one feature", lambda r: _batchnorm_inputs(r, [[1, 1, 1, 1]], 1)),
        ("B=2, T=3, D=2: padded rows hold values near 50", lambda r: _batchnorm_inputs(r, [[1, 1, 0], [1, 1, 0]], 2,
                                                                                        padded_value=50.0)),
    ]


def _batchnorm_cases(rng):
    return [Case(label, make(rng)) for label, make in _batchnorm_shapes()]


def batchnorm_backward_cases(rng):
    return backward_cases(rng, _batchnorm_forward, _batchnorm_shapes())


def _unseen_batchnorm_inputs(rng):
    batch, length, d_model = size(rng, 2, 3), size(rng, 2, 5), size(rng, 1, 5)
    keep = rng.random((batch, length)) < 0.7
    keep.reshape(-1)[rng.permutation(batch * length)[:3]] = True  # at least three kept positions
    label = f"B={batch}, T={length}, D={d_model}, {int((~keep).sum())} padded positions"
    return label, _batchnorm_inputs(rng, keep, d_model, padded_value=float(rng.uniform(-20, 20)))


def _unseen_batchnorm(rng):
    label, inputs = _unseen_batchnorm_inputs(rng)
    return [Case(label, inputs)]


def unseen_batchnorm_backward(rng):
    label, inputs = _unseen_batchnorm_inputs(rng)
    return [Case(label, with_dout(rng, inputs, _batchnorm_forward))]


def _stats(x, rows, ddof=0, eps=BATCHNORM_EPS):
    """x normalised with the mean and variance of ``rows`` (axis 0)."""
    return (x - rows.mean(axis=0)) / numpy.sqrt(rows.var(axis=0, ddof=ddof) + eps)


def _batchnorm_forward_hint(got, expected, inputs, output):
    x, gamma, beta = inputs["x"], inputs["gamma"], inputs["beta"]
    keep = numpy.asarray(inputs["keep"], dtype=bool)

    def zeroed(values):
        return numpy.where(keep[..., None], values, 0.0)

    counted = gamma * _stats(x, x.reshape(-1, x.shape[-1])) + beta
    layer_norm = gamma * (x - x.mean(axis=-1, keepdims=True)) / numpy.sqrt(
        x.var(axis=-1, keepdims=True) + BATCHNORM_EPS) + beta
    counted_words = ("the statistics include the padded rows: take the mean and variance over the kept rows only "
                     "(x[keep])")
    layer_words = ("a mean and variance per position, over its D features: that is layer norm; batch norm takes "
                   "one per feature, over the kept rows")
    candidates = [(zeroed(counted), counted_words), (counted, counted_words), (zeroed(layer_norm), layer_words),
                  (layer_norm, layer_words),
                  (gamma * _stats(x, x[keep]) + beta, "the padded rows' outputs must be 0: normalise, then zero the "
                                                      "rows that keep leaves out")]
    if keep.sum() > 1:
        unbiased = gamma * _stats(x, x[keep], ddof=1) + beta
        unbiased_words = ("the unbiased variance (ddof=1): batch norm normalises with the mean of the squared "
                          "deviations, dividing by N")
        candidates += [(zeroed(unbiased), unbiased_words), (unbiased, unbiased_words)]
    return next((words for candidate, words in candidates if explains(candidate, got)), "")


def _batchnorm_dx_hint(got, expected, keep, rstd, x_hat, g):
    """dx: which cases pass, and the invariants a right dx keeps, per feature over the kept positions."""
    kept, d_model = keep[..., None], got.shape[-1]
    if (~keep).any() and numpy.abs(got[~keep]).max(initial=0.0) > 0 and explains(expected[keep], got[keep]):
        return ("right at the kept positions, but dx is not 0 at the padded ones: their outputs are 0 whatever x "
                "holds there")
    every = keep.size
    as_if_all_kept = kept * rstd * (g - g.reshape(-1, d_model).sum(0) / every
                                    - x_hat * (g * x_hat).reshape(-1, d_model).sum(0) / every)
    if (~keep).any() and explains(as_if_all_kept, got):
        return ("dx would be right if every one of the B*T positions were kept (a case without padding passes): "
                "the padded positions are counted where only the kept ones should be")
    scale = numpy.abs(expected).max(initial=0.0) + 1e-300
    column_sums = numpy.abs((got * kept).reshape(-1, d_model).sum(0)).max()
    if keep.sum() > 1 and column_sums > 1e-6 * scale * keep.sum():
        return ("the columns of dx do not sum to zero over the kept positions, but a right dx's do (adding the same "
                "number to one feature at every kept position changes no output): check the path through the "
                "mean (the step batchnorm_dmean)")
    along_x_hat = numpy.abs((got * x_hat * kept).reshape(-1, d_model).sum(0)).max()
    allowed = numpy.abs((expected * x_hat * kept).reshape(-1, d_model).sum(0)).max() + 1e-6 * scale * keep.sum()
    if keep.sum() > 2 and along_x_hat > 10 * allowed:
        return ("each column of dx sums to zero over the kept positions, but is not orthogonal to x_hat's as a right "
                "dx's is (rescaling one feature about its mean changes no output, up to eps): check the path "
                "through the variance (the step batchnorm_dvar)")
    return ""


def _batchnorm_backward_hint(got, expected, inputs, output):
    x, gamma, dout = inputs["x"], inputs["gamma"], inputs["dout"]
    keep = numpy.asarray(inputs["keep"], dtype=bool)
    kept = keep[..., None]
    d_model = x.shape[-1]
    _, rstd, x_hat = batchnorm_parts(x, keep)
    if got.shape != expected.shape:
        return ""
    if output == "dx":
        return _batchnorm_dx_hint(got, expected, keep, rstd, x_hat, gamma * dout * kept)
    if output in ("dgamma", "dbeta"):
        every = (dout * x_hat if output == "dgamma" else dout).reshape(-1, d_model).sum(axis=0)
        if (~keep).any() and explains(every, got):
            return f"{output} sums over the padded rows too: only the kept rows have outputs that depend on it"
        count = int(keep.sum())
        if count > 1 and explains(expected / count, got):
            return f"{output} = (right answer) / {count}: the kept rows share it, so their gradients add up (a sum)"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("shift_right", "shift_right(tgt_ids) -> (tgt_in, tgt_out), each (B, T): <bos> in front, the last "
             "column dropped", "23", _shift_right, _shift_cases, ("tgt_in", "tgt_out"), exact=True,
             hints=(_shift_hint,), unseen=_unseen_shift),
    Exercise("batchnorm_forward", "batchnorm_forward(x, gamma, beta, keep) -> out (B, T, D), the statistics of "
             "the kept rows, padded rows 0", "24", _batchnorm_forward, _batchnorm_cases, ("out",),
             hints=(_batchnorm_forward_hint,), unseen=_unseen_batchnorm),
    Exercise("batchnorm_backward", "batchnorm_backward(x, gamma, beta, keep, dout) -> (dx, dgamma, dbeta)", "24",
             _batchnorm_backward, batchnorm_backward_cases, ("dx", "dgamma", "dbeta"), _batchnorm_forward,
             ("x", "gamma", "beta"), hints=(_batchnorm_backward_hint,), unseen=unseen_batchnorm_backward, points=2),
]


# -- realistic wrong solutions -------------------------------------------------------------------------------

def _not_shifted(tgt_ids):
    return tgt_ids.copy(), tgt_ids


def _sliced_like_pad_batch(tgt_ids):
    return tgt_ids[:, :-1], tgt_ids[:, 1:]


def _rolled(tgt_ids):
    return numpy.roll(tgt_ids, 1, axis=1), tgt_ids


def _shifted_left(tgt_ids):
    pad = numpy.zeros((tgt_ids.shape[0], 1), dtype=tgt_ids.dtype)
    return numpy.concatenate([tgt_ids[:, 1:], pad], axis=1), tgt_ids


def _bn_padding_counted(x, gamma, beta, keep):
    rows = x.reshape(-1, x.shape[-1])
    out = gamma * (x - rows.mean(0)) / numpy.sqrt(rows.var(0) + 1e-5) + beta
    return out * keep[..., None]


def _bn_over_features(x, gamma, beta, keep):
    out = gamma * (x - x.mean(-1, keepdims=True)) / numpy.sqrt(x.var(-1, keepdims=True) + 1e-5) + beta
    return out * keep[..., None]


def _bn_padded_rows_kept(x, gamma, beta, keep):
    rows = x[keep]
    return gamma * (x - rows.mean(0)) / numpy.sqrt(rows.var(0) + 1e-5) + beta


def _bn_unbiased(x, gamma, beta, keep):
    rows = x[keep]
    out = gamma * (x - rows.mean(0)) / numpy.sqrt(rows.var(0, ddof=1) + 1e-5) + beta
    return out * keep[..., None]


def _bn_backward_pieces(x, gamma, keep, dout):
    rows = x[keep]
    rstd = 1 / numpy.sqrt(rows.var(0) + 1e-5)
    x_hat = (x - rows.mean(0)) * rstd
    kept = keep[..., None]
    return rstd, x_hat, kept, dout * gamma * kept


def _bn_backward_constant_statistics(x, gamma, beta, keep, dout):
    rstd, x_hat, kept, g = _bn_backward_pieces(x, gamma, keep, dout)
    d = x.shape[-1]
    return rstd * g, (dout * x_hat * kept).reshape(-1, d).sum(0), (dout * kept).reshape(-1, d).sum(0)


def _bn_backward_all_rows(x, gamma, beta, keep, dout):
    rstd, x_hat, kept, g = _bn_backward_pieces(x, gamma, keep, dout)
    d = x.shape[-1]
    g_rows, gx_rows = g.reshape(-1, d), (g * x_hat).reshape(-1, d)
    dx = kept * rstd * (g - g_rows.mean(0) - x_hat * gx_rows.mean(0))  # mean over all B*T rows
    return dx, (dout * x_hat * kept).reshape(-1, d).sum(0), (dout * kept).reshape(-1, d).sum(0)


def _bn_backward_padded_gradient(x, gamma, beta, keep, dout):
    rstd, x_hat, kept, g = _bn_backward_pieces(x, gamma, keep, dout)
    d, count = x.shape[-1], keep.sum()
    dx = rstd * (dout * gamma - (g.reshape(-1, d).sum(0) + x_hat * (g * x_hat).reshape(-1, d).sum(0)) / count)
    return dx * kept + rstd * dout * gamma * ~kept, (dout * x_hat * kept).reshape(-1, d).sum(0), \
        (dout * kept).reshape(-1, d).sum(0)


def _bn_backward_params_over_padding(x, gamma, beta, keep, dout):
    rstd, x_hat, kept, g = _bn_backward_pieces(x, gamma, keep, dout)
    d, count = x.shape[-1], keep.sum()
    dx = kept * rstd * (g - (g.reshape(-1, d).sum(0) + x_hat * (g * x_hat).reshape(-1, d).sum(0)) / count)
    return dx, (dout * x_hat).reshape(-1, d).sum(0), dout.reshape(-1, d).sum(0)


def _bn_backward_variance_doubled(x, gamma, beta, keep, dout):
    rstd, x_hat, kept, g = _bn_backward_pieces(x, gamma, keep, dout)
    d, count = x.shape[-1], keep.sum()
    dx = kept * rstd * (g - (g.reshape(-1, d).sum(0) + 2 * x_hat * (g * x_hat).reshape(-1, d).sum(0)) / count)
    return dx, (dout * x_hat * kept).reshape(-1, d).sum(0), (dout * kept).reshape(-1, d).sum(0)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("shift_right", "not shifted: the targets as the input", _not_shifted, "nothing is shifted"),
    WrongSolution("shift_right", "sliced like pad_batch, without a <bos> to drop", _sliced_like_pad_batch,
                  "no <bos> yet"),
    WrongSolution("shift_right", "numpy.roll: the last column wraps round to the front", _rolled,
                  "must be <bos>"),
    WrongSolution("shift_right", "shifted to the left", _shifted_left, "shifted the wrong way"),
    WrongSolution("batchnorm_forward", "statistics over every row, padding counted", _bn_padding_counted,
                  "include the padded rows"),
    WrongSolution("batchnorm_forward", "statistics over the features: layer norm", _bn_over_features,
                  "that is layer norm"),
    WrongSolution("batchnorm_forward", "padded rows normalised, not zeroed", _bn_padded_rows_kept,
                  "outputs must be 0"),
    WrongSolution("batchnorm_forward", "unbiased variance", _bn_unbiased, "unbiased variance"),
    WrongSolution("batchnorm_backward", "the statistics treated as constants", _bn_backward_constant_statistics,
                  "do not sum to zero"),
    WrongSolution("batchnorm_backward", "means over all B*T rows", _bn_backward_all_rows,
                  "a case without padding passes"),
    WrongSolution("batchnorm_backward", "padded rows get a gradient", _bn_backward_padded_gradient,
                  "not 0 at the padded ones"),
    WrongSolution("batchnorm_backward", "the variance's path without its factor -1/2", _bn_backward_variance_doubled,
                  "orthogonal to x_hat"),
    WrongSolution("batchnorm_backward", "dgamma and dbeta summed over the padded rows too",
                  _bn_backward_params_over_padding, "sums over the padded rows too"),
]
