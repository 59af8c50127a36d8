"""A BERT-style masked language model on French sentences.

Training data are made by **masking** (Devlin et al., 2019): 15% of the real tokens of each batch
are selected; of those, 80% are replaced by ``[MASK]``, 10% by a random word and 10% left as they
are. The model must predict the original word at every selected position, and only there: the
target is ``<pad>`` (ignored by the loss) everywhere else. The random and unchanged 10% keep the
model from trusting that only ``[MASK]`` positions matter.

The model is ``nn.LanguageModel`` with ``causal=False``: the same blocks, attending both ways, so
a hidden word can be read from its right-hand context too. French shows why that matters: the form
of a prenominal adjective (``petits`` / ``petites``) depends on the noun that *follows* it.
"""

from __future__ import annotations

import time
from typing import IO, Any

import numpy

from .. import backend
from ..data import Vocab, tokenize
from ..models import LanguageModel, LanguageModelConfig
from ..tokens import BOS_ID, EOS_ID, MASK_ID, MASK_TOKEN, PAD_ID
from ..training import fit
from .language_model import encode_sentences, french_sentences, trim_padding


def mask_tokens(ids: numpy.ndarray, rng: numpy.random.Generator, vocab_size: int,
                rate: float = 0.15) -> tuple[numpy.ndarray, numpy.ndarray]:
    """BERT's masking. Returns (inputs, targets); targets are ``<pad>`` where nothing is asked."""
    first_word = MASK_ID + 1
    candidates = ids >= first_word  # real words only: never <bos>, <eos>, <pad> or [MASK]
    selected = candidates & (rng.random(ids.shape) < rate)
    targets = numpy.where(selected, ids, PAD_ID)
    choice = rng.random(ids.shape)
    inputs = ids.copy()
    inputs[selected & (choice < 0.8)] = MASK_ID
    random_words = selected & (choice >= 0.8) & (choice < 0.9)
    inputs[random_words] = rng.integers(first_word, vocab_size, size=int(random_words.sum()))
    return inputs, targets  # the last 10% of the selected keep their word


def masked_accuracy(model: LanguageModel, ids: numpy.ndarray, rng: numpy.random.Generator,
                    batch: int = 256) -> float:
    correct = total = 0
    with model.evaluating():
        for start in range(0, len(ids), batch):
            chunk = trim_padding(ids[start:start + batch])
            inputs, targets = mask_tokens(chunk, rng, model.config.vocab)
            predictions = backend.to_numpy(model.forward(backend.asarray(inputs)).argmax(-1))
            asked = targets != PAD_ID
            correct += int((predictions[asked] == targets[asked]).sum())
            total += int(asked.sum())
    return correct / max(total, 1)


def train_french_mlm(data: str | None = None, steps: int = 400, batch: int = 64, max_pairs: int = 30000,
                     seed: int = 0, stream: IO[str] | None = None, **config: Any) -> dict:
    log = (lambda text: print(text, file=stream)) if stream else (lambda text: None)
    train, valid, source = french_sentences(data, max_pairs, seed, log)
    words = Vocab.build((tokenize(s, "fr") for s in train), min_freq=2 if data else 1).tokens
    vocab = Vocab(words[:MASK_ID] + [MASK_TOKEN] + words[MASK_ID:])
    model = LanguageModel(LanguageModelConfig(vocab=len(vocab), causal=False, **{"max_len": 32, **config}),
                          seed=seed)
    train_ids = encode_sentences(train, vocab, model.config.max_len)
    valid_ids = encode_sentences(valid, vocab, model.config.max_len)
    rng = numpy.random.default_rng(seed)

    def next_batch(step: int) -> tuple | None:
        inputs, targets = mask_tokens(trim_padding(train_ids[rng.integers(0, len(train_ids), size=batch)]),
                                      rng, len(vocab))
        if not (targets != PAD_ID).any():
            return None  # nothing selected in this batch: no loss to learn from
        return backend.asarray(inputs), backend.asarray(targets)

    start = time.perf_counter()
    losses = fit(model, next_batch, steps, ignore_index=PAD_ID, progress=stream is not None)
    accuracy = masked_accuracy(model, valid_ids, numpy.random.default_rng(seed + 1))
    result = {"model": model, "vocab": vocab, "source": source, "losses": losses,
              "valid_masked_accuracy": accuracy, "valid_sentences": len(valid),
              "seconds": time.perf_counter() - start, "parameters": model.num_params()}
    log(f"{source}: masked-token accuracy {accuracy:.1%} on {len(valid):,} validation sentences "
        f"({model.num_params():,} parameters, {steps} steps, {result['seconds']:.0f} s)")
    return result


def fill_mask(model: LanguageModel, vocab: Vocab, sentence: str, top: int = 3) -> list[list[str]]:
    """The ``top`` most probable words for each ``[MASK]`` in ``sentence``."""
    tokens: list[str] = []
    for index, piece in enumerate(sentence.split(MASK_TOKEN)):
        if index:
            tokens.append(MASK_TOKEN)
        tokens += tokenize(piece, "fr")
    ids = numpy.array([[BOS_ID] + vocab.encode(tokens) + [EOS_ID]])
    with model.evaluating():
        logits = backend.to_numpy(model.forward(backend.asarray(ids)))[0]
    answers = []
    for position in numpy.flatnonzero(ids[0] == MASK_ID):
        order = numpy.argsort(-logits[position])
        answers.append([vocab.tokens[i] for i in order if i > MASK_ID][:top])
    return answers
