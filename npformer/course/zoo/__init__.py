"""A bug zoo: eleven bugs of the kind that Keras and PyTorch Transformer tutorials make.

Four entries (2, 4, 7, 9) cite, in ``Bug.source``, the public tutorial or code where the bug was
found and reported; the other seven are common slips of the same kinds, not attributed to one source.

Each bug is a ``Bug``: a name, what the tutorial does (in its own style), a ``buggy`` and a
``fixed`` function with the same signature, and a ``symptom``: a function that takes either
implementation and returns one number, **above** ``threshold`` when the bug is there::

    bug = BUGS[0]                          # 1. cosine in one column of the positional table
    bug.measure(bug.buggy)                 # 1.0: a (sin, cos) pair is off the unit circle
    bug.measure(bug.fixed)                 # 0.0
    bug.shows(bug.fixed)                   # False: measure(...) <= threshold

None of them raises an error on the shapes a tutorial tries (two of them do on others), and
most let the training loss fall. The lesson (``lessons/22_a_bug_zoo.py``) and the tests
(``tests/test_bug_zoo.py``) share these definitions.

    positions   1 cosine in one column              2 positions indexed by batch
    attention   3 K Q^T instead of Q K^T             4 scaled by sqrt(d_model), not sqrt(d_head)
                10 cross-attention masked with the decoder's padding
    blocks      5 cross-attention queries from the raw decoder input
                6 a feed-forward block without its activation
                7 layer norm with the unbiased std and beta initialised to ones
    training    8 the decoder input not shifted      9 a softmax, then a loss "from logits"
                11 accuracy that counts padding

Two sanity checks catch bugs before any of this: ``loss_at_initialisation`` (near ln V) and
``overfit_one_batch`` (a tiny model drives the loss on one batch to near zero).

Everything here runs on host NumPy, in float64 unless a model says otherwise; ``Bug.measure``
switches the backend to NumPy for the call, as the exercise grader does.

The package, one idea per module (each imports only the ones above it):

    positions_and_attention.py  bugs 1-4 and 10: the positional table, the attention scores, the mask
    blocks.py                   bugs 5-7: the decoder layer, the feed-forward block, layer norm
    training.py                 the tiny task (reversal_batch, tiny_transformer, fit), bugs 8, 9, 11
                                and the sanity checks
    catalogue.py                Bug, BUGS and bug(n)
"""

from .blocks import (context_blind_cross_attention, decoder_layer_buggy, decoder_layer_fixed,
                     explained_by_one_matrix, feed_forward_buggy, feed_forward_fixed, layer_norm_buggy,
                     layer_norm_fixed, not_normalised)
from .catalogue import BUGS, Bug, bug
from .positions_and_attention import (add_positions_buggy, add_positions_fixed, attention_buggy,
                                      attention_fixed, cross_attention_mask_buggy, cross_attention_mask_fixed,
                                      depends_on_batch_row, off_the_unit_circle, positional_table_buggy,
                                      positional_table_fixed, query_leak, scaled_scores_buggy,
                                      scaled_scores_fixed, score_scale_error, weight_on_source_padding)
from .training import (REVERSAL_VOCAB, SANITY_VOCAB, TRAINING_STEPS, accuracy_buggy, accuracy_fixed,
                       accuracy_of_knowing_nothing, decoder_pairs_buggy, decoder_pairs_fixed, fit,
                       generation_gap, loss_at_initialisation, loss_buggy, loss_fixed, loss_floor,
                       overfit_one_batch, padded_targets, reversal_batch, teacher_forced_and_generated,
                       tiny_transformer, train_reversal)

__all__ = [
    "Bug", "BUGS", "bug", "positional_table_buggy", "positional_table_fixed", "off_the_unit_circle",
    "add_positions_buggy", "add_positions_fixed", "depends_on_batch_row", "attention_buggy", "attention_fixed",
    "query_leak", "scaled_scores_buggy", "scaled_scores_fixed", "score_scale_error",
    "cross_attention_mask_buggy", "cross_attention_mask_fixed", "weight_on_source_padding",
    "decoder_layer_buggy", "decoder_layer_fixed", "context_blind_cross_attention", "feed_forward_buggy",
    "feed_forward_fixed", "explained_by_one_matrix", "layer_norm_buggy", "layer_norm_fixed", "not_normalised",
    "reversal_batch", "tiny_transformer", "fit", "decoder_pairs_buggy", "decoder_pairs_fixed", "REVERSAL_VOCAB",
    "TRAINING_STEPS", "train_reversal", "teacher_forced_and_generated", "generation_gap", "loss_buggy",
    "loss_fixed", "loss_floor", "accuracy_buggy", "accuracy_fixed", "padded_targets",
    "accuracy_of_knowing_nothing", "SANITY_VOCAB", "loss_at_initialisation", "overfit_one_batch",
]
