"""Prove the CuPy backend: every op on the GPU against NumPy, then gradients on the GPU.

    python benchmarks/gpu_check.py            (needs CuPy and a CUDA GPU)

For every op of ``npformer.gradcheck.OP_CASES`` it runs forward and backward
on NumPy and on CuPy from the same inputs and upstream gradient, in float64
and float32, and prints the largest difference of outputs and gradients. Then
it runs the finite-difference check of every op with the arrays on the GPU.
Exits 1 if anything disagrees or fails.
"""

import sys

import numpy as np

from npformer import backend, gradcheck

TOLERANCE = {np.float64: 1e-10, np.float32: 2e-4}


def run_op(name, dtype):
    """Forward + backward of one op on the active backend; results as host arrays."""
    forward, backward, inputs = gradcheck.OP_CASES[name](np.random.default_rng(0))
    inputs = {k: backend.asarray(v.astype(dtype) if v.dtype.kind == "f" else v)
              for k, v in inputs.items()}
    out, cache = forward(*inputs.values())
    dout = np.random.default_rng(1).standard_normal(np.shape(out)).astype(dtype)
    grads = backward(backend.asarray(dout), cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    return [backend.to_numpy(out)] + [backend.to_numpy(g) for g in grads]


def main():
    backend.set_backend("cupy")  # raises a clear error without CuPy or a GPU
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"CuPy {cupy.__version__} on {props['name'].decode()}; NumPy {np.__version__}")
    failed = False
    print(f"{'op':<16} {'dtype':<8} {'max |cupy - numpy|':>20}  result")
    for name in gradcheck.OP_CASES:
        for dtype in (np.float64, np.float32):
            backend.set_backend("numpy")
            on_cpu = run_op(name, dtype)
            backend.set_backend("cupy")
            on_gpu = run_op(name, dtype)
            worst = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(on_cpu, on_gpu))
            wrong_dtype = any(a.dtype != dtype for a in on_gpu)
            ok = worst <= TOLERANCE[dtype] and not wrong_dtype
            failed |= not ok
            print(f"{name:<16} {np.dtype(dtype).name:<8} {worst:>20.2e}  {'pass' if ok else 'FAIL'}")
    backend.set_backend("cupy")
    report = gradcheck.check_all_ops(seed=0)
    print("\nfinite-difference check with every array on the GPU:")
    print(report.table())
    failed |= not report.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
