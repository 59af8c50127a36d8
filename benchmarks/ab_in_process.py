"""A/B in one process: an older npformer tree against this one, step by step, on the bench's batches.

    rm -rf /tmp/oldpkg && mkdir /tmp/oldpkg && cp -r OLD_TREE/npformer /tmp/oldpkg/npformer_old
    sed -i 's/from npformer\\b/from npformer_old/g; s/import npformer\\b/import npformer_old/g' \\
        $(grep -rl npformer /tmp/oldpkg --include=*.py)
    python benchmarks/ab_in_process.py small 40 step     # or: loop (the user's own textbook loop)

``step`` is ``train_step(..., only_counted_targets=True)``; ``loop`` is the loop a user writes with
the default op set (forward, loss, backward, Adam; ``benchmarks/loops.py``). Both models are
built from the same seed; their steps alternate (new-old, old-new, ...) on the same batches, so that
drift hits both alike. Prints each one's median and the median (and quartiles) of new / old per round.
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
sys.path.insert(0, "/tmp/oldpkg")

import npformer as new  # noqa: E402
import npformer.bench  # noqa: E402,F401
import npformer_old as old  # noqa: E402
import npformer_old.bench  # noqa: E402,F401
from loops import training_loop  # noqa: E402  (benchmarks/loops.py)


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "base"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    mode = sys.argv[3] if len(sys.argv) > 3 else "step"
    loop = "train_step" if mode == "step" else "the user's loop"
    ours, theirs = training_loop(new, name, loop), training_loop(old, name, loop)
    batches = new.bench.random_batches(new.bench.PRESETS[name], 4)
    for s, t in batches[:2]:
        ours(s, t)
        theirs(s, t)
    times = {"new": [], "old": []}
    for round_ in range(rounds):
        s, t = batches[round_ % 4]
        pair = (("new", ours), ("old", theirs)) if round_ % 2 == 0 else (("old", theirs), ("new", ours))
        for label, run in pair:
            start = time.perf_counter()
            run(s, t)
            times[label].append(time.perf_counter() - start)
    ratios = [a / b for a, b in zip(times["new"], times["old"])]
    low, middle, high = statistics.quantiles(ratios, n=4)
    print(f"{name} {mode}: new {1000 * statistics.median(times['new']):.1f} ms, old "
          f"{1000 * statistics.median(times['old']):.1f} ms; new / old per round {middle:.3f} ({low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
