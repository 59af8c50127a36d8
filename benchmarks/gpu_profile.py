"""Where a GPU training step's host time goes: cProfile over a few bench steps on CuPy.

    NPFORMER_BACKEND=cupy python benchmarks/gpu_profile.py [small|base] [fast|textbook]

A GPU step of these sizes is bound by the host (Python and kernel launches), not by the GPU's
arithmetic, so the functions with the most own time are where to cut. Prints the top functions by
own time and by cumulative time, and the number of kernels CuPy launched per step when its
profiler hooks are available.
"""

import cProfile
import io
import pstats
import sys
import time

from npformer import backend, ops, optim
from npformer.bench.workloads import PRESETS, WARMUP_STEPS, preset_model, random_batches
from npformer.tokens import PAD_ID
from npformer.training import train_step

name = sys.argv[1] if len(sys.argv) > 1 else "small"
op_set = sys.argv[2] if len(sys.argv) > 2 else "fast"
preset = PRESETS[name]
model = preset_model(preset)
optimizer = optim.Adam(model, lr=1e-4)
batches = [(backend.asarray(s), backend.asarray(t)) for s, t in random_batches(preset, WARMUP_STEPS + 10)]


def step(src, tgt):
    return train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, ignore_index=PAD_ID,
                      only_counted_targets=True).loss


with ops.using(op_set):
    for src, tgt in batches[:WARMUP_STEPS]:
        step(src, tgt)
    backend.synchronize()
    started = time.perf_counter()
    for src, tgt in batches[WARMUP_STEPS:]:
        step(src, tgt)
    backend.synchronize()
    print(f"{name}, {op_set} set, {backend.get_backend()}: {1000 * (time.perf_counter() - started) / 10:.1f} ms per step")
    profiler = cProfile.Profile()
    profiler.enable()
    for src, tgt in batches[WARMUP_STEPS:]:
        step(src, tgt)
    backend.synchronize()
    profiler.disable()
for key in ("tottime", "cumulative"):
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(45)
    print("\n".join(line[:200] for line in text.getvalue().splitlines()[4:60]))
