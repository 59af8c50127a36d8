"""The course machinery: the grader can pass and fail, its hints, the student edition, the table."""

import math
import pathlib

import numpy as np
import pytest

from npformer import nn, ops, optim
from npformer.course import BEGIN, END, EXERCISES, ExerciseFailed, check, exercise_table, student_source
from npformer.course.edition import graded_exercises

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"


def _layernorm_parts(x, gamma, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    return (x - mean) * rstd, rstd


def _layernorm_without_mean_terms(x, gamma, beta, dout):
    x_hat, rstd = _layernorm_parts(x, gamma)
    flat = (-1, x.shape[-1])
    return rstd * dout * gamma, (dout * x_hat).reshape(flat).sum(0), dout.reshape(flat).sum(0)


def _embedding_overwrite(ids, W, dout):
    dW = np.zeros_like(W)
    dW[ids.reshape(-1)] = dout.reshape(-1, W.shape[1])  # repeated ids: the last write wins
    return dW


def _attention_leaking(q, k, v, mask, dout):
    scale = 1 / math.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2) * scale
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)  # the mask is ignored: every key gets weight
    dweights = dout @ v.swapaxes(-1, -2)
    dscores = weights * (dweights - (dweights * weights).sum(-1, keepdims=True)) * scale
    return dscores @ k, dscores.swapaxes(-1, -2) @ q, weights.swapaxes(-1, -2) @ dout


def _unshifted_softmax(x):
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is the point
        return np.exp(x) / np.exp(x).sum(-1, keepdims=True)


def _reference(name):
    return EXERCISES[name].reference


def _scaled(name, factor):
    def wrong(*args):
        result = _reference(name)(*args)
        return tuple(factor * r for r in result) if isinstance(result, tuple) else factor * result
    return wrong


# One realistic wrong solution per exercise, and a words the report must contain (its hint or verdict).
def _forward_difference(f, x, h):
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        shifted = x.copy()
        shifted[index] += h
        gradient[index] = (f(shifted) - f(x)) / h  # first order: error about h
    return gradient


WRONG = {
    "central_difference": (_forward_difference, "FAILED"),
    "decoder_mask": (lambda tgt_ids: np.broadcast_to(np.tril(np.ones((tgt_ids.shape[1],) * 2, dtype=bool)),
                                                     (tgt_ids.shape[0], 1) + (tgt_ids.shape[1],) * 2), "FAILED"),
    "transformer_parameters": (lambda src_vocab, tgt_vocab, d_model, d_ff, n_layers: _reference(
        "transformer_parameters")(src_vocab, tgt_vocab, d_model, d_ff, n_layers) - 2 * d_model * n_layers, "FAILED"),
    "attention_entropy": (lambda weights: -np.sum(weights * np.log2(np.where(weights > 0, weights, 1)), -1),
                          "constant factor"),
    "linear_backward": (lambda x, W, b, dout: (dout @ W.T, x.reshape(-1, W.shape[0]).T @ dout.reshape(-1, W.shape[1]),
                                               dout), "sum over a broadcast axis is missing"),
    "relu_backward": (lambda x, dout: dout * x * (x > 0), "FAILED"),  # multiplied by x, not by the step
    "gelu_backward": (lambda x, dout: dout * 0.5 * (1 + ops.erf(x / math.sqrt(2))), "FAILED"),  # Gaussian term missing
    "softmax": (lambda x: _unshifted_softmax(x), "NaN or inf"),
    "softmax_backward": (lambda x, dout: dout * ops.softmax_forward(x)[0] * (1 - ops.softmax_forward(x)[0]),
                         "FAILED"),  # the Jacobian's diagonal only
    "cross_entropy_backward": (lambda logits, targets, dloss: _reference("cross_entropy_backward")(
        logits, targets, dloss) * max(int((targets != 0).sum()), 1) / targets.size, "constant factor"),
    "smoothed_cross_entropy_backward": (lambda logits, targets, eps, dloss: _reference("cross_entropy_backward")(
        logits, targets, dloss), "FAILED"),  # the smoothing forgotten
    "layernorm_backward": (_layernorm_without_mean_terms, "dx wrong"),
    "positional_encoding": (lambda max_len, d_model: np.cos(_reference("positional_encoding")(max_len, d_model)),
                            "FAILED"),
    "padding_mask": (lambda ids: (ids == 0)[:, None, None, :], "inverted"),
    "causal_mask": (lambda length: np.triu(np.ones((length, length), dtype=bool), 1), "inverted"),
    "embedding_backward": (_embedding_overwrite, "repeated id"),
    "dropout_backward": (lambda x, keep, p, dout: dout * keep, "constant factor"),
    "attention": (lambda q, k, v, mask: _reference("attention")(q, k, v, None), "FAILED"),
    "attention_backward": (_attention_leaking, "FAILED"),
    "split_heads": (lambda x, n_heads: x.reshape(x.shape[0], n_heads, x.shape[1], -1), "FAILED"),
    "merge_heads": (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "FAILED"),
    "multi_head_attention": (lambda query, memory, Wq, Wk, Wv, Wo, n_heads, mask: _reference(
        "multi_head_attention")(query, memory, Wq, Wk, Wv, Wo, 1, mask[..., :1, :] if mask is not None else None),
        "FAILED"),
    "multi_head_attention_backward": (lambda *args: _reference("multi_head_attention_backward")(*args)[:1]
                                      + (args[1] * 0,) + _reference("multi_head_attention_backward")(*args)[2:],
                                      "dmemory wrong"),
    "adam_step": (lambda param, grad, m, v, step, lr, b1, b2, eps: _reference("adam_step")(
        param, grad, m, v, step + 1, lr, b1, b2, eps), "step + 1"),
    "noam_lr": (lambda step, d_model, warmup_steps: d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.0),
                "FAILED"),
    "modified_precision": (lambda hyp, refs, n: (sum(tuple(hyp[i:i + n]) in {tuple(r[j:j + n]) for r in refs
                                                                              for j in range(len(r))}
                                                     for i in range(len(hyp) - n + 1)), max(len(hyp) - n + 1, 0)),
                           "not clipped"),
    "length_penalty": (lambda length, alpha: ((5 + length) / 6) * alpha, "FAILED"),
    "residual_backward": (lambda dout, sublayer, norm, dropout, pre_norm: (
        norm(sublayer(dropout(dout))) if pre_norm else sublayer(dropout(norm(dout)))),
        "add the identity path's gradient too"),
    "residual_backward_with_memory": (lambda dout, sublayer, norm, dropout, pre_norm: _reference(
        "residual_backward_with_memory")(dout, sublayer, norm, dropout, not pre_norm),
        "the post-norm formula for a pre-norm block"),
    "stack_backward_with_memory": (lambda dout, layers: (
        _reference("stack_backward_with_memory")(dout, layers)[0], layers[-1](dout)[1]),
        "only the last layer's memory gradient"),
}


def test_every_exercise_has_a_wrong_solution_here():
    assert set(WRONG) == set(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_reference_passes(name):
    report = check(name, EXERCISES[name].reference)
    assert report.passed, report
    assert report.verdict.startswith(f"exercise {name}: passed")


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_wrong_solution_fails_with_its_hint(name):
    wrong, words = WRONG[name]
    report = check(name, wrong)
    assert not report.passed and report.status == "FAILED", report
    assert words in str(report), report


@pytest.mark.parametrize("factor, words", [(-1.0, "sign is wrong"), (0.5, "constant factor: got = 0.5")])
def test_hints_name_a_sign_and_a_factor(factor, words):
    report = check("attention_backward", _scaled("attention_backward", factor))
    assert words in str(report), report


def test_a_transposed_gradient_is_named():
    def transposed(x, W, b, dout):
        dx, dW, db = _reference("linear_backward")(x, W, b, dout)
        return dx, dW.T if dW.shape[0] == dW.shape[1] else dW, db
    report = check("linear_backward", transposed)
    assert "transposed" in str(report) and not report.passed, report


def test_a_stub_is_not_implemented_yet_and_a_crash_is_a_failure_with_its_line():
    def stub(x, dout):
        raise NotImplementedError
    report = check("relu_backward", stub)
    assert report.status == "not implemented yet" and report.verdict == "exercise relu_backward: not implemented yet"

    def crashes(x, dout):
        return dout @ np.ones(7)
    report = check("relu_backward", crashes)
    assert report.status == "FAILED" and "raised ValueError" in str(report) and "dout @ np.ones(7)" in str(report)

    report = check("linear_backward", lambda x, W, b, dout: (dout @ W.T, None))
    assert "returned 2 value(s), expected 3: dx, dW, db" in str(report)


def test_strict_mode_raises_on_a_failure_but_not_on_a_stub(monkeypatch):
    monkeypatch.setenv("NPFORMER_GRADER", "strict")
    with pytest.raises(ExerciseFailed, match="relu_backward"):
        check("relu_backward", lambda x, dout: dout)

    def stub(x, dout):
        raise NotImplementedError
    assert check("relu_backward", stub).status == "not implemented yet"


def test_the_student_function_cannot_change_the_cases():
    def writes_into_its_inputs(x, dout):
        result = dout * (x > 0)
        x[...] = 0
        dout[...] = 0
        return result
    assert check("relu_backward", writes_into_its_inputs).passed


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="layernorm_backward"):
        check("layer_norm", lambda: None)


def test_the_adam_exercise_agrees_with_the_optimizer():
    rng = np.random.default_rng(0)
    layer = nn.Linear(3, 2, rng=rng, dtype=np.float64, bias=False)
    adam = optim.Adam(layer, lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    param = layer.W.copy()
    m, v = np.zeros_like(param), np.zeros_like(param)
    for step in range(1, 4):
        grad = rng.standard_normal(param.shape)
        layer.grad["W"][...] = grad
        adam.step()
        param, m, v = EXERCISES["adam_step"].reference(param, grad, m, v, step, 1e-2, 0.9, 0.98, 1e-9)
    np.testing.assert_allclose(layer.W, param, rtol=1e-12)


def test_the_student_source_replaces_each_solution_by_a_stub():
    text = f"def f(x):\n    '''doc'''\n    {BEGIN}\n    return x + 1\n    {END}\n\nprint(f)\n"
    student = student_source(text)
    assert student == "def f(x):\n    '''doc'''\n    # YOUR CODE HERE\n    raise NotImplementedError\n\nprint(f)\n"
    for broken, words in [(f"{BEGIN}\n{BEGIN}\n{END}\n", "inside the block"), (f"{END}\n", "without"),
                          (f"{BEGIN}\nx = 1\n", "never closed")]:
        with pytest.raises(ValueError, match=words):
            student_source(broken, "lesson.py")


def test_every_lesson_solution_is_graded_in_a_later_cell():
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text = path.read_text(encoding="utf-8")
        assert text.count(BEGIN) == text.count(END), path.name
        for name in graded_exercises(text):
            assert name in EXERCISES, (path.name, name)


def test_the_lessons_grade_every_exercise_and_every_math_lesson_has_one():
    graded = {path.name[:2]: graded_exercises(path.read_text(encoding="utf-8"))
              for path in sorted(LESSONS.glob("[0-9][0-9]_*.py"))}
    assert set(EXERCISES) <= {name for names in graded.values() for name in names}
    for lesson in [f"{n:02d}" for n in range(1, 13)] + ["14", "15"]:
        assert graded[lesson], f"lesson {lesson} has no graded exercise"


def test_the_exercise_table_in_the_lessons_readme_is_current():
    readme = (LESSONS / "README.md").read_text(encoding="utf-8")
    assert exercise_table(LESSONS) in readme, "run: npformer course exercises > the table in lessons/README.md"


def test_the_course_command_writes_the_student_edition_and_the_table(tmp_path, capsys):
    from npformer.cli import main

    assert main(["course", "student", str(tmp_path / "student"), "--lessons", str(LESSONS)]) == 0
    written = sorted(path.name for path in (tmp_path / "student").iterdir())
    assert written == sorted(path.name for path in LESSONS.glob("[0-9][0-9]_*.py"))
    assert all(BEGIN not in (tmp_path / "student" / name).read_text() for name in written)
    assert main(["course", "exercises", "--lessons", str(LESSONS)]) == 0
    assert exercise_table(LESSONS) in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["course", "student"], "needs an output folder"),
    (["course", "student", "out", "--lessons", "nowhere"], "no lessons (NN_topic.py files) in 'nowhere'"),
])
def test_the_course_command_fails_in_one_line(argv, words, tmp_path, monkeypatch, capsys):
    from npformer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert words in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "out").exists()
