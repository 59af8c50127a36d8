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
(``ru_maxrss``, above the process's size before the first step) is its own."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

import numpy


from .measure import PROFILE_FAMILIES, measure_npformer, profile_step, time_steps
from .torch_twin import measure_torch, torch_available, torch_translator
from .workloads import (PRESETS, WARMUP_STEPS, WORKLOADS, gemm_gflops, padding_share, preset_model, random_batches,
                        real_token_flops, real_tokens, step_flops)

# measure_npformer and measure_torch run in the subprocesses of ``run``; the benchmarks/ scripts reuse
# preset_model, time_steps and torch_translator.
__all__ = ["run", "profile_table", "PRESETS", "WORKLOADS", "WARMUP_STEPS", "PROFILE_FAMILIES", "gemm_gflops",
           "random_batches", "real_tokens", "step_flops", "real_token_flops", "padding_share", "profile_step",
           "torch_available", "torch_translator", "measure_npformer", "measure_torch", "preset_model", "time_steps"]


def _subprocess(framework: str, name: str, steps: int, op_set: str = "fast", stream: Any = None) -> dict:
    from .. import backend

    # The active backend, however it was chosen (--backend or NPFORMER_BACKEND), goes to the subprocess.
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2",
               NPFORMER_BACKEND=backend.get_backend())
    arguments = f"{name!r}, {steps}" + (f", {op_set!r}" if framework == "npformer" else "")
    code = f"import json, npformer.bench as b; print(json.dumps(b.measure_{framework}({arguments})))"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"bench: {framework} {name} failed:\n{result.stderr[-2000:]}")
    if stream is not None:
        label = f"npformer ({op_set} ops)" if framework == "npformer" else framework
        print(f"  {label} {name}: {time.perf_counter() - started:.1f} s in all", file=stream, flush=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _fastest(framework: str, name: str, steps: int, rounds: int, other: str | None,
             op_set: str = "fast", stream: Any = None) -> tuple[dict, dict | None]:
    """``rounds`` alternating measurements of ``framework`` (and ``other``); the fastest of each.

    This machine's speed drifts by 10-20% from minute to minute; alternating the two frameworks
    and keeping each one's best time lets drift hit both alike.
    """
    ours = theirs = None
    for _ in range(rounds):
        candidate = _subprocess(framework, name, steps, op_set, stream)
        if ours is None or candidate["seconds_per_step"] < ours["seconds_per_step"]:
            ours = candidate
        if other:
            candidate = _subprocess(other, name, steps, stream=stream)
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
    from .. import backend, threads

    results["backend"], results["threads"] = backend.get_backend(), threads.get_threads()
    where = "cuBLAS on the GPU (8192^3)" if backend.is_cupy() else "NumPy (2048^3)"
    print(f"backend: {results['backend']}, {results['threads']} threads, {ops} ops; "
          f"float32 GEMM, {where}: {peak:.0f} GFLOP/s", file=stream)
    for name in presets:
        print(f"measuring {name} ...", file=stream, flush=True)
        flops = step_flops(PRESETS[name])
        timed_batches = random_batches(PRESETS[name], steps + WARMUP_STEPS)[WARMUP_STEPS:]
        ours, theirs = _fastest("npformer", name, steps, rounds, "torch" if with_torch else None, ops, stream)
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
