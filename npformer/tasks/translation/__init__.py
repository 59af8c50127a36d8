"""English -> French translation: decoding, the ``Translator``, the trainer and its evaluation.

* ``greedy_decode``, ``beam_search``: batched searches on the KV-cached decoder;
* ``Translator``: sentences in; ``Translation`` results (``translations``) or strings (``translate``),
  unknown words copied from the source;
* ``TrainOptions``, ``PRESETS``, ``train``, ``Trainer``: ``npformer train``;
* ``corpus_bleu``, ``validate``, ``test_bleu``, ``evaluate_loss``: BLEU and the loss on sentence pairs;
* ``RunFolder``, ``load_run``, ``latest_run``: what a run writes and how it is loaded back;
* ``attention_of``: one sentence's translation and every attention map, labelled;
* ``pretrained``: the translators that ship inside the package (``"toy"``).
"""

from .attention import attention_of
from .decoding import beam_search, greedy_decode
from .evaluation import corpus_bleu, evaluate_loss, test_bleu, validate
from .options import PRESETS, TrainOptions
from .pretrained import pretrained, pretrained_record
from .result import Translation
from .run_folder import CHECKPOINT, Run, RunError, RunFolder, latest_run, load_run, read_tsv, write_tsv
from .trainer import Trainer, load_splits, start_run, train
from .translator import Translator

__all__ = ["greedy_decode", "beam_search", "Translator", "TrainOptions", "PRESETS", "Trainer", "train",
           "start_run", "load_splits", "corpus_bleu", "validate", "test_bleu", "attention_of",
           "Translation", "pretrained", "pretrained_record", "evaluate_loss", "RunFolder", "Run", "RunError",
           "load_run", "latest_run", "read_tsv", "write_tsv", "CHECKPOINT"]
