"""npformer's side of the bench: a training step timed, profiled by op family, and decoding timed.

Each ``measure_*`` runs in a fresh subprocess (``bench.run``), so that its peak memory is its own.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ..tokens import BOS_ID, PAD_ID
from .workloads import PRESETS, WARMUP_STEPS, preset_model, random_batches, real_tokens


def _max_rss_mb() -> float:
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform != "darwin" else rss / 2**20


def time_steps(step: Any, batches: list) -> tuple[float, float]:
    """``WARMUP_STEPS`` untimed steps, then the mean seconds per step and the peak-memory growth in MB."""
    rss_before = _max_rss_mb()
    for src, tgt in batches[:WARMUP_STEPS]:
        step(src, tgt)
    start = time.perf_counter()
    for src, tgt in batches[WARMUP_STEPS:]:
        step(src, tgt)  # each step reads its loss, which also waits for a GPU
    return (time.perf_counter() - start) / (len(batches) - WARMUP_STEPS), _max_rss_mb() - rss_before


def measure_npformer(name: str, steps: int, op_set: str = "fast") -> dict:
    from .. import ops

    with ops.using(op_set):
        return _measure_npformer_with_active_ops(name, steps)


def _measure_npformer_with_active_ops(name: str, steps: int) -> dict:
    from .. import backend, optim
    from ..training import train_step

    preset = PRESETS[name]
    model = preset_model(preset)
    optimizer = optim.Adam(model, lr=1e-4)
    batches = [(backend.asarray(s), backend.asarray(t)) for s, t in random_batches(preset, steps + WARMUP_STEPS)]

    def step(src: Any, tgt: Any) -> float:
        return train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, ignore_index=PAD_ID,
                          only_counted_targets=True).loss

    seconds, memory = time_steps(step, batches)
    tokens = sum(real_tokens(s, t) for s, t in batches[WARMUP_STEPS:]) / steps
    return {"seconds_per_step": seconds, "tokens_per_step": tokens,
            "peak_memory_mb": memory, "decoding": _measure_decoding(model, preset),
            "profile": profile_step(model, optimizer, batches)}


# The op families of a profile: each op's forward and backward, by the family it counts in.
PROFILE_FAMILIES = {
    "linear": "matrix products of the linear layers",
    "attention": "attention: scores, mask, softmax, weighted sum",
    "layernorm": "layer norm",
    "cross_entropy": "loss: softmax cross-entropy",
    "relu": "activation", "gelu": "activation",
    "embedding": "embedding lookup and scatter",
    "dropout": "dropout",
}


def profile_step(model: Any, optimizer: Any, batches: list, ignore_index: int = PAD_ID) -> dict:
    """Where a training step's time goes: seconds per step in each op family, in the optimizer
    (clipping is not part of the bench's step) and in the rest (residual additions, head split
    and merge, positional table, masks, copies, Python).

    Every ``ops.<name>_forward`` and ``ops.<name>_backward`` that the blocks call is wrapped by a
    timer for the duration, and so is ``optimizer.step``; the first ``WARMUP_STEPS`` batches warm up. Timers
    cost about a microsecond per call, a fraction of a percent of a step. On a GPU each timer waits for
    the GPU before and after its op, so that the op's kernels count in its family; the waits make the
    profiled step longer than the timed one.
    """
    from .. import backend, ops, threads
    from ..training import train_step

    spent: dict[str, float] = {family: 0.0 for family in dict.fromkeys(PROFILE_FAMILIES.values())}
    spent["optimizer: Adam update"] = 0.0

    def timed(function: Any, family: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            backend.synchronize()              # on a GPU: the op's kernels, not just their launches
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                backend.synchronize()
                spent[family] += time.perf_counter() - start
        return call

    op_set = ops.current()
    timed_ops = {f"{op}_{direction}": timed(getattr(op_set, f"{op}_{direction}"), family)
                 for op, family in PROFILE_FAMILIES.items() for direction in ("forward", "backward")}
    original_step = optimizer.step
    optimizer.step = timed(original_step, "optimizer: Adam update")
    hold_blas = ops.holds_blas()  # asked before the timers hide which ops are active
    try:
        with threads.blas_on_one_thread(when=hold_blas), ops.using(timed_ops, name="timed"):
            for src, tgt in batches[:WARMUP_STEPS]:
                train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, ignore_index=ignore_index,
                           only_counted_targets=True)
            for family in spent:
                spent[family] = 0.0
            start = time.perf_counter()
            for src, tgt in batches[WARMUP_STEPS:]:
                train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, ignore_index=ignore_index,
                           only_counted_targets=True)
            total = (time.perf_counter() - start) / (len(batches) - WARMUP_STEPS)
    finally:
        optimizer.step = original_step
    per_step = {family: seconds / (len(batches) - WARMUP_STEPS) for family, seconds in spent.items()}
    per_step["the rest: residuals, head split/merge, copies, Python"] = max(total - sum(per_step.values()), 0.0)
    return {"seconds_per_step": total, "families": per_step}


def _measure_decoding(model: Any, preset: dict, length: int = 24) -> dict:
    from .. import backend

    src = backend.asarray(random_batches(preset, 1, seed=9)[0][0])
    batch = src.shape[0]

    def cached() -> None:
        cache = model.start_decoding(src, max_len=length)
        tokens = backend.xp.full(batch, BOS_ID)
        for _ in range(length):
            tokens = model.decode_step(cache, tokens).argmax(-1)

    def uncached() -> None:
        memory, src_mask = model.encode(src)
        prefix = backend.xp.full((batch, 1), BOS_ID)
        for _ in range(length):
            logits = model.decode(prefix, memory, src_mask)
            prefix = backend.xp.concatenate([prefix, logits[:, -1].argmax(-1)[:, None]], axis=1)

    timings = {}
    with model.evaluating():
        for name, run in (("cached", cached), ("uncached", uncached)):
            run()
            start = time.perf_counter()
            run()
            timings[name] = batch * length / (time.perf_counter() - start)
    return {"tokens_per_second_cached": timings["cached"], "tokens_per_second_uncached": timings["uncached"],
            "speedup": timings["cached"] / timings["uncached"], "length": length}
