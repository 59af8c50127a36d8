"""Language identification with the encoder-only classifier: is a sentence English or French?

The labelled data come from sentence pairs: the English side of each pair is
class 0, the French side class 1, and both sides of a pair stay in the same
split (so a test sentence's translation was never seen in training). With
``data=None`` the pairs are the embedded corpus; with a Tatoeba TSV file,
real sentences (credit: Tatoeba Project (tatoeba.org), CC-BY 2.0 FR, via
manythings.org/anki). The task is easy for a model that sees whole words, which
makes it a good first classifier: the lesson's point is the architecture,
masked pooling and learned positions, and the held-out accuracy shows it works.
"""

from __future__ import annotations

import time
from typing import IO, Any

import numpy

from .. import backend
from ..data import Vocab, pad_rows, sentence_splits, tokenize
from ..models import ClassifierConfig, EncoderClassifier
from ..tokens import PAD_ID
from ..training import fit

LANGUAGES = ("English", "French")


def labelled(pairs: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """Both sides of each pair, labelled 0 (English) and 1 (French)."""
    return [(text, label) for pair in pairs for label, text in enumerate(pair)]


def encode(examples: list[tuple[str, int]], vocab: Vocab, max_len: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Padded ids ``(N, T)`` (one tokenizer for both languages: the model must tell them apart) and labels."""
    ids = pad_rows([vocab.encode(tokenize(text, "en"))[:max_len] for text, _ in examples])
    return ids, numpy.array([label for _, label in examples])


def accuracy(model: EncoderClassifier, ids: numpy.ndarray, labels: numpy.ndarray, batch: int = 256) -> float:
    correct = 0
    with model.evaluating():
        for start in range(0, len(ids), batch):
            chunk = ids[start:start + batch]
            chunk = chunk[:, : max(1, int((chunk != PAD_ID).sum(1).max()))]
            logits = model.forward(backend.asarray(chunk))
            correct += int((backend.to_numpy(logits.argmax(-1)) == labels[start:start + batch]).sum())
    return correct / max(len(ids), 1)


def train_language_id(data: str | None = None, steps: int = 300, batch: int = 64, max_pairs: int = 20000,
                      pooling: str = "mean", seed: int = 0, stream: IO[str] | None = None, **config: Any) -> dict:
    """Train and evaluate; returns the model, vocabulary and held-out accuracy. ``DataError`` (a
    ``ValueError`` naming the file), before any training, when ``data`` cannot be read or leaves the
    training or the test split empty (``data.sentence_splits``)."""
    log = (lambda text: print(text, file=stream)) if stream else (lambda text: None)
    splits, source = sentence_splits(data, max_pairs, seed, log)
    train, test = labelled(splits.train), labelled(splits.test)
    vocab = Vocab.build((tokenize(text, "en") for text, _ in train), min_freq=2 if data else 1)
    model_config = ClassifierConfig(vocab=len(vocab), n_classes=2, pooling=pooling, **{"max_len": 32, **config})
    model = EncoderClassifier(model_config, seed=seed)
    train_ids, train_labels = encode(train, vocab, model_config.max_len)
    test_ids, test_labels = encode(test, vocab, model_config.max_len)
    rng = numpy.random.default_rng(seed)

    def next_batch(step: int) -> tuple:
        rows = rng.integers(0, len(train_ids), size=batch)
        ids = train_ids[rows]
        ids = ids[:, : max(1, int((ids != PAD_ID).sum(1).max()))]
        return backend.asarray(ids), backend.asarray(train_labels[rows])

    start = time.perf_counter()
    losses = fit(model, next_batch, steps, ignore_index=None, lr=1e-3, betas=(0.9, 0.999),
                 progress=stream is not None)
    result = {"model": model, "vocab": vocab, "source": source, "lowercase": data is None,
              "train_sentences": len(train),
              "test_sentences": len(test), "test_accuracy": accuracy(model, test_ids, test_labels),
              "seconds": time.perf_counter() - start, "parameters": model.num_params(), "losses": losses}
    log(f"{source}: {result['test_accuracy']:.2%} held-out accuracy on {len(test):,} sentences "
        f"({model.num_params():,} parameters, {steps} steps, {result['seconds']:.0f} s)")
    return result


def predict(model: EncoderClassifier, vocab: Vocab, sentences: list[str], lowercase: bool = False) -> list[str]:
    """"English" or "French" for each sentence. ``lowercase``: read input as the training text was
    written (the embedded corpus is lower-case: ``train_language_id`` says so in its ``"lowercase"``)."""
    if not sentences:
        return []
    ids, _ = encode([(s.lower() if lowercase else s, 0) for s in sentences], vocab, model.config.max_len)
    with model.evaluating():
        logits = model.forward(backend.asarray(ids))
    return [LANGUAGES[i] for i in backend.to_numpy(logits.argmax(-1))]
