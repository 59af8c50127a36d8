"""``Translation``: everything one decoding of one sentence produced, in one object.

``Translator.translations`` returns them; ``attention_of``, ``npformer translate``, ``npformer
attention`` (its PNGs and its explorer) and ``npformer evaluate`` read them instead of working the
tokens, the copies or the attention out again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from ...data.bpe import END
from ...models import ATTENTION_KINDS
from ...tokens import BOS_TOKEN, EOS_TOKEN, SPECIAL_TOKENS


CONTINUES = "·"  # starts the label of a BPE piece that continues the word of the piece before it


def piece_label(token: str) -> str:
    """A token without its end-of-word mark: a word as it is, a BPE piece as its letters."""
    return token[: -len(END)] if token.endswith(END) and token != END else token


def piece_labels(tokens: list[str], pieces: bool = True) -> list[str]:
    """How a sequence of tokens is labelled in a figure: words as they are; BPE pieces
    (``pieces``) as their letters, a piece that continues the word of the piece before it (which
    had no end-of-word mark) marked with a leading ``·``: "Zorvan" in pieces is "Zor", "·van"."""
    if not pieces:
        return list(tokens)
    labels, word_open = [], False
    for token in tokens:
        labels.append((CONTINUES if word_open else "") + piece_label(token))
        word_open = not token.endswith(END) and token not in SPECIAL_TOKENS
    return labels


@dataclass
class Translation:
    """One sentence, translated.

    Source, as the decoder read it:
    ``source_typed`` / ``source_read``: its words as typed, and as the model reads them (lower-cased
    and with a final mark when the run's style asks for it); ``source_ids``: one id per token
    (a word of several BPE pieces has several); ``source_labels``: one label per id.

    Output, exactly as decoded:
    ``output_ids`` (no ``<eos>``), ``output_tokens`` (the vocabulary's tokens, ``<unk>`` included),
    ``output_labels`` (one label per output id, the copied word in place of ``<unk>``);
    ``copies``: output position -> the source position (into ``source_ids``) whose word replaced
    that ``<unk>``, or whose unknown name was written there in place of the name read for it
    (``Translator``); ``ended``: whether the decoder produced ``<eos>`` (False: it stopped at its
    length limit); ``text``: the detokenised translation.

    ``attention[kind]`` (kinds ``models.ATTENTION_KINDS``: "encoder", "decoder", "cross"): one
    ``(H, Tq, Tk)`` host array per layer, recorded while decoding. Decoder position ``t`` reads
    input token ``t`` (``<bos>`` first) and produces output token ``t`` (``<eos>`` last, when
    ``ended``), so ``Tt = len(output_ids) + ended``. ``labels[kind]``: (row labels, column labels).
    """

    sentence: str
    text: str
    source_typed: list[str]
    source_read: list[str]
    source_ids: list[int]
    source_labels: list[str]
    output_ids: list[int]
    output_tokens: list[str]
    output_labels: list[str]
    copies: dict[int, int]
    ended: bool
    attention: dict[str, list[numpy.ndarray]]

    @property
    def labels(self) -> dict[str, tuple[list[str], list[str]]]:
        """``(rows, columns)`` of each kind's maps."""
        produced = self.output_labels + ([EOS_TOKEN] if self.ended else [])
        read = ([BOS_TOKEN] + self.output_labels)[: len(produced)]
        return {"encoder": (self.source_labels, self.source_labels), "decoder": (read, read),
                "cross": (produced, self.source_labels)}

    def title(self, kind: str) -> str:
        """A figure title: the kind's title (``models.ATTENTION_KINDS``), then sentence -> translation."""
        return f"{ATTENTION_KINDS[kind]}\n{self.sentence} -> {self.text}"
