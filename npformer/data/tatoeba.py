"""Sentence pairs from the Tatoeba project, as distributed by manythings.org/anki.

Format: UTF-8 text, one pair per line, ``english<TAB>french[<TAB>attribution]``.
For example ``fra.txt`` of the ``fra-eng`` archive (167,130 pairs).

Data credit: sentence pairs from the Tatoeba Project (tatoeba.org), CC-BY 2.0 FR,
via manythings.org/anki. Show this credit wherever results on the data are shown.
npformer never ships the file.

``load_pairs`` reads the file and keeps count of what it drops: malformed lines
(no tab, an empty side, bytes that are not UTF-8) are reported with their
line numbers, never silently skipped and never fatal. ``split_by_source``
deduplicates and splits by English sentence, so all the translations of one
English sentence land in the same split; each split comes in a seeded random
order, so that its first pairs are a fair sample.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy

from .toy_corpus import Splits, toy_corpus

ATTRIBUTION = "Tatoeba Project (tatoeba.org), CC-BY 2.0 FR, via manythings.org/anki"


@dataclass
class LoadReport:
    """What ``load_pairs`` read, kept and dropped; ``problems`` maps a reason to line numbers."""

    path: str
    lines: int = 0
    kept: int = 0
    duplicates: int = 0
    too_long: int = 0
    problems: dict[str, list[int]] = field(default_factory=dict)

    def add_problem(self, reason: str, line_number: int) -> None:
        self.problems.setdefault(reason, []).append(line_number)

    def summary(self) -> str:
        parts = [f"{self.path}: {self.lines:,} lines, {self.kept:,} pairs kept"]
        if self.duplicates:
            parts.append(f"{self.duplicates:,} duplicate pairs dropped")
        if self.too_long:
            parts.append(f"{self.too_long:,} pairs over the length limit dropped")
        for reason, line_numbers in self.problems.items():
            shown = ", ".join(str(n) for n in line_numbers[:10])
            more = f" and {len(line_numbers) - 10} more" if len(line_numbers) > 10 else ""
            parts.append(f"{len(line_numbers)} malformed ({reason}): lines {shown}{more}")
        return "; ".join(parts)


def load_pairs(path: str, max_words: int | None = None, max_pairs: int | None = None,
               lowercase: bool = False) -> tuple[list[tuple[str, str]], LoadReport]:
    """Read ``english<TAB>french[<TAB>...]`` pairs, deduplicated, in file order.

    Args:
        path: the TSV file.
        max_words: keep pairs with at most this many whitespace-separated words per side.
        max_pairs: stop after this many kept pairs.
        lowercase: lower-case both sides.

    Returns:
        The pairs and a ``LoadReport``. Raises ``FileNotFoundError`` naming the path.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_pairs: no such file: {path}")
    report = LoadReport(path=path)
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    with open(path, "rb") as file:
        for line_number, raw in enumerate(file, start=1):
            report.lines += 1
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                report.add_problem("not UTF-8", line_number)
                continue
            if not line.strip():
                report.add_problem("empty line", line_number)
                continue
            columns = line.split("\t")
            if len(columns) < 2:
                report.add_problem("no tab", line_number)
                continue
            english, french = columns[0].strip(), columns[1].strip()
            if not english or not french:
                report.add_problem("empty side", line_number)
                continue
            if lowercase:
                english, french = english.lower(), french.lower()
            if max_words is not None and max(len(english.split()), len(french.split())) > max_words:
                report.too_long += 1
                continue
            if (english, french) in seen:
                report.duplicates += 1
                continue
            seen.add((english, french))
            pairs.append((english, french))
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    report.kept = len(pairs)
    return pairs, report


def split_by_source(pairs: list[tuple[str, str]], valid_fraction: float = 0.02,
                    test_fraction: float = 0.05, seed: int = 0) -> Splits:
    """Shuffle the distinct English sentences and split them; every translation
    of one English sentence goes where that sentence goes."""
    if not (0 <= valid_fraction < 1 and 0 <= test_fraction < 1 and valid_fraction + test_fraction < 1):
        raise ValueError(
            f"split_by_source: fractions must be in [0, 1) and sum below 1, "
            f"got valid {valid_fraction}, test {test_fraction}"
        )
    sources = list(dict.fromkeys(english for english, _ in pairs))
    order = numpy.random.default_rng(seed).permutation(len(sources))
    n_test = int(round(test_fraction * len(sources)))
    n_valid = int(round(valid_fraction * len(sources)))
    split_of = {}
    for rank, index in enumerate(order):
        split_of[sources[index]] = "test" if rank < n_test else "valid" if rank < n_test + n_valid else "train"
    buckets: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair in pairs:
        buckets[split_of[pair[0]]].append(pair)
    # Files like fra.txt are sorted by length: shuffle each split, so that its first N pairs
    # (a validation sample, a quick test) are a fair sample rather than the N shortest.
    rng = numpy.random.default_rng(seed + 1)
    for name, bucket in buckets.items():
        buckets[name] = [bucket[i] for i in rng.permutation(len(bucket))]
    return Splits(**buckets)


def sentence_splits(data: str | None, max_pairs: int, seed: int = 0,
                    log: Callable[[str], None] | None = None) -> tuple[Splits, str]:
    """The sentence pairs of the small-model tasks and where they came from: the embedded corpus
    (``data=None``, at most 12,000 training pairs), or a Tatoeba file's pairs of at most 12 words,
    split by English sentence. The load report goes to ``log``."""
    if data is None:
        return toy_corpus(n_train=min(max_pairs, 12000), seed=seed), "embedded corpus"
    pairs, report = load_pairs(data, max_words=12, max_pairs=max_pairs)
    if log:
        log(report.summary())
    return split_by_source(pairs, seed=seed), data
