"""Same as ``npformer bench``: python benchmarks/bench.py [--presets ...] [--steps N] [--json PATH]."""

import sys

from npformer.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
