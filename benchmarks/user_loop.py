"""A user's own training loop against ``train_step`` and PyTorch eager, both op sets, small and base.

    python benchmarks/user_loop.py [ROUNDS] [STEPS]      (defaults 3 and 10)

The user's loop is the textbook step of the lessons and the design, written out with the
default op set and no help from npformer's training code::

    logits = model.forward(src, tgt_in)
    loss, cache = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
    model.zero_grad(); model.backward(ops.current().cross_entropy_backward(1.0, cache)); optimizer.step()

It computes the padded batch, as PyTorch eager does. ``train_step(..., only_counted_targets=True)``
takes the fast path (no work on padding). Every measurement runs in a fresh process with 2 BLAS
threads (as ``npformer bench``), on the bench's batches; the rounds alternate the six npformer
measurements and PyTorch's, and each keeps its fastest mean step time (this machine drifts).
"""

import json
import os
import subprocess
import sys

CHILD = """
import json, sys
from npformer import bench, backend, ops, optim
from npformer.tokens import PAD_ID
from npformer.training import train_step
name, op_set, loop, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
preset = bench.PRESETS[name]
model = bench._model(preset)
optimizer = optim.Adam(model, lr=1e-4)
batches = [(backend.asarray(s), backend.asarray(t)) for s, t in bench.random_batches(preset, steps + bench.WARMUP_STEPS)]

active = getattr(ops, "current", lambda: ops)  # before issue 43, the package's names were the active set

def users_loop(src, tgt):
    logits = model.forward(src, tgt[:, :-1])
    loss, cache = active().cross_entropy_forward(logits, tgt[:, 1:], ignore_index=PAD_ID)
    model.zero_grad()
    model.backward(active().cross_entropy_backward(1.0, cache))
    optimizer.step()
    return float(loss)

def npformers_step(src, tgt):
    return train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer, only_counted_targets=True).loss

with ops.using(op_set):
    seconds, _ = bench._time_steps(users_loop if loop == "users_loop" else npformers_step, batches)
print(json.dumps(seconds))
"""
TORCH = "import json, sys, npformer.bench as b; print(json.dumps(b._measure_torch(sys.argv[1], int(sys.argv[2]))['seconds_per_step']))"


def run(arguments: list[str]) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    result = subprocess.run([sys.executable, "-c", *arguments], capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with open("/proc/cpuinfo") as cpuinfo:
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; {rounds} rounds of {steps} steps; best mean step time of each")
    kinds = [(op_set, loop) for loop in ("users_loop", "train_step") for op_set in ("fast", "textbook")]
    for name in ("small", "base"):
        best: dict = {}
        for _ in range(rounds):
            for op_set, loop in kinds:
                seconds = run([CHILD, name, op_set, loop, str(steps)])
                best[op_set, loop] = min(best.get((op_set, loop), seconds), seconds)
            seconds = run([TORCH, name, str(steps)])
            best["torch"] = min(best.get("torch", seconds), seconds)
        print(f"{name}: PyTorch eager {1000 * best['torch']:.1f} ms")
        for op_set, loop in kinds:
            seconds = best[op_set, loop]
            label = "the user's loop (padded)" if loop == "users_loop" else "train_step (fast path)"
            print(f"  {label:26s} {op_set:8s} {1000 * seconds:7.1f} ms  {seconds / best['torch']:.2f}x PyTorch")


if __name__ == "__main__":
    main()
