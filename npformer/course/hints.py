"""Hints that name the classic mistakes of the exercises, each recognised from the student's output.

A hint is ``hint(got, expected, inputs, output) -> str``: ``got`` and ``expected`` are one
returned tensor (float64, the same shape), ``inputs`` the case's inputs and ``output`` the
tensor's name; it returns a sentence about the mistake, or "" when the mistake is not its
own. It teaches before it tells: a ``Hint`` says first what property of the answer fails, and
names the fix only in its second tier (``Hint.fix``). The grader tries an exercise's hints before ``gradcheck.hints.diagnose``'s generic ones.

Two ways to recognise a mistake, both from what a correct answer must be:

* an **invariant** the right answer keeps and a wrong one breaks: each row of layer norm's
  ``dx`` sums to zero (a shift of a whole row changes nothing after normalisation) and is
  orthogonal to ``x_hat`` (so is a rescaling of it, up to eps); each row of a softmax gradient
  sums to zero (softmax ignores a shift shared by the whole row);
* the **wrong answer itself**, recomputed from the inputs: the softmax Jacobian's diagonal
  alone, ``dk`` from the scores instead of their transpose, Adam's ``eps`` under the square root.
"""

from __future__ import annotations

import numpy

FIX_AFTER = 3  # failed checks of one exercise, in one session, after which a hint names its fix


class Hint(str):
    """A hint in two tiers. The string itself is the first: a property the student's answer breaks (a
    shape, a constant factor, a sum that is not zero, which cases pass), for the student to reason from.
    ``fix`` is the second: the mistake named, shown by ``check`` only on request (``reveal=True``) or
    after ``FIX_AFTER`` failed checks of the exercise, and never on a class's grade sheet. A plain
    ``str`` hint is a first tier without a second."""

    fix: str

    def __new__(cls, sees: str, fix: str = "") -> "Hint":
        hint = super().__new__(cls, sees)
        hint.fix = fix
        return hint


def fix_of(hint: str) -> str:
    """The second tier of ``hint`` ("" for a plain string)."""
    return getattr(hint, "fix", "")


MATCH = 1e-6  # a wrong formula explains ``got`` when it reproduces it to this fraction of its size


def explains(candidate, got) -> bool:
    candidate = numpy.asarray(candidate, dtype=numpy.float64)
    if candidate.shape != got.shape:
        return False
    scale = max(float(numpy.abs(got).max(initial=0.0)), 1e-300)
    return bool(numpy.all(numpy.abs(candidate - got) <= MATCH * scale))


def _rows_sum_to_zero(values, reference) -> bool:
    scale = max(float(numpy.abs(reference).max(initial=0.0)), 1e-300)
    return bool(numpy.all(numpy.abs(values.sum(axis=-1)) <= 1e-6 * scale * values.shape[-1]))


# -- layer norm ------------------------------------------------------------------------------------

def layernorm_x_hat(x, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / numpy.sqrt(x.var(axis=-1, keepdims=True) + eps)


def layernorm_dx_hint(got, expected, inputs, output):
    """dx: the invariants of the compact form tell which of its two mean terms is wrong."""
    if output != "dx" or got.shape != expected.shape or inputs["x"].shape[-1] < 2:
        return ""
    if not _rows_sum_to_zero(got, expected):
        return Hint("the rows of dx do not sum to zero, but a right dx's rows do (shifting a whole row changes "
                    "nothing after normalisation)",
                    "the path through the mean is lost or wrong: the step layernorm_dmean, or its factor "
                    "dmean/dx_j = 1/D where the three paths are added")
    x_hat = layernorm_x_hat(inputs["x"])
    along_x_hat = numpy.abs((got * x_hat).sum(axis=-1)).max()
    allowed = numpy.abs((expected * x_hat).sum(axis=-1)).max() + 1e-6 * numpy.abs(expected).max() * x_hat.shape[-1]
    if along_x_hat > 10 * allowed:
        return Hint("each row of dx sums to zero, but dx is not orthogonal to x_hat as a right dx is (rescaling "
                    "a row changes nothing after normalisation)",
                    "the path through the variance: its sign or its form (the step layernorm_dvar), or its "
                    "factor dvar/dx_j = 2 (x_j - mean) / D where the three paths are added")
    return ""


def summed_over_rows_hint(got, expected, inputs, output):
    """A parameter shared by every position (gamma, beta, a bias): averaged, or one row only."""
    if got.shape != expected.shape or got.ndim != 1 or "dout" not in inputs:
        return ""
    rows = inputs["dout"].size // expected.shape[0]
    if rows > 1 and explains(expected / rows, got):
        return Hint(f"{output} = (right answer) / {rows}, and {rows} is the number of positions that share it",
                    "a parameter shared by every position collects all their gradients: a sum over the rows, "
                    "not a mean")
    if rows > 1 and any(explains(candidate, got) for candidate in _single_row_candidates(inputs, output)):
        return Hint(f"{output} equals the gradient of one position alone, though every position uses it",
                    "sum the gradient over every row of the batch")
    return ""


def _single_row_candidates(inputs, output):
    dout = inputs["dout"].reshape(-1, inputs["dout"].shape[-1])
    if output == "dbeta" or output == "db":
        return [dout[0], dout[-1]]
    if output == "dgamma":
        x_hat = layernorm_x_hat(inputs["x"]).reshape(-1, dout.shape[-1])
        return [dout[0] * x_hat[0], dout[-1] * x_hat[-1]]
    return []


# -- softmax and attention -------------------------------------------------------------------------

def softmax(scores):
    shifted = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def softmax_diagonal_hint(got, expected, inputs, output):
    """softmax_backward: the Jacobian's diagonal alone, p (1 - p) dout."""
    if output != "dx" or got.shape != expected.shape:
        return ""
    p = softmax(inputs["x"])
    if explains(inputs["dout"] * p * (1 - p), got):
        return Hint("each dx_i depends on dout_i alone, but a softmax gradient's dx_i depends on every dout_j "
                    "of its row (the step softmax_jacobian)",
                    "only the diagonal of the Jacobian, p_i (1 - p_i): softmax mixes the row, so every p_i "
                    "depends on every x_j")
    for axis in range(p.ndim - 1):
        if p.shape[axis] > 1 and explains(p * (inputs["dout"] - (inputs["dout"] * p).sum(axis=axis, keepdims=True)),
                                          got):
            return Hint(f"dx sums to zero along axis {axis}, where a softmax gradient's rows sum to zero along the "
                        "last axis",
                        "softmax normalises each row over the last axis, so the sum that mixes the gradient runs "
                        "over the last axis too")
    if not _rows_sum_to_zero(got, expected):
        return Hint("the rows of dx do not sum to zero, but a softmax gradient's rows do (softmax ignores a shift "
                    "shared by the whole row)", "the - sum(dout * p) term is missing or wrong")
    return ""


def attention_pieces(inputs):
    q, k, v, mask, dout = (inputs[name] for name in ("q", "k", "v", "mask", "dout"))
    scale = 1.0 / numpy.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2) * scale
    allowed = numpy.ones(scores.shape, dtype=bool) if mask is None else numpy.broadcast_to(mask, scores.shape)
    scores = numpy.where(allowed, scores, -numpy.inf)
    with numpy.errstate(invalid="ignore"):
        weights = numpy.nan_to_num(softmax(numpy.where(allowed.any(-1, keepdims=True), scores, 0.0))) * allowed
    d_weights = dout @ v.swapaxes(-1, -2)
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
    return q, k, scale, weights, d_weights, d_scores


def attention_backward_hint(got, expected, inputs, output):
    """dq, dk, dv: the transposes, the scale and the softmax Jacobian of attention's backward pass."""
    if got.shape != expected.shape or output not in ("dq", "dk", "dv"):
        return ""
    q, k, scale, weights, d_weights, d_scores = attention_pieces(inputs)
    d_diagonal = weights * (1 - weights) * d_weights
    diagonal_only = Hint(f"{output} is what dS would give if its rows summed to anything but zero; the rows of a "
                         "softmax's gradient dS sum to zero (the step attention_d_scores)",
                         "only the diagonal of the softmax Jacobian")
    by_query = ("row j of {0} belongs to key j and collects from every query that attended to that key; yours "
                "gathers row j from query j (it has the right shape only because Tq == Tk here)")
    wrong = {"dq": [(d_diagonal @ k * scale, diagonal_only)],
             "dk": [(d_scores @ q * scale, Hint(by_query.format("dk"), "dS Q instead of dS^T Q: the scores' rows "
                                                                      "are queries, so dk needs the transpose of dS")),
                    (d_diagonal.swapaxes(-1, -2) @ q * scale, diagonal_only)],
             "dv": [(weights @ inputs["dout"], Hint(by_query.format("dv"), "P dout instead of P^T dout: a transpose "
                                                                           "is missing"))]}[output]
    for candidate, words in wrong:
        if explains(candidate, got):
            return words
    if output in ("dq", "dk") and explains(expected / scale, got):
        return Hint(f"{output} = (right answer) x sqrt(d_head) = {1 / scale:.4g} x",
                    "the 1/sqrt(d_head) of the scores is part of the forward pass")
    if output in ("dq", "dk") and explains(expected * scale, got):
        return Hint(f"{output} = (right answer) / sqrt(d_head) = {scale:.4g} x", "scaled twice by 1/sqrt(d_head)")
    return ""


# -- the optimiser ---------------------------------------------------------------------------------

def adam_eps_hint(got, expected, inputs, output):
    """Adam's update with eps in the wrong place (under the square root), or without eps: what it does."""
    if output != "param":
        return ""
    beta1, beta2, step, eps = inputs["beta1"], inputs["beta2"], inputs["step"], inputs["eps"]
    m = beta1 * inputs["m"] + (1 - beta1) * inputs["grad"]
    v = beta2 * inputs["v"] + (1 - beta2) * inputs["grad"] ** 2
    m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
    if explains(inputs["param"] - inputs["lr"] * m_hat / numpy.sqrt(v_hat), got):
        return Hint("your update does not depend on eps: it is right where the gradients are far above eps and "
                    "wrong where they are tiny", "eps is added to sqrt(v_hat), below the fraction")
    if explains(inputs["param"] - inputs["lr"] * m_hat / numpy.sqrt(v_hat + eps), got):
        return Hint("right where the gradients are far above eps, wrong where they are tiny (near 1e-7): there "
                    "your eps acts on the scale of a squared gradient, not of a gradient",
                    "eps under the square root: the rule is m_hat / (sqrt(v_hat) + eps)")
    return ""


# -- masks -----------------------------------------------------------------------------------------

def causal_diagonal_hint(got, expected, inputs, output):
    """A causal mask without its diagonal: a query may attend to its own position."""
    if got.shape != expected.shape or got.ndim < 2 or expected.shape[-1] < 2:
        return ""
    strict = numpy.tril(numpy.ones(expected.shape[-2:], dtype=bool), k=-1)
    if numpy.array_equal(got.astype(bool), expected.astype(bool) & strict):
        return Hint("False on the diagonal: your mask hides each query's own position from it",
                    "a query may attend to its own position: key <= query, not key < query")
    return ""


# -- ReLU, the positions, the heads ----------------------------------------------------------------

def relu_hint(got, expected, inputs, output):
    """relu_backward: the mask taken from dout, or dout forgotten."""
    x, dout = inputs["x"], inputs["dout"]
    if output != "dx" or got.shape != x.shape:
        return ""
    if explains(dout * (dout > 0), got):
        return Hint("your dx does not depend on x: it keeps dout where dout is positive, whatever x was",
                    "the mask comes from the forward's input, x > 0, not from dout")
    if explains((x > 0).astype(float), got):
        return Hint("your dx does not change when dout does: it is 1 or 0 whatever the upstream gradient",
                    "the chain rule multiplies the local slope by dout")
    return ""


def positional_encoding_hint(got, expected, inputs, output):
    """positional_encoding: which columns are right says which part of the formula is wrong."""
    if got.shape != expected.shape or got.ndim != 2 or got.shape[1] < 2:
        return ""
    right = numpy.all(numpy.abs(got - expected) <= 1e-6 * (1 + numpy.abs(expected)), axis=0)
    if right.all():
        return ""
    wrong = [int(column) for column in numpy.flatnonzero(~right)]
    if right[0] and right[1] and not right[2:].all():
        return Hint(f"columns 0 and 1 are right and columns {wrong[:6]} wrong: the first pair's frequency is 1 for "
                    "any exponent; look at how the later pairs' frequencies fall with the column",
                    "pair i (columns 2i and 2i+1) has frequency 1 / 10000^(2i / d_model), the same for both")
    if right[1::2].all() != right[0::2].all():
        return Hint(f"the {'even' if right[0::2].all() else 'odd'} columns are right and the others wrong",
                    "sin in the even columns (2i), cos in the odd ones (2i + 1), both at pair i's frequency")
    return ""


def heads_order_hint(split: bool):
    """split_heads / merge_heads: the head axis and the feature axis in the wrong order."""
    def hint(got, expected, inputs, output):
        x = inputs["x"]
        if got.shape != expected.shape:
            return ""
        if split:
            batch, length, width = x.shape
            heads = expected.shape[1]
            bare = x.reshape(batch, heads, length, width // heads)
            strided = x.reshape(batch, length, width // heads, heads).transpose(0, 3, 1, 2)
        else:
            batch, heads, length, head_width = x.shape
            bare = x.reshape(batch, length, heads * head_width)
            strided = x.transpose(0, 2, 3, 1).reshape(batch, length, heads * head_width)
        if explains(bare, got):
            return Hint("the right shape, but a position's numbers are spread over several rows: a reshape alone "
                        "never moves an entry, and the positions and the heads must trade places",
                        "reshape to (B, T, H, Dh), then swap the T and H axes" if split else
                        "swap the H and T axes back first, to (B, T, H, Dh), then reshape to (B, T, H * Dh)")
        if explains(strided, got):
            return Hint("each head should hold one contiguous block of Dh features; yours holds features spaced H "
                        "apart" if split else "the heads' features are interleaved: head h's block should be "
                        "features h*Dh to (h+1)*Dh - 1, one after the other",
                        "reshape to (B, T, H, Dh), not (B, T, Dh, H)" if split else
                        "transpose to (B, T, H, Dh) before the reshape, not to (B, T, Dh, H)")
        return ""
    return hint


def multi_head_scale_hint(forward):
    """multi_head_attention: the scores scaled by 1/sqrt(D), the model's width, not the head's."""
    def hint(got, expected, inputs, output):
        heads = inputs["n_heads"]
        if heads < 2 or got.shape != expected.shape:
            return ""
        arguments = {**inputs, "Wq": inputs["Wq"] / numpy.sqrt(heads)}  # 1/sqrt(D) = 1/sqrt(Dh) / sqrt(H)
        if explains(forward(*arguments.values()), got):
            return Hint("right with one head, wrong with several: your scale depends on the number of heads",
                        "each head's scores are scaled by 1/sqrt(Dh), the head's width, not 1/sqrt(D)")
        return ""
    return hint


def shared_weight_averaged_hint(got, expected, inputs, output):
    """A weight matrix used at every position whose gradient was averaged over the positions."""
    if got.shape != expected.shape or got.ndim != 2 or "dout" not in inputs:
        return ""
    counts = {int(numpy.prod(value.shape[:-1])) for name, value in inputs.items()
              if name in ("x", "query", "memory", "dout") and getattr(value, "ndim", 0) >= 2}
    for rows in sorted(counts - {1}):
        if explains(expected / rows, got):
            return Hint(f"{output} = (right answer) / {rows}, and {rows} is the number of positions that use the "
                        "weight", "a weight shared by every position collects all their gradients: a sum, not a mean")
    return ""
