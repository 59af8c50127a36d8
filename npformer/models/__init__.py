"""Whole networks, each a few lines of composition of the blocks in ``npformer.nn``.

* ``Transformer`` (+ ``TransformerConfig``): the encoder-decoder of "Attention Is All You
  Need", with KV-cached incremental decoding (``start_decoding`` / ``decode_step``);
* ``EncoderClassifier``: the encoder, pooled, then a linear head;
* ``LanguageModel``: the encoder layer under a causal mask (GPT-style), or without it
  (``causal=False``: a BERT-style masked language model);
* ``ModernLanguageModel``: the LLaMA-style decoder (RMSNorm, rotary positions, SwiGLU,
  grouped-query attention, tied embeddings);
* ``VisionTransformer``: images as sequences of patches;
* ``summary``: per-module output shapes, parameter counts and FLOPs;
* ``MODEL_PRESETS``: the named sizes (tiny, small, base, large), written once.
"""

from .classifier import ClassifierConfig, EncoderClassifier
from .language_model import LanguageModel, LanguageModelConfig
from .modern_language_model import ModernLanguageModel, ModernLanguageModelConfig
from .presets import MODEL_PRESETS
from .summary import modern_summary_rows, summarize, summarize_modern, summary_rows
from .transformer import ATTENTION_KINDS, Transformer, TransformerConfig
from .vit import ViTConfig, VisionTransformer

__all__ = ["ATTENTION_KINDS", "Transformer", "TransformerConfig", "EncoderClassifier", "ClassifierConfig",
           "LanguageModel", "LanguageModelConfig", "ModernLanguageModel", "ModernLanguageModelConfig", "VisionTransformer", "ViTConfig",
           "summarize", "summary_rows", "summarize_modern", "modern_summary_rows", "MODEL_PRESETS"]
