"""``npformer bench``: how fast is a training step, against the machine's limit and PyTorch?

In one run it measures:

* NumPy's float32 matrix-product throughput (``2 n^3`` FLOPs for ``n x n``): the
  practical limit for any NumPy code on this machine;
* npformer's float32 training step (forward, loss, backward, Adam) for three presets,
  on random padded batches with lengths uniform in ``[L/2, L]``: tokens/s (real source
  and target tokens), achieved GFLOP/s (matrix products, ``2mnk`` each, x3 for forward
  plus backward), the fraction of the GEMM peak (MFU), and the peak memory of a step;
  the MFU twice: over the FLOPs of the padded batch (what a framework that computes the
  padding does) and over the FLOPs of the real tokens alone (each sentence at its own
  lengths), with the padding share of the batches;
* the limit: the time of the real tokens' matrix products at the GEMM peak, and the step's
  time over it;
* greedy decoding of 24 tokens, with and without the KV cache;
* a profile of npformer's step: the time in each op family (linear layers, attention, layer norm,
  loss, ...), in the optimizer and in the rest, and the floor that the GEMM peak sets;
* when PyTorch is importable (never required): the same model in plain PyTorch eager,
  ``torch.nn.Transformer`` with the same sizes, 2 threads, float32, post-norm, dropout 0,
  timed in the same run, and the ratio npformer / PyTorch.

The two frameworks are measured alternately, ``rounds`` times each, and each keeps its
fastest step time: the machine's speed drifts, and drift should hit both alike. Each
measurement first runs ``WARMUP_STEPS`` untimed steps (the first step of a process sets up
its arrays, thread pools and caches).

Every (framework, preset) runs in a fresh subprocess, so that its peak resident memory
(``ru_maxrss``, above the process's size before the first step) is its own.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

import numpy

from .models import MODEL_PRESETS
from .tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS

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


def _max_rss_mb() -> float:
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform != "darwin" else rss / 2**20


def gemm_gflops(n: int = 2048, repeats: int = 10) -> float:
    """Best float32 ``n x n`` matrix-product throughput of NumPy, in GFLOP/s.

    The better of two ways to use the cores: BLAS's own threads (``threads.set_threads(1)``)
    and npformer's row blocks, one per thread, each a one-thread BLAS product (how npformer's
    ops run). The peak is the best either reaches, so the MFU below flatters neither.
    """
    from . import threads

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


def _model(preset: dict, seed: int = 0) -> Any:
    """The Transformer of a preset, float32, without dropout (the bench's and the summaries' model)."""
    from .models import Transformer, TransformerConfig

    sizes = {key: preset[key] for key in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "d_ff", "n_layers")}
    return Transformer(TransformerConfig(**sizes, dropout=0.0), seed=seed)


def real_tokens(src: Any, tgt: Any) -> int:
    """The real (non-padding) tokens of a batch: source tokens and counted targets (``tgt[:, 1:]``)."""
    return int((src != PAD_ID).sum() + (tgt[:, 1:] != PAD_ID).sum())


def step_flops(preset: dict) -> int:
    """Matrix-product FLOPs of one training step on padded (B, L) batches: 3 x forward."""
    from .models import summary_rows

    rows = summary_rows(_model(preset), preset["batch"], preset["length"], preset["length"])
    return 3 * sum(row.forward_flops for row in rows)


# Untimed steps before the timed ones, for both frameworks.
WARMUP_STEPS = 2


def real_token_flops(preset: dict, batches: list) -> float:
    """Matrix-product FLOPs of one training step (3 x forward) counting the real tokens only: each
    sentence at its own source length and target length (its counted targets), averaged over
    ``batches``. The padded batch's FLOPs are ``step_flops``."""
    from .models import summary_rows

    model = _model(preset)
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


def _time_steps(step: Any, batches: list) -> tuple[float, float]:
    """``WARMUP_STEPS`` untimed steps, then the mean seconds per step and the peak-memory growth in MB."""
    rss_before = _max_rss_mb()
    for src, tgt in batches[:WARMUP_STEPS]:
        step(src, tgt)
    start = time.perf_counter()
    for src, tgt in batches[WARMUP_STEPS:]:
        step(src, tgt)  # each step reads its loss, which also waits for a GPU
    return (time.perf_counter() - start) / (len(batches) - WARMUP_STEPS), _max_rss_mb() - rss_before


def _measure_npformer(name: str, steps: int, op_set: str = "fast") -> dict:
    from . import ops

    with ops.using(op_set):
        return _measure_npformer_with_active_ops(name, steps)


def _measure_npformer_with_active_ops(name: str, steps: int) -> dict:
    from . import backend, optim
    from .training import train_step

    preset = PRESETS[name]
    model = _model(preset)
    optimizer = optim.Adam(model, lr=1e-4)
    batches = [(backend.asarray(s), backend.asarray(t)) for s, t in random_batches(preset, steps + WARMUP_STEPS)]

    def step(src: Any, tgt: Any) -> float:
        return train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, ignore_index=PAD_ID,
                          only_counted_targets=True).loss

    seconds, memory = _time_steps(step, batches)
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
    cost about a microsecond per call, a fraction of a percent of a step.
    """
    from . import ops, threads
    from .training import train_step

    spent: dict[str, float] = {family: 0.0 for family in dict.fromkeys(PROFILE_FAMILIES.values())}
    spent["optimizer: Adam update"] = 0.0

    def timed(function: Any, family: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
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
    from . import backend

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


def _measure_torch(name: str, steps: int) -> dict:
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    # On the CuPy backend, compare with PyTorch on the GPU; otherwise on the CPU.
    on_gpu = os.environ.get("NPFORMER_BACKEND", "") == "cupy" and torch.cuda.is_available()
    device = torch.device("cuda" if on_gpu else "cpu")
    preset = PRESETS[name]
    d_model, vocab_src, vocab_tgt = preset["d_model"], preset["src_vocab"], preset["tgt_vocab"]

    class TorchTranslator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.src_embed = torch.nn.Embedding(vocab_src, d_model)
            self.tgt_embed = torch.nn.Embedding(vocab_tgt, d_model)
            self.transformer = torch.nn.Transformer(
                d_model, preset["n_heads"], preset["n_layers"], preset["n_layers"], preset["d_ff"],
                dropout=0.0, batch_first=True, norm_first=False)
            self.out_proj = torch.nn.Linear(d_model, vocab_tgt)
            position = torch.arange(512).unsqueeze(1)
            frequency = torch.exp(torch.arange(0, d_model, 2) * (-torch.log(torch.tensor(10000.0)) / d_model))
            table = torch.zeros(512, d_model)
            table[:, 0::2] = torch.sin(position * frequency)
            table[:, 1::2] = torch.cos(position * frequency)
            self.register_buffer("positions", table)

        def forward(self, src: Any, tgt: Any) -> Any:
            scale = d_model ** 0.5
            x = self.src_embed(src) * scale + self.positions[: src.shape[1]]
            y = self.tgt_embed(tgt) * scale + self.positions[: tgt.shape[1]]
            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
            src_padding = torch.zeros(src.shape, device=src.device).masked_fill(src == PAD_ID, float("-inf"))
            tgt_padding = torch.zeros(tgt.shape, device=tgt.device).masked_fill(tgt == PAD_ID, float("-inf"))
            out = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_padding,
                                   tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=src_padding)
            return self.out_proj(out)

    model = TorchTranslator().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_ID)
    batches = [(torch.from_numpy(s).to(device), torch.from_numpy(t).to(device))
               for s, t in random_batches(preset, steps + WARMUP_STEPS)]

    def step(src: Any, tgt: Any) -> float:
        logits = model(src, tgt[:, :-1])
        loss = criterion(logits.reshape(-1, vocab_tgt), tgt[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    seconds, memory = _time_steps(step, batches)
    return {"seconds_per_step": seconds, "peak_memory_mb": memory,
            "torch_version": torch.__version__, "device": str(device)}


def _subprocess(framework: str, name: str, steps: int, op_set: str = "fast") -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    arguments = f"{name!r}, {steps}" + (f", {op_set!r}" if framework == "npformer" else "")
    code = f"import json, npformer.bench as b; print(json.dumps(b._measure_{framework}({arguments})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"bench: {framework} {name} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _fastest(framework: str, name: str, steps: int, rounds: int, other: str | None,
             op_set: str = "fast") -> tuple[dict, dict | None]:
    """``rounds`` alternating measurements of ``framework`` (and ``other``); the fastest of each.

    This machine's speed drifts by 10-20% from minute to minute; alternating the two frameworks
    and keeping each one's best time lets drift hit both alike.
    """
    ours = theirs = None
    for _ in range(rounds):
        candidate = _subprocess(framework, name, steps, op_set)
        if ours is None or candidate["seconds_per_step"] < ours["seconds_per_step"]:
            ours = candidate
        if other:
            candidate = _subprocess(other, name, steps)
            if theirs is None or candidate["seconds_per_step"] < theirs["seconds_per_step"]:
                theirs = candidate
    return ours, theirs


def run(presets: list[str], steps: int = 10, with_torch: bool | None = None,
        stream: Any = sys.stdout, rounds: int = 2, ops: str = "fast") -> dict:
    """Measure everything; print a table to ``stream`` and return the results.

    ``ops``: the op set npformer's steps run on (``npformer.ops.using``): "fast" (the
    default set) or "textbook".
    """
    if ops not in ("fast", "textbook"):
        raise ValueError(f"bench: ops must be 'fast' or 'textbook', got {ops!r}")
    with_torch = torch_available() if with_torch is None else with_torch
    peak = gemm_gflops()  # measured again at the end: the higher one is the limit (a stricter MFU)
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "python": platform.python_version(), "numpy": numpy.__version__,
        "date": time.strftime("%Y-%m-%d"), "gemm_gflops": peak, "presets": {}, "ops": ops,
    }
    from . import backend, threads

    results["backend"], results["threads"] = backend.get_backend(), threads.get_threads()
    print(f"backend: {results['backend']}, {results['threads']} threads, {ops} ops; "
          f"NumPy float32 GEMM (2048^3): {peak:.0f} GFLOP/s", file=stream)
    for name in presets:
        print(f"measuring {name} ...", file=stream, flush=True)
        flops = step_flops(PRESETS[name])
        timed_batches = random_batches(PRESETS[name], steps + WARMUP_STEPS)[WARMUP_STEPS:]
        ours, theirs = _fastest("npformer", name, steps, rounds, "torch" if with_torch else None, ops)
        entry = {**ours, "flops_per_step": flops, "gflops": flops / ours["seconds_per_step"] / 1e9,
                 "real_token_flops_per_step": real_token_flops(PRESETS[name], timed_batches),
                 "padding_share": padding_share(timed_batches)}
        entry["tokens_per_second"] = ours["tokens_per_step"] / ours["seconds_per_step"]
        if with_torch:
            entry["torch"] = theirs
            entry["ratio_to_torch"] = ours["seconds_per_step"] / theirs["seconds_per_step"]
        results["presets"][name] = entry
    # The GEMM peak again, now that the machine is warm: MFU divides by the higher reading.
    results["gemm_gflops"] = peak = max(peak, gemm_gflops())
    print(f"GEMM peak (best of two readings): {peak:.0f} GFLOP/s", file=stream)
    print(f"{'preset':<6} {'ms/step':>8} {'tok/s':>8} {'GFLOP/s':>8} {'MFU':>5} {'MFU*':>5} {'pad':>4} "
          f"{'limit ms':>8} {'x limit':>7} {'mem MB':>7} {'decode x':>8}"
          + (f" {'torch ms':>9} {'torch MB':>8} {'ratio':>6}" if with_torch else ""), file=stream)
    for name, entry in results["presets"].items():
        entry["mfu"] = entry["gflops"] / peak
        entry["mfu_real_tokens"] = entry["real_token_flops_per_step"] / entry["seconds_per_step"] / (peak * 1e9)
        entry["limit_seconds"] = entry["real_token_flops_per_step"] / (peak * 1e9)
        line = (f"{name:<6} {1000 * entry['seconds_per_step']:8.1f} {entry['tokens_per_second']:8,.0f} "
                f"{entry['gflops']:8.1f} {entry['mfu']:5.2f} {entry['mfu_real_tokens']:5.2f} "
                f"{100 * entry['padding_share']:3.0f}% {1000 * entry['limit_seconds']:8.1f} "
                f"{entry['seconds_per_step'] / entry['limit_seconds']:6.2f}x {entry['peak_memory_mb']:7.0f} "
                f"{entry['decoding']['speedup']:7.1f}x")
        if with_torch:
            line += (f" {1000 * entry['torch']['seconds_per_step']:9.1f} "
                     f"{entry['torch']['peak_memory_mb']:8.0f} {entry['ratio_to_torch']:6.2f}")
        print(line, file=stream)
    print("MFU = padded batch's FLOPs / time / GEMM peak; MFU* = the real tokens' FLOPs only (each sentence at "
          "its own lengths); pad = padding share of the batch positions; limit = the real tokens' matrix "
          "products at the GEMM peak, x limit = step time / limit", file=stream)
    print("ratio = npformer time / PyTorch time per step (below 1: npformer is faster); "
          "decode x = KV-cached greedy decoding speed-up at 24 tokens", file=stream)
    for name, entry in results["presets"].items():
        print(profile_table(name, entry, peak), file=stream)
    return results


def profile_table(name: str, entry: dict, peak: float) -> str:
    """The profile of one preset's step as lines: milliseconds and share of the step per family,
    and the floor: the matrix-product FLOPs of the real tokens (of the padded batch when the entry
    has no count of them) at the GEMM peak."""
    profile = entry["profile"]
    total = profile["seconds_per_step"]
    lines = [f"where the {name} step goes ({1000 * total:.1f} ms in the profiled steps):"]
    for family, seconds in sorted(profile["families"].items(), key=lambda item: -item[1]):
        lines.append(f"  {100 * seconds / total:5.1f}%  {1000 * seconds:7.1f} ms  {family}")
    floor = entry.get("real_token_flops_per_step", entry["flops_per_step"]) / (peak * 1e9)
    lines.append(f"  every matrix product of the real tokens at the GEMM peak would take {1000 * floor:.1f} ms "
                 f"({100 * floor / total:.0f}% of the step)")
    return "\n".join(lines)
