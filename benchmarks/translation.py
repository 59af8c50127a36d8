"""Measure the translation targets: time to train and test BLEU, greedy and beam.

    python benchmarks/translation.py toy                     # the default `npformer train`
    python benchmarks/translation.py fra --data ../shared/data/fra-eng/fra.txt   # 30 minutes
    python benchmarks/translation.py fra --data ../shared/data/fra-eng/fra.txt --name bpe8k \
        -- --tokenizer bpe --bpe-merges 8000 --joint-vocab    # anything after -- goes to npformer train

``toy`` runs the default ``npformer train`` (embedded corpus) in a fresh
folder, times the whole command, then ``npformer evaluate`` on the full test
split (1,000 new combinations). ``fra`` trains the ``small`` preset on the
Tatoeba pairs of at most 8 words for ``--minutes`` (30) and evaluates on the
full test split. Each prints the numbers and writes them as JSON
(``--json``). Run it on an otherwise idle machine: the time budget is wall-clock.

Data credit for ``fra``: Tatoeba Project (tatoeba.org), CC-BY 2.0 FR, via manythings.org/anki.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time


def run(command: list[str]) -> tuple[float, str]:
    print("$", " ".join(command), flush=True)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds, result.stdout + result.stderr


def bleu_scores(evaluate_output: str) -> dict:
    def number(pattern: str) -> float:
        return float(re.search(pattern, evaluate_output).group(1))

    sentences = int(re.search(r"([\d,]+) sentence pairs", evaluate_output).group(1).replace(",", ""))
    return {"test_sentences": sentences, "bleu_greedy": number(r"BLEU greedy\s+([\d.]+)"),
            "bleu_beam": number(r"BLEU beam \d+\s+([\d.]+)"), "chrf_greedy": number(r"chrF greedy\s+([\d.]+)"),
            "chrf_beam": number(r"chrF beam \d+\s+([\d.]+)")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=("toy", "fra"))
    parser.add_argument("--data", help="fra.txt (for the fra task)")
    parser.add_argument("--minutes", type=float, default=30.0, help="fra: time budget")
    parser.add_argument("--runs-dir", default=None, help="default: a new temporary folder")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--name", default="fra-small", help="fra: the run's name")
    own, _, train_options = " ".join(sys.argv[1:]).partition(" -- ")
    args = parser.parse_args(own.split())
    args.train_options = train_options.split()

    runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="npformer-bench-")
    npformer = [sys.executable, "-m", "npformer"]
    if args.task == "toy":
        train = npformer + ["train", "--runs-dir", runs_dir, "--name", "toy"]
    else:
        if not args.data or not os.path.isfile(args.data):
            sys.exit("the fra task needs --data pointing at fra.txt")
        train = npformer + ["train", "--runs-dir", runs_dir, "--name", args.name, "--data", args.data,
                            "--preset", "small", "--minutes", str(args.minutes), "--min-freq", "2",
                            "--token-budget", "4096", "--lr", "2e-3", "--warmup", "400",
                            "--eval-every", "500", *args.train_options]
    train_seconds, train_log = run(train)
    folder = os.path.join(runs_dir, "toy" if args.task == "toy" else args.name)
    _, evaluate_log = run(npformer + ["evaluate", "--run", folder, "--beam", "4"])
    steps = [int(s) for s in re.findall(r"step (\d+)", train_log)]
    results = {
        "task": args.task,
        "command": " ".join(train[2:]),
        "train_wall_seconds": round(train_seconds, 1),
        "steps": max(steps) if steps else None,
        "tokens_per_second": int(re.findall(r"([\d,]+) tok/s", train_log)[-1].replace(",", "")),
        **bleu_scores(evaluate_log),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "run_folder": folder,
    }
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
