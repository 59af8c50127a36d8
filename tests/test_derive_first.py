"""Derive first, for every graded backward pass: the student edition poses each one as its forward, its
shapes and the question, with graded steps where the derivation has intermediate quantities, and holds
no closed form or recipe of a graded answer; npformer's compact form is shown by ``check`` once the
student's function passes (``exercises.TEXTBOOK``).

The closed forms the student edition must not hold are listed here, in the tests, never in the package
(a list of answers shipped to students would be an answer key). A pattern is a regular expression
matched against the lesson's student edition with every space removed, so ``dout @ W.T`` and
``dout@W.T`` are one pattern; keep each one specific to the graded answer (not the forward pass, which
the student is given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from npformer.course import EXERCISES, edition
from npformer.course.exercises import DERIVATIONS, TEXTBOOK

from lesson_solutions import LESSONS


@dataclass(frozen=True)
class Posed:
    """A graded backward pass as the student edition poses it: its ``steps`` (graded on their own, in
    order, before it; empty where the derivation has no intermediate quantity worth a step) and the
    ``leaks``, closed forms of its answer or of a step's, that the student edition must not hold."""

    steps: tuple[str, ...]
    leaks: tuple[str, ...]


# -- lesson 02 ---------------------------------------------------------------------------------------
LESSON_02 = {
    "linear_backward": Posed((), (r"dout@W\.T", r"x\.T@dout", r"W\^\\top", r"x\^\\top", r"W\^T", r"x\^T")),
    "relu_backward": Posed((), (r"dout\*\(x>0\)", r"\(x>0\)\*dout")),
    "gelu_backward": Posed((), ()),
}

# -- lesson 03 ---------------------------------------------------------------------------------------
# the cross-entropy family's closed forms: p - onehot(t), p - q, g - p sum(g), dloss / N at a counted position
_CROSS_ENTROPY = (r"p-\\mathrm\{onehot\}", r"p-\\operatorname\{onehot\}", r"p_n-\\operatorname\{onehot\}",
                  r"p_j-\[j=t\]", r"-\[j=t\]\+", r"p-y", r"probs-onehot", r"p-onehot", r"p-np\.eye",
                  r"\(p-q\)", r"\(p_n-q_n\)", r"p_j-q_j", r"dz=p-q", r"g-p\*g\.sum", r"g_k-p_k\\sum",
                  r"\\delta_\{jk\}-p_k", r"\\frac\{\\texttt\{dloss\}\}\{N\}", r"dloss\*counted/",
                  r"dloss/max\(N", r"\*counts/n_counted", r"-d_position\[")
LESSON_03 = {
    "softmax_backward": Posed(("softmax_jacobian",), (r"p\*\(dout-", r"p\\odot\(")),
    "cross_entropy_backward": Posed(("cross_entropy_d_position_losses", "cross_entropy_d_log_probs"), _CROSS_ENTROPY),
    "smoothed_cross_entropy_backward": Posed(("smoothed_cross_entropy_d_log_probs",), _CROSS_ENTROPY),
}

# -- lesson 04 ---------------------------------------------------------------------------------------
LESSON_04 = {
    "layernorm_backward": Posed(("layernorm_dx_hat", "layernorm_dvar", "layernorm_dmean"),
                                (r"\\operatorname\{mean\}\(g\)", r"mean\(g\*x_hat\)")),
}

# -- lesson 05 ---------------------------------------------------------------------------------------
LESSON_05 = {
    "embedding_backward": Posed((), (r"add\.at", r"np\.add\.at")),
}

# -- lesson 07 ---------------------------------------------------------------------------------------
LESSON_07 = {
    "attention_backward": Posed(("attention_dv", "attention_d_weights", "attention_d_scores"),
                                (r"P\^\\topdout", r"P\^Tdout", r"dS\^\\topQ", r"dSK/")),
}

# -- lesson 08 ---------------------------------------------------------------------------------------
LESSON_08 = {
    "multi_head_attention_backward": Posed((), (r"deftextbook_backward",)),
}

# -- lesson 09 ---------------------------------------------------------------------------------------
LESSON_09 = {
    "dropout_backward": Posed((), ()),
    "residual_backward": Posed((), ()),
}

# -- lesson 10 ---------------------------------------------------------------------------------------
LESSON_10 = {
    "residual_backward_with_memory": Posed((), ()),
    "stack_backward_with_memory": Posed((), ()),
}

# -- lesson 12 ---------------------------------------------------------------------------------------
LESSON_12 = {
    "adam_step": Posed(("adam_bias_correction",), (
        r"m_hat/\(sqrt\(v_hat\)\+eps\)", r"\\hat\{m\}_t/\(\\sqrt\{\\hat\{v\}_t\}\+", r"\\frac\{\\hat\{?m\}?_t\}\{\\sqrt",
        r"\\sqrt\{\\hat\{?v\}?_t\}\+\\epsilon", r"sqrt\(v_hat\)\+eps", r"m/\(np\.sqrt\(v\)", r"m/sqrt\(v\)",
        r"1-\\beta_?\{?[12]?\}?\^\{?t", r"1-beta[12]?\*\*step", r"1-beta[12]?\*\*t\b", r"\\frac\{m_t\}\{1-",
        r"/\(1-beta", r"\(1-\\beta_1\)/\\sqrt\{1-\\beta_2\}", r"\(1-0\.9\)/np\.sqrt\(1-beta2\)")),
}

# -- lesson 14 ---------------------------------------------------------------------------------------
LESSON_14 = {
    "cached_attention_step": Posed((), ()),
}

# -- lesson 17 ---------------------------------------------------------------------------------------
LESSON_17 = {
    "masked_mean_pool_backward": Posed((), ()),
    "masked_max_pool_backward": Posed((), ()),
}

# -- lesson 20 ---------------------------------------------------------------------------------------
LESSON_20 = {
    "patches_backward": Posed((), ()),
}

# -- lesson 24 ---------------------------------------------------------------------------------------
LESSON_24 = {
    "batchnorm_backward": Posed((), ()),
}

# -- lesson 28 ---------------------------------------------------------------------------------------
LESSON_28 = {
    "rmsnorm_backward": Posed(("rmsnorm_d_rstd",), ()),
    "rope_backward": Posed((), ()),
    "silu_backward": Posed((), ()),
    "swiglu_backward": Posed(("silu_backward",), ()),
    "repeat_kv_backward": Posed((), ()),
}

POSED: dict[str, Posed] = {**LESSON_02, **LESSON_03, **LESSON_04, **LESSON_05, **LESSON_07, **LESSON_08,
                           **LESSON_09, **LESSON_10, **LESSON_12, **LESSON_14, **LESSON_17, **LESSON_20,
                           **LESSON_24, **LESSON_28}

# Graded exercises that are a derivation although they return no gradient: an update rule, a cached step.
DERIVED_WITHOUT_GRADIENT = ("adam_step", "cached_attention_step", "residual_backward_with_memory",
                            "stack_backward_with_memory")


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def student_text(lesson: str) -> str:
    path = next(LESSONS.glob(f"{lesson}_*.py"))
    return edition.student_source(path.read_text(encoding="utf-8"), path.name)


def stub_position(text: str, name: str) -> int:
    """Where the student edition defines ``name``'s stub (its ``def`` line)."""
    found = re.search(rf"^def {re.escape(name)}\(.*?\n(?:.*\n)*?\s+raise NotImplementedError", text, re.MULTILINE)
    assert found is not None, f"no stub of {name} in the student edition"
    return found.start()


def leaks_in(text: str, name: str, posed: Posed) -> list[str]:
    """The closed forms of ``name`` (its patterns, and npformer's compact form) that ``text`` holds."""
    squeezed = _squeezed(text)
    found = [pattern for pattern in posed.leaks if re.search(pattern, squeezed)]
    if name in TEXTBOOK and _squeezed(TEXTBOOK[name]) in squeezed:
        found.append("npformer's compact form (exercises.TEXTBOOK)")
    return found


def test_every_graded_backward_pass_is_posed():
    backward = {name for name, exercise in EXERCISES.items() if exercise.wrt or name.endswith("_backward")}
    assert backward | set(DERIVED_WITHOUT_GRADIENT) == set(POSED), "add the exercise to POSED, or remove it"


@pytest.mark.parametrize("name", sorted(POSED))
def test_the_steps_come_first_and_the_final_check_grades_them(name):
    posed, exercise = POSED[name], EXERCISES[name]
    assert DERIVATIONS.get(name, ()) == posed.steps, f"exercises.DERIVATIONS[{name!r}]"
    text = student_text(exercise.lesson)
    final = stub_position(text, name)
    for step in posed.steps:
        assert EXERCISES[step].lesson == exercise.lesson
        assert stub_position(text, step) < final, f"{step}'s stub comes before {name}'s"
    if posed.steps:
        steps = rf"steps=\({', '.join(posed.steps)},?\)"
        assert re.search(rf'check\("{name}", {name}, {steps}', text), f"{name}'s check names its steps"


@pytest.mark.parametrize("name", sorted(POSED))
def test_the_student_edition_holds_no_closed_form_of_the_answer(name):
    text = student_text(EXERCISES[name].lesson)
    assert leaks_in(text, name, POSED[name]) == []


@pytest.mark.parametrize("name", sorted(POSED))
def test_the_compact_form_is_shown_once_it_passes(name):
    assert TEXTBOOK.get(name), f"exercises.TEXTBOOK has no compact form of {name} to show once it passes"


def test_a_leaked_closed_form_is_found():
    text = student_text("02")
    stub = stub_position(text, "linear_backward")
    leaked = text[:stub] + "# $$dx = dout\\, W^\\top, \\qquad dW = x^\\top dout$$\n" + text[stub:]
    assert leaks_in(text, "linear_backward", POSED["linear_backward"]) == []
    assert leaks_in(leaked, "linear_backward", POSED["linear_backward"]) != []
    compact = text[:stub] + f"# {TEXTBOOK.get('layernorm_backward', 'x')}\n" + text[stub:]
    assert "npformer's compact form (exercises.TEXTBOOK)" in leaks_in(compact, "layernorm_backward", Posed((), ()))
