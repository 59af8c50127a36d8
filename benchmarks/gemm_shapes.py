"""The matrix products of the small preset's step: NumPy's BLAS against PyTorch's, same threads.

    python benchmarks/gemm_shapes.py

For each linear layer's shape at the bench's small batch (1024 rows of d_model 128): the forward
product and the backward's two products (dX = dY W^T, dW = X^T dY), timed (median of 100) with
npformer's fast linear layer (row blocks on 2 threads, BLAS held to one), with NumPy's BLAS on 2
threads (the textbook layer), and with PyTorch (``torch.set_num_threads(2)``). The step is mostly
these products, so their ratio bounds what npformer's padded step can reach against PyTorch's.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

from npformer.ops import fast, linear  # noqa: E402
from timing import median_of  # noqa: E402

torch.set_num_threads(2)


def microseconds(run, repeats=100):
    return median_of(run, repeats) * 1e6


def main():
    blas = [(info["internal_api"], info.get("version"), info.get("architecture")) for info in threadpool_info()
            if info["user_api"] == "blas"]
    print(f"NumPy {np.__version__} BLAS {blas}; PyTorch {torch.__version__} (MKL: {torch.backends.mkl.is_available()})")
    print(f"{'rows, d_in, d_out':22s} {'npformer fast':>16s} {'NumPy BLAS':>16s} {'PyTorch':>16s}   (forward / backward, us)")
    rng = np.random.default_rng(0)
    for rows, d_in, d_out in [(1024, 128, 128), (1024, 128, 512), (1024, 512, 128), (1024, 128, 6000)]:
        x, W = rng.random((rows, d_in), dtype=np.float32), rng.random((d_in, d_out), dtype=np.float32)
        b, dy = np.zeros(d_out, np.float32), rng.random((rows, d_out), dtype=np.float32)
        _, cache = fast.linear_forward(x, W, b)
        tx, tW, tb, tdy = map(torch.from_numpy, (x, W, b, dy))
        timings = [(microseconds(lambda: fast.linear_forward(x, W, b)), microseconds(lambda: fast.linear_backward(dy, cache))),
                   (microseconds(lambda: linear.linear_forward(x, W, b)), microseconds(lambda: linear.linear_backward(dy, cache))),
                   (microseconds(lambda: torch.addmm(tb, tx, tW)),
                    microseconds(lambda: (tdy @ tW.T, tx.T @ tdy, tdy.sum(0))))]
        print(f"{str((rows, d_in, d_out)):22s} " + " ".join(f"{f:7.0f} / {bw:6.0f}" for f, bw in timings))


if __name__ == "__main__":
    main()
