"""One sentence's attention, labelled: what ``npformer attention`` draws.

``attention_of(run, sentence)`` translates the sentence, feeds the source and
the translation back through the model (teacher forcing), and returns every
attention map with the tokens that label its rows and columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from ... import backend
from ...data import tokenize
from ...tokens import BOS_TOKEN, BOS_ID, EOS_TOKEN
from ...training import Run
from ...viz import EXPLORER_KINDS
from .translator import Translator

KINDS = {"enc": "encoder", "dec": "decoder_self", "cross": "decoder_cross"}
# The figure titles are the explorer's (``viz.EXPLORER_KINDS``), in the order PNGs are written.
TITLES = {kind: EXPLORER_KINDS[kind][1] for kind in ("enc", "dec", "cross")}


@dataclass
class SentenceAttention:
    """``maps[kind]``: one ``(H, Tq, Tk)`` host array per layer; ``labels[kind]``: (row tokens,
    column tokens). Kinds: "enc", "dec", "cross"."""

    sentence: str
    translation: str
    maps: dict[str, list[numpy.ndarray]]
    labels: dict[str, tuple[list[str], list[str]]]


def _labels(vocab: Any, typed: str, read: str) -> list[str]:
    """The labels of one word's ids: the word as typed when it is one token, else its pieces
    (without the end-of-word marker)."""
    pieces = vocab.pieces([read])
    return [typed] if len(pieces) == 1 else [piece.rstrip(" ") for piece in pieces]


def attention_of(run: Run, sentence: str, beam_size: int = 4) -> SentenceAttention:
    """Translate ``sentence`` with a trained run and gather its attention maps."""
    model, max_len = run.model, run.model.config.max_len
    translator = Translator.from_run(run)
    [translation] = translator.translate([sentence], beam_size=beam_size)
    typed_tokens, read_tokens = translator.source_tokens(sentence)  # as typed, as read (ids)
    # One label per id: a word as typed, or, for a word of several BPE pieces, its pieces.
    src_tokens = [label for typed, read in zip(typed_tokens, read_tokens)
                  for label in _labels(run.src_vocab, typed, read)][:max_len]
    tgt_words = tokenize(translation, "fr")
    tgt_tokens = [label for word in tgt_words for label in _labels(run.tgt_vocab, word, word)][: max_len - 1]
    src = numpy.array([run.src_vocab.encode(read_tokens)[:max_len]])
    tgt_in = numpy.array([[BOS_ID] + run.tgt_vocab.encode(tgt_words)[: max_len - 1]])
    with model.evaluating():
        model.forward(backend.asarray(src), backend.asarray(tgt_in))
    maps = {kind: [backend.to_numpy(layer[0]) for layer in model.attention_maps()[name]]
            for kind, name in KINDS.items()}
    labels = {
        # rows, columns: encoder queries and keys are source tokens; decoder position t reads
        # input token t (<bos> first) and produces output token t (<eos> last).
        "enc": (src_tokens, src_tokens),
        "dec": ([BOS_TOKEN] + tgt_tokens, [BOS_TOKEN] + tgt_tokens),
        "cross": (tgt_tokens + [EOS_TOKEN], src_tokens),
    }
    return SentenceAttention(sentence, translation, maps, labels)
