"""Input as people type it: case, long sentences and names, for a translator trained on Tatoeba.

    python benchmarks/typed_input.py case --data data/fra-eng/fra.txt --json case.json
    python benchmarks/typed_input.py long --data data/fra-eng/fra.txt --held-out runs/long16/long.tsv [--run RUN]
    python benchmarks/typed_input.py marks --data data/fra-eng/fra.txt --json marks.json
    python benchmarks/typed_input.py rule --data data/fra-eng/fra.txt --json rule.json
    python benchmarks/typed_input.py truecaser --data data/fra-eng/fra.txt

``case``: BLEU (sacreBLEU's, single reference) of the shipped ``--pretrained fra`` (or ``--run``) on
its validation and test splits with the English as written, lower-cased and upper-cased, greedy and
with beam 4, read as typed (no truecaser: how npformer read input before issue 47) and truecased
(``data.truecase``). The splits are drawn again from ``--data`` with the run's recorded options.

``long``: long pairs that no run trained on: the pairs that ``npformer train --long-words 16`` held
out (its ``long.tsv``; the documented command, ``--max-words 8``, trains on none of them), and the
pairs whose English has more than 16 words, in groups by length, with beam 4, translated whole (as
before issue 47; the model reads at most ``max_len`` pieces, so the rest was cut) and as
``Translator.translate`` now reads them (split at sentence ends, then at ``max_len``).

``marks``: English typed without its final mark, as into a prompt ("I am tired", "what time is it"):
BLEU with beam 4 on the validation and test splits as written, with the final mark removed, and
lower-cased with it removed, read with no mark added (``final_mark=None``: how npformer read input
before issue 65) and with the mark English word order gives (``final_mark="guess"``,
``data.final_mark``); how often the guessed mark is the one removed; and the share of outputs with
a repeated run of words the reference lacks (``repeats``).

``rule``: how often ``data.final_mark`` gives back the mark removed, on the training split (where it
was written), the validation and the test split.

``truecaser``: learn the shipped ``fra``'s truecaser again from its training split (drawn again from
``--data`` with the recorded options), check that its forms and names are those it ships with, and
write it with its ``rare_names`` (issue 65) into ``npformer/data/pretrained/fra/truecase.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter

from npformer.data import load_pairs, split_by_source, tokenize
from npformer.data.final_mark import final_mark
from npformer.data.tatoeba import longest_side
from npformer.metrics import bleu
from npformer.tasks.translation import Translator, load_run, read_tsv
from npformer.tasks.translation.pretrained import pretrained_folder

CASES = {"as written": lambda text: text, "lower-cased": str.lower, "upper-cased": str.upper}


def translators(run) -> dict[str, Translator]:
    """The run's translator as it is now, and as npformer read input before (no truecaser, no parts)."""
    now = Translator.from_run(run)
    before = Translator(run.model, run.src_vocab, run.tgt_vocab, truecaser=None, trained_words=None)
    return {"before": before, "now": now}


def drawn_splits(run, data: str):
    """The run's splits of short pairs, drawn again from ``data`` with its recorded options."""
    config = run.config
    pairs, _ = load_pairs(data, config["data"]["max_words"], config["data"]["max_pairs"], config["data"]["lowercase"])
    return split_by_source(pairs, seed=config["train"]["seed"])


def measure_case(run, data: str, readings: list[str], split_names=("valid", "test"), beams=(1, 4)) -> dict:
    splits = drawn_splits(run, data)
    result = {}
    for split_name in split_names:
        split = getattr(splits, split_name)
        references = [french for _, french in split]
        for reading, translator in translators(run).items():
            if reading not in readings:
                continue
            for case_name, case in CASES.items():
                for beam in beams:
                    started = time.perf_counter()
                    outputs = translator.translate([case(english) for english, _ in split], beam_size=beam)
                    key = f"{split_name} | {reading} | {case_name} | {'greedy' if beam == 1 else f'beam {beam}'}"
                    result[key] = round(bleu(outputs, references), 2)
                    print(f"{key}: BLEU {result[key]:.2f} ({len(split)} pairs, {time.perf_counter() - started:.0f} s)",
                          flush=True)
    return result


def measure_long(run, data: str, held_out: str, longest: int) -> dict:
    """BLEU with beam 4 on long pairs no run trained on: ``held_out`` (a run's ``long.tsv``, written by
    ``npformer train --long-words``), grouped by the longer side's words, and the pairs of ``data``
    whose English has more than ``longest`` words (beyond any run's ``--long-words``), read whole
    (before issue 47) and in parts (``Translator.translate`` now)."""
    held = read_tsv(held_out)
    all_pairs, _ = load_pairs(data, None, None, run.config["data"]["lowercase"])
    groups = {"9-12 words": [pair for pair in held if longest_side(*pair) <= 12],
              f"13-{longest} words": [pair for pair in held if 12 < longest_side(*pair) <= longest],
              f"{longest + 1}+ words (English)": [pair for pair in all_pairs if len(pair[0].split()) > longest]}
    result = {}
    for name, group in groups.items():
        sentences = sum(sum(token in (".", "!", "?") for token in tokenize(english, "en")) > 1 for english, _ in group)
        entry = {"pairs": len(group), "several sentences": sentences}
        for reading, translator in translators(run).items():
            outputs = translator.translate([english for english, _ in group], beam_size=4)
            entry[f"BLEU {reading}"] = round(bleu(outputs, [french for _, french in group]), 2)
        result[name] = entry
        print(name, entry, flush=True)
    return result


UNMARKED = {"as written": lambda text: text,
            "unmarked": lambda text: re.sub(r"\s*[.!?…]+$", "", text),
            "lower-cased, unmarked": lambda text: re.sub(r"\s*[.!?…]+$", "", text).lower()}


def _runs_of_words(text: str) -> Counter:
    """The word pairs of a French sentence, and each word followed at once by itself (punctuation
    between left out): "je suis fatigué, je suis fatigué" has "je suis" twice."""
    words = [word for word in tokenize(text.lower(), "fr") if any(character.isalnum() for character in word)]
    found = Counter(zip(words, words[1:]))
    found.update((word, "(again)") for word, following in zip(words, words[1:]) if word == following)
    return found


def repeats(outputs: list[str], references: list[str]) -> float:
    """The share of outputs with a word pair (or a word said twice in a row) more often than in
    their reference: a decoding that loops ("J'adore la pizza de la pizza que j'adore la pizza")."""
    looping = 0
    for output, reference in zip(outputs, references):
        said, meant = _runs_of_words(output), _runs_of_words(reference)
        looping += any(count > 1 and count > meant[run] for run, count in said.items())
    return looping / len(outputs)


def mark_accuracy(split: list[tuple[str, str]]) -> dict:
    """How often ``final_mark`` gives back the mark removed from a split's English: the mark itself,
    question or not, and which marks it gives in place of which."""
    marks = [tokenize(english, "en")[-1] for english, _ in split]
    guessed = [final_mark(tokenize(UNMARKED["unmarked"](english), "en")) for english, _ in split]
    return {"sentences": len(split),
            "mark right": round(sum(a == b for a, b in zip(marks, guessed)) / len(split), 4),
            "question or not right": round(sum((a == "?") == (b == "?") for a, b in zip(marks, guessed)) / len(split), 4),
            "marks": dict(Counter(f"{mark} as {guess}" for mark, guess in zip(marks, guessed)).most_common())}


def measure_rule(run, data: str) -> dict:
    """``mark_accuracy`` on the training split (where the rule was written), the validation and the test split."""
    splits = drawn_splits(run, data)
    result = {}
    for split_name in ("train", "valid", "test"):
        result[split_name] = mark_accuracy(getattr(splits, split_name))
        print(split_name, result[split_name], flush=True)
    return result


def measure_marks(run, data: str, beam: int = 4) -> dict:
    splits = drawn_splits(run, data)
    readings = {"no mark added": None, "mark guessed": "guess"}
    result = {}
    for split_name in ("valid", "test"):
        split = getattr(splits, split_name)
        references = [french for _, french in split]
        accuracy = mark_accuracy(split)
        result[f"{split_name} | guessed mark right"] = accuracy["mark right"]
        result[f"{split_name} | question or not right"] = accuracy["question or not right"]
        print(split_name, {key: value for key, value in result.items() if key.startswith(split_name)}, flush=True)
        for reading, mark in readings.items():
            translator = Translator.from_run(run)
            translator.final_mark = mark
            for case_name, case in UNMARKED.items():
                if case_name == "as written" and reading == "no mark added" and split_name == "valid":
                    continue
                started = time.perf_counter()
                outputs = translator.translate([case(english) for english, _ in split], beam_size=beam)
                key = f"{split_name} | {case_name} | {reading} | beam {beam}"
                result[key] = {"bleu": round(bleu(outputs, references), 2),
                               "repeats": round(repeats(outputs, references), 4)}
                print(f"{key}: {result[key]} ({len(split)} pairs, {time.perf_counter() - started:.0f} s)", flush=True)
    return result


def relearn_truecaser(run, data: str) -> dict:
    """The shipped truecaser learned again (``truecaser`` above); what changed."""
    import dataclasses
    from pathlib import Path

    from npformer.data.truecase import Truecaser
    from npformer.tasks.translation.options import TrainOptions
    from npformer.tasks.translation.trainer import load_splits

    fields = {field.name for field in dataclasses.fields(TrainOptions)}
    options = TrainOptions(**{key: value for key, value in {**run.config["train"], "data": data}.items() if key in fields})
    splits, _ = load_splits(options, log=print)
    learned = Truecaser.learn([(tokenize(source, "en"), tokenize(target, "fr")) for source, target in splits.train])
    if learned.forms != run.truecaser.forms or learned.names != run.truecaser.names:
        raise SystemExit("the truecaser learned again differs from the shipped one: not the run's training split")
    learned.save(str(Path(run.folder) / "truecase.json"))
    print(f"{len(learned.rare_names)} rare names written: {', '.join(sorted(learned.rare_names)[:20])}, ...")
    return {"rare_names": len(learned.rare_names)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("case", "long", "marks", "rule", "truecaser"))
    parser.add_argument("--data", required=True, help="the Tatoeba fra.txt the run was trained on")
    parser.add_argument("--run", help="a run folder (default: the shipped --pretrained fra)")
    parser.add_argument("--held-out", help="long: a run's long.tsv (npformer train --long-words)")
    parser.add_argument("--longest", type=int, default=16, help="long: the --long-words of that run")
    parser.add_argument("--readings", nargs="+", choices=("before", "now"), default=["before", "now"],
                        help="case: as before issue 47, as now, or both")
    parser.add_argument("--splits", nargs="+", choices=("valid", "test"), default=["valid", "test"],
                        help="case: the splits to score")
    parser.add_argument("--beams", nargs="+", type=int, default=[1, 4], help="case: the beam sizes (1: greedy)")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args()
    run = load_run(args.run or pretrained_folder("fra"))
    if args.what == "case":
        result = measure_case(run, args.data, args.readings, args.splits, args.beams)
    elif args.what == "marks":
        result = measure_marks(run, args.data)
    elif args.what == "rule":
        result = measure_rule(run, args.data)
    elif args.what == "truecaser":
        result = relearn_truecaser(run, args.data)
    else:
        result = measure_long(run, args.data, args.held_out, args.longest)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"run": args.run or "--pretrained fra", args.what: result}, file, indent=1)


if __name__ == "__main__":
    main()
