"""The course's graded exercises, one module per group of lessons, gathered in lesson order.

    base.py                 Exercise, Case, WrongSolution, and the pieces cases are drawn with
    steps.py                lessons 3, 4, 7 (and 28): the steps of the derivations (the softmax Jacobian; layer norm
                            through x_hat, the variance, the mean; attention through v, P and S), each
                            graded on its own, and DERIVATIONS, the order of each derivation's steps
    ops_steps.py            lessons 2 and 5: the steps of their derivations (the linear layer for one row,
                            GELU's gate, the embedding's one-hot form), and those lessons' compact forms
    loss_steps.py           lesson 3: the steps of cross-entropy's derivation (through the mean over the counted
                            positions, through the log-probabilities, with and without label smoothing)
    cross_entropy_loss.py   lesson 3: the smoothed loss's forward pass over a padded batch; questions 2-3 (the
                            margin smoothing prefers and its loss, the scale of dividing by B*T)
    finite_difference_steps.py  lesson 1 (question 2): the step at which a finite difference is most accurate
    ops_backward.py         lessons 1-5: finite differences, the ops' backward passes (linear, ReLU, GELU,
                            softmax, the loss, layer norm, the embedding), the positional encoding
    attention_pieces.py     lessons 6-8: the masks (lesson 10's decoder mask too), attention, the heads,
                            multi-head attention
    multi_head_steps.py     lesson 8: the steps of multi-head attention's backward pass (the heads' context,
                            the heads' q, k and v, the two inputs)
    adam_steps.py           lesson 12: Adam's bias correction, the step of its update that is derived
    adamw_and_schedules.py  lesson 12: AdamW over a dict of parameters (the decay's skip rule); questions 1-3 (SGD's
                            largest stable rate on a quadratic valley, AdaGrad's update, the schedule's peak)
    attention_questions.py  lessons 6-7 (questions): a prefix language model's mask for a padded batch, the cost
                            of scaling Q or the scores, a query whose scores are all equal, the bytes of P
    blocks_and_training.py  lessons 9-15: dropout, the residual block, the decoder stack, the parameter
                            count, Adam and its schedule, BLEU's precision, the length penalty,
                            attention's entropy
    model_size.py           lesson 11 (questions 4, 5): the vocabulary at which the embeddings and the output
                            layer outgrow the layers, the length at which attention's N^2 terms catch up
    searches.py             lesson 14: greedy search, one step of beam search, the whole beam search
    kv_cache.py             lesson 14: the KV-cached decoding step
    alignments.py           lesson 15 (questions 1, 3): crossing links, one head's alignment error rate
    roofline.py             lesson 16: a GPU's roofline (arithmetic, memory traffic, kernel launches), the
                            matrix products of the forward pass
    masked_pooling.py       lesson 17: the masked mean and max pooling's backward passes
    classifier_head.py      lesson 17: the classifier head's backward pass (pool, linear layer, loss)
    language_models.py      lessons 18-19: top-k, sampling, BERT's masking rule
    patches.py              lesson 20: patch embeddings and their backward pass
    vit_embedding.py        lesson 20: the embedding's backward pass (patches, projection, class token, positions);
                            question 1 (the tokens the encoder reads)
    debugging.py            lessons 21-22: reading a gradient check, two bugs of the zoo fixed
    teacher_forcing_and_batchnorm.py  lessons 23-24: teacher forcing's shift, batch norm and its backward
    batchnorm_steps.py      lesson 24: batch norm's backward in steps (through x_hat, the variance, the mean)
    torch_layout_and_bpe.py lessons 25-26: PyTorch's in_proj layout, BPE's merge step and segmentation
    modern_parts.py         lesson 28: RMSNorm (through 1/rms), rotary positions from a cache offset, SiLU and
                            SwiGLU, the gradient sum of grouped-query attention's shared heads
    modern_block.py         lesson 28: the SwiGLU sublayer's backward pass (down projection, residual path);
                            questions 2-4 (RoPE's saved numbers, W_k and W_v's weights, the two networks' weights)
    modern_parts_steps.py   lesson 28: the steps (RMSNorm's mean square, one pair's rotation, SwiGLU's branches)

Each module lists its ``EXERCISES`` (and may list ``WRONG_SOLUTIONS``, realistic mistakes the
grader must fail, beside ``course.wrong_solutions``'s catalogue; ``DERIVATIONS``, the steps of its
derivations; ``TEXTBOOK``, the compact forms shown once a final exercise passes).
"""

from __future__ import annotations

from . import (  # one module per line: each group of lessons adds its own
    adam_steps,
    adamw_and_schedules,
    alignments,
    attention_pieces,
    attention_questions,
    batchnorm_steps,
    blocks_and_training,
    classifier_head,
    cross_entropy_loss,
    debugging,
    finite_difference_steps,
    kv_cache,
    language_models,
    loss_steps,
    masked_pooling,
    model_size,
    modern_block,
    modern_parts,
    modern_parts_steps,
    multi_head_steps,
    ops_backward,
    ops_steps,
    patches,
    roofline,
    searches,
    steps,
    teacher_forcing_and_batchnorm,
    torch_layout_and_bpe,
    vit_embedding,
)
from .base import Case, Exercise, WrongSolution

MODULES = (
    steps,
    loss_steps,
    cross_entropy_loss,
    ops_steps,
    ops_backward,
    attention_pieces,
    multi_head_steps,
    adam_steps,
    blocks_and_training,
    adamw_and_schedules,
    searches,
    kv_cache,
    roofline,
    masked_pooling,
    classifier_head,
    language_models,
    patches,
    vit_embedding,
    debugging,
    teacher_forcing_and_batchnorm,
    batchnorm_steps,
    torch_layout_and_bpe,
    modern_parts_steps,
    modern_parts,
    modern_block,
    alignments,
    attention_questions,
    finite_difference_steps,
    model_size,
)

EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in sorted(
    (exercise for module in MODULES for exercise in module.EXERCISES), key=lambda exercise: exercise.lesson)}

# final exercise -> the names of its steps, in the order a student derives them (each module may list its own)
DERIVATIONS: dict[str, tuple[str, ...]] = {
    final: steps for module in MODULES for final, steps in getattr(module, "DERIVATIONS", {}).items()}

# final exercise -> npformer's compact form, which the grader shows once the student's passes
TEXTBOOK: dict[str, str] = {final: form for module in MODULES for final, form in getattr(module, "TEXTBOOK", {}).items()}

__all__ = ["EXERCISES", "Exercise", "Case", "WrongSolution", "MODULES", "DERIVATIONS", "TEXTBOOK"]
