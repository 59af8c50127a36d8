"""One sentence's attention, labelled: what ``npformer attention`` draws.

``attention_of(run, sentence)`` translates the sentence once and returns its ``Translation``:
every attention map was recorded while the decoder produced the translation, so the maps, their
labels and the text all describe the same decoded tokens (``result.Translation``).
"""

from __future__ import annotations

from typing import Any

from .decoding import BEAM_SIZE
from .result import Translation
from .translator import Translator


def attention_of(run: Any, sentence: str, beam_size: int = BEAM_SIZE) -> Translation:
    """Translate ``sentence`` with a trained run (``load_run``, ``npformer.pretrained``);
    its ``Translation`` holds the text and every attention map (``.attention``, ``.labels``)."""
    if not isinstance(sentence, str):
        raise TypeError(f"attention_of: sentence must be a str, got {type(sentence).__name__}")
    return Translator.from_run(run).translations([sentence], beam_size=beam_size)[0]
