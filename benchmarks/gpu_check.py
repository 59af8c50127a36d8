"""Prove the CuPy backend on a CUDA GPU, in one command (172 s on an H100; each step has a time limit).

    bash benchmarks/gpu_check.sh            (python benchmarks/gpu_check.py [--out FOLDER] [--skip-bench])

Each step runs in its own process, with a time limit, and its output goes to ``FOLDER/<step>.log``
(default ``gpu_check/``); the summary table comes last, and the exit status is 1 if any step failed:

1. ops: every op of ``gradcheck.OP_CASES``, forward and backward, on CuPy against NumPy from the same
   inputs, in float64 and float32, in both op sets (the textbook's and the fast one, whose forms on
   CuPy are the fused kernels of ``npformer/ops/gpu/``); dropout draws its mask from the counter
   generator (``backend.default_rng``) on both, so the masks are the same. Then the finite-difference
   check of every op with every array on the GPU.
2. kernels: ``tests/test_gpu_ops.py``, every GPU form against its textbook twin on the GPU.
3. gradients: ``tests/test_gradients.py`` under CuPy (hypothesis profile "gpu": 12 shapes per op).
4. training: ``tests/test_training_on_device.py`` under CuPy: ``train --data`` with a checkpoint at
   every evaluation, Ctrl-C and ``--resume`` ending bit-exactly where the uninterrupted run ends,
   ``--average-last``, ``evaluate``, ``translate``, the attention explorer, the run moved to the CPU
   and back.
5. gradcheck: ``npformer --backend cupy gradcheck``.
6. pretrained: the shipped English-French model's greedy translations of its first 100 test sentences
   on the GPU and on the CPU, compared; ``attention --pretrained fra --html`` on the GPU.
7. bench: ``npformer bench --presets small base`` on the GPU, against PyTorch eager on the same card,
   with the fast set and with the textbook set.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = {"float64": 1e-10, "float32": 2e-4}


def compare_ops() -> int:
    """Step 1, in this process: every op on CuPy against NumPy, then finite differences on the GPU."""
    import numpy as np

    from npformer import backend, gradcheck, ops
    from npformer.counter_random import CounterGenerator

    def run_op(name: str, dtype: type, op_set: str) -> list:
        with ops.using(op_set):
            forward, backward, inputs = gradcheck.OP_CASES[name](np.random.default_rng(0))
            inputs = {key: backend.asarray(value.astype(dtype) if value.dtype.kind == "f" else value)
                      for key, value in inputs.items()}
            if name == "dropout":   # the same mask on both: the counter generator draws the same numbers
                x = inputs["x"]
                out, cache = ops.current().dropout_forward(x, 0.3, CounterGenerator(5, backend.xp._module), True)
                backward = ops.current().dropout_backward
            else:
                out, cache = forward(*inputs.values())
            dout = np.random.default_rng(1).standard_normal(np.shape(out)).astype(dtype)
            grads = backward(backend.asarray(dout), cache)
        grads = grads if isinstance(grads, tuple) else (grads,)
        return [backend.to_numpy(out)] + [backend.to_numpy(g) for g in grads]

    failed = 0
    print(f"{'op':<16} {'set':<9} {'dtype':<8} {'max |cupy - numpy|':>20}  result")
    for name in gradcheck.OP_CASES:
        for op_set in ("textbook", "fast"):
            for dtype in (np.float64, np.float32):
                backend.set_backend("numpy")
                on_cpu = run_op(name, dtype, "textbook")
                backend.set_backend("cupy")
                on_gpu = run_op(name, dtype, op_set)
                worst = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(on_cpu, on_gpu))
                scale = max(1.0, max(float(np.max(np.abs(a), initial=0.0)) for a in on_cpu))
                ok = worst <= TOLERANCE[np.dtype(dtype).name] * scale and all(a.dtype == dtype for a in on_gpu)
                failed += not ok
                print(f"{name:<16} {op_set:<9} {np.dtype(dtype).name:<8} {worst:>20.2e}  {'pass' if ok else 'FAIL'}")
    backend.set_backend("cupy")
    for op_set in ("textbook", "fast"):
        with ops.using(op_set):
            report = gradcheck.check_all_ops(seed=0)
        print(f"\nfinite differences, every array on the GPU, {op_set} set:")
        print(report.table())
        failed += not report.passed
    return 1 if failed else 0


def compare_pretrained() -> int:
    """Step 6, in this process: the shipped model's greedy translations on the GPU and on the CPU."""
    from npformer import backend, pretrained
    from npformer.tasks.translation import Translator
    from npformer.tasks.translation.pretrained import pretrained_folder

    folder = Path(pretrained_folder("fra"))
    sources = [line.split("\t")[0] for line in (folder / "test.tsv").read_text(encoding="utf-8").splitlines()[:100]]
    outputs = {}
    for name in ("numpy", "cupy"):
        backend.set_backend(name)
        run = pretrained("fra")
        started = time.perf_counter()
        outputs[name] = Translator.from_run(run).translate(sources)
        print(f"{name}: {len(sources)} sentences, greedy, in {time.perf_counter() - started:.2f} s")
    differ = [(s, a, b) for s, a, b in zip(sources, outputs["numpy"], outputs["cupy"]) if a != b]
    print(f"{len(sources) - len(differ)} of {len(sources)} translations are the same on the GPU and the CPU")
    for source, on_cpu, on_gpu in differ:
        print(f"  {source!r}: CPU {on_cpu!r} / GPU {on_gpu!r}")
    # Float32 sums run in another order on a GPU; a near tie between two tokens can flip. More than a few
    # such flips would mean a wrong kernel, not rounding.
    return 0 if len(differ) <= 3 else 1


STEPS = [
    ("ops", "every op on CuPy = NumPy; finite differences on the GPU",
     [sys.executable, __file__, "--only", "ops"], {}, 150),
    ("kernels", "GPU forms = textbook twins (tests/test_gpu_ops.py)",
     [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "tests/test_gpu_ops.py"],
     {"NPFORMER_REQUIRE_GPU": "1"}, 120),
    ("gradients", "tests/test_gradients.py under CuPy (12 shapes per op)",
     [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "4", "tests/test_gradients.py"],
     {"NPFORMER_BACKEND": "cupy", "NPFORMER_HYPOTHESIS": "gpu"}, 150),
    ("training", "train --data: checkpoints, Ctrl-C, --resume bit-exact, average, evaluate, translate, explorer",
     [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-n", "0",
      "tests/test_training_on_device.py"], {"NPFORMER_BACKEND": "cupy"}, 150),
    ("gradcheck", "npformer --backend cupy gradcheck",
     [sys.executable, "-m", "npformer", "--backend", "cupy", "gradcheck"], {}, 90),
    ("pretrained", "translate --pretrained fra: GPU vs CPU on 100 test sentences",
     [sys.executable, __file__, "--only", "pretrained"], {}, 120),
    ("explorer", "attention --pretrained fra --html on the GPU",
     [sys.executable, "-m", "npformer", "--backend", "cupy", "attention", "--pretrained", "fra",
      "I like the black cat.", "Where is the station?", "--html", "{out}/explorer.html"], {}, 90),
    ("bench", "bench --presets small base, fast set, against PyTorch on the same card",
     [sys.executable, "-m", "npformer", "--backend", "cupy", "bench", "--presets", "small", "base",
      "--steps", "10", "--rounds", "1", "--json", "{out}/bench_fast.json"], {}, 240),
    ("bench-textbook", "bench --presets small base, textbook set",
     [sys.executable, "-m", "npformer", "--backend", "cupy", "bench", "--presets", "small", "base",
      "--steps", "10", "--rounds", "1", "--ops", "textbook", "--no-torch", "--json",
      "{out}/bench_textbook.json"], {}, 180),
]


def device_line() -> str:
    import cupy
    import numpy

    properties = cupy.cuda.runtime.getDeviceProperties(0)
    driver = cupy.cuda.runtime.driverGetVersion()
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    return (f"{properties['name'].decode()} (driver API {driver // 1000}.{driver % 1000 // 10}), CuPy "
            f"{cupy.__version__}, NumPy {numpy.__version__}, PyTorch {torch_version}, Python {sys.version.split()[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check", help="folder of the steps' logs (default: gpu_check)")
    parser.add_argument("--skip-bench", action="store_true", help="leave out the two bench steps")
    parser.add_argument("--only", choices=("ops", "pretrained"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        from npformer import backend

        backend.set_backend("cupy")
        return compare_ops() if args.only == "ops" else compare_pretrained()

    from npformer import backend

    try:
        backend.set_backend("cupy")
    except backend.BackendUnavailableError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = device_line()
    print(f"gpu_check on {header}", flush=True)
    rows, started = [], time.perf_counter()
    for name, what, command, env, limit in STEPS:
        if args.skip_bench and name.startswith("bench"):
            continue
        command = [part.replace("{out}", str(out)) for part in command]
        step_started = time.perf_counter()
        with open(out / f"{name}.log", "w", encoding="utf-8") as log:
            # A session of its own, so that a step over its limit is stopped with every process it
            # started (pytest's workers hold the GPU too).
            process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            try:
                status = process.wait(timeout=limit)
                result = "pass" if status == 0 else f"FAIL ({status})"
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                result = f"FAIL (over {limit} s)"
        seconds = time.perf_counter() - step_started
        rows.append((name, what, result, seconds))
        print(f"{name:<15} {result:<16} {seconds:6.1f} s   ({out / (name + '.log')})", flush=True)
    for name in ("bench_fast", "bench_textbook"):
        path = out / f"{name}.json"
        if path.exists():
            results = json.loads(path.read_text())
            for preset, entry in results["presets"].items():
                torch_ms = f", PyTorch {1000 * entry['torch']['seconds_per_step']:.1f} ms, ratio " \
                           f"{entry['ratio_to_torch']:.2f}" if "torch" in entry else ""
                print(f"{name} {preset}: {1000 * entry['seconds_per_step']:.1f} ms per step{torch_ms}")
    total = time.perf_counter() - started
    print(f"\nsummary ({header}; {total:.0f} s in all)")
    print(f"| {'step':<15} | {'what':<95} | {'result':<16} | {'seconds':>7} |")
    print(f"| {'-' * 15} | {'-' * 95} | {'-' * 16} | {'-' * 7} |")
    for name, what, result, seconds in rows:
        print(f"| {name:<15} | {what:<95} | {result:<16} | {seconds:7.1f} |")
    failed = [name for name, _, result, _ in rows if result != "pass"]
    print("gpu_check: all passed" if not failed else f"gpu_check: FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
