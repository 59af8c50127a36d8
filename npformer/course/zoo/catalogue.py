"""The catalogue: ``Bug`` (one entry: buggy, fixed, symptom, threshold), the eleven ``BUGS``, ``bug(n)``.

Each entry names what the tutorial does and, for four of them, the public source where the bug was
reported; ``Bug.measure`` runs the symptom on NumPy whatever the active backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ... import backend
from .blocks import (context_blind_cross_attention, decoder_layer_buggy, decoder_layer_fixed,
                     explained_by_one_matrix, feed_forward_buggy, feed_forward_fixed, layer_norm_buggy,
                     layer_norm_fixed, not_normalised)
from .positions_and_attention import (add_positions_buggy, add_positions_fixed, attention_buggy,
                                      attention_fixed, cross_attention_mask_buggy, cross_attention_mask_fixed,
                                      depends_on_batch_row, off_the_unit_circle, positional_table_buggy,
                                      positional_table_fixed, query_leak, scaled_scores_buggy,
                                      scaled_scores_fixed, score_scale_error, weight_on_source_padding)
from .training import (accuracy_buggy, accuracy_fixed, accuracy_of_knowing_nothing, decoder_pairs_buggy,
                       decoder_pairs_fixed, generation_gap, loss_buggy, loss_fixed, loss_floor)


@dataclass(frozen=True)
class Bug:
    """One entry of the zoo. ``symptom(implementation) -> float``; the bug shows above ``threshold``."""

    number: int
    name: str
    tutorial: str        # what the tutorial does, in its own words
    buggy: Callable
    fixed: Callable
    symptom: Callable[[Callable], float]
    threshold: float
    measures: str        # what the symptom's number is
    source: str = ""     # the public code or tutorial where the bug was found and reported, if cited

    def measure(self, implementation: Callable) -> float:
        """``symptom(implementation)``, on NumPy whatever the active backend."""
        active = backend.get_backend()
        backend.set_backend("numpy")
        try:
            return float(self.symptom(implementation))
        finally:
            backend.set_backend(active)

    def shows(self, implementation: Callable) -> bool:
        """True when ``implementation`` has the symptom: ``measure(implementation) > threshold``."""
        return self.measure(implementation) > self.threshold


# == the catalogue ================================================================================

BUGS = [
    Bug(1, "cosine in one column of the positional table",
        "pe = np.sin(angles); pe[:, 1] = np.cos(angles[:, 1])",
        positional_table_buggy, positional_table_fixed, off_the_unit_circle, 1e-9,
        "largest |sin^2 + cos^2 - 1| over the pairs of columns"),
    Bug(2, "positional table indexed by batch, not position",
        "x = x + self.pe[:x.size(0)]   # pe (max_len, 1, d_model), x (batch, seq, d_model)",
        add_positions_buggy, add_positions_fixed, depends_on_batch_row, 1e-9,
        "largest difference between two batch rows holding the same sentence",
        "the table's (seq, batch, d_model) layout comes from PyTorch's tutorial \"Language Modeling with "
        "nn.Transformer and torchtext\"; the bug is copying it into a batch-first model"),
    Bug(3, "attention scores as K Q^T",
        "scores = tf.matmul(k, q, transpose_b=True) / tf.sqrt(d_k)",
        attention_buggy, attention_fixed, query_leak, 1e-9,
        "largest change in other queries' outputs when query 0 moves"),
    Bug(4, "scores scaled by sqrt(d_model), not sqrt(d_head)",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)",
        scaled_scores_buggy, scaled_scores_fixed, score_scale_error, 0.25,
        "|ln std(scores)| for unit-variance q and k, 8 heads",
        "Aladdin Persson's \"Transformer from scratch\" (aladdinpersson/Machine-Learning-Collection, "
        "transformer_from_scratch.py, reported in its issue #65); the single-head form, scaled by the "
        "embedding width, was fixed in Karpathy's \"Let's build GPT\" code (karpathy/ng-video-lecture, PR #6)"),
    Bug(5, "cross-attention queries from the raw decoder input",
        "out1 = norm1(x + mha1(x, x, x)); attn2 = mha2(x, enc, enc)   # query x, not out1",
        decoder_layer_buggy, decoder_layer_fixed, context_blind_cross_attention, 0.5,
        "share of cross-attention rows blind to the earlier target words"),
    Bug(6, "feed-forward without its activation",
        "self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model))",
        feed_forward_buggy, feed_forward_fixed, explained_by_one_matrix, 0.999,
        "R^2 of the best single affine map"),
    Bug(7, "layer norm with the unbiased std and beta = ones",
        "self.b = nn.Parameter(torch.ones(d)); (x - x.mean(-1)) / (x.std(-1) + eps) + self.b",
        layer_norm_buggy, layer_norm_fixed, not_normalised, 1e-3,
        "max |row mean| + max |row variance - 1| at initialisation",
        "the unbiased x.std(-1) with eps outside the root: The Annotated Transformer's LayerNorm "
        "(harvardnlp/annotated-transformer, PR #119 and issue #122), copied into codertimo/BERT-pytorch "
        "(its issue #30); beta = ones is this entry's own second slip, not from a cited source"),
    Bug(8, "decoder input not shifted",
        "model.fit([src, tgt], tgt)   # the decoder reads the very tokens it must predict",
        decoder_pairs_buggy, decoder_pairs_fixed, generation_gap, 0.5,
        "teacher-forced minus generated exact match after training"),
    Bug(9, "a softmax layer, then a loss from logits",
        "Dense(vocab, activation='softmax'); SparseCategoricalCrossentropy(from_logits=True)",
        loss_buggy, loss_fixed, loss_floor, 0.01,
        "loss of a right and certain prediction (V = 12)",
        "a softmax output fed to a loss that applies its own softmax: the RNN spam-prediction recipe of "
        "Nick McClure's TensorFlow Machine Learning Cookbook (nfmcclure/tensorflow_cookbook, issue #87)"),
    Bug(10, "cross-attention masked with the decoder's padding",
        "attn2 = mha2(out1, enc, enc, mask=padding_mask(tgt))",
        cross_attention_mask_buggy, cross_attention_mask_fixed, weight_on_source_padding, 1e-9,
        "largest attention weight on source <pad> keys"),
    Bug(11, "accuracy that counts padding",
        "accuracy = (logits.argmax(-1) == targets).float().mean()",
        accuracy_buggy, accuracy_fixed, accuracy_of_knowing_nothing, 0.01,
        "accuracy of a model that predicts <pad> everywhere"),
]


def bug(number: int) -> Bug:
    """The zoo's entry ``number`` (1 to 11)."""
    for entry in BUGS:
        if entry.number == number:
            return entry
    raise ValueError(f"bug: number must be one of 1..{len(BUGS)}, got {number!r}")
