"""English -> French translation: decoding, the ``Translator``, the trainer and its evaluation.

* ``greedy_decode``, ``beam_search``: batched searches on the KV-cached decoder;
* ``Translator``: strings in, strings out (unknown words copied from the source);
* ``TrainOptions``, ``PRESETS``, ``train``, ``Trainer``: ``npformer train``;
* ``corpus_bleu``, ``validate``, ``test_bleu``: BLEU on sentence pairs;
* ``attention_of``: one sentence's translation and every attention map, labelled;
* ``pretrained``: the translators that ship inside the package (``"toy"``).
"""

from .attention import SentenceAttention, attention_of
from .decoding import beam_search, greedy_decode
from .evaluation import corpus_bleu, test_bleu, validate
from .options import PRESETS, TrainOptions
from .pretrained import pretrained, pretrained_record
from .trainer import Trainer, load_splits, start_run, train
from .translator import Translator

__all__ = ["greedy_decode", "beam_search", "Translator", "TrainOptions", "PRESETS", "Trainer", "train",
           "start_run", "load_splits", "corpus_bleu", "validate", "test_bleu", "attention_of",
           "SentenceAttention", "pretrained", "pretrained_record"]
