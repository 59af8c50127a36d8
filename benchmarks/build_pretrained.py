"""Rebuild the translators that ship in the package (npformer/data/pretrained/NAME/).

    python benchmarks/build_pretrained.py                       # toy: trains it (about a minute)
    python benchmarks/build_pretrained.py fra --run RUN_FOLDER --command "npformer train ..."
    python benchmarks/build_pretrained.py fra --rescore "why"    # its record scored again, weights kept

``toy`` trains the default ``npformer train`` run (the ``tiny`` preset, the embedded corpus, 900
steps, seed 0) in a temporary folder. ``fra`` packages a Tatoeba run trained by the documented
command (given as ``--command``, recorded with the result), with its weights stored as float16 to
fit the wheel. Both keep the configuration, vocabularies, test split and weights (no optimizer
state) and, where the run has them, the test split's gold alignments, the truecaser and the
held-out long pairs (``long.tsv``), evaluate the kept files exactly as ``npformer evaluate --pretrained NAME`` does and write the
result into ``record.json``, which the tests hold the shipped model to, on the first 300 (``toy``) or
200 (``fra``) test pairs, the whole split being too slow for a test; the whole split's scores are
recorded too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from npformer.data import ATTRIBUTION
from npformer.tasks.translation import TrainOptions, Translator, test_bleu, train
from npformer.tasks.translation.pretrained import PRETRAINED_DIR
from npformer.tasks.translation import RunFolder, load_run
from npformer.training import save_checkpoint

KEPT = ("config.json", "src_vocab.json", "tgt_vocab.json", "test.tsv")
OPTIONAL = ("alignments.json", "truecase.json", "long.tsv")  # where the run has them


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package(source: Path, target: Path, params_as: object = None, meta: dict | None = None) -> None:
    """Copy a run folder's kept files into ``target`` and write its weights alone (no optimizer state)."""
    run = load_run(str(source))
    target.mkdir(parents=True, exist_ok=True)
    for name in KEPT + tuple(name for name in OPTIONAL if (source / name).exists()):
        shutil.copyfile(source / name, target / name)
    if (target / "alignments.json").exists():  # only the test split ships: only its alignments
        alignments = json.loads((target / "alignments.json").read_text(encoding="utf-8"))
        (target / "alignments.json").write_text(json.dumps({"test": alignments["test"]}, separators=(",", ":")),
                                                encoding="utf-8")
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    config["train"]["max_steps"] = json.loads((source / "checkpoint.json").read_text())["step"]  # the steps it took
    config["train"]["runs_dir"] = "runs"  # not the folder it was trained in
    config["train"]["data"] = os.path.basename(config["train"]["data"]) if config["train"].get("data") else None
    (target / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    save_checkpoint(str(target / "checkpoint.npz"), run.model, meta={"built_by": "benchmarks/build_pretrained.py",
                                                                      **(meta or {})}, params_as=params_as)


def build_fra(run_folder: str, command: str) -> int:
    import numpy

    target = PRETRAINED_DIR / "fra"
    package(Path(run_folder), target, params_as=numpy.float16,
            meta={"data": ATTRIBUTION})
    shipped = load_run(str(target))
    pairs = RunFolder(str(target)).split("test")
    translator = Translator.from_run(shipped)
    record = {"first_200": test_bleu(translator, pairs[:200], beam_size=4),
              **test_bleu(translator, pairs, beam_size=4, progress=True)}
    record.update(command=command, packaged="python benchmarks/build_pretrained.py fra --run RUN --command ...",
                  weights="float16", machine=cpu_name(), python=sys.version.split()[0],
                  data=ATTRIBUTION)
    (target / "record.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))
    return 0


def rescore_fra(why: str) -> int:
    """The shipped fra's record scored again, its weights untouched, when the ``Translator`` reads
    input differently (``why``, kept in the record with the scores it replaces)."""
    target = PRETRAINED_DIR / "fra"
    record = json.loads((target / "record.json").read_text(encoding="utf-8"))
    shipped = load_run(str(target))
    pairs = RunFolder(str(target)).split("test")
    translator = Translator.from_run(shipped)
    before = {key: record[key] for key in ("bleu_greedy", "bleu_beam", "chrf_greedy", "chrf_beam")}
    record.update(first_200=test_bleu(translator, pairs[:200], beam_size=4),
                  **test_bleu(translator, pairs, beam_size=4, progress=True))
    record.setdefault("rescored", []).append({"why": why, "before": before, "machine": cpu_name()})
    (target / "record.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "fra":
        parser = argparse.ArgumentParser(description="package a Tatoeba run as the shipped fra translator")
        parser.add_argument("name", choices=("fra",))
        parser.add_argument("--run")
        parser.add_argument("--command")
        parser.add_argument("--rescore", metavar="WHY", help="score the shipped fra again (its weights kept)")
        args = parser.parse_args()
        if args.rescore:
            return rescore_fra(args.rescore)
        if not (args.run and args.command):
            parser.error("--run and --command are needed to package a run (or --rescore WHY)")
        return build_fra(args.run, args.command)
    target = PRETRAINED_DIR / "toy"
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        status = train(TrainOptions(name="toy", runs_dir=scratch))
        if status != 0:
            return status
        seconds = time.perf_counter() - started
        package(Path(scratch) / "toy", target)
    shipped = load_run(str(target))
    pairs = RunFolder(str(target)).split("test")
    record = {"first_300": test_bleu(Translator.from_run(shipped), pairs[:300], beam_size=1),
              **test_bleu(Translator.from_run(shipped), pairs, beam_size=4)}
    record.update(command="npformer train (defaults: --preset tiny, the embedded corpus, 900 steps, seed 0)",
                  trained_seconds=round(seconds, 1), machine=cpu_name(), python=sys.version.split()[0])
    (target / "record.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
