#!/usr/bin/env bash
# Run the op gradient tests and the gradient check under CuPy, in one command.
#
#   bash benchmarks/gpu_check.sh          (on a machine with CuPy and a CUDA GPU)
#
# 1. every op on CuPy against NumPy (outputs and gradients, float64 and float32),
#    then the finite-difference check of every op on the GPU;
# 2. the hypothesis gradient tests with NPFORMER_BACKEND=cupy;
# 3. `npformer --backend cupy gradcheck`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import cupy; print('cupy', cupy.__version__, '| GPUs:', cupy.cuda.runtime.getDeviceCount())"
python benchmarks/gpu_check.py
NPFORMER_BACKEND=cupy python -m pytest -q -p no:cacheprovider tests/test_gradients.py \
    "tests/test_backend.py::test_cupy_backend_runs_every_op_and_matches_numpy"
python -m npformer --backend cupy gradcheck
echo "gpu_check: all passed"
