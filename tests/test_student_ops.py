"""The student's own functions as npformer's ops: collected from the lessons, graded, run through the
whole model (``course.student_ops``, ``npformer course collect``, ``train --ops``, ``gradcheck --model
--ops``); a wrong function is refused or named with its lesson; bad modules are one-line errors."""

import pathlib

import numpy as np
import pytest

from npformer import gradcheck, ops, optim
from npformer.cli import main
from npformer.course import StudentOpsError, collect, load_student_ops, student_edition, student_ops
from npformer.training import train_step

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """The repository's lessons (solutions filled in), collected into one module."""
    out = tmp_path_factory.mktemp("student") / "my_npformer.py"
    result = collect(LESSONS, out)
    assert not result.problems, result.problems
    return out


def test_collect_writes_every_graded_function_in_lesson_order_with_its_lesson(collected):
    text = collected.read_text()
    compile(text, str(collected), "exec")
    for name, lesson in (("linear_backward", "02_linear_and_relu"), ("layernorm_backward", "04_layer_normalization"),
                         ("attention_backward", "07_scaled_dot_product_attention"), ("adam_step", "12_adam_and_warmup")):
        assert f"def {name}(" in text and f"# -- lesson {lesson}" in text, name
    assert text.index("def linear_backward(") < text.index("def layernorm_backward(") < text.index("def adam_step(")
    assert "BEGIN SOLUTION" not in text and "check(" not in text


# The ops that no lesson writes: those that no model of the course runs on a student's functions (the
# Transformer's and lesson 28's decoder's), and grouped-query attention's forward (lesson 28 writes its
# backward's sum over shared heads; the forward keeps attention's own cache).
NOT_IN_THE_TRANSFORMER = {"softmax_forward", "softmax_backward", "masked_mean_pool_forward", "masked_mean_pool_backward",
                          "masked_max_pool_forward", "masked_max_pool_backward", "patches_forward", "patches_backward",
                          "grouped_query_attention_forward"}


def test_the_lessons_own_functions_give_every_op_the_transformer_calls_and_pass_the_whole_model_check(collected):
    student = load_student_ops(str(collected))
    assert all(entry.status == "passed" for entry in student.exercises)
    assert set(student) == set(ops.OP_NAMES) - NOT_IN_THE_TRANSFORMER
    assert student.report().startswith(f"{len(student.yours())} of {len(ops.OP_NAMES)} ops are yours")
    with ops.using(student):
        labels = ops.active()
        # the forward ops that only keep the inputs for a backward are npformer's, and say so
        forwards_kept = {op for op in student if op.endswith("_forward") and op != "attention_forward"}
        assert {op for op, label in labels.items() if label != "yours"} == NOT_IN_THE_TRANSFORMER | forwards_kept
        assert all(labels[op].startswith("textbook, keeping the inputs") for op in forwards_kept)
        report = gradcheck.check_model(seed=0, directions=1)
    assert report.passed, report.table()


def test_gradcheck_on_a_students_ops_counts_their_ops_alike_at_the_top_and_the_end(collected, capsys):
    """One count of the student's ops: the forwards that only keep the inputs are npformer's in the
    header and in the verdict alike (the verdict once counted them: "4 of 39" above, "6 of 39" below)."""
    import re

    assert main(["gradcheck", "--model", "--fast", "--ops", str(collected)]) == 0
    output = capsys.readouterr().out
    header = re.search(r"(\d+) of (\d+) ops are yours", output)
    verdict = re.search(r"\((\d+) of (\d+) ops yours\)", output.strip().splitlines()[-1])
    assert header and verdict and header.groups() == verdict.groups(), output


def test_the_whole_collected_set_runs_lesson_28s_decoder_with_a_padded_row(collected):
    """Every op of the course yours at once (attention's backward included) under the modern decoder: its
    grouped attention keeps the textbook attention's cache, which the shared-head sum must go back through."""
    import numpy as np

    from npformer import models

    student = load_student_ops(str(collected))
    assert {"rmsnorm_backward", "rope_backward", "swiglu_backward", "grouped_query_attention_backward",
            "attention_backward"} <= set(student.yours())
    model = models.ModernLanguageModel(models.ModernLanguageModelConfig(vocab=11, d_model=8, n_heads=4, n_kv_heads=2,
                                                                        d_ff=6, n_layers=1, max_len=6), dtype=np.float64)
    ids = np.array([[1, 5, 6, 7, 2, 0], [0, 0, 0, 0, 0, 0]])
    with ops.using(student):
        report = gradcheck.check_loss(model, {"ids": ids[:, :-1]}, ids[:, 1:], name="modern decoder")
    assert report.passed, report.table()


def test_active_credits_a_student_with_only_the_backward_for_the_backward_alone():
    from lesson_solutions import solution

    student = student_ops({"layernorm_backward": solution("layernorm_backward")})
    with ops.using(student):
        labels = ops.active()
    assert labels["layernorm_backward"] == "yours" and labels["layernorm_forward"] != "yours", labels
    assert student.yours() == ["layernorm_backward"] and student.report().startswith("1 of ")


def test_a_training_step_on_the_students_ops_equals_npformers(collected):
    student = load_student_ops(str(collected))
    losses, params = {}, {}
    for label, op_set in (("npformer", "textbook"), ("student", student)):
        model, src, tgt_in, tgt_out = gradcheck.model_case(seed=2, dropout=0.0)
        optimizer = optim.Adam(model, lr=1e-2)
        with ops.using(op_set):
            losses[label] = [train_step(model, (src, tgt_in), tgt_out, optimizer).loss for _ in range(3)]
        params[label] = model.params()
    np.testing.assert_allclose(losses["student"], losses["npformer"], rtol=1e-10)
    for key, value in params["npformer"].items():
        np.testing.assert_allclose(params["student"][key], value, rtol=1e-8, atol=1e-10, err_msg=key)


def test_the_untouched_student_edition_gives_no_op_and_trains_on_npformers(tmp_path):
    student_dir = tmp_path / "student"
    student_edition(LESSONS, student_dir)
    result = collect(student_dir, tmp_path / "mine.py")
    student = load_student_ops(str(tmp_path / "mine.py"))
    assert len(student) == 0 and student.report().startswith("0 of")
    assert {entry.status for entry in student.exercises} == {"not implemented"}
    assert result.functions  # the stubs were collected: they just are not written yet
    model, src, tgt_in, tgt_out = gradcheck.model_case(seed=2, dropout=0.0)
    with ops.using(student):
        assert "yours" not in ops.active().values()
        assert np.isfinite(train_step(model, (src, tgt_in), tgt_out, optim.Adam(model)).loss)


# Realistic wrong versions of the lessons' functions (the natural-signature twins of gradient mutants
# in npformer.gradcheck.mutants), each appended to the collected module so that it replaces the right one.
WRONG = {
    "linear_backward": ("dW from the last row only", """
def linear_backward(x, W, b, dout):
    dx, dW, db = _right(x, W, b, dout)
    return dx, x[-1, -1:].T @ dout[-1, -1:], db
"""),
    "relu_backward": ("the mask forgotten", """
def relu_backward(x, dout):
    return dout
"""),
    "gelu_backward": ("the Gaussian term missing", """
def gelu_backward(x, dout):
    from math import sqrt
    from npformer.ops import erf
    return dout * 0.5 * (1 + erf(x / sqrt(2)))
"""),
    "layernorm_backward": ("the mean term missing", """
def layernorm_backward(x, gamma, beta, dout):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + 1e-5)
    g = dout * gamma
    dx = (g - x_hat * (g * x_hat).mean(-1, keepdims=True)) / np.sqrt(var + 1e-5)
    _, dgamma, dbeta = _right(x, gamma, beta, dout)
    return dx, dgamma, dbeta
"""),
    "embedding_backward": ("repeated ids overwrite instead of adding", """
def embedding_backward(ids, W, dout):
    dW = np.zeros_like(W)
    dW[ids.reshape(-1)] = dout.reshape(-1, W.shape[1])
    return dW
"""),
    "attention_backward": ("the 1/sqrt(Dh) scale forgotten in dq and dk", """
def attention_backward(q, k, v, mask, dout):
    dq, dk, dv = _right(q, k, v, mask, dout)
    return dq * np.sqrt(q.shape[-1]), dk * np.sqrt(q.shape[-1]), dv
"""),
    "multi_head_attention_backward": ("dW_o as dY^T C' (transposed)", """
def multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
    dquery, dmemory, dWq, dWk, dWv, dWo = _right(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)
    return dquery, dmemory, dWq, dWk, dWv, dWo.T
"""),
    "smoothed_cross_entropy_backward": ("a sum over positions, not a mean", """
def smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss):
    return _right(logits, targets, label_smoothing, dloss) * max(int((targets != 0).sum()), 1)
"""),
    "dropout_backward": ("the 1 / (1 - p) scale forgotten", """
def dropout_backward(x, keep, p, dout):
    return dout * keep
"""),
    "residual_backward": ("the identity path forgotten", """
def residual_backward(dout, sublayer_backward, norm_backward, dropout_backward, pre_norm):
    if pre_norm:
        return norm_backward(sublayer_backward(dropout_backward(dout)))
    return sublayer_backward(dropout_backward(norm_backward(dout)))
"""),
    "stack_backward_with_memory": ("only the last layer's memory gradient", """
def stack_backward_with_memory(dout, layer_backwards):
    d, d_memory = dout, None
    for layer_backward in reversed(layer_backwards):
        d, d_layer_memory = layer_backward(d)
        d_memory = d_layer_memory if d_memory is None else d_memory
    return d, d_memory
"""),
    "encoder_layer_backward": ("the blocks walked first block first", """
def encoder_layer_backward(dout, blocks, pre_norm):
    return _right(dout, list(reversed(blocks)), pre_norm)
"""),
    "decoder_backward": ("the memory's gradient from the last block only", """
def decoder_backward(dout, layers, pre_norm, final_norm_backward):
    last = {}
    def keep_last(block):
        sublayer_backward, norm_backward, dropout_backward, reads_memory = block
        def backward(g):
            d_input, d_memory = sublayer_backward(g)
            last["d_memory"] = d_memory
            return d_input, 0 * d_memory
        return (backward, norm_backward, dropout_backward, True) if reads_memory else block
    dx, _ = _right(dout, [[keep_last(block) for block in blocks] for blocks in layers], pre_norm, final_norm_backward)
    return dx, last["d_memory"]
"""),
}


def _wrong_module(collected, tmp_path, name):
    source = collected.read_text() + f"\n_right = {name}\n" + WRONG[name][1]
    if name in ("residual_backward", "stack_backward_with_memory"):  # the walks of lessons 9-10 would replace them
        source += "\ndel encoder_layer_backward, decoder_backward\n"
    if name == "attention_backward":  # lesson 8's backward would run every attention block in its place
        source += "\ndel multi_head_attention_backward\n"
    path = tmp_path / f"wrong_{name}.py"
    path.write_text(source)
    return path


REFUSED_IN_ONE_LINE = ("linear_backward", "multi_head_attention_backward", "decoder_backward")


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_function_is_refused_and_with_allow_failing_the_model_check_names_it(collected, tmp_path, name, capsys):
    path = _wrong_module(collected, tmp_path, name)
    model_options = ["--activation", "gelu"] if name == "gelu_backward" else []  # the default model uses ReLU
    if name in REFUSED_IN_ONE_LINE:  # the refusal is one code path: a few exercises show it
        assert main(["gradcheck", "--model", "--fast", "--ops", str(path)]) == 2
        error = capsys.readouterr().err
        assert f"{path}: {name} (lesson" in error and "fails its exercise" in error and "--allow-failing" in error
        assert len(error.strip().splitlines()) == 1
    assert main(["gradcheck", "--model", "--fast", "--ops", str(path), "--allow-failing", *model_options]) == 1
    output = capsys.readouterr().out
    assert "yours, FAILING its exercise (allowed)" in output
    culprit_line = output.strip().splitlines()[-1]
    assert "the culprits" in culprit_line and f"{name} (lesson" in culprit_line, output
    assert culprit_line.count("(lesson") == 1, "only the wrong function is blamed"


@pytest.mark.parametrize("content, message", [
    ("x = (\n", "not Python (line 1)"),
    ("def helper():\n    pass\n", "defines none of the graded functions"),
    ("def relu_backward(x):\n    return x\n", "relu_backward must take (x, dout), got relu_backward(x)"),
    ("def relu_backward(x, dout):\n    return dout[..., :1]\n", "relu_backward (lesson 02) fails its exercise"),
    ("import numpy as np\nraise RuntimeError('half-written')\n", "importing it raised RuntimeError: half-written"),
])
def test_bad_modules_are_one_line_errors_naming_the_file_before_any_work(tmp_path, capsys, content, message):
    path = tmp_path / "mine.py"
    path.write_text(content)
    assert main(["train", "--ops", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(path) in error and message in error, error
    assert not (tmp_path / "runs").exists(), "nothing may start before the module is accepted"
    with pytest.raises(StudentOpsError, match=message.split(" (")[0]):
        load_student_ops(str(path))


def test_ops_applies_to_the_model_check_only(tmp_path, capsys):
    assert main(["gradcheck", "--ops", str(tmp_path / "mine.py")]) == 2
    assert "--ops applies to --model" in capsys.readouterr().err


def test_collect_reports_what_it_cannot_collect_and_changes_nothing(tmp_path):
    lessons = tmp_path / "mine"
    student_edition(LESSONS, lessons)
    broken = lessons / "04_layer_normalization.py"
    text = broken.read_text()
    stub = text.index("raise NotImplementedError", text.index("def layernorm_backward("))
    broken.write_text(text[:stub] + "raise NotImplementedError(" + text[stub + len("raise NotImplementedError"):])
    (lessons / "12_adam_and_warmup.py").unlink()
    before = {path.name: path.read_text() for path in lessons.iterdir()}
    result = collect(lessons, tmp_path / "out.py")
    assert any("layernorm_backward does not parse" in problem for problem in result.problems), result.problems
    missing_adam = "lesson 12 is missing: adam_bias_correction, adam_step"
    assert any(problem.startswith(missing_adam) for problem in result.problems), result.problems
    assert {path.name: path.read_text() for path in lessons.iterdir()} == before
    assert main(["course", "collect", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x.py")]) == 2


def test_collect_carries_the_constants_a_function_computes_from_its_imports(tmp_path):
    """A value computed from the lesson's imports (``C = math.sqrt(2 / math.pi)``) goes with the function that
    reads it, with its import; a name the lesson later rebinds to its own data does not (a student's gelu
    once passed its check in the lesson and failed in the collected file with a NameError)."""
    lessons = tmp_path / "mine"
    lessons.mkdir()
    (lessons / "02_linear_and_relu.py").write_text(
        "import math\nimport numpy as np\n\nC = math.sqrt(2 / math.pi)\nHALF = C / 2\nSCALE = 3.0\n"
        "SCALE = np.ones(2).sum()\n\n\ndef load():\n    return np.zeros(3)\n\n\ndata = load()\nLOOKED = data.sum()\n\n\n"
        "def relu_backward(x, dout):\n    return dout * (x > 0) * HALF / HALF * SCALE / SCALE\n\n\n"
        "def linear_backward(x, W, b, dout):\n    return LOOKED\n")
    result = collect(lessons, tmp_path / "out.py")
    text = (tmp_path / "out.py").read_text()
    assert "import math" in text and text.index("C = math.sqrt(2 / math.pi)") < text.index("HALF = C / 2"), text
    assert "SCALE = np.ones(2).sum()" in text and "SCALE = 3.0" not in text, text
    assert "LOOKED" not in text.split("def linear_backward")[0], text      # computed from the lesson's data
    namespace = {}
    exec(compile(text, "out.py", "exec"), namespace)
    np.testing.assert_array_equal(namespace["relu_backward"](np.array([-1.0, 2.0]), np.ones(2)), [0.0, 1.0])
    assert "relu_backward" in result.exercises


@pytest.mark.slow
def test_the_capstone_in_an_untouched_student_edition_trains_on_npformers_ops(tmp_path):
    """Lesson 27 run where a student who solved nothing would run it: in the student edition's
    folder. It collects the stubs, says that none of the ops is the student's, and runs to the end."""
    import os
    import subprocess
    import sys

    folder = tmp_path / "student"
    student_edition(LESSONS, folder)
    env = dict(os.environ, NPFORMER_QUICK="1", NPFORMER_FIGURES=str(tmp_path / "figures"), MPLBACKEND="Agg",
               NPFORMER_BACKEND="numpy")
    result = subprocess.run([sys.executable, str(folder / "27_your_transformer.py")], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"0 of {len(ops.OP_NAMES)} ops are yours" in result.stdout
    assert "not implemented" in result.stdout and (tmp_path / "figures" / "27_your_transformer.png").is_file()


def test_a_students_variants_run_in_the_model_so_their_backward_is_its_gradient(tmp_path, monkeypatch):
    """With a variants file, the forward ops of the variant-graded exercises run the student's variants:
    backward passes derived for them (here their numerical stand-ins, allowed though the timed case
    fails them) are the gradients of the model's own output, and the whole-model check passes."""
    import functools
    import inspect
    import json

    from npformer.course.exercises import EXERCISES
    from npformer.course.variants import FAMILY_OF
    from numerical_student import numerical_backward

    chosen = {"linear": "column-scaled", "layernorm": "unbiased", "cross_entropy": "z-loss", "attention": "alibi"}
    (tmp_path / "npformer_variants.json").write_text(json.dumps({"student": "kim", "variants": chosen}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NPFORMER_VARIANTS", raising=False)
    functions = {}
    for name in ("linear_backward", "layernorm_backward", "cross_entropy_backward", "attention_backward"):
        forward = FAMILY_OF[name].variant(chosen[FAMILY_OF[name].name]).forward_of(name)
        inputs = list(inspect.signature(EXERCISES[name].forward).parameters)
        functions[name] = functools.partial(numerical_backward, forward, [inputs.index(w) for w in EXERCISES[name].wrt])
    student = student_ops(functions, allow_failing=True, source="kim's numerical stand-ins")
    assert student.variants == {name: chosen[FAMILY_OF[name].name] for name in functions}
    assert "variant 'unbiased'" in student.report()
    with ops.using(student):
        assert ops.active()["layernorm_forward"] == "your variant's forward ('unbiased')"
        x = np.random.default_rng(0).standard_normal((1, 2, 4)).astype(np.float32)
        mine = ops.current().layernorm_forward(x, np.ones(4, np.float32), np.zeros(4, np.float32))[0]
        # GELU: a ReLU unit within the step of its kink fails a finite difference for that reason alone
        report = gradcheck.check_model(seed=0, directions=1, activation="gelu")
    unbiased = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(mine, unbiased, rtol=1e-5)
    assert report.passed, report.table()


def test_train_on_a_students_variants_names_them_and_keeps_them_in_the_run(tmp_path, monkeypatch, capsys):
    import inspect
    import json

    from numerical_student import numerical_backward

    from npformer.course.variants import layer_norm

    (tmp_path / "npformer_variants.json").write_text(json.dumps({"variants": {"layernorm": "unbiased"}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NPFORMER_VARIANTS", raising=False)
    source = inspect.getsource(layer_norm._statistics) + inspect.getsource(layer_norm.unbiased) + \
        inspect.getsource(numerical_backward)
    (tmp_path / "mine.py").write_text(
        "import numpy as np\nimport numpy\n\nEPS = 1e-5\n\n\ndef keep(name, value):\n    return value\n\n\n" + source +
        "\n\ndef layernorm_backward(x, gamma, beta, dout):\n"
        "    return numerical_backward(unbiased, (0, 1, 2), x, gamma, beta, dout)\n")
    arguments = ["train", "--runs-dir", str(tmp_path / "runs"), "--name", "mine", "--d-model", "16", "--d-ff", "32",
                 "--layers", "1", "--heads", "2", "--eval-every", "100000", "--test-sentences", "1", "--beam", "1",
                 "--max-steps", "1", "--token-budget", "64", "--ops", str(tmp_path / "mine.py"), "--allow-failing"]
    assert main(arguments) == 0
    printed = capsys.readouterr().out
    assert "variant 'unbiased' (its forward runs in the model)" in printed
    assert "your variants ran in the model: layernorm_backward 'unbiased'" in printed
    assert json.loads((tmp_path / "runs" / "mine" / "variants.json").read_text()) == {"layernorm_backward": "unbiased"}
