"""Sentence pairs from the Tatoeba project, as distributed by manythings.org/anki.

Format: UTF-8 text, one pair per line, ``english<TAB>french[<TAB>attribution]``.
For example ``fra.txt`` of the ``fra-eng`` archive (167,130 pairs).

Data credit: sentence pairs from the Tatoeba Project (tatoeba.org), CC-BY 2.0 FR,
via manythings.org/anki. Show this credit wherever results on the data are shown.
npformer never ships the file.

``load_pairs`` reads the file through ``files.read_pairs_file`` (one checked path, one set of
``DataError`` messages) and keeps count of what it drops: malformed lines (no tab, an empty
side, a stray line that is not UTF-8) are reported with their line numbers, never silently
skipped; a file that cannot be used as a whole (missing, binary, in another encoding, empty, no
line with a tab, no usable pair) is a ``DataError`` naming it. ``split_by_source``
deduplicates and splits by English sentence, so all the translations of one
English sentence land in the same split; each split comes in a seeded random
order, so that its first pairs are a fair sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy

from .files import EXPECTED, DataError, check_encoding, data_error, read_pairs_file
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


def longest_side(english: str, french: str) -> int:
    """The words (whitespace-separated) of a pair's longer side: what ``max_words`` limits."""
    return max(len(english.split()), len(french.split()))


def load_pairs(path: str, max_words: int | None = None, max_pairs: int | None = None,
               lowercase: bool = False, allow_empty: bool = False) -> tuple[list[tuple[str, str]], LoadReport]:
    """Read ``english<TAB>french[<TAB>...]`` pairs, deduplicated, in file order.

    Args:
        path: the TSV file, read through ``files.read_pairs_file`` (its checks, its messages).
        max_words: keep pairs with at most this many whitespace-separated words per side.
        max_pairs: stop after this many kept pairs.
        lowercase: lower-case both sides.
        allow_empty: an empty file, or one without a usable pair, gives no pairs instead of an
            error (a run folder's empty split).

    Returns:
        The pairs and a ``LoadReport``. Raises ``DataError`` (a ``ValueError``) naming the path:
        the file's problems (``read_pairs_file``: missing, a directory, unreadable, empty, binary,
        not UTF-8), no line with a tab, or no usable pair, with the report of what was dropped.
    """
    report = LoadReport(path=path)
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    first_bad, tabs = None, 0
    for entry in read_pairs_file(path, allow_empty):
        line_number, line = entry.number, entry.text
        report.lines += 1
        if line is None:
            first_bad = first_bad or entry
            report.add_problem("not UTF-8", line_number)
            continue
        if not line.strip():
            report.add_problem("empty line", line_number)
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            report.add_problem("no tab", line_number)
            continue
        tabs += 1
        english, french = columns[0].strip(), columns[1].strip()
        if not english or not french:
            report.add_problem("empty side", line_number)
            continue
        if lowercase:
            english, french = english.lower(), french.lower()
        if max_words is not None and longest_side(english, french) > max_words:
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
    check_encoding(path, first_bad, len(report.problems.get("not UTF-8", [])), report.lines, report.kept)
    if not pairs and not allow_empty:
        if not tabs and report.problems.get("no tab"):
            raise data_error(path, f"no line has a tab: not a file of sentence pairs ({EXPECTED}, "
                                   f"as in the Tatoeba files of manythings.org/anki)")
        if not tabs:
            raise data_error(path, f"holds only blank lines ({EXPECTED})")
        hint = f"; allow longer sentences (max_words is {max_words})" if report.too_long else ""
        raise data_error(path, f"no usable sentence pair ({report.summary()}){hint}")
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


SPLIT_NAMES = {"train": "training", "valid": "validation", "test": "test"}


def _sources_needed(needs: tuple[str, ...], valid_fraction: float, test_fraction: float) -> int | None:
    """The fewest distinct English sentences for which ``split_by_source`` fills every split in ``needs``."""
    for n in range(1, 1_000_001):
        n_test, n_valid = int(round(test_fraction * n)), int(round(valid_fraction * n))
        counts = {"train": n - n_test - n_valid, "valid": n_valid, "test": n_test}
        if all(counts[name] > 0 for name in needs):
            return n
    return None


def split_hint(report: LoadReport, max_pairs: int | None, max_words: int | None,
               max_words_flag: str | None = "--max-words") -> str:
    """What else gives more pairs, for ``check_splits``: a larger ``max_pairs`` when it stopped the
    reading, a larger ``max_words`` (``max_words_flag``) when it dropped pairs."""
    hint = ""
    if max_pairs is not None and report.kept >= max_pairs:
        hint += f", or a larger --max-pairs (now {max_pairs:,})"
    if report.too_long:
        limit = f"{max_words_flag}, now {max_words}" if max_words_flag else f"at most {max_words} words here"
        hint += f", or longer sentences ({limit}: {report.too_long:,} pairs were longer)"
    return hint


def check_splits(splits: Splits, path: str | None, needs: tuple[str, ...] = ("train", "valid", "test"),
                 valid_fraction: float = 0.02, test_fraction: float = 0.05, hint: str = "") -> Splits:
    """``splits``, when each split named in ``needs`` holds at least one pair; else, before any
    training, the ``DataError`` that names the file (``path``; ``None``: the embedded corpus), says
    how many pairs there were, what each split got, how many distinct English sentences
    ``split_by_source`` needs at these fractions, and what to do (``hint``: see ``split_hint``)."""
    empty = [name for name in needs if not getattr(splits, name)]
    if not empty:
        return splits
    everything = splits.train + splits.valid + splits.test
    got = ", ".join(f"{SPLIT_NAMES[name]} {len(getattr(splits, name)):,}" for name in SPLIT_NAMES)
    which = " and ".join(SPLIT_NAMES[name] for name in empty) + (" splits are" if len(empty) > 1 else " split is")
    if path is None:
        raise DataError(f"the embedded corpus: {len(everything):,} pairs give {got}: the {which} empty; "
                        f"use more pairs (--max-pairs)")
    sources = len({english for english, _ in everything})
    needed = _sources_needed(needs, valid_fraction, test_fraction)
    rule = (f"holding out {valid_fraction:.0%} for validation and {test_fraction:.0%} for test takes at least "
            f"{needed:,} distinct English sentences" if needed else "the split fractions leave it empty")
    raise data_error(path, f"too few pairs to split: {len(everything):,} pairs ({sources:,} distinct English "
                           f"sentences) give {got}: the {which} empty ({rule}); use a bigger file{hint}")


def sentence_splits(data: str | None, max_pairs: int, seed: int = 0,
                    log: Callable[[str], None] | None = None,
                    needs: tuple[str, ...] = ("train", "test")) -> tuple[Splits, str]:
    """The sentence pairs of the small-model tasks and where they came from: the embedded corpus
    (``data=None``, at most 12,000 training pairs), or a Tatoeba file's pairs of at most 12 words,
    split by English sentence. The load report goes to ``log``. ``DataError`` (naming the file) when
    the file cannot be read (``load_pairs``) or a split in ``needs`` comes out empty
    (``check_splits``), before any training."""
    if data is None:
        return check_splits(toy_corpus(n_train=min(max_pairs, 12000), seed=seed), None, needs), "embedded corpus"
    pairs, report = load_pairs(data, max_words=12, max_pairs=max_pairs)
    if log:
        log(report.summary())
    splits = split_by_source(pairs, seed=seed)
    return check_splits(splits, data, needs, hint=split_hint(report, max_pairs, 12, None)), data
