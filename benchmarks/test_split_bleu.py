"""Score a Tatoeba run on its whole test split with sacreBLEU (the reference implementation).

    python benchmarks/test_split_bleu.py RUN_FOLDER [--beam 4] [--json out.json] [--snapshot STEP]

Translates every distinct English sentence of the run's ``test.tsv`` once, greedy and with beam
search, and scores the translations of all test pairs: corpus BLEU with one reference per pair
(sacreBLEU's default 13a tokenisation) and chrF, and BLEU with all of a sentence's French
translations as references. It also counts the outputs that hold an English word: a word of the
output of two letters or more that the run's English vocabulary knows, that the French one does
not (for a model of pieces: words seen twice or more in its training split, ``known_words``), and
that is not a name or a number (no capital letter, no digit; the French tokenizer keeps
"m'" whole, so the letter "m" alone is not counted); ``--examples`` prints some.

``--snapshot STEP`` scores the parameters kept at that step in ``snapshots.npz`` (``--average-last``)
instead of the final model, and ``--mean-of N`` the mean of the last N kept, to measure what
averaging buys; ``--valid`` scores the validation split instead (to choose N, or GNMT's alpha with
``--length-penalty``, without the test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict

from npformer.tasks.translation.decoding import LENGTH_PENALTY


def english_words(text: str, english: set, french: set) -> list[str]:
    words = re.findall(r"[^\W\d_]+", text)
    return [word for word in words if len(word) > 1 and word.islower() and word in english and word not in french]


def known_words(run: str, translator) -> tuple[set, set] | None:
    """The English and French words a run knows: its vocabularies' tokens for a word model; for a
    model of pieces, whose vocabularies hold pieces, the word vocabularies (``Vocab.build``,
    ``--min-freq 2``) of each side of its training split. None for a model of pieces without its
    training split (a shipped model): the English words are then not counted."""
    from npformer.data import BPEVocab, Vocab, tokenize
    from npformer.tasks.translation import RunFolder

    if not isinstance(translator.src_vocab, BPEVocab):
        return set(translator.src_vocab.index), set(translator.tgt_vocab.index)
    if not os.path.isfile(os.path.join(run, "train.tsv")):
        return None
    train = RunFolder(run).split("train")
    return tuple(set(Vocab.build([tokenize(pair[side], lang) for pair in train], min_freq=2).index)
                 for side, lang in enumerate(("en", "fr")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=LENGTH_PENALTY, help="GNMT's alpha for beam search")
    parser.add_argument("--json")
    parser.add_argument("--snapshot", type=int)
    parser.add_argument("--examples", type=int, default=0)
    parser.add_argument("--greedy-only", action="store_true")
    parser.add_argument("--mean-of", type=int)
    parser.add_argument("--valid", action="store_true")
    parser.add_argument("--copy-any", action="store_true",
                        help="the rule before issue 36: <unk> copies whatever source word it attends to most")
    args = parser.parse_args()

    import sacrebleu

    from npformer.tasks.translation import Translator, load_run
    from npformer.training import Snapshots

    run = load_run(args.run)
    if args.snapshot is not None or args.mean_of is not None:
        snapshots = Snapshots(os.path.join(args.run, "snapshots.npz"), keep=1000)
        if args.snapshot is not None:
            run.model.load_state_dict(snapshots.params[snapshots.steps.index(args.snapshot)])
        else:
            snapshots.steps, snapshots.params = snapshots.steps[-args.mean_of:], snapshots.params[-args.mean_of:]
            snapshots.load_mean_into(run.model)
    translator = Translator.from_run(run)
    if args.copy_any:
        translator.copyable = lambda typed, read: [True] * len(typed)
    with open(os.path.join(args.run, "valid.tsv" if args.valid else "test.tsv"), encoding="utf-8") as file:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in file if line.strip()]
    references = defaultdict(list)
    for source, target in pairs:
        references[source].append(target)
    sources = list(references)
    known = known_words(args.run, translator)
    results = {"run": args.run, "length_penalty": args.length_penalty, "snapshot": args.snapshot,
               "mean_of": args.mean_of, "copy_any": args.copy_any,
               "split": "valid" if args.valid else "test", "pairs": len(pairs), "distinct_sources": len(sources),
               "date": time.strftime("%Y-%m-%d")}
    for name, beam in [("greedy", 1)] + ([] if args.greedy_only else [(f"beam{args.beam}", args.beam)]):
        started = time.perf_counter()
        outputs = translator.translate(sources, beam_size=beam, length_penalty=args.length_penalty, progress=True)
        translated = dict(zip(sources, outputs))
        seconds = time.perf_counter() - started
        hypotheses = [translated[source] for source, _ in pairs]
        single = sacrebleu.corpus_bleu(hypotheses, [[target for _, target in pairs]])
        chrf = sacrebleu.corpus_chrf(hypotheses, [[target for _, target in pairs]])
        most = max(len(refs) for refs in references.values())
        multi = sacrebleu.corpus_bleu([translated[source] for source in sources],
                                      [[references[source][k] if k < len(references[source]) else None
                                        for source in sources] for k in range(most)])
        leaked = {source: english_words(translated[source], *known) for source in sources} if known else {}
        leaked = {source: words for source, words in leaked.items() if words}
        results[name] = {"bleu": round(single.score, 2), "chrf": round(chrf.score, 2),
                         "bleu_all_references": round(multi.score, 2), "seconds": round(seconds, 1),
                         "outputs_with_english_words": len(leaked) if known else None,
                         "signature": str(single)}
        print(name, json.dumps(results[name]), flush=True)
        for source in list(leaked)[: args.examples]:
            print(f"  {source} -> {translated[source]}  {leaked[source]}")
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    sys.exit(main())
