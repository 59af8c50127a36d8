"""The exercises of lesson 16, graded without a GPU: the roofline of a matrix product on a GPU,
``roofline``, and the list of the matrix products of a Transformer's forward pass, ``forward_products``.

Each op is ``batch`` products of an ``(m, k)`` matrix by a ``(k, n)`` matrix, one row
``(batch, m, k, n)`` of ``shapes``: a linear layer on ``N`` tokens is ``(1, N, D_in, D_out)``, attention's
scores are ``(B * H, T_q, D_h, T_k)``. Each output entry is a sum of ``k`` products, one multiply and
one add per term, and each operand is read once and the result written once, ``itemsize`` bytes a
number::

    flops         = 2 * batch * m * k * n
    bytes_moved   = itemsize * batch * (m * k + k * n + m * n)

The op cannot finish faster than its arithmetic at the card's peak (``flops / peak_flops``) nor
faster than its traffic at the card's bandwidth (``bytes_moved / bandwidth``); the two overlap, so
its floor is the larger of the two (Williams, Waterman and Patterson's roofline). On top of that, its
kernel's launch costs a fixed ``launch_seconds`` (CuPy's Python dispatch and the driver's launch),
however little the kernel does::

    seconds       = max(flops / peak_flops, bytes_moved / bandwidth) + launch_seconds
    compute_bound = flops / peak_flops > bytes_moved / bandwidth

Lesson 16 applies it to every matrix product of its model's forward pass (``forward_products``, one
``(batch, m, k, n)`` per product, in the textbook form: q, k and v three products) and compares the sum
with the times recorded on an H100. The products are compared as a set of shapes, whatever their names;
the reference counts npformer's own model: one product per weight matrix (``params()``), and attention's
two batches of per-head products where its ``summary_rows`` puts their FLOPs.
"""

from __future__ import annotations

from collections import Counter

import numpy

from ... import models
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, size


def roofline(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    batch, m, k, n = numpy.asarray(shapes, dtype=numpy.float64).T            # (ops,) each
    flops = 2 * batch * m * k * n                                            # a multiply and an add per term
    bytes_moved = itemsize * batch * (m * k + k * n + m * n)                 # operands read, result written
    compute, memory = flops / peak_flops, bytes_moved / bandwidth            # (ops,) seconds each
    return flops, bytes_moved, numpy.maximum(compute, memory) + launch_seconds, compute > memory


H100 = {"peak_flops": 67e12, "bandwidth": 3.35e12}   # float32 without tensor cores; HBM3 (NVIDIA's datasheet, SXM)


def _ops(shapes, itemsize=4, launch_seconds=10e-6, card=H100):
    return {"shapes": numpy.array(shapes, dtype=numpy.int64), "itemsize": itemsize, **card,
            "launch_seconds": launch_seconds}


def _roofline_cases(rng):
    return [
        Case("a 4096^3 float32 product, a linear layer on 3,072 tokens, attention's scores (H100)",
             _ops([[1, 4096, 4096, 4096], [1, 3072, 256, 1024], [512, 24, 32, 25]])),
        Case("float64, no launch cost counted: the roofline alone",
             _ops([[1, 2048, 64, 2048], [8, 16, 512, 16], [3, 1000, 1000, 10]], itemsize=8, launch_seconds=0.0)),
        Case("one op: a matrix times a vector", _ops([[1, 8192, 8192, 1]])),
        Case("half precision on a slower card", _ops([[2, 512, 768, 640], [64, 128, 64, 128], [1, 40, 30, 20],
                                                      [6, 256, 2048, 96], [1, 7, 9, 11]], itemsize=2,
                                                     launch_seconds=5e-6,
                                                     card={"peak_flops": 19.5e12, "bandwidth": 2.0e12})),
    ]


def _unseen_roofline(rng):
    count = int(rng.choice([2, 3, 5, 6, 7]))
    shapes = numpy.stack([rng.integers(2, 65, size=count), *(2 ** rng.uniform(2, 12, size=(3, count)))], axis=1)
    card = {"peak_flops": float(10 ** rng.uniform(12, 14.5)), "bandwidth": float(10 ** rng.uniform(11, 12.7))}
    itemsize = int(rng.choice([2, 4, 8]))
    return [Case(f"{count} products, {itemsize}-byte numbers, on a drawn card",
                 _ops(shapes.astype(numpy.int64), itemsize, float(10 ** rng.uniform(-6, -4.3)), card))]


def _pieces(inputs):
    batch, m, k, n = numpy.asarray(inputs["shapes"], dtype=numpy.float64).T
    return batch, m, k, n, inputs["itemsize"], inputs["peak_flops"], inputs["bandwidth"], inputs["launch_seconds"]


def _roofline_hint(got, expected, inputs, output):
    batch, m, k, n, itemsize, peak, bandwidth, launch = _pieces(inputs)
    flops = 2 * batch * m * k * n
    moved = itemsize * batch * (m * k + k * n + m * n)
    compute, memory = flops / peak, moved / bandwidth
    got = numpy.asarray(got, dtype=float)
    if got.shape != flops.shape:
        return ""

    def same(value):
        return numpy.allclose(got, value, rtol=1e-9)

    if output == "flops":
        if same(flops / 2):
            return "one operation per term: each term of the sum is a multiply and an add, two FLOPs"
        if same(flops / batch) and (batch != 1).any():
            return "one product counted: the op is `batch` products of the same shapes"
    if output == "bytes_moved":
        if same(moved / itemsize):
            return "numbers, not bytes: multiply by itemsize"
        if same(itemsize * batch * (m * k + k * n)):
            return "the result is not counted: it is written to memory, m * n more numbers per product"
        if same(moved / batch) and (batch != 1).any():
            return "one product counted: each of the `batch` products reads and writes its own matrices"
    if output == "seconds":
        if same(compute + memory + launch):
            return ("the arithmetic and the memory traffic are added: they overlap on a GPU, so the floor is "
                    "the larger of the two")
        if same(numpy.minimum(compute, memory) + launch):
            return "the smaller of the two times: an op waits for the slower of its arithmetic and its traffic"
        if launch and same(numpy.maximum(compute, memory)):
            return "no launch cost: each product is one kernel, and its launch adds launch_seconds"
    if output == "compute_bound" and numpy.array_equal(got.astype(bool), compute < memory):
        return "reversed: an op is compute-bound when its arithmetic takes longer than its memory traffic"
    return ""


# -- the forward pass's matrix products ---------------------------------------------------------------------

def _forward_products(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len):
    """name -> (batch, m, k, n): a product per weight matrix of npformer's model, over the tokens its
    module reads (the source in the encoder and in cross-attention's k and v), and per attention the
    scores Q K^T and the weighted sum P V, batches of pairs * n_heads products."""
    config = models.TransformerConfig(8, tgt_vocab, d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_layers=n_layers,
                                      max_len=max(src_len, tgt_len))
    model = models.Transformer(config, seed=0, dtype=numpy.float16)
    head = d_model // n_heads
    products = {}
    for name, weight in model.params().items():
        if weight.ndim != 2 or "embed" in name:
            continue
        reads_source = name.startswith("encoder") or ("cross" in name and name.split(".")[-2] in ("k", "v"))
        tokens = pairs * (src_len if reads_source else tgt_len)
        products[name] = (1, tokens, *weight.shape)
    for name in (row.name for row in models.summary_rows(model, pairs, src_len, tgt_len) if row.name.endswith("attn")):
        queries = src_len if name.startswith("encoder") else tgt_len
        keys = src_len if name.startswith("encoder") or "cross" in name else tgt_len
        products[f"{name} scores"] = (pairs * n_heads, queries, head, keys)
        products[f"{name} weighted sum"] = (pairs * n_heads, queries, keys, head)
    return products


def _product_rows(result, inputs):
    """The products as a sorted (ops, 4) integer array: the grader compares the set, not the names."""
    shapes = numpy.array([tuple(int(x) for x in shape) for shape in dict(result).values()], dtype=numpy.int64)
    return (shapes[numpy.lexsort(shapes.T[::-1])] if shapes.size else shapes.reshape(0, 4),)


def _sizes(d_model=32, n_heads=4, d_ff=64, n_layers=2, tgt_vocab=40, pairs=3, src_len=5, tgt_len=7):
    return {"d_model": d_model, "n_heads": n_heads, "d_ff": d_ff, "n_layers": n_layers, "tgt_vocab": tgt_vocab,
            "pairs": pairs, "src_len": src_len, "tgt_len": tgt_len}


def _product_cases(rng):
    return [Case("D=32, H=4, F=64, 2 layers, V=40; 3 pairs of 5 -> 7 tokens", _sizes()),
            Case("one layer, one head, source and target of one length", _sizes(16, 1, 32, 1, 20, 2, 6, 6)),
            Case("a source longer than the target", _sizes(24, 3, 96, 3, 50, 1, 9, 2))]


def _unseen_products(rng):
    heads = size(rng, 1, 4)
    sizes = _sizes(heads * size(rng, 1, 8), heads, 4 * size(rng, 1, 16), size(rng, 1, 3), size(rng, 8, 60),
                   size(rng, 1, 4), size(rng, 1, 9), size(rng, 1, 9))
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _products_hint(got, expected, inputs, output):
    got = numpy.asarray(got)
    if got.ndim != 2 or got.shape[1:] != (4,):
        return Hint(f"the products have the shape {got.shape}: each must be four integers (batch, m, k, n)")
    mine, theirs = Counter(map(tuple, got.tolist())), Counter(map(tuple, expected.tolist()))
    missing, extra = theirs - mine, mine - theirs
    source_projection = (1, inputs["pairs"] * inputs["src_len"], inputs["d_model"], inputs["d_model"])
    if missing[source_projection] and inputs["src_len"] != inputs["tgt_len"]:
        return Hint(f"{missing[source_projection]} fewer projections over the source's tokens than the forward "
                    f"pass makes: not every product of the decoder reads the target's tokens")
    if len(got) != len(expected):
        return Hint(f"{len(got)} products where the forward pass makes {len(expected)}")
    if extra:
        return Hint(f"{sum(extra.values())} of your products are not the forward pass's, for example "
                    f"{min(extra)} (batch, m, k, n)")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("roofline",
             "roofline(shapes, itemsize, peak_flops, bandwidth, launch_seconds) -> "
             "(flops, bytes_moved, seconds, compute_bound)",
             "16", roofline, _roofline_cases, ("flops", "bytes_moved", "seconds", "compute_bound"),
             hints=(_roofline_hint,), unseen=_unseen_roofline),
    Exercise("forward_products",
             "forward_products(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len) -> "
             "dict name -> (batch, m, k, n), every matrix product of the forward pass",
             "16", _forward_products, _product_cases, ("products",), exact=True, hints=(_products_hint,),
             convert=_product_rows, unseen=_unseen_products),
]


# -- the mistakes students make -------------------------------------------------------------------------

def _costs(shapes, itemsize):
    batch, m, k, n = numpy.asarray(shapes, dtype=float).T
    return 2 * batch * m * k * n, itemsize * batch * (m * k + k * n + m * n)


def _one_flop_per_term(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    batch, m, k, n = numpy.asarray(shapes, dtype=float).T
    flops = batch * m * k * n
    _, moved = _costs(shapes, itemsize)
    compute, memory = flops / peak_flops, moved / bandwidth
    return flops, moved, numpy.maximum(compute, memory) + launch_seconds, compute > memory


def _result_not_written(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    batch, m, k, n = numpy.asarray(shapes, dtype=float).T
    flops, _ = _costs(shapes, itemsize)
    moved = itemsize * batch * (m * k + k * n)
    compute, memory = flops / peak_flops, moved / bandwidth
    return flops, moved, numpy.maximum(compute, memory) + launch_seconds, compute > memory


def _added(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    flops, moved = _costs(shapes, itemsize)
    compute, memory = flops / peak_flops, moved / bandwidth
    return flops, moved, compute + memory + launch_seconds, compute > memory


def _reversed(shapes, itemsize, peak_flops, bandwidth, launch_seconds):
    flops, moved = _costs(shapes, itemsize)
    compute, memory = flops / peak_flops, moved / bandwidth
    return flops, moved, numpy.maximum(compute, memory) + launch_seconds, compute < memory


def _listed(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len, cross_reads_source=True,
            weighted_sum=True):
    head, products = d_model // n_heads, {}
    attentions = [("encoder", "self", src_len, src_len), ("decoder", "self", tgt_len, tgt_len),
                  ("decoder", "cross", tgt_len, src_len if cross_reads_source else tgt_len)]
    for layer in range(n_layers):
        for side, kind, queries, keys in attentions:
            for matrix, length in (("q", queries), ("k", keys), ("v", keys), ("o", queries)):
                products[f"{side}.{layer} {kind} {matrix}"] = (1, pairs * length, d_model, d_model)
            products[f"{side}.{layer} {kind} scores"] = (pairs * n_heads, queries, head, keys)
            if weighted_sum:
                products[f"{side}.{layer} {kind} weighted sum"] = (pairs * n_heads, queries, keys, head)
        for side, length in (("encoder", src_len), ("decoder", tgt_len)):
            products[f"{side}.{layer} fc1"] = (1, pairs * length, d_model, d_ff)
            products[f"{side}.{layer} fc2"] = (1, pairs * length, d_ff, d_model)
    products["output layer"] = (1, pairs * tgt_len, d_model, tgt_vocab)
    return products


def _cross_reads_target(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len):
    return _listed(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len, cross_reads_source=False)


def _no_weighted_sum(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len):
    return _listed(d_model, n_heads, d_ff, n_layers, tgt_vocab, pairs, src_len, tgt_len, weighted_sum=False)


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("roofline", "a multiply-add counted as one FLOP", _one_flop_per_term, "two FLOPs"),
    WrongSolution("roofline", "the result's write left out of the traffic", _result_not_written, "result is not counted"),
    WrongSolution("roofline", "arithmetic and traffic added", _added, "overlap"),
    WrongSolution("roofline", "compute-bound reversed", _reversed, "reversed"),
    WrongSolution("forward_products", "cross-attention read as self-attention on the target", _cross_reads_target,
                  "projections over the source"),
    WrongSolution("forward_products", "attention's product with V forgotten", _no_weighted_sum, "products where"),
]
