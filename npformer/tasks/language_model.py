"""Training the decoder-only language model on French sentences, and sampling from it.

Each French sentence of the corpus (the embedded one, or a Tatoeba TSV file) becomes
``<bos> w1 ... wn <eos>`` at word level; the model learns to predict every next word. Validation
perplexity is ``exp(mean cross-entropy per token)`` on held-out sentences: the number of words
the model is, on average, as unsure as a uniform choice among.
"""

from __future__ import annotations

import math
import time
from typing import IO, Any

import numpy

from .. import backend, ops
from ..data import Vocab, detokenize, pad_rows, sentence_splits, tokenize
from ..models import LanguageModel, LanguageModelConfig, ModernLanguageModel, ModernLanguageModelConfig
from ..tokens import BOS_ID, EOS_ID, PAD_ID
from ..training import fit


def encode_sentences(sentences: list[str], vocab: Vocab, max_len: int) -> numpy.ndarray:
    """``<bos> w1 ... wn <eos>`` per French sentence, padded into ``(N, T)``."""
    return pad_rows([[BOS_ID] + vocab.encode(tokenize(s, "fr"))[: max_len - 2] + [EOS_ID] for s in sentences])


def trim_padding(ids: numpy.ndarray) -> numpy.ndarray:
    return ids[:, : max(2, int((ids != PAD_ID).sum(1).max()))]


def perplexity(model: LanguageModel, ids: numpy.ndarray, batch: int = 256) -> float:
    """``exp`` of the mean cross-entropy per predicted token over the rows of ``ids``."""
    total, count = 0.0, 0
    with model.evaluating():
        for start in range(0, len(ids), batch):
            chunk = trim_padding(ids[start:start + batch])
            targets = chunk[:, 1:]
            n = int((targets != PAD_ID).sum())
            logits = model.forward(backend.asarray(chunk[:, :-1]))
            loss, _ = ops.current().cross_entropy_forward(logits, backend.asarray(targets), ignore_index=PAD_ID)
            total, count = total + float(loss) * n, count + n
    return math.exp(total / max(count, 1))


def french_sentences(data: str | None, max_pairs: int, seed: int, log: Any) -> tuple[list[str], list[str], str]:
    """The French sides of the training and validation pairs (the test split when there is no
    validation split), and where they came from. ``DataError`` (a ``ValueError`` naming the file),
    before any training, when ``data`` cannot be read or leaves the training split, or both held-out
    splits, empty: a perplexity over nothing is no number."""
    splits, source = sentence_splits(data, max_pairs, seed, log, needs=("train", "test"))
    valid = splits.valid or splits.test
    return [french for _, french in splits.train], [french for _, french in valid], source


ARCHITECTURES = ("2017", "modern")


def check_architecture(architecture: str) -> None:
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")


def build_language_model(architecture: str, vocab: int, seed: int, **config: Any) -> Any:
    """The 2017 decoder (``LanguageModel``, lesson 18) or the LLaMA-style one (``ModernLanguageModel``)."""
    check_architecture(architecture)
    if architecture == "modern":
        return ModernLanguageModel(ModernLanguageModelConfig(vocab=vocab, **{"max_len": 32, **config}), seed=seed)
    return LanguageModel(LanguageModelConfig(vocab=vocab, **{"max_len": 32, **config}), seed=seed)


def train_french_lm(data: str | None = None, steps: int = 400, batch: int = 64, max_pairs: int = 30000,
                    seed: int = 0, stream: IO[str] | None = None, architecture: str = "2017",
                    minutes: float | None = None, warmup: int | None = None, **config: Any) -> dict:
    """Train a language model on the French side of ``data`` (default: the embedded corpus).

    ``architecture``: "2017" (lesson 18's decoder) or "modern" (RMSNorm, rotary positions, SwiGLU,
    grouped-query attention, tied embeddings); ``config``: that model's configuration fields.
    ``minutes``: stop when that much time is spent (``steps`` is then a ceiling; ``training.fit``).
    """
    log = (lambda text: print(text, file=stream)) if stream else (lambda text: None)
    check_architecture(architecture)  # before the data is read
    train, valid, source = french_sentences(data, max_pairs, seed, log)
    vocab = Vocab.build((tokenize(s, "fr") for s in train), min_freq=2 if data else 1)
    model = build_language_model(architecture, len(vocab), seed, **config)
    train_ids = encode_sentences(train, vocab, model.config.max_len)
    valid_ids = encode_sentences(valid, vocab, model.config.max_len)
    rng = numpy.random.default_rng(seed)
    trained_tokens = [0]  # the predicted (non-<pad>) tokens of every batch drawn

    def next_batch(step: int) -> tuple:
        ids = trim_padding(train_ids[rng.integers(0, len(train_ids), size=batch)])
        trained_tokens[0] += int((ids[:, 1:] != PAD_ID).sum())
        return backend.asarray(ids[:, :-1]), backend.asarray(ids[:, 1:])

    start = time.perf_counter()
    losses = fit(model, next_batch, steps, ignore_index=PAD_ID, progress=stream is not None, minutes=minutes,
                 warmup=warmup)
    seconds = time.perf_counter() - start
    result = {"model": model, "vocab": vocab, "source": source, "losses": losses,
              "valid_perplexity": perplexity(model, valid_ids), "valid_sentences": len(valid),
              "seconds": seconds, "steps": len(losses), "tokens_per_second": trained_tokens[0] / seconds,
              "parameters": model.num_params(),
              "architecture": architecture}
    log(f"{source}: validation perplexity {result['valid_perplexity']:.2f} on {len(valid):,} sentences "
        f"({architecture} decoder, {model.num_params():,} parameters, {len(losses)} steps, {seconds:.0f} s)")
    return result


def sample(model: LanguageModel, vocab: Vocab, prompt: str = "", count: int = 3, temperature: float = 0.8,
           top_k: int | None = 10, seed: int = 0, max_new_tokens: int = 20) -> list[str]:
    """``count`` seeded continuations of ``prompt`` (French words; empty: from the start)."""
    rng = numpy.random.default_rng(seed)
    prompt_ids = [BOS_ID] + vocab.encode(tokenize(prompt, "fr"))
    out = []
    for _ in range(count):
        ids = model.generate(prompt_ids, max_new_tokens, rng, temperature=temperature, top_k=top_k,
                             stop_id=EOS_ID)
        out.append(detokenize(tokenize(prompt, "fr") + vocab.decode(ids), "fr"))
    return out
