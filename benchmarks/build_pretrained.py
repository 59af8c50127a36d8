"""Rebuild the pretrained toy translator that ships in the package (npformer/data/pretrained/toy/).

    python benchmarks/build_pretrained.py

Trains the default ``npformer train`` run (the ``tiny`` preset, the embedded corpus, 900 steps,
seed 0) in a temporary folder, keeps its configuration, vocabularies, test split and weights (no
optimizer state), then evaluates the kept files exactly as ``npformer evaluate --pretrained toy``
does and writes the result into ``record.json``, which the tests hold the shipped model to.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from npformer.tasks.translation import TrainOptions, Translator, test_bleu, train
from npformer.tasks.translation.pretrained import PRETRAINED_DIR
from npformer.tasks.translation import RunFolder, load_run
from npformer.training import save_checkpoint

KEPT = ("config.json", "src_vocab.json", "tgt_vocab.json", "test.tsv")


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> int:
    target = PRETRAINED_DIR / "toy"
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        status = train(TrainOptions(name="toy", runs_dir=scratch))
        if status != 0:
            return status
        seconds = time.perf_counter() - started
        run = load_run(str(Path(scratch) / "toy"))
        target.mkdir(parents=True, exist_ok=True)
        for name in KEPT:
            shutil.copyfile(Path(scratch) / "toy" / name, target / name)
        config = json.loads((target / "config.json").read_text(encoding="utf-8"))
        config["train"]["max_steps"] = json.loads((Path(scratch) / "toy" / "checkpoint.json").read_text())["step"]
        config["train"]["runs_dir"] = "runs"  # not the temporary folder it was trained in
        (target / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")  # the steps it took
        save_checkpoint(str(target / "checkpoint.npz"), run.model, meta={"built_by": "benchmarks/build_pretrained.py"})
    shipped = load_run(str(target))
    pairs = RunFolder(str(target)).split("test")
    record = test_bleu(Translator.from_run(shipped), pairs, beam_size=4)
    record.update(command="npformer train (defaults: --preset tiny, the embedded corpus, 900 steps, seed 0)",
                  trained_seconds=round(seconds, 1), machine=cpu_name(), python=sys.version.split()[0])
    (target / "record.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
