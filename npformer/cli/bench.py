"""``npformer bench``: time training steps and decoding (and PyTorch's, when it is installed)."""

from __future__ import annotations

import argparse
import json

from .arguments import add_arguments, values
from .inputs import writable_files

HELP = {
    "steps": "timed steps per preset",
    "rounds": "alternating measurements per framework; the fastest counts",
    "ops": "npformer's op set: fast (the default) or textbook (npformer/ops/*.py)",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from .. import bench

    parser = commands.add_parser(
        "bench", help="time training steps and decoding (and PyTorch, when installed)",
        description="Measure NumPy's GEMM peak, npformer's float32 training step for the tiny/small/base "
                    "presets (tokens/s, GFLOP/s, MFU, peak memory), KV-cached decoding, and the same model "
                    "in PyTorch eager when PyTorch is importable.")
    parser.add_argument("--presets", nargs="+", default=["tiny", "small", "base"], choices=tuple(bench.PRESETS))
    add_arguments(parser, bench.run, HELP, choices={"ops": ("fast", "textbook")})
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    parser.add_argument("--json", help="also write the results here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from .. import bench

    writable_files(args.json)
    results = bench.run(args.presets, with_torch=False if args.no_torch else None, **values(args, HELP))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
        print(f"wrote {args.json}")
    return 0
