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
    "linear_row_backward": Posed((), (r"W@dout", r"outer\(x,dout\)", r"x_k\\,?\\texttt\{dout\}_j", r"=\\sum_jW_\{kj\}",
                                      r"=x\\,?\\texttt\{dout\}\^", r"dx=W\\,?\\texttt\{dout\}")),
    "linear_backward": Posed(("linear_row_backward",), (
        r"dout@W\.T", r"x\.T@dout", r"W\^\\top", r"x\^\\top", r"W\^T", r"x\^T", r"X\^\\top", r"X\^T",
        r"dY\\,?W", r"rows\.T@", r"\.T@dout", r"=\\sum_jdY_\{nj\}W", r"=\\sum_nX_\{n", r"=\\sum_ndY_\{nj\}")),
    "relu_backward": Posed((), (r"dout\*\(x>0\)", r"\(x>0\)\*dout", r"dout\*\(x>=0\)", r"\\odot\[x>0\]",
                                r"\[x>0\]\\odot", r"where\(x>0,dout", r"slope\[grid>0\]==1",
                                r"derivative\[grid>0\]==1")),
    "gelu_gate_backward": Posed((), (
        r"\\Phi'\(x\)=\\varphi", r"=\\frac\{e\^\{-x\^2/2\}\}\{\\sqrt\{2\\pi\}\}", r"e\^\{-x\^2/2\}/\\sqrt\{2\\pi\}",
        r"exp\(-0\.5\*x\*x\)", r"exp\(-0\.5\*x\*\*2\)", r"exp\(-x\*\*2/2\)", r"exp\(-x\*x/2\)",
        r"\\operatorname\{erf\}'\(z\)=")),
    "gelu_backward": Posed(("gelu_gate_backward",), (r"\\Phi\(x\)\+x\\?,?\\varphi", r"cdf\+x\*",
                                                     r"Phi\(x\)\+x\*?phi\(x\)", r"\(cdf\+x")),
    "mlp_backward": Posed((), (r"reversed\(range\(len\(weights", r"\*\(pre_activations\[layer\]>0\)",
                               r"d_weights\.insert\(0,rows\.T@", r"layer_inputs\[layer\]\.reshape",
                               r"runlastlayerfirst", r"receives`dout`itself", r"dh_\{L-1\}", r"filledfromtheend")),
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
    "embedding_backward": Posed(("embedding_one_hot",), (
        r"add\.at", r"np\.add\.at", r"O\^\\top", r"O\^T", r"one_hot\.T@", r"onehot\.T@", r"\.T@dout",
        r"\.swapaxes\(-1,-2\)@dout", r"bincount", r"reduceat", r"dW\[ids\]\+=", r"scatter-add", r"\\sum_\{\(b,t\)",
        r"receivesthe\*?sum")),
    "embedding_positions_backward": Posed((), (
        r"dW_pos\[start:start\+", r"dout\.sum\(axis=0\)", r"sqrt\(d_model\)\*dout", r"eachtermreceivesthewhole",
        r"receivesthesumoverthebatch", r"\\sum_b\\texttt\{dout\}", r"withthepositionsasids",
        r"Itsgradientistheembeddingbackward", r"dW=\\sqrt\{D\}", r"backthroughthescale")),
}

# -- lesson 07 ---------------------------------------------------------------------------------------
LESSON_07 = {
    "attention_backward": Posed(("attention_dv", "attention_d_weights", "attention_d_scores"),
                                (r"P\^\\topdout", r"P\^Tdout", r"dS\^\\topQ", r"dSK/")),
}

# -- lesson 08 ---------------------------------------------------------------------------------------
LESSON_08 = {
    "multi_head_attention_backward": Posed(
        ("multi_head_attention_d_context", "multi_head_attention_d_heads", "multi_head_attention_d_inputs"),
        (r"deftextbook_backward", r"dW_[oqkv]=", r"dC'=", r"dC=\\operatorname\{split\}", r"d[XM]=d[QKV]",
         r"W_[oqkv]\^(\\top|\{\\top\}|T)", r"[XMC]'?\^(\\top|\{\\top\})_\{?bt", r"@W[oqkv]\.T",
         r"\.T@(rows|flat)?\(?d", r"reshape\(-1,D\)\.T@", r"gradient#?of#?a#?merge#?is#?a#?split", r"dx_q\+dx_k\+dx_v",
         r"dquery\+dmemory", r"attend_heads_backward\(", r"layer\.backward\(block\.merge_heads",
         r"linear_backward\(merge\(", r"my_attention_backward\(q,k,v,mask,split")),
}

# -- lesson 09 ---------------------------------------------------------------------------------------
LESSON_09 = {
    "dropout_backward": Posed((), (r"\\frac\{d\\text\{out\}\\odot\\text\{keep\}\}", r"dout\*keep", r"keep\*dout",
                                   r"dout\*mask", r"c_i\\,?\\delta_\{ij\}", r"\\text\{keep\}/\(1-p\)",
                                   r"passesnogradientback", r"passesitbackscaled")),
    "residual_backward": Posed((), (r"ds=J_\{\\mathrm\{LN\}\}", r"dx=ds\+J_F", r"dx=dy\+J_\{\\mathrm\{LN\}\}",
                                    r"J_\{\\mathrm\{LN\}\}\^\\topJ_F\^\\top", r"D_p\(ds\)", r"D_p\(dy\)",
                                    r"norm_backward\(sublayer_backward\(dropout_backward\(",
                                    r"sublayer_backward\(dropout_backward\(d_sum", r"d_sum=norm_backward\(dout\)",
                                    r"dout\+norm_backward\(", r"d_sum\+sublayer_backward",
                                    r"identitypathpassesthegradient")),
    "encoder_layer_backward": Posed((), (r"reversed\(blocks\)", r"d_sublayers\.insert\(0", r"d_normed,d_weights=",
                                         r"d_sum,d_norm=norm_backward\(d\)", r"blocksareundonelastfirst",
                                         r"parameterstake`dout`", r"takewhat\$F\$'sbackwardreturns")),
    "sandwich_backward": Posed((), (r"norm1_backward\(sublayer_backward\(norm2_backward", r"J_\{\\mathrm\{N_1\}\}\^\\top",
                                    r"thesecondnorm'sbackwardfirst")),
}

# -- lesson 10 ---------------------------------------------------------------------------------------
LESSON_10 = {
    "residual_backward_with_memory": Posed((), (r"dout\+norm_backward\(d_input\)", r"d_sum\+d_input",
                                                r"=sublayer_backward\(dropout_backward\(", r"D_p\(J_",
                                                r"comesoutofthesub-?layerasitis", r"concern\$?x\$?only")),
    "stack_backward_with_memory": Posed((), (r"\\sum_\{l=1\}\^\{?N\}?J_\{?l\}?\^\\top", r"reversed\(layer_backwards",
                                             r"layer_backwards\[::-1\]", r"d_memory\+=", r"d_memory=d_memory\+",
                                             r"lastfirst", r"summedovereverylayer", r"receivesthe\*\*sum\*\*")),
    "decoder_backward": Posed((), (r"reversed\(layers\)", r"final_norm_backward\(dout\)ifpre_norm",
                                   r"d_memory=d_memory\+d_block", r"receives\$J_\{\\mathrm\{LN\}\}",
                                   r"undonelastfirstacross", r"twoperlayer")),
}

# -- lesson 11 ---------------------------------------------------------------------------------------
LESSON_11 = {
    "transformer_backward": Posed((), (r"encoder_backward\(d_memory\)", r"encoder_backward\(d_mem",
                                       r"sqrt\(d_model\)\*\w*dropout_backward", r"dropout_backward\(d_\w+\)\*scale",
                                       r"theencoder'supstreamgradient(is|comes)")),
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
    "cached_attention_step": Posed((), (
        r"concatenate\(\[[kv]_cache,[kv]_new\]", r"\[[KV]_\{<t\};#?[kv]_t\]", r"append[#\w]{0,16}key",
        r"attends?[#\w]{0,24}overall", r"(?i)attends?#?to#?itself", r"(?i)no#?mask#?is#?(needed|required)", r"needs#?no#?mask",
        r"q_t(\\,)?K\^", r"j\\(le|leq)#?t", r"defnpformer_cached_step")),
}

# -- lesson 17 ---------------------------------------------------------------------------------------
LESSON_17 = {
    "masked_mean_pool_backward": Posed(("masked_mean_pool_d_sum",), (
        r"\\frac\{m_\{b,t\}\}\{n_b\}", r"\\frac\{m_\{b,t\}\}\{\\max\(n_b,1\)\}", r"m_\{b,t\}/n_b",
        r"mask\[:,:,None\]\*dout", r"mask\*dout/", r"dout\[b\]/n\[b\]", r"dout/n\b", r"dout/counts",
        r"dout/\\max\(n_b,1\)", r"spreads.{0,60}evenly", r"evenlyovertherealpositions")),
    "masked_max_pool_backward": Posed(("masked_max_pool_jacobian",), (
        r"put_along_axis", r"argmax", r"t\^\*", r"\\partialL/\\partialx_\{b,t", r"-np\.inf\)\.arg",
        r"-\\infty", r"gradientgoestotheposition", r"onlythepositionwherethemaximum",
        r"whereeachmaximumcamefrom", r"1atthe(first)?position")),
    "classifier_head_backward": Posed((), (
        r"pooled\.T@d_?logits", r"d_?logits@W\.T", r"probs?-np\.eye", r"p-onehot", r"\(p-onehot", r"dloss/len\(",
        r"dloss/B\b", r"\\frac\{\\texttt\{dloss\}\}\{B\}", r"\\text\{pooled\}\^\\top", r"W\^\\top", r"\.sum\(axis=0\)")),
}

# -- lesson 20 ---------------------------------------------------------------------------------------
LESSON_20 = {
    "patches_backward": Posed(("patches_destination",), (
        r"inverserearrangement", r"\(0,3,1,4,2,5\)", r"argsort", r"dout\.reshape\(-1\)\[", r"dout\.ravel\(\)\[",
        r"x_\{\\pi\(m\)\}", r"undotheforward'ssteps", r"\(B,H/p,W/p,C,p,p\)", r"\(h//p\)\*", r"h%p",
        r"\(h\\bmodp\)", r"c\*p\*p\+", r"cp\^2\+", r"receivesexactlyoneentryof`?dout")),
    "vit_embedding_backward": Posed((), (
        r"dout\.sum\(axis=0\)", r"dout\.sum\(0\)", r"dout\[:,:1\]\.sum", r"dout\[:,1:\]", r"d_tokens@W\.T",
        r"rows\.T@d_tokens", r"\.sum\(axis=\(0,1\)\)", r"\\sum_b\\texttt\{dout\}", r"\\sum_bdout", r"W\^\\top")),
}

# -- lesson 24 ---------------------------------------------------------------------------------------
LESSON_24 = {
    "batchnorm_backward": Posed(("batchnorm_dx_hat", "batchnorm_dvar", "batchnorm_dmean"),
                                (r"\\overline\{g\}", r"\\overline\{g\\odot", r"r\\left\(g-", r"r_d\\?,?\(g",
                                 r"\\delta_\{ij\}-\\frac\{?1\}?\{?N", r"g_mean", r"gx_mean", r"x_hat\*gx",
                                 r"d\\gamma=\\sum", r"d\\beta=\\sum", r"dout\*gamma\*kee?pt?",
                                 r"rstd\*\*3", r"\*\*-1\.5", r"\^\{-3/2\}", r"\^\{3/2\}", r"dx=0\$?ata?padded",
                                 r"r\^3", r"r_d\^3", r"\\sigma_d\^3")),
    "batchnorm_padding_normalised_backward": Posed((), (
        r"dx_p=r", r"r\\?,?g_p", r"rstd\*dout", r"keep\[\.\.\.,None\]\*\(g", r"S_1=\\frac\{?1\}?\{?N",
        r"S_2=\\frac\{?1\}?\{?N", r"(?i)over\**every\**position", r"directterm(alone|only)",
        r"\(g_i-S_1-\\hatx_iS_2\)")),
}

# -- lesson 28 ---------------------------------------------------------------------------------------
_ROTATION_BACK = (r"R\^\\top", r"R\^T", r"R\(-\\alpha\)", r"R\(-angle\)", r"by-angle", r"by\$-",
                  r"cos\*dout\[:,0\]\+sin", r"dout\[\.\.\.,0::2\]\*cos", r"\\cos\\alpha\\,dy_0\+",
                  r"dx_0=", r"dx\[2i\]=")
LESSON_28 = {
    "rmsnorm_backward": Posed(("rmsnorm_d_rstd", "rmsnorm_d_mean_square"), (
        r"-r\^3x_j/D", r"r\^3", r"rstd\*\*3", r"\\operatorname\{mean\}\(g\\odot\\hatx\)", r"mean\(g\*x_hat\)",
        r"g-\\hatx", r"\(m\+\\epsilon\)\^\{-3/2\}", r"\*\*-1\.5", r"\(dout\*gamma\*x\)\.sum", r"\\sum_ig_ix_i",
        r"\\sum_idy_i\\gamma_ix_i", r"2x_j/D", r"-\\frac\{1\}\{2\}\(m")),
    "rope_pair_backward": Posed((), _ROTATION_BACK),
    "rope_backward": Posed(("rope_pair_backward",), _ROTATION_BACK + (r"dx\[\.\.\.,0::2\]=",)),
    "silu_backward": Posed((), (r"\\sigma\(a\)\(1-\\sigma\(a\)\)", r"\\sigma\(1-\\sigma\)", r"sigmoid\*\(1\.0\+gate",
                                r"1\+a\(1-", r"\\sigma'\(a\)=", r"sigmoid\*\(1-sigmoid\)")),
    "swiglu_backward": Posed(("silu_backward", "swiglu_d_gate", "swiglu_d_up"), (
        r"x\^\\topd", r"x\^Td", r"rows\.T@", r"d_gate@W_gate\.T", r"W_\\text\{gate\}\^\\top", r"W_\\text\{up\}\^\\top",
        r"dout\*gate/\(1\.0\+np\.exp", r"dout\*\(x@W_up\)", r"dout\*up\)", r"\\operatorname\{silu\}'\(a\)\\odotb")),
    "swiglu_ffn_backward": Posed((), (
        r"dout\+dx_unit", r"dx=dout\+", r"dx=dy\+", r"rows\.T@dout", r"dout@W_down\.T", r"W_\\text\{down\}\^\\top",
        r"\\text\{hidden\}\^\\top", r"hidden\.T@", r"swiglu_backward\(x,W_gate,W_up,dout@")),
    "repeat_kv_backward": Posed((), (r"\.sum\(axis=2\)", r"reshape\(batch,kv_heads,n_rep", r"dout\.reshape\(B,Hkv,n_rep",
                                     r"sumoverthe(group|copies|n_rep)", r"sumof(their|the)gradients")),
}

POSED: dict[str, Posed] = {**LESSON_02, **LESSON_03, **LESSON_04, **LESSON_05, **LESSON_07, **LESSON_08,
                           **LESSON_09, **LESSON_10, **LESSON_11, **LESSON_12, **LESSON_14, **LESSON_17, **LESSON_20,
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
