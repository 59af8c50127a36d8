"""The exercises of lessons 25-26: the layout of PyTorch's attention weights, byte-pair encoding.

    to_torch_in_proj    lesson 25: W_q, W_k, W_v and their biases as torch.nn.MultiheadAttention's
                        in_proj_weight and in_proj_bias (graded with NumPy only: no PyTorch needed)
    bpe_merge_step      lesson 26: one merge of byte-pair encoding's learning
    bpe_segment         lesson 26: a word as BPE pieces, the merges replayed as npformer does

The references call npformer (``interop.to_torch_layout``'s map, ``data.bpe``'s merges and
segmentation). The BPE exercises return strings; the grader compares numbers, so their ``call``
turns each returned list of pieces into the code points of its characters, a piece ending at each
``-1`` (exact, and the hints turn the codes back into pieces to name the difference).
"""

from __future__ import annotations

from collections import Counter

import numpy

from ... import interop, nn
from ...data import bpe
from ..hints import explains  # a wrong formula that reproduces the output
from .base import Case, Exercise, WrongSolution, normal, size

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
            if d_model > 1 and explains(numpy.concatenate([blocks[name] for name in order]), got):
                return ("each block is W as npformer keeps it, (d_in, d_out); torch.nn.Linear's layout is "
                        "weight = W.T, (d_out, d_in), and in_proj_weight holds the three weights in that layout")
            if order != _ORDERS[0] and explains(numpy.concatenate([blocks[name].T for name in order]), got):
                return (f"the blocks are in the order {', '.join(order)}: PyTorch's order is queries, keys, values "
                        "(rows 0 to D-1 are W_q.T, then W_k.T, then W_v.T)")
    if output == "in_proj_bias":
        biases = {name: inputs[f"b{name}"] for name in "qkv"}
        for order in _ORDERS[1:]:
            if explains(numpy.concatenate([biases[name] for name in order]), got):
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


def _segment_codes(result, inputs):
    return (numpy.array(_codes(result, "bpe_segment's result")),)


def _merge_step_codes(result, inputs):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return (result,)  # the grader reports how many values came back
    pair, merged = result
    if len(pair) != 2:
        raise TypeError(f"bpe_merge_step must return (pair, word_counts), the pair two symbols; got {pair!r:.80} "
                        "as the pair")
    return numpy.array(_codes(pair, "bpe_merge_step: the pair")), numpy.array(_counts_codes(merged))


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
    ``bpe.merge_pair`` applied to every word."""
    counts = _pair_counts(word_counts)
    pair = min(counts, key=lambda pair: (-counts[pair], pair))
    return pair, {tuple(bpe.merge_pair(symbols, pair)): count for symbols, count in word_counts.items()}


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
        if other != pair and got_counts == {tuple(bpe.merge_pair(symbols, other)): count
                                            for symbols, count in inputs["word_counts"].items()}:
            return (f"every word merged with {_show(other)}, rightly for that pair, but the pair to merge is "
                    f"{_show(pair)} (see the hint for pair)")
    for symbols, count in inputs["word_counts"].items():
        right = tuple(bpe.merge_pair(symbols, pair))
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
        pieces = bpe.merge_pair(pieces, pair)


def _last_learned_first(word, merges):
    ranks, pieces = {tuple(pair): rank for rank, pair in enumerate(merges)}, bpe.word_symbols(word)
    while True:
        present = [pair for pair in zip(pieces, pieces[1:]) if pair in ranks]
        if not present:
            return pieces
        pieces = bpe.merge_pair(pieces, max(present, key=ranks.get))


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
    Exercise("to_torch_in_proj", "to_torch_in_proj(Wq, Wk, Wv, bq, bk, bv) -> (in_proj_weight (3D, D), "
             "in_proj_bias (3D,))", "25", _to_torch_in_proj, _in_proj_cases, ("in_proj_weight", "in_proj_bias"),
             hints=(_in_proj_hint,), unseen=_unseen_in_proj),
    Exercise("bpe_merge_step", "bpe_merge_step(word_counts) -> (pair, merged word_counts), words as tuples of "
             "symbols", "26", _bpe_merge_step, _merge_step_cases, ("pair", "word_counts"), exact=True,
             hints=(_merge_pair_hint, _merged_words_hint), convert=_merge_step_codes, unseen=_unseen_merge_step, points=2),
    Exercise("bpe_segment", "bpe_segment(word, merges) -> list of pieces, the last one ending with the marker",
             "26", _bpe_segment, _segment_cases, ("pieces",), exact=True, hints=(_segment_hint,),
             convert=_segment_codes, unseen=_unseen_segment, points=2),
]


# -- realistic wrong solutions -------------------------------------------------------------------------------

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
