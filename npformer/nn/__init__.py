"""Modules: parameters, caches and hand-written backward passes built on ``npformer.ops``."""

from .attention import MultiHeadAttention
from .classifier import ClassifierConfig, EncoderClassifier
from .decoder import Decoder, DecoderCache, DecoderLayer
from .dropout import Dropout
from .embedding import Embedding
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward
from .language_model import LanguageModel, LanguageModelConfig
from .layernorm import LayerNorm
from .linear import Linear
from .loss import CrossEntropyLoss
from .module import Module, ModuleList
from .vit import ViTConfig, VisionTransformer
from .transformer import (BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, Transformer,
                          TransformerConfig)

__all__ = [
    "Module", "ModuleList", "Linear", "Embedding", "LayerNorm", "Dropout", "FeedForward",
    "MultiHeadAttention", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache",
    "CrossEntropyLoss", "Transformer", "TransformerConfig", "ClassifierConfig", "EncoderClassifier",
    "LanguageModel", "LanguageModelConfig", "ViTConfig", "VisionTransformer",
    "PAD_ID", "BOS_ID", "EOS_ID", "UNK_ID", "SPECIAL_TOKENS",
]
