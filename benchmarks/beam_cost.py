"""What beam search costs against greedy search, on the same sentences of a trained run.

    python benchmarks/beam_cost.py runs/fra-small            # a run folder written by npformer train
    python benchmarks/beam_cost.py runs/toy-tiny --sentences 1000 --beams 2 4 8

Translates the first ``--sentences`` source sentences of the run's test split with greedy
search and with each beam size, alternating, ``--rounds`` times; each keeps its best time.
Prints sentences per second, the ratio to greedy and the target tokens generated, and
with ``--profile`` where one beam-4 pass spends its time (cProfile, by function).
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from npformer import threads
from npformer.tasks.translation import Translator
from npformer.tasks.translation import RunFolder, load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run folder written by npformer train")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--beams", type=int, nargs="+", default=[4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also profile one beam-4 pass")
    args = parser.parse_args()

    translator = Translator.from_run(load_run(args.run))
    sentences = [english for english, _ in RunFolder(args.run).split("test")[: args.sentences]]
    best = {beam: float("inf") for beam in [1, *args.beams]}
    outputs = {}
    for _ in range(args.rounds):
        for beam in best:
            start = time.perf_counter()
            outputs[beam] = translator.translate(sentences, beam_size=beam)
            best[beam] = min(best[beam], time.perf_counter() - start)
    print(f"{len(sentences)} sentences of {args.run}, {threads.get_threads()} threads, best of {args.rounds}")
    for beam, seconds in best.items():
        words = sum(len(text.split()) for text in outputs[beam])
        print(f"  {'greedy' if beam == 1 else f'beam {beam}':>8}: {len(sentences) / seconds:7.0f} sentences/s  "
              f"{seconds / best[1]:4.1f}x greedy's time  ({words:,} words out)")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(translator.translate, sentences, beam_size=4)
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
        print(text.getvalue())


if __name__ == "__main__":
    main()
