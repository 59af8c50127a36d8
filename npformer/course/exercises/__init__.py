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
    mlp_and_positions.py    lessons 2 and 5: an MLP's backward pass chained through its layers, the embedding
                            with learned positions; questions: Phi's far tail, the position table's counts, the
                            first minimum of PE_0 . PE_k
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
    multi_head_questions.py lesson 8's open questions, their auto-graded parts: the key and value biases'
                            gradients, one head against lesson 7's attention, the multiply-adds
    blocks_and_training.py  lessons 9-15: dropout, the residual block, the decoder stack, the parameter
                            count, Adam and its schedule, BLEU's precision, the length penalty,
                            attention's entropy
    model_backward.py       lesson 11: the whole Transformer's backward pass, composed from its parts' backward passes
    model_size.py           lesson 11 (questions 4, 5): the vocabulary at which the embeddings and the output
                            layer outgrow the layers, the length at which attention's N^2 terms catch up
    layer_backward.py       lessons 9 and 10: an encoder layer's backward pass through its blocks with the
                            parameters' gradients, the decoder's through its layers and the memory; questions:
                            the sandwich block, the layers' parameter counts, the queries that attend to nothing
    searches.py             lesson 14: greedy search, one step of beam search, the whole beam search
    training_loop.py        lesson 13: the training loop (global-norm clipping, the step count, Adam, in place)
    kv_cache.py             lesson 14: the KV-cached decoding step
    alignments.py           lesson 15 (questions 1, 3): crossing links, one head's alignment error rate
    roofline.py             lesson 16: a GPU's roofline (arithmetic, memory traffic, kernel launches), the
                            matrix products of the forward pass
    decoding_questions.py   lesson 14's open questions, their auto-graded parts: what the cache saves,
                            sampling with a temperature, the length penalty's choices
    masked_pooling.py       lesson 17: the masked mean and max pooling's backward passes
    classifier_head.py      lesson 17: the classifier head's backward pass (pool, linear layer, loss)
    language_models.py      lessons 18-19: top-k, sampling, BERT's masking rule
    language_model_questions.py  lessons 18-19's open questions: top-p filtering, the share of <unk> in English
    patches.py              lesson 20: patch embeddings and their backward pass
    vit_embedding.py        lesson 20: the embedding's backward pass (patches, projection, class token, positions);
                            question 1 (the tokens the encoder reads)
    debugging.py            lessons 21-22: reading a gradient check, two bugs of the zoo fixed
    debugging_questions.py  lessons 21-22's open questions: finite differences across ReLU's kink, when bugs 4
                            and 7 show, a mask's future leak, the inflated accuracy batch by batch
    teacher_forcing_and_batchnorm.py  lessons 23-24: teacher forcing's shift, batch norm and its backward
    batchnorm_steps.py      lesson 24: batch norm's backward in steps (through x_hat, the variance, the mean)
    batchnorm_questions.py  lesson 24's open questions, their auto-graded parts: the backward pass of batch norm
                            that normalises the padding too, the padding share of batches
    teacher_forcing_questions.py  lesson 23's open question: how far back each position sees its target
    torch_encoder_layer.py  lesson 25: a whole encoder layer's parameters as torch.nn.TransformerEncoderLayer keeps them
    torch_layout_and_bpe.py lessons 25-26: PyTorch's in_proj layout, BPE's merge step and segmentation
    translation_questions.py  lessons 25-26's open questions: a tied table's gradient, BLEU's reference streams
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
    batchnorm_questions,
    batchnorm_steps,
    blocks_and_training,
    classifier_head,
    cross_entropy_loss,
    debugging,
    debugging_questions,
    decoding_questions,
    finite_difference_steps,
    kv_cache,
    language_model_questions,
    language_models,
    layer_backward,
    loss_steps,
    masked_pooling,
    mlp_and_positions,
    model_backward,
    model_size,
    modern_block,
    modern_parts,
    modern_parts_steps,
    multi_head_questions,
    multi_head_steps,
    ops_backward,
    ops_steps,
    patches,
    roofline,
    searches,
    steps,
    teacher_forcing_and_batchnorm,
    teacher_forcing_questions,
    torch_encoder_layer,
    torch_layout_and_bpe,
    training_loop,
    translation_questions,
    vit_embedding,
)
from .base import Case, Exercise, WrongSolution

MODULES = (
    steps,
    loss_steps,
    cross_entropy_loss,
    ops_steps,
    ops_backward,
    mlp_and_positions,
    attention_pieces,
    multi_head_steps,
    adam_steps,
    multi_head_questions,
    blocks_and_training,
    layer_backward,
    adamw_and_schedules,
    searches,
    kv_cache,
    decoding_questions,
    roofline,
    masked_pooling,
    classifier_head,
    language_models,
    patches,
    vit_embedding,
    debugging,
    teacher_forcing_and_batchnorm,
    batchnorm_steps,
    batchnorm_questions,
    torch_layout_and_bpe,
    torch_encoder_layer,
    modern_parts_steps,
    modern_parts,
    modern_block,
    alignments,
    attention_questions,
    finite_difference_steps,
    model_size,
    model_backward,
    training_loop,
    debugging_questions,
    language_model_questions,
    teacher_forcing_questions,
    translation_questions,
)

EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in sorted(
    (exercise for module in MODULES for exercise in module.EXERCISES), key=lambda exercise: exercise.lesson)}

# final exercise -> the names of its steps, in the order a student derives them (each module may list its own)
DERIVATIONS: dict[str, tuple[str, ...]] = {
    final: steps for module in MODULES for final, steps in getattr(module, "DERIVATIONS", {}).items()}

# final exercise -> npformer's compact form, which the grader shows once the student's passes
TEXTBOOK: dict[str, str] = {final: form for module in MODULES for final, form in getattr(module, "TEXTBOOK", {}).items()}

__all__ = ["EXERCISES", "Exercise", "Case", "WrongSolution", "MODULES", "DERIVATIONS", "TEXTBOOK"]
