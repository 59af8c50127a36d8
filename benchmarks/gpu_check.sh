#!/usr/bin/env bash
# Prove npformer on a CUDA GPU in one command (172 s on an H100, each step capped; CuPy and a GPU needed, PyTorch
# with CUDA for the bench's comparison): ops, GPU kernels, gradients, a whole training run with an
# interruption and a resume, gradcheck, the shipped translator, the explorer, and the bench.
# Each step's log goes to gpu_check/ (--out FOLDER); the summary table is printed last, and the exit
# status is 1 if any step failed. See benchmarks/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python benchmarks/gpu_check.py "$@"
