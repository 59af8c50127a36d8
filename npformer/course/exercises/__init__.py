"""The course's graded exercises, one module per group of lessons, gathered in lesson order.

    base.py                 Exercise, Case, WrongSolution, and the pieces cases are drawn with
    steps.py                lessons 3, 4, 7 (and 28): the steps of the derivations (the softmax Jacobian; layer norm
                            through x_hat, the variance, the mean; attention through v, P and S), each
                            graded on its own, and DERIVATIONS, the order of each derivation's steps
    ops_backward.py         lessons 1-5: finite differences, the ops' backward passes (linear, ReLU, GELU,
                            softmax, the loss, layer norm, the embedding), the positional encoding
    attention_pieces.py     lessons 6-8: the masks (lesson 10's decoder mask too), attention, the heads,
                            multi-head attention
    blocks_and_training.py  lessons 9-15: dropout, the residual block, the decoder stack, the parameter
                            count, Adam and its schedule, BLEU's precision, the length penalty,
                            attention's entropy
    searches.py             lesson 14: greedy search, one step of beam search, the whole beam search
    kv_cache.py             lesson 14: the KV-cached decoding step
    roofline.py             lesson 16: a GPU's roofline (arithmetic, memory traffic, kernel launches)
    masked_pooling.py       lesson 17: the masked mean and max pooling's backward passes
    language_models.py      lessons 18-19: top-k, sampling, BERT's masking rule
    language_model_questions.py  lessons 18-19's open questions: top-p filtering, the share of <unk> in English
    patches.py              lesson 20: patch embeddings and their backward pass
    debugging.py            lessons 21-22: reading a gradient check, two bugs of the zoo fixed
    debugging_questions.py  lessons 21-22's open questions: finite differences across ReLU's kink, when bugs 4
                            and 7 show, a mask's future leak, the inflated accuracy batch by batch
    teacher_forcing_and_batchnorm.py  lessons 23-24: teacher forcing's shift, batch norm and its backward
    teacher_forcing_questions.py  lesson 23's open question: how far back each position sees its target
    torch_layout_and_bpe.py lessons 25-26: PyTorch's in_proj layout, BPE's merge step and segmentation
    translation_questions.py  lessons 25-26's open questions: a tied table's gradient, BLEU's reference streams
    modern_parts.py         lesson 28: RMSNorm (through 1/rms), rotary positions from a cache offset, SiLU and
                            SwiGLU, the gradient sum of grouped-query attention's shared heads

Each module lists its ``EXERCISES`` (and may list ``WRONG_SOLUTIONS``, realistic mistakes the
grader must fail, beside ``course.wrong_solutions``'s catalogue; ``DERIVATIONS``, the steps of its
derivations; ``TEXTBOOK``, the compact forms shown once a final exercise passes).
"""

from __future__ import annotations

from . import (attention_pieces, blocks_and_training, debugging, debugging_questions, kv_cache,
               language_model_questions, language_models, masked_pooling, modern_parts, ops_backward, patches,
               roofline, searches, steps, teacher_forcing_and_batchnorm, teacher_forcing_questions,
               torch_layout_and_bpe, translation_questions)
from .base import Case, Exercise, WrongSolution

MODULES = (steps, ops_backward, attention_pieces, blocks_and_training, searches, kv_cache, roofline, masked_pooling,
           language_models, language_model_questions, patches, debugging, debugging_questions,
           teacher_forcing_and_batchnorm, teacher_forcing_questions, torch_layout_and_bpe, translation_questions,
           modern_parts)

EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in sorted(
    (exercise for module in MODULES for exercise in module.EXERCISES), key=lambda exercise: exercise.lesson)}

# final exercise -> the names of its steps, in the order a student derives them (each module may list its own)
DERIVATIONS: dict[str, tuple[str, ...]] = {
    final: steps for module in MODULES for final, steps in getattr(module, "DERIVATIONS", {}).items()}

# final exercise -> npformer's compact form, which the grader shows once the student's passes
TEXTBOOK: dict[str, str] = {final: form for module in MODULES for final, form in getattr(module, "TEXTBOOK", {}).items()}

__all__ = ["EXERCISES", "Exercise", "Case", "WrongSolution", "MODULES", "DERIVATIONS", "TEXTBOOK"]
