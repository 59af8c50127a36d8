"""Each student's own exercise: the variants of every graded derivation, and whose is whose.

    base.py                    Variant, Family; a variant's answers by finite differences of its forward
    linear_and_activations.py  lesson 2: the linear layer, ReLU, GELU
    softmax_and_loss.py        lesson 3: softmax (its Jacobian, its backward pass), cross-entropy
    layer_norm.py              lesson 4: layer norm, through x_hat, the variance and the mean
    embedding_and_dropout.py   lessons 5 and 9: the embedding, dropout
    attention.py               lessons 7 and 8: attention, through v, the weights and the scores; multi-head
    pooling.py                 lesson 17: masked mean and max pooling
    patches.py                 lesson 20: images cut into patches
    batch_norm.py              lesson 24: batch norm
    modern_parts.py            lesson 28: RMSNorm (through 1/rms), RoPE, SwiGLU (through SiLU), shared heads
    timed.py                   the large case whose time tells an analytic backward pass from a numerical one

A class graded with variants (``course grade --roster FILE --secret FILE``) gives each student, for
each family, one of its variants (never the lesson's own form), drawn from the instructor's secret
and the student's name on the roster (``course.roster``); the student reads theirs from the file
``course variants`` writes for them, and ``check`` grades against it.
"""

from __future__ import annotations

from functools import lru_cache

from ..exercises import EXERCISES, Exercise
from ..exercises.base import from_secret
from .attention import ATTENTION, MULTI_HEAD_ATTENTION
from .base import TEXTBOOK_FORM, Family, Variant, varied
from .batch_norm import BATCH_NORM
from .embedding_and_dropout import DROPOUT, EMBEDDING
from .layer_norm import LAYER_NORM
from .linear_and_activations import GELU, LINEAR, RELU
from .modern_parts import REPEAT_KV, RMS_NORM, ROPE, SWIGLU
from .patches import PATCHES
from .pooling import MAX_POOL, MEAN_POOL
from .softmax_and_loss import CROSS_ENTROPY, SOFTMAX

FAMILIES: dict[str, Family] = {family.name: family for family in (
    LINEAR, RELU, GELU, SOFTMAX, CROSS_ENTROPY, LAYER_NORM, EMBEDDING, ATTENTION, MULTI_HEAD_ATTENTION, DROPOUT,
    MEAN_POOL, MAX_POOL, PATCHES, BATCH_NORM, RMS_NORM, ROPE, SWIGLU, REPEAT_KV)}

# exercise name -> its family
FAMILY_OF: dict[str, Family] = {name: family for family in FAMILIES.values() for name in family.exercises}

MODES = ("student", "class", "off")  # a variant per student, one per class, or the lesson's form for all


def graded_with_variants(name: str) -> bool:
    """Whether ``name`` earns points when a class is graded with variants: it belongs to a family,
    and some variant changes its answer (not one of the family's ``practice`` steps)."""
    family = FAMILY_OF.get(name)
    return family is not None and name not in family.practice


def draw(secret: str, student: str, family: str, mode: str = "student") -> str:
    """The variant of ``family`` for ``student`` (their name on the roster): one of the family's
    variants, never the lesson's own form, chosen by a hash of the secret, the student and the family
    (each family draws on its own, but multi-head attention takes attention's). ``mode`` "class": one
    variant for the whole class (the secret and the family only); "off": the lesson's form."""
    if mode == "off":
        return TEXTBOOK_FORM
    variants = FAMILIES[family].variants
    family = FAMILIES[family].drawn_with or family
    keys = (secret, family) if mode == "class" else (secret, student, family)
    return variants[from_secret(*keys, width=8) % len(variants)].name


def variant_for(name: str, variants: dict[str, str]) -> str:
    """The variant of the exercise ``name`` in ``variants`` (family -> variant: an assignment, a
    student's file); ``TEXTBOOK_FORM`` when ``name`` has no family or the map none for it."""
    family = FAMILY_OF.get(name)
    return TEXTBOOK_FORM if family is None else variants.get(family.name, TEXTBOOK_FORM)


def assignment(secret: str, student: str, mode: str = "student") -> dict[str, str]:
    """Every family's variant for ``student``: ``{"layernorm": "unbiased", ...}``."""
    return {family: draw(secret, student, family, mode) for family in FAMILIES}


@lru_cache(maxsize=None)
def posed(name: str, variant: str) -> Exercise:
    """The exercise ``name`` as ``variant`` poses it (``TEXTBOOK_FORM``, or a name no family of it has:
    the lesson's own exercise). Made once per process, so that its prepared cases are kept too."""
    family = FAMILY_OF.get(name)
    if family is None or variant == TEXTBOOK_FORM:
        return EXERCISES[name]
    return varied(family, EXERCISES[name], family.variant(variant))


def statement(name: str, variant: str) -> str:
    """What ``variant`` changes in the exercise ``name``, in the lesson's notation."""
    family = FAMILY_OF.get(name)
    if family is None or variant == TEXTBOOK_FORM:
        return "the lesson's own form"
    return family.variant(variant).statement


__all__ = ["FAMILIES", "FAMILY_OF", "Family", "Variant", "TEXTBOOK_FORM", "MODES", "draw", "assignment", "posed",
           "statement", "graded_with_variants", "variant_for"]
