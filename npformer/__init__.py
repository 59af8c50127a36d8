"""npformer: a Transformer in pure NumPy, every backward pass written by hand.

The layers, each importing only the ones above it in this list::

    backend, tokens   the array module (NumPy or CuPy), the dtype; the special token ids
    ops               the math: pure forward/backward pairs
    data              tokenizers, vocabularies, batching, corpora (needs only tokens)
    nn                building blocks with parameters and hand-written backward passes
    models, optim     whole networks; SGD, Adam, AdamW, schedules, clipping
    training          one training step, the loop, run folders, checkpoints
    gradcheck, metrics, viz   finite-difference checks, BLEU, figures
    tasks             translation, language id, language models, images
    bench, cli        the benchmark and the ``npformer`` command
"""

from . import backend, data, gradcheck, metrics, models, nn, ops, optim, tasks, tokens, training, viz
from .models import (ClassifierConfig, EncoderClassifier, LanguageModel, LanguageModelConfig, Transformer,
                     TransformerConfig, ViTConfig, VisionTransformer)
from .tasks.translation.pretrained import pretrained
from .training import fit, train_step

__version__ = "0.1.0"
__all__ = ["backend", "tokens", "ops", "data", "nn", "models", "optim", "training", "gradcheck", "metrics",
           "viz", "tasks", "Transformer", "TransformerConfig", "EncoderClassifier", "ClassifierConfig",
           "LanguageModel", "LanguageModelConfig", "VisionTransformer", "ViTConfig", "train_step", "fit",
           "pretrained", "__version__"]
