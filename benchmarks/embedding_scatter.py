"""Time the embedding backward (sort + copy + reduceat) against np.add.at, in one run.

    python benchmarks/embedding_scatter.py [--repeats 200]

Both compute dW[v] = sum of the upstream rows of token v; the ids are a
64 x 24 batch drawn uniformly and from a Zipf law (like real text, with
many repeats), V = 8000, D = 256, float32.
"""

import argparse

import numpy as np

from npformer import ops
from timing import best_of  # benchmarks/timing.py


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vocab, d_model, shape = 8000, 256, (64, 24)
    W = rng.standard_normal((vocab, d_model)).astype(np.float32)
    print(f"numpy {np.__version__}, V={vocab}, D={d_model}, ids {shape}, best of {args.repeats}")
    print(f"{'ids':<8} {'distinct':>8} {'npformer ms':>12} {'np.add.at ms':>13} {'speed-up':>9}")
    for label, ids in (("uniform", rng.integers(0, vocab, shape)),
                       ("zipf", np.minimum(rng.zipf(1.3, shape), vocab) - 1)):
        out, cache = ops.embedding_forward(ids, W)
        dout = rng.standard_normal(out.shape).astype(np.float32)

        def add_at():
            dW = np.zeros_like(W)
            np.add.at(dW, ids.reshape(-1), dout.reshape(-1, d_model))
            return dW

        np.testing.assert_allclose(ops.embedding_backward(dout, cache), add_at(), atol=1e-4)
        ours = best_of(lambda: ops.embedding_backward(dout, cache), args.repeats)
        theirs = best_of(add_at, args.repeats)
        print(f"{label:<8} {len(np.unique(ids)):>8} {ours * 1e3:>12.3f} {theirs * 1e3:>13.3f} "
              f"{theirs / ours:>8.1f}x")


if __name__ == "__main__":
    main()
