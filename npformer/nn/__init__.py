"""Building blocks: parameters, caches and hand-written backward passes built on ``npformer.ops``.

Whole networks made of these blocks live one layer up, in ``npformer.models``.
"""

from .attention import MultiHeadAttention, SelfAttention, check_heads
from .decoder import Decoder, DecoderCache, DecoderLayer, kv_buffers
from .dropout import Dropout
from .embedding import Embedding, LearnedPositions
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward
from .fused import FusedLinear
from .grouped_attention import GroupedQueryAttention, check_grouped_heads
from .layernorm import LayerNorm
from .layout import PADDED, Layout, Packed, Padded
from .linear import Linear
from .modern_block import ModernBlock
from .layer import LayerInputs, ResidualLayer, Stack, TransformerLayer
from .residual import Residual, residual_backward, residual_backward_with_memory, stack_backward_with_memory
from .module import BackwardBeforeForwardError, Module, ModuleList
from .rmsnorm import RMSNorm
from .swiglu import SwiGLUFeedForward

__all__ = [
    "Module", "ModuleList", "BackwardBeforeForwardError", "Linear", "Embedding", "LearnedPositions", "LayerNorm", "Dropout",
    "FeedForward", "MultiHeadAttention", "SelfAttention", "check_heads",
    "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache", "kv_buffers",
    "FusedLinear", "Layout", "Padded", "Packed", "PADDED", "Residual", "ResidualLayer", "LayerInputs",
    "TransformerLayer", "Stack",
    "residual_backward", "residual_backward_with_memory", "stack_backward_with_memory",
    "RMSNorm", "SwiGLUFeedForward", "GroupedQueryAttention", "ModernBlock", "check_grouped_heads",
]
