"""The pairs longer than ``--max-words`` that ``--long-words`` adds to a run's training split
(``trainer.load_splits``), with a tenth of their English sentences held out to measure long input."""

from __future__ import annotations

from ...data import Splits, split_by_source
from ...data.tatoeba import longest_side


def split_by_length(pairs: list[tuple[str, str]], max_words: int | None) -> tuple[list, list]:
    """``(pairs of at most max_words words a side, the longer ones)``, each in file order."""
    short, longer = [], []
    for pair in pairs:
        (short if max_words is None or longest_side(*pair) <= max_words else longer).append(pair)
    return short, longer


LONG_HELD_OUT = 0.1  # of the longer pairs' English sentences, kept out of training to measure long input


def with_longer_pairs(splits: Splits, longer: list[tuple[str, str]], seed: int) -> Splits:
    """``splits`` with the ``longer`` pairs added: a tenth of the English sentences that only they
    hold kept out of training (``Splits.long``), the rest added to training. A longer pair whose
    English sentence is in the validation or test split is left out, and one whose English sentence
    is in the training split trains, so that no English sentence is in two places."""
    elsewhere = {english for english, _ in splits.valid + splits.test}
    trained = {english for english, _ in splits.train}
    longer = [pair for pair in longer if pair[0] not in elsewhere]
    new = [pair for pair in longer if pair[0] not in trained]
    parts = split_by_source(new, valid_fraction=0.0, test_fraction=LONG_HELD_OUT, seed=seed) if new \
        else Splits([], [], [])
    also_trained = [pair for pair in longer if pair[0] in trained]
    return Splits(splits.train + also_trained + parts.train, splits.valid, splits.test, splits.alignments,
                  long=parts.test)
