"""What the bench times: the presets' workloads, random padded batches, and their FLOPs.

``PRESETS[name]`` is a preset's model sizes (``models.MODEL_PRESETS``, written once) with the
workload it is timed on (``WORKLOADS``); ``random_batches`` draws the batches; ``step_flops`` and
``real_token_flops`` count a step's matrix products over the padded batch and over the real tokens.
"""

from __future__ import annotations

import time
from typing import Any

import numpy

from ..models import MODEL_PRESETS
from ..tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS


# What each preset is timed on: vocabulary sizes, sentences per batch, longest sentence.
WORKLOADS = {
    "tiny": dict(src_vocab=1000, tgt_vocab=1000, batch=32, length=12),
    "small": dict(src_vocab=4000, tgt_vocab=6000, batch=64, length=16),
    "base": dict(src_vocab=8000, tgt_vocab=8000, batch=64, length=24),
    # for GPUs: the paper's base sizes (NPFORMER_BACKEND=cupy npformer bench --presets base large)
    "large": dict(src_vocab=8000, tgt_vocab=8000, batch=128, length=32),
}


# The model sizes (``models.MODEL_PRESETS``) and the workload of every preset, in one dict each.
PRESETS = {name: {**MODEL_PRESETS[name], **workload} for name, workload in WORKLOADS.items()}


def gemm_gflops(n: int = 2048, repeats: int = 10) -> float:
    """Best float32 ``n x n`` matrix-product throughput of the active backend, in GFLOP/s.

    On NumPy, the better of two ways to use the cores: BLAS's own threads (``threads.set_threads(1)``)
    and npformer's row blocks, one per thread, each a one-thread BLAS product (how npformer's
    ops run). On CuPy, cuBLAS on the GPU (``n = 8192``, enough work to fill a large card), timed
    between synchronisations. The peak is the best reading, so the MFU below flatters neither.
    """
    from .. import backend, threads

    if backend.is_cupy():
        return _gpu_gemm_gflops(8192 if n == 2048 else n, repeats)
    rng = numpy.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=numpy.float32)
    b = rng.standard_normal((n, n), dtype=numpy.float32)
    out = numpy.empty((n, n), dtype=numpy.float32)

    def product(rows: slice) -> None:
        numpy.matmul(a[rows], b, out=out[rows])

    best = float("inf")
    previous = threads.get_threads()
    try:
        for count in dict.fromkeys((1, previous)):
            threads.set_threads(count)
            threads.parallel_rows(product, n, row_size=n * n)
            for _ in range(repeats):
                start = time.perf_counter()
                threads.parallel_rows(product, n, row_size=n * n)
                best = min(best, time.perf_counter() - start)
    finally:
        threads.set_threads(previous)
    return 2 * n**3 / best / 1e9


def _gpu_gemm_gflops(n: int, repeats: int) -> float:
    from .. import backend

    xp = backend.xp
    a = backend.asarray(numpy.random.default_rng(0).standard_normal((n, n), dtype=numpy.float32))
    b, out = a.T.copy(), xp.empty((n, n), dtype=numpy.float32)
    xp.matmul(a, b, out=out)
    best = float("inf")
    for _ in range(repeats):
        backend.synchronize()
        start = time.perf_counter()
        xp.matmul(a, b, out=out)
        backend.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def random_batches(preset: dict, count: int, seed: int = 0) -> list[tuple[numpy.ndarray, numpy.ndarray]]:
    """``count`` (source, target with <bos>/<eos>) id batches, lengths uniform in [L/2, L]."""
    rng = numpy.random.default_rng(seed)
    batch, length = preset["batch"], preset["length"]
    batches = []
    for _ in range(count):
        first_word = len(SPECIAL_TOKENS)
        src = rng.integers(first_word, preset["src_vocab"], size=(batch, length))
        tgt = rng.integers(first_word, preset["tgt_vocab"], size=(batch, length + 1))
        tgt[:, 0] = BOS_ID
        for row in range(batch):
            src[row, rng.integers(length // 2, length + 1):] = PAD_ID
            end = rng.integers(length // 2, length + 1)
            tgt[row, end] = EOS_ID
            tgt[row, end + 1:] = PAD_ID
        batches.append((src, tgt))
    return batches


def preset_model(preset: dict, seed: int = 0) -> Any:
    """The Transformer of a preset, float32, without dropout (the bench's and the summaries' model)."""
    from ..models import Transformer, TransformerConfig

    sizes = {key: preset[key] for key in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "d_ff", "n_layers")}
    return Transformer(TransformerConfig(**sizes, dropout=0.0), seed=seed)


def real_tokens(src: Any, tgt: Any) -> int:
    """The real (non-padding) tokens of a batch: source tokens and counted targets (``tgt[:, 1:]``)."""
    return int((src != PAD_ID).sum() + (tgt[:, 1:] != PAD_ID).sum())


def step_flops(preset: dict) -> int:
    """Matrix-product FLOPs of one training step on padded (B, L) batches: 3 x forward."""
    from ..models import summary_rows

    rows = summary_rows(preset_model(preset), preset["batch"], preset["length"], preset["length"])
    return 3 * sum(row.forward_flops for row in rows)


# Untimed steps before the timed ones, for both frameworks.
WARMUP_STEPS = 2


def real_token_flops(preset: dict, batches: list) -> float:
    """Matrix-product FLOPs of one training step (3 x forward) counting the real tokens only: each
    sentence at its own source length and target length (its counted targets), averaged over
    ``batches``. The padded batch's FLOPs are ``step_flops``."""
    from ..models import summary_rows

    model = preset_model(preset)
    pairs: dict[tuple[int, int], int] = {}
    for src, tgt in batches:
        for src_length, tgt_length in zip((src != PAD_ID).sum(1), (tgt[:, 1:] != PAD_ID).sum(1)):
            key = (int(src_length), int(tgt_length))
            pairs[key] = pairs.get(key, 0) + 1
    total = sum(count * sum(row.forward_flops for row in summary_rows(model, 1, max(src_length, 1), tgt_length))
                for (src_length, tgt_length), count in pairs.items())
    return 3 * total / len(batches)


def padding_share(batches: list) -> float:
    """The share of the batches' source and target positions that hold ``<pad>``."""
    real = sum(real_tokens(src, tgt) for src, tgt in batches)
    total = sum(src.size + tgt[:, 1:].size for src, tgt in batches)
    return 1.0 - real / total
