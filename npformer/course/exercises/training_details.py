"""The exercises of lessons 23-26: teacher forcing, batch norm, the layout of PyTorch's weights, BPE.

    shift_right         lesson 23: the decoder's input and targets from the target rows
    batchnorm_forward   lesson 24: batch norm whose statistics leave the padded rows out
    batchnorm_backward  lesson 24: its backward pass (padded rows get no gradient)
    to_torch_in_proj    lesson 25: W_q, W_k, W_v and their biases as torch.nn.MultiheadAttention's
                        in_proj_weight and in_proj_bias (graded with NumPy only: no PyTorch needed)
    bpe_merge_step      lesson 26: one merge of byte-pair encoding's learning
    bpe_segment         lesson 26: a word as BPE pieces, the merges replayed as npformer does

The references call npformer where it has the answer (``data.pad_batch``'s shift,
``interop.to_torch_layout``'s map, ``data.bpe``'s merges and segmentation). The BPE exercises
return strings; the grader compares numbers, so their ``call`` turns each returned list of
pieces into the code points of its characters, a piece ending at each ``-1`` (exact, and the
hints turn the codes back into pieces to name the difference).
"""

from __future__ import annotations

from collections import Counter

import numpy

from ... import interop, nn
from ...data import batching, bpe
from ...tokens import BOS_ID, EOS_ID, PAD_ID
from ..hints import _explains  # a wrong formula that reproduces the output
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


def _batchnorm_parts(x, keep, eps=BATCHNORM_EPS):
    """The kept rows' mean and 1/std per feature, and x_hat at every position (padded ones too)."""
    keep = numpy.asarray(keep, dtype=bool)
    rows = x[keep]  # (N, D): the kept positions only
    rstd = 1.0 / numpy.sqrt(rows.var(axis=0) + eps)
    return keep, rstd, (x - rows.mean(axis=0)) * rstd


def _batchnorm_forward(x, gamma, beta, keep):
    keep, _, x_hat = _batchnorm_parts(x, keep)
    return numpy.where(keep[..., None], gamma * x_hat + beta, 0.0)


def _batchnorm_backward(x, gamma, beta, keep, dout):
    keep, rstd, x_hat = _batchnorm_parts(x, keep)
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


def _batchnorm_backward_cases(rng):
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


def _unseen_batchnorm_backward(rng):
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
    return next((words for candidate, words in candidates if _explains(candidate, got)), "")


def _batchnorm_backward_hint(got, expected, inputs, output):
    x, gamma, dout = inputs["x"], inputs["gamma"], inputs["dout"]
    keep = numpy.asarray(inputs["keep"], dtype=bool)
    kept = keep[..., None]
    d_model = x.shape[-1]
    _, rstd, x_hat = _batchnorm_parts(x, keep)
    if got.shape != expected.shape:
        return ""
    if output == "dx":
        g = dout * gamma * kept
        every = keep.size
        all_rows = kept * rstd * (g - g.reshape(-1, d_model).sum(0) / every
                                  - x_hat * (g * x_hat).reshape(-1, d_model).sum(0) / every)
        candidates = [
            (kept * rstd * g, "dx = gamma * dout / sigma treats the mean and the variance as constants: they are "
                              "functions of every kept x, hence the two mean terms of the compact form"),
            (all_rows, "the two means divide by all B*T positions: they are means over the N kept rows"),
        ]
        for candidate, words in candidates:
            if _explains(candidate, got):
                return words
        if (~keep).any() and numpy.abs(got[~keep]).max(initial=0.0) > 0 and _explains(
                expected[keep], got[keep]):
            return ("right on the kept rows, but the padded rows get a gradient: their outputs are 0 whatever x "
                    "holds there, so their dx is 0")
        return ""
    if output in ("dgamma", "dbeta"):
        every = (dout * x_hat if output == "dgamma" else dout).reshape(-1, d_model).sum(axis=0)
        if (~keep).any() and _explains(every, got):
            return f"{output} sums over the padded rows too: only the kept rows have outputs that depend on it"
        count = int(keep.sum())
        if count > 1 and _explains(expected / count, got):
            return f"{output} = (right answer) / {count}: the kept rows share it, so their gradients add up (a sum)"
    return ""


# -- lesson 25: PyTorch's in_proj_weight -----------------------------------------------------------------

def _to_torch_in_proj(Wq, Wk, Wv, bq, bk, bv):
    """npformer's map (``interop.to_torch_layout``) of one attention's q, k, v, stacked as PyTorch keeps them."""
    d_model = Wq.shape[0]
    attention = nn.SelfAttention(d_model, 1, rng=numpy.random.default_rng(0), dtype=numpy.float64)
    arrays = {"q.W": Wq, "q.b": bq, "k.W": Wk, "k.b": bk, "v.W": Wv, "v.b": bv,
              "o.W": numpy.zeros((d_model, d_model)), "o.b": numpy.zeros(d_model)}
    torch_arrays = interop.to_torch_layout(attention, arrays)
    return (numpy.concatenate([torch_arrays[f"{name}.weight"] for name in "qkv"]),
            numpy.concatenate([torch_arrays[f"{name}.bias"] for name in "qkv"]))


def _in_proj_inputs(r, d_model):
    return {"Wq": normal(r, d_model, d_model), "Wk": normal(r, d_model, d_model), "Wv": normal(r, d_model, d_model),
            "bq": normal(r, d_model), "bk": normal(r, d_model), "bv": normal(r, d_model)}


def _in_proj_cases(rng):
    return [Case("D=4", _in_proj_inputs(rng, 4)), Case("D=1: one feature", _in_proj_inputs(rng, 1)),
            Case("D=6", _in_proj_inputs(rng, 6))]


def _unseen_in_proj(rng):
    d_model = size(rng, 2, 8)
    return [Case(f"D={d_model}", _in_proj_inputs(rng, d_model))]


_ORDERS = [("q", "k", "v"), ("q", "v", "k"), ("k", "q", "v"), ("k", "v", "q"), ("v", "q", "k"), ("v", "k", "q")]


def _in_proj_hint(got, expected, inputs, output):
    d_model = inputs["Wq"].shape[0]
    if output == "in_proj_weight":
        blocks = {name: inputs[f"W{name}"] for name in "qkv"}
        if got.shape == (d_model, 3 * d_model):
            return ("shape (D, 3D): the three blocks side by side; PyTorch stacks them as rows, "
                    "in_proj_weight is (3D, D)")
        for order in _ORDERS:
            if d_model > 1 and _explains(numpy.concatenate([blocks[name] for name in order]), got):
                return ("each block is W as npformer keeps it, (d_in, d_out); torch.nn.Linear's layout is "
                        "weight = W.T, (d_out, d_in), and in_proj_weight holds the three weights in that layout")
            if order != _ORDERS[0] and _explains(numpy.concatenate([blocks[name].T for name in order]), got):
                return (f"the blocks are in the order {', '.join(order)}: PyTorch's order is queries, keys, values "
                        "(rows 0 to D-1 are W_q.T, then W_k.T, then W_v.T)")
    if output == "in_proj_bias":
        biases = {name: inputs[f"b{name}"] for name in "qkv"}
        for order in _ORDERS[1:]:
            if _explains(numpy.concatenate([biases[name] for name in order]), got):
                return f"the biases are in the order {', '.join(order)}: PyTorch's order is b_q, b_k, b_v"
    return ""


# -- lesson 26: byte-pair encoding -------------------------------------------------------------------------
#
# A returned list of pieces becomes the code points of their characters, each piece closed by -1;
# a dict {word as a tuple of symbols: count} becomes its items in sorted order, each word's
# symbols coded so and closed by -2, its count, then -3. Both are exact, and decode back.

END = bpe.END


def _show(symbols) -> str:
    return "[" + ", ".join(repr(symbol.replace(END, "␣")) for symbol in symbols) + "]"


def _codes(symbols, what: str) -> list[int]:
    if isinstance(symbols, str) or not isinstance(symbols, (list, tuple)) or not all(
            isinstance(symbol, str) for symbol in symbols):
        raise TypeError(f"{what} must be a list (or tuple) of strings, got {symbols!r:.80}")
    return [code for symbol in symbols for code in (*map(ord, symbol), -1)]


def _pieces(codes) -> list[str]:
    pieces, current = [], ""
    for code in numpy.asarray(codes).astype(int).tolist():
        if code == -1:
            pieces.append(current)
            current = ""
        else:
            current += chr(code)
    return pieces


def _counts_codes(word_counts) -> list[int]:
    if not isinstance(word_counts, dict):
        raise TypeError("bpe_merge_step must return (pair, word_counts), word_counts a dict {tuple of symbols: count}, "
                        f"got {type(word_counts).__name__}")
    codes = []
    for symbols, count in sorted(word_counts.items(), key=lambda item: tuple(item[0])):
        codes += [*_codes(symbols, "bpe_merge_step: each word of word_counts"), -2, int(count), -3]
    return codes


def _counts_from_codes(codes) -> dict[tuple[str, ...], int]:
    counts, values = {}, numpy.asarray(codes).astype(int).tolist()
    while values:
        at = values.index(-3)
        entry, values = values[:at], values[at + 1:]
        counts[tuple(_pieces(entry[:-2]))] = entry[-1]
    return counts


def _call_segment(fn, inputs):
    return (numpy.array(_codes(fn(*inputs.values()), "bpe_segment's result")),)


def _call_merge_step(fn, inputs):
    result = fn(*inputs.values())
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return (result,)  # the grader reports how many values came back
    pair, merged = result
    if len(pair) != 2:
        raise TypeError(f"bpe_merge_step must return (pair, word_counts), the pair two symbols; got {pair!r:.80} "
                        "as the pair")
    return numpy.array(_codes(pair, "bpe_merge_step: the pair")), numpy.array(_counts_codes(merged))


def _merge_pair(symbols, pair):
    return bpe._merge_pair(list(symbols), tuple(pair))


def _pair_counts(word_counts, per_word=False, once=False):
    """Each pair of neighbouring symbols -> how often it occurs, each word weighted by its count
    (``per_word``: each word counted once; ``once``: a pair counted once per word)."""
    counts: Counter = Counter()
    for symbols, count in word_counts.items():
        pairs = list(zip(symbols, symbols[1:]))
        for pair in set(pairs) if once else pairs:
            counts[pair] += 1 if per_word else count
    return counts


def _bpe_merge_step(word_counts):
    """npformer's choice (``learn_merges``: the most frequent pair, ties to the pair that sorts first), then
    ``bpe._merge_pair`` applied to every word."""
    counts = _pair_counts(word_counts)
    pair = min(counts, key=lambda pair: (-counts[pair], pair))
    return pair, {tuple(_merge_pair(symbols, pair)): count for symbols, count in word_counts.items()}


def _as_symbols(word_counts):
    return {tuple(bpe.word_symbols(word)): count for word, count in word_counts.items()}


SENNRICH = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


def _merge_step_cases(rng):
    later = _as_symbols({**SENNRICH, "low": 4})
    for _ in range(2):
        later = _bpe_merge_step(later)[1]
    return [
        Case("low 5, lower 2, newest 6, widest 3, as characters: a tie at 9", {"word_counts": _as_symbols(SENNRICH)}),
        Case("counts weigh the pairs: (a, b) in one word of count 5, (x, y) in three words of count 1; "
             "a word of one symbol", {"word_counts": {("a", "b", "c" + END): 5, ("x", "y", "z" + END): 1,
                                                      ("x", "y", "w" + END): 1, ("x", "y", "v" + END): 1,
                                                      ("o" + END,): 4}}),
        Case("low 4, lower 2, newest 6, widest 3 after two merges (es, est␣): four pairs tie at 6",
             {"word_counts": later}),
        Case("a pair twice in a word: a a a a b␣", {"word_counts": {("a", "a", "a", "a", "b" + END): 2,
                                                                     ("b", "a", "b" + END): 3}}),
    ]


def _unseen_merge_step(rng):
    words = {"".join(rng.choice(list("abcd"), size=size(rng, 1, 6))): size(rng, 1, 9) for _ in range(size(rng, 2, 6))}
    words["".join(rng.choice(list("abcd"), size=size(rng, 2, 6)))] = size(rng, 1, 9)  # one word with a pair
    word_counts, steps = _as_symbols(words), 0
    for _ in range(size(rng, 0, 4)):
        merged = _bpe_merge_step(word_counts)[1]
        if not _pair_counts(merged):
            break  # no pair would be left to merge
        word_counts, steps = merged, steps + 1
    return [Case(f"{len(words)} random words over 'abcd', after {steps} merges", {"word_counts": word_counts})]


def _merge_pair_hint(got, expected, inputs, output):
    if output != "pair":
        return ""
    got_pair, right = tuple(_pieces(got)), tuple(_pieces(expected))
    if len(got_pair) != 2:
        return ""
    counts = _pair_counts(inputs["word_counts"])
    best = counts[right]
    tied = sorted(pair for pair, count in counts.items() if count == best)
    if got_pair in tied:
        return (f"{_show(got_pair)} is one of the {len(tied)} pairs that occur {best} times; a tie goes to the pair "
                f"that sorts first, {_show(right)}, so that the same text always gives the same merges")
    for counts_so, words in ((_pair_counts(inputs["word_counts"], per_word=True),
                              "counted each word once: a word's pairs count as many times as the word occurs "
                              "(weigh them by its count)"),
                             (_pair_counts(inputs["word_counts"], once=True),
                              "counted a pair once per word: a pair that occurs twice in a word counts twice")):
        if counts_so.get(got_pair, 0) == max(counts_so.values()):
            return words
    return f"merged {_show(got_pair)} ({counts.get(got_pair, 0)} times), but {_show(right)} occurs {best} times"


def _merged_words_hint(got, expected, inputs, output):
    if output != "word_counts":
        return ""
    got_counts, right_counts = _counts_from_codes(got), _counts_from_codes(expected)
    pair = _bpe_merge_step(inputs["word_counts"])[0]
    for other in _pair_counts(inputs["word_counts"]):
        if other != pair and got_counts == {tuple(_merge_pair(symbols, other)): count
                                            for symbols, count in inputs["word_counts"].items()}:
            return (f"every word merged with {_show(other)}, rightly for that pair, but the pair to merge is "
                    f"{_show(pair)} (see the hint for pair)")
    for symbols, count in inputs["word_counts"].items():
        right = tuple(_merge_pair(symbols, pair))
        if got_counts.get(right) == right_counts[right]:
            continue
        word = "".join(symbols).replace(END, "")
        same_word = [key for key in got_counts if "".join(key) == "".join(symbols)]
        if not same_word:
            return f"the word {word!r} is missing from the merged word_counts: keep every word, merged or not"
        wrong = same_word[0]
        if got_counts[wrong] != count and wrong == right:
            return f"the count of {word!r} changed from {count} to {got_counts[wrong]}: a merge keeps each word's count"
        if pair in zip(wrong, wrong[1:]) and any(piece == pair[0] + pair[1] for piece in wrong):
            return (f"{word!r} became {_show(wrong)}, with {_show(pair)} still in it: merge every occurrence of the "
                    f"pair in a word, left to right, not only the first ({_show(right)})")
        if wrong == tuple(symbols) and pair in zip(symbols, symbols[1:]):
            return f"{word!r} holds {_show(pair)} but was left as it was: the merge applies to every word"
        return f"{word!r} became {_show(wrong)}; merging {_show(pair)} gives {_show(right)}"
    return ""


def _bpe_segment(word, merges):
    return bpe.BPE(merges).segment(word)


def _segment_cases(rng):
    sennrich = bpe.learn_merges(SENNRICH, 10)
    overlapping = bpe.learn_merges({"bcd": 10, "abd": 5}, 4)
    return [
        Case("'lowest', the 10 merges of low 5, lower 2, newest 6, widest 3", {"word": "lowest", "merges": sennrich}),
        Case("'abcd', the 4 merges of bcd 10, abd 5: (b, c) was learned before (a, b)",
             {"word": "abcd", "merges": overlapping}),
        Case("'a': one character", {"word": "a", "merges": sennrich}),
        Case("'lowes': (e, s) was learned, but this word ends in s␣", {"word": "lowes", "merges": sennrich}),
    ]


def _unseen_segment(rng):
    words = {"".join(rng.choice(list("abcd"), size=size(rng, 2, 7))): size(rng, 1, 9) for _ in range(size(rng, 2, 6))}
    merges = bpe.learn_merges(words, size(rng, 2, 12))
    word = (str(rng.choice(list(words))) if rng.random() < 0.5
            else "".join(rng.choice(list("abcd"), size=size(rng, 1, 8))))
    return [Case(f"{word!r}, {len(merges)} merges learned on {len(words)} random words",
                 {"word": word, "merges": merges})]


def _leftmost_first(word, merges):
    known, pieces = set(map(tuple, merges)), bpe.word_symbols(word)
    while True:
        pair = next((pair for pair in zip(pieces, pieces[1:]) if pair in known), None)
        if pair is None:
            return pieces
        pieces = _merge_pair(pieces, pair)


def _last_learned_first(word, merges):
    ranks, pieces = {tuple(pair): rank for rank, pair in enumerate(merges)}, bpe.word_symbols(word)
    while True:
        present = [pair for pair in zip(pieces, pieces[1:]) if pair in ranks]
        if not present:
            return pieces
        pieces = _merge_pair(pieces, max(present, key=ranks.get))


def _segment_hint(got, expected, inputs, output):
    word, merges = inputs["word"], inputs["merges"]
    pieces, right = _pieces(got), _pieces(expected)
    if "".join(pieces) != word + END:
        if "".join(pieces) == word:
            return (f"no end-of-word marker: the last piece must end with END (a space, ␣), as in {_show(right)}; "
                    "start from the characters with the last one marked")
        return f"the pieces {_show(pieces)} do not join back into the word plus its marker, {word + '␣'!r}"
    ways = [words for way, words in ((_leftmost_first, "merging the leftmost pair that is a merge"),
                                     (_last_learned_first, "merging the pair learned last first"))
            if pieces == way(word, merges)]
    if ways:
        return (f"{_show(pieces)} is what {' or '.join(ways)} gives; merge the pair "
                f"learned first (the earliest in merges) wherever it is in the word, and repeat: {_show(right)}")
    return f"got {_show(pieces)}, expected {_show(right)}"


EXERCISES: list[Exercise] = [
    Exercise("shift_right", "shift_right(tgt_ids) -> (tgt_in, tgt_out), each (B, T): <bos> in front, the last "
             "column dropped", "23", _shift_right, _shift_cases, ("tgt_in", "tgt_out"), exact=True,
             hints=(_shift_hint,), unseen=_unseen_shift, library=(batching.pad_batch, batching.make_batches)),
    Exercise("batchnorm_forward", "batchnorm_forward(x, gamma, beta, keep) -> out (B, T, D), the statistics of "
             "the kept rows, padded rows 0", "24", _batchnorm_forward, _batchnorm_cases, ("out",),
             hints=(_batchnorm_forward_hint,), unseen=_unseen_batchnorm),
    Exercise("batchnorm_backward", "batchnorm_backward(x, gamma, beta, keep, dout) -> (dx, dgamma, dbeta)", "24",
             _batchnorm_backward, _batchnorm_backward_cases, ("dx", "dgamma", "dbeta"), _batchnorm_forward,
             ("x", "gamma", "beta"), hints=(_batchnorm_backward_hint,), unseen=_unseen_batchnorm_backward, points=2),
    Exercise("to_torch_in_proj", "to_torch_in_proj(Wq, Wk, Wv, bq, bk, bv) -> (in_proj_weight (3D, D), "
             "in_proj_bias (3D,))", "25", _to_torch_in_proj, _in_proj_cases, ("in_proj_weight", "in_proj_bias"),
             hints=(_in_proj_hint,), unseen=_unseen_in_proj,
             library=(interop.to_torch_layout, interop.parameter_map)),
    Exercise("bpe_merge_step", "bpe_merge_step(word_counts) -> (pair, merged word_counts), words as tuples of "
             "symbols", "26", _bpe_merge_step, _merge_step_cases, ("pair", "word_counts"), exact=True,
             hints=(_merge_pair_hint, _merged_words_hint), call=_call_merge_step, unseen=_unseen_merge_step,
             library=(bpe.learn_merges, bpe._merge_pair), points=2),
    Exercise("bpe_segment", "bpe_segment(word, merges) -> list of pieces, the last one ending with the marker",
             "26", _bpe_segment, _segment_cases, ("pieces",), exact=True, hints=(_segment_hint,),
             call=_call_segment, unseen=_unseen_segment,
             library=(bpe.BPE.segment, bpe.BPEVocab.pieces, bpe.BPEVocab.encode, bpe._merge_pair), points=2),
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


def _in_proj_untransposed(Wq, Wk, Wv, bq, bk, bv):
    return numpy.concatenate([Wq, Wk, Wv]), numpy.concatenate([bq, bk, bv])


def _in_proj_side_by_side(Wq, Wk, Wv, bq, bk, bv):
    return numpy.concatenate([Wq.T, Wk.T, Wv.T], axis=1), numpy.concatenate([bq, bk, bv])


def _in_proj_kqv(Wq, Wk, Wv, bq, bk, bv):
    return numpy.concatenate([Wk.T, Wq.T, Wv.T]), numpy.concatenate([bk, bq, bv])


def _student_pair_counts(word_counts, weighted=True, once=False):
    counts = {}
    for symbols, count in word_counts.items():
        pairs = list(zip(symbols, symbols[1:]))
        for pair in (set(pairs) if once else pairs):
            counts[pair] = counts.get(pair, 0) + (count if weighted else 1)
    return counts


def _student_merge(symbols, pair, first_only=False):
    out, i, merged = [], 0, False
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair and not (first_only and merged):
            out.append(symbols[i] + symbols[i + 1])
            i, merged = i + 2, True
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def _merge_step_unweighted(word_counts):
    counts = _student_pair_counts(word_counts, weighted=False)
    pair = min(counts, key=lambda p: (-counts[p], p))
    return pair, {_student_merge(s, pair): c for s, c in word_counts.items()}


def _merge_step_first_seen(word_counts):
    counts = _student_pair_counts(word_counts)
    pair = max(counts, key=counts.get)  # the first pair seen among the most frequent
    return pair, {_student_merge(s, pair): c for s, c in word_counts.items()}


def _merge_step_once_per_word(word_counts):
    counts = _student_pair_counts(word_counts, once=True)
    pair = min(counts, key=lambda p: (-counts[p], p))
    return pair, {_student_merge(s, pair): c for s, c in word_counts.items()}


def _merge_step_first_occurrence(word_counts):
    counts = _student_pair_counts(word_counts)
    pair = min(counts, key=lambda p: (-counts[p], p))
    return pair, {_student_merge(s, pair, first_only=True): c for s, c in word_counts.items()}


def _segment_leftmost(word, merges):
    merges = [tuple(m) for m in merges]
    pieces = list(word[:-1]) + [word[-1] + " "]
    changed = True
    while changed:
        changed = False
        for i in range(len(pieces) - 1):
            if (pieces[i], pieces[i + 1]) in merges:
                pieces[i:i + 2] = [pieces[i] + pieces[i + 1]]
                changed = True
                break
    return pieces


def _segment_without_marker(word, merges):
    ranks = {tuple(m): r for r, m in enumerate(merges)}
    pieces = list(word)
    while len(pieces) > 1:
        pair = min(zip(pieces, pieces[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        pieces = list(_student_merge(pieces, pair))
    return pieces


def _segment_last_learned_first(word, merges):
    ranks = {tuple(m): r for r, m in enumerate(merges)}
    pieces = list(word[:-1]) + [word[-1] + " "]
    while True:
        present = [p for p in zip(pieces, pieces[1:]) if p in ranks]
        if not present:
            return pieces
        pieces = list(_student_merge(pieces, max(present, key=ranks.get)))


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
                  "treats the mean and the variance as constants"),
    WrongSolution("batchnorm_backward", "means over all B*T rows", _bn_backward_all_rows, "all B*T positions"),
    WrongSolution("batchnorm_backward", "padded rows get a gradient", _bn_backward_padded_gradient,
                  "padded rows get a gradient"),
    WrongSolution("batchnorm_backward", "dgamma and dbeta summed over the padded rows too",
                  _bn_backward_params_over_padding, "sums over the padded rows too"),
    WrongSolution("to_torch_in_proj", "npformer's W, not transposed", _in_proj_untransposed, "weight = W.T"),
    WrongSolution("to_torch_in_proj", "the blocks side by side (D, 3D)", _in_proj_side_by_side, "side by side"),
    WrongSolution("to_torch_in_proj", "the blocks in the order k, q, v", _in_proj_kqv, "PyTorch's order is"),
    WrongSolution("bpe_merge_step", "pairs counted once per word type, not weighted by its count",
                  _merge_step_unweighted, "counted each word once"),
    WrongSolution("bpe_merge_step", "a tie goes to the pair seen first", _merge_step_first_seen,
                  "sorts first"),
    WrongSolution("bpe_merge_step", "a pair counted once per word", _merge_step_once_per_word,
                  "counted a pair once per word"),
    WrongSolution("bpe_merge_step", "only the first occurrence in a word merged", _merge_step_first_occurrence,
                  "not only the first"),
    WrongSolution("bpe_segment", "the leftmost pair that is a merge, not the one learned first", _segment_leftmost,
                  "leftmost pair"),
    WrongSolution("bpe_segment", "no end-of-word marker", _segment_without_marker, "end-of-word marker"),
    WrongSolution("bpe_segment", "the pair learned last merged first", _segment_last_learned_first,
                  "learned last"),
]
