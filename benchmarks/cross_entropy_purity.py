"""What keeping ``cross_entropy_backward`` pure costs: the gradient in a new array (the default)
against writing it into the cache's own ``exp`` buffer (``out=cache["exps"]``, what
``training.train_step`` passes, and what the op did by itself before it was made pure).

    python benchmarks/cross_entropy_purity.py [--repeats 30]

Times forward + backward together, float32, for the bench presets' batch shapes
(small: 64 x 16 positions, V = 6,000; base: 64 x 24, V = 8,000) and the Tatoeba
vocabulary (64 x 16, V = 13,507), with label smoothing 0.1 and a quarter of the targets padding.
"""

import argparse

import numpy as np

from npformer import ops
from timing import best_of  # benchmarks/timing.py


def in_place_backward(dloss, cache):
    return ops.cross_entropy_backward(dloss, cache, out=cache["exps"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'shape':>22} {'in place ms':>12} {'pure ms':>9} {'pure / in place':>16}")
    for batch, length, vocab in ((64, 16, 6000), (64, 24, 8000), (64, 16, 13507)):
        logits = rng.standard_normal((batch, length, vocab), dtype=np.float32)
        targets = rng.integers(4, vocab, size=(batch, length))
        targets[:, 3 * length // 4:] = 0

        def step(backward):
            _, cache = ops.cross_entropy_forward(logits, targets, label_smoothing=0.1)
            return backward(1.0, cache)

        # identical results first
        assert np.allclose(step(in_place_backward), step(ops.cross_entropy_backward), atol=1e-9)
        in_place = pure = float("inf")
        for _ in range(3):  # alternate, so drift hits both alike
            in_place = min(in_place, best_of(lambda: step(in_place_backward), args.repeats))
            pure = min(pure, best_of(lambda: step(ops.cross_entropy_backward), args.repeats))
        print(f"{str((batch, length, vocab)):>22} {1000 * in_place:12.2f} {1000 * pure:9.2f} {pure / in_place:16.2f}")


if __name__ == "__main__":
    main()
