"""A/B: npformer's training step in two source trees (say, before and after a change), alternately.

    python benchmarks/ab_step.py OLD_TREE NEW_TREE [--presets small base] [--rounds 5] [--steps 10]

Each measurement is one fresh subprocess running that tree's own ``npformer.bench.measure_npformer``
(the step of ``npformer bench``: forward, loss, backward, Adam on random padded batches, float32,
2 threads). The trees alternate, ``rounds`` times each, in the order old-new, new-old, ... (the second
measurement of a pair tends to be faster on this machine, by up to 10% in an A/A run), and each
keeps its fastest step, so that the machine's drift hits both alike. PyTorch is not involved: this compares npformer with itself.
"""

import argparse
import json
import os
import subprocess
import sys


def measure(tree: str, preset: str, steps: int) -> float:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2",
               MKL_NUM_THREADS="2")
    code = ("import json, npformer.bench as b; "  # a tree from before issue 62 calls it _measure_npformer
            "measure = getattr(b, 'measure_npformer', None) or b._measure_npformer; "
            f"print(json.dumps(measure({preset!r}, {steps})))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            cwd=os.path.abspath(tree), check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print(f"{'preset':<6} {'old ms':>8} {'new ms':>8} {'new / old':>10}   (best of {args.rounds}, alternating)")
    for preset in args.presets:
        best = {"old": float("inf"), "new": float("inf")}
        for round_index in range(args.rounds):
            order = ("old", "new") if round_index % 2 == 0 else ("new", "old")  # ABBA: no position bias
            for name in order:
                best[name] = min(best[name], measure(getattr(args, name), preset, args.steps))
        print(f"{preset:<6} {1000 * best['old']:8.1f} {1000 * best['new']:8.1f} {best['new'] / best['old']:10.3f}")


if __name__ == "__main__":
    main()
