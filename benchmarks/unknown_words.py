"""Do unseen words pass through? Put an invented name into test sentences and count the copies.

    python benchmarks/unknown_words.py runs/toy-tiny                 # a run folder written by npformer train
    python benchmarks/unknown_words.py runs/fra-small --sentences 1000 --beam 4
    python benchmarks/unknown_words.py npformer/data/pretrained/fra --without-truecaser   # as before issue 47

Takes the run's test split and, in each pair that has one, replaces an aligned word pair by an
invented name on both sides (``data.swap_in_words``): on the embedded corpus a noun of the gold
alignment ("the cat sees the dog" -> "the cat sees the Zorvan"), on other data a word written
the same on both sides (a name or a number). Then translates the English and counts the
translations that hold the name (``unknown_words_copied``), those that come within two letters of
it instead ("Zorvan" -> "Forvan"), and their BLEU against the changed references. A word model
copies only if it learned to write ``<unk>`` (``--unk-rate``); a BPE model spells the name out of
pieces, unless its truecaser finds it unknown and a known name stands in for it (``Translator``).
"""

from __future__ import annotations

import argparse
import json

from npformer.data import copy_links, swap_in_words, tokenize
from npformer.data.toy_corpus import NOUNS
from npformer.tasks.translation import Translator
from npformer.tasks.translation.alignment import gold_test_split
from npformer.tasks.translation.evaluation import unknown_words_copied
from npformer.tasks.translation import RunFolder, load_run

NAMES = ("Zorvan", "Quillet", "Brannoc", "Velmira", "Tosker", "Ardwyn", "Pelloza", "Himbertz", "Oskaru", "Fendrel")


def test_pairs_with_links(run) -> tuple[list[tuple[str, str]], list[list[tuple[int, int]]]]:
    """The run's test pairs and, for each, the aligned pairs a name may replace."""
    toy = run.config["train"].get("data") is None
    pairs, golds = gold_test_split(run) if toy else (RunFolder(run.folder).split("test"), None)
    tokens = [(tokenize(english, "en"), tokenize(french, "fr")) for english, french in pairs]
    links = [copy_links(english, french, gold) for (english, french), gold in zip(tokens, golds or [None] * len(pairs))]
    if toy:  # on the embedded corpus, only nouns of the gold alignment become names
        nouns = {word for singular, plural, *_ in NOUNS for word in (singular, plural)}
        links = [[(s, t) for s, t in pair_links if english[s] in nouns] for pair_links, (english, _) in zip(links, tokens)]
    return pairs, links


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run folder written by npformer train")
    parser.add_argument("--sentences", type=int, default=500, help="at most this many changed pairs")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--without-truecaser", action="store_true",
                        help="read input as before issue 47: no truecaser, so no name stands in for an unknown one")
    args = parser.parse_args()

    run = load_run(args.run)
    translator = Translator.from_run(run)
    if args.without_truecaser:
        translator.truecaser = None
    # A word model's <unk>s; a BPE model knows every letter, and these names are in no training text.
    unseen = translator.unknown_words(NAMES) or list(NAMES)
    pairs, links = test_pairs_with_links(run)
    swapped, words = swap_in_words(pairs, links, unseen)
    swapped, words = swapped[: args.sentences], words[: args.sentences]
    result = unknown_words_copied(translator, swapped, words, args.beam)
    share = {key: result[key] / max(result["sentences"], 1) for key in ("copied", "near")}
    print(f"{args.run}: an unseen name in {result['sentences']} test sentences "
          f"({'greedy' if args.beam == 1 else f'beam {args.beam}'}): copied in {result['copied']} ({share['copied']:.0%}), "
          f"within two letters in {result['near']} more ({share['near']:.0%}), BLEU {result['bleu']:.1f}")
    for english, reference, translation in result["examples"]:
        print(f"  {english}  ->  {translation}   (reference: {reference})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"run": args.run, "beam": args.beam, **result}, file, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
