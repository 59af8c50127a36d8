"""The library's entry points check their arguments before any work (issue 33, "bad input, generally").

Every public function of ``npformer.gradcheck``, the course's grader (``npformer.course.check``)
and every drawing function of ``npformer.viz`` raises ``ValueError`` or ``TypeError`` whose one
line names the function, the argument, what was expected and what it got: for a wrong type,
a wrong shape, labels that do not fit their matrix, something that is not a function, and
inputs that a forward pass does not take. The figures raise before anything is drawn.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer import backend, gradcheck, nn, ops, viz
from npformer.course import EXERCISES, check


@contextlib.contextmanager
def raises(error, *fragments):
    """pytest.raises that also checks that every fragment appears in the (one-line) message."""
    with pytest.raises(error) as info:
        yield info
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def linear_inputs(rng=None):
    rng = rng or np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 3)), "W": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}


def refusing_forward(*args):
    raise AssertionError("the forward ran although the arguments were wrong")


# -- gradcheck.check_gradients ---------------------------------------------------------------


@pytest.mark.parametrize("inputs, words", [
    ({"x": np.ones((2, 3))}, ["missing a required argument: 'W'"]),
    ({**linear_inputs(), "extra": np.ones(2)}, ["too many positional arguments"]),
    ({"W": np.ones((3, 4)), "x": np.ones((2, 3)), "b": np.ones(4)}, ["'W' in the place of 'x'"]),
])
def test_check_gradients_rejects_inputs_its_forward_does_not_take(inputs, words):
    with raises(TypeError, "check_gradients", "inputs", "linear_forward(x, W, b=None)", *words):
        gradcheck.check_gradients(ops.linear_forward, ops.linear_backward, inputs)


def test_an_input_name_the_forward_does_not_take_is_named_before_any_work():
    """A name that is no parameter of forward (a typing mistake, or inputs meant for another op)
    is a ValueError naming it; a forward that takes ``*args`` accepts any names, in order."""
    x = np.random.default_rng(0).standard_normal((2, 3))
    with raises(ValueError, "check_gradients", "inputs must name the arguments of softmax_forward(x, axis=-1)",
                "got 'z'", "does not take"):
        gradcheck.check_gradients(ops.softmax_forward, ops.softmax_backward, {"z": x})
    with raises(ValueError, "check_module", "inputs must name the arguments of forward(x)", "got 'q'"):
        gradcheck.check_module(nn.Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float64), {"q": x})
    report = gradcheck.check_gradients(lambda *arrays: ops.softmax_forward(*arrays), ops.softmax_backward, {"z": x})
    assert report.passed, report


def test_an_op_set_of_ones_own_may_name_its_arguments_otherwise():
    """The op set asks for the ops' signatures, not their parameter names: check_op passes the case's
    values in order, whatever the set's forward calls them."""
    def my_linear_forward(inputs, weight, bias):
        return ops.linear_forward(inputs, weight, bias)

    def my_relu_forward(values):
        return ops.relu_forward(values)

    with ops.using({"linear_forward": my_linear_forward, "relu_forward": my_relu_forward}):
        assert gradcheck.check_op("linear").passed and gradcheck.check_op("relu").passed


@pytest.mark.parametrize("forward, backward, name", [
    (3, ops.linear_backward, "forward"),
    (ops.linear_forward, "linear_backward", "backward"),
    (ops.linear_forward, None, "backward"),
])
def test_check_gradients_rejects_what_is_not_a_function(forward, backward, name):
    with raises(TypeError, "check_gradients", f"{name} must be a function", "got"):
        gradcheck.check_gradients(forward, backward, linear_inputs())


def test_check_gradients_rejects_a_backward_that_does_not_take_dout_and_cache():
    with raises(TypeError, "check_gradients", "backward", "(dout, cache)", "too many positional arguments"):
        gradcheck.check_gradients(refusing_forward, lambda dout: dout, {"x": np.ones(3)})


@pytest.mark.parametrize("inputs, error, words", [
    ([np.ones(3)], TypeError, ["inputs must be a dict", "list"]),
    ({}, ValueError, ["inputs must map argument names"]),
    ({0: np.ones(3)}, ValueError, ["inputs must map argument names (str)"]),
])
def test_check_gradients_rejects_inputs_that_are_no_dict_of_names(inputs, error, words):
    with raises(error, "check_gradients", *words):
        gradcheck.check_gradients(refusing_forward, ops.relu_backward, inputs)


@given(value=st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf"))),
       argument=st.sampled_from(["tol", "eps"]))
def test_check_gradients_rejects_tolerances_and_steps_that_are_not_positive(value, argument):
    with raises(ValueError, "check_gradients", argument, "finite number > 0"):
        gradcheck.check_gradients(refusing_forward, ops.relu_backward, {"x": np.ones(3)}, **{argument: value})


@pytest.mark.parametrize("keywords, error, argument", [
    ({"tol": "1e-6"}, TypeError, "tol"), ({"eps": None}, TypeError, "eps"),
    ({"seed": -1}, ValueError, "seed"), ({"seed": 1.5}, TypeError, "seed"), ({"name": 3}, TypeError, "name"),
])
def test_check_gradients_rejects_options_of_the_wrong_type_or_range(keywords, error, argument):
    with raises(error, "check_gradients", argument):
        gradcheck.check_gradients(refusing_forward, ops.relu_backward, {"x": np.ones(3)}, **keywords)


def test_check_gradients_rejects_a_dout_of_another_shape_and_a_forward_without_cache():
    x = {"x": np.random.default_rng(0).standard_normal((2, 3))}
    with raises(ValueError, "check_gradients", "dout", "(2, 3)", "got shape (3,)"):
        gradcheck.check_gradients(ops.relu_forward, ops.relu_backward, x, dout=np.ones(3))
    with raises(TypeError, "check_gradients", "forward must return a pair (out, cache)", "ndarray"):
        gradcheck.check_gradients(lambda x: x * 2, ops.relu_backward, x)
    with raises(ValueError, "check_gradients", "inputs", "floating array", "list"):
        gradcheck.check_gradients(lambda x: (x, None), ops.relu_backward, {"x": [1.0, 2.0]})


# -- gradcheck.numerical_gradient ------------------------------------------------------------


def test_numerical_gradient_rejects_outputs_that_are_no_function_of_nothing():
    x = backend.asarray(np.ones(3))
    with raises(TypeError, "numerical_gradient", "output must be a function"):
        gradcheck.numerical_gradient(x * 2, x, np.ones(3))
    with raises(TypeError, "numerical_gradient", "output", "missing a required argument: 'x'"):
        gradcheck.numerical_gradient(lambda x: x * 2, x, np.ones(3))


@pytest.mark.parametrize("x, error, words", [
    ([1.0, 2.0], TypeError, ["x must be a", "list"]),
    (np.ones(3, dtype=np.float32), TypeError, ["x must have dtype float64", "float32"]),
    (np.arange(3), TypeError, ["x must have a floating dtype", "int"]),
    (np.ones(3), ValueError, ["x must be a writable array", "read-only"]),
])
def test_numerical_gradient_rejects_an_x_it_cannot_perturb_in_place(x, error, words):
    x = backend.asarray(x) if isinstance(x, np.ndarray) else x
    if words[0] == "x must be a writable array":
        x = x.view()
        x.flags.writeable = False
    with raises(error, "numerical_gradient", *words):
        gradcheck.numerical_gradient(lambda: 1.0, x, np.ones(3))


def test_numerical_gradient_perturbs_a_view_where_it_lies():
    """A column block of a larger array (the fused q|k|v weight's views, ``nn.FusedLinear``): the
    differences reach the array the output reads, and the array is restored."""
    whole = backend.asarray(np.arange(12.0).reshape(3, 4))
    before = backend.to_numpy(whole).copy()
    block = whole[:, 1:3]                                  # (3, 2), neither C- nor F-contiguous
    assert not block.flags.c_contiguous
    grad = gradcheck.numerical_gradient(lambda: (whole**2).sum(), block, np.ones(()))
    np.testing.assert_allclose(backend.to_numpy(grad), 2 * before[:, 1:3], rtol=1e-8)
    np.testing.assert_array_equal(backend.to_numpy(whole), before)


def test_numerical_gradient_rejects_a_dout_the_output_does_not_have_and_bad_entries():
    x = backend.asarray(np.ones(3))
    with raises(ValueError, "numerical_gradient", "dout", "shape of output() (3,)", "got shape (2,)"):
        gradcheck.numerical_gradient(lambda: x * 2, x, np.ones(2))
    with raises(ValueError, "numerical_gradient", "entries", "[0, x.size = 3)", "[0, 5]"):
        gradcheck.numerical_gradient(lambda: x * 2, x, np.ones(3), entries=[0, 5])
    with raises(TypeError, "numerical_gradient", "entries", "int flat indices"):
        gradcheck.numerical_gradient(lambda: x * 2, x, np.ones(3), entries=[0.5])
    with raises(ValueError, "numerical_gradient", "eps", "> 0", "0"):
        gradcheck.numerical_gradient(lambda: x * 2, x, np.ones(3), eps=0.0)
    np.testing.assert_allclose(gradcheck.numerical_gradient(lambda: x * 2, x, np.ones(3)), [2, 2, 2])


# -- gradcheck.check_module, check_loss, check_model, model_case ------------------------------


def linear64():
    return nn.Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float64)


def test_check_module_rejects_what_is_not_a_module_and_inputs_its_forward_does_not_take():
    with raises(TypeError, "check_module", "module must be an npformer.nn.Module", "int"):
        gradcheck.check_module(3, {"x": np.ones((2, 3))})
    with raises(TypeError, "check_module", "inputs", "forward(x)", "too many positional arguments"):
        gradcheck.check_module(linear64(), {"x": np.ones((2, 3)), "y": np.ones((2, 3))})
    with raises(TypeError, "check_module", "inputs", "missing a required argument"):
        gradcheck.check_module(linear64(), {"x": np.ones((2, 3))}, forward=lambda x, mask: x)


@pytest.mark.parametrize("keywords, error, words", [
    ({"forward": "forward"}, TypeError, ["forward must be a function"]),
    ({"backward": 1}, TypeError, ["backward must be a function"]),
    ({"backward": lambda dout, cache: dout}, TypeError, ["backward", "missing a required argument: 'cache'"]),
    ({"max_entries": 0}, ValueError, ["max_entries", "int >= 1 or None", "0"]),
    ({"directions": 2.0}, TypeError, ["directions", "int >= 1 or None"]),
    ({"tol": -1e-6}, ValueError, ["tol", "> 0"]),
    ({"name": 7}, TypeError, ["name", "str or None"]),
])
def test_check_module_rejects_bad_options(keywords, error, words):
    with raises(error, "check_module", *words):
        gradcheck.check_module(linear64(), {"x": np.ones((2, 3))}, **keywords)


def test_check_module_still_asks_for_float64_parameters():
    with raises(TypeError, "check_module", "float64", "float32"):
        gradcheck.check_module(nn.Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float32), {"x": np.ones((2, 3))})


def test_check_loss_rejects_targets_smoothing_and_inputs_that_do_not_fit():
    x = {"x": np.ones((2, 3))}
    with raises(TypeError, "check_loss", "targets must be an integer array", "float64"):
        gradcheck.check_loss(linear64(), x, np.ones(2))
    with raises(ValueError, "check_loss", "label_smoothing", "[0, 1)", "1.5"):
        gradcheck.check_loss(linear64(), x, np.ones(2, dtype=np.int64), label_smoothing=1.5)
    with raises(TypeError, "check_loss", "ignore_index", "int or None"):
        gradcheck.check_loss(linear64(), x, np.ones(2, dtype=np.int64), ignore_index="pad")
    with raises(TypeError, "check_loss", "inputs", "forward(x)", "too many positional arguments"):
        gradcheck.check_loss(linear64(), {**x, "mask": None}, np.ones(2, dtype=np.int64))
    with raises(TypeError, "check_loss", "model must be an npformer.nn.Module"):
        gradcheck.check_loss(lambda x: x, x, np.ones(2, dtype=np.int64))


def test_check_model_and_model_case_reject_unknown_keywords_and_bad_sizes():
    with raises(TypeError, "check_model", "config", "closest: d_model", "'d_modle'"):
        gradcheck.check_model(d_modle=8)
    with raises(TypeError, "check_model", "config", "'fused'"):  # the attention blocks are always fused
        gradcheck.check_model(fused=True)
    with raises(ValueError, "model_case", "batch", "int >= 1", "0"):
        gradcheck.model_case(batch=0)
    with raises(TypeError, "model_case", "config", "closest: n_heads"):
        gradcheck.model_case(n_head=2)


# -- gradcheck.check_op, check_all_ops, the case builders, relative_error ----------------------


def test_check_op_offers_the_close_names_of_an_unknown_op():
    with raises(ValueError, "check_op", "name must be one of", "closest: softmax", "'sofmax'"):
        gradcheck.check_op("sofmax")


def test_check_op_rejects_sizes_its_case_does_not_take():
    with raises(TypeError, "check_op", "sizes", "linear_case(rng, batch=2", "unexpected keyword argument 'widht'"):
        gradcheck.check_op("linear", widht=3)
    with raises(ValueError, "linear_case", "batch", "int >= 1", "0"):
        gradcheck.check_op("linear", batch=0)
    with raises(ValueError, "check_op", "tol", "> 0"):
        gradcheck.check_op("linear", tol=0)


def test_check_all_ops_checks_every_name_before_running_any(monkeypatch):
    monkeypatch.setattr(gradcheck.cases, "check_gradients", refusing_forward)
    with raises(ValueError, "check_all_ops", "names", "closest: relu", "'rleu'"):
        gradcheck.check_all_ops(names=["linear", "rleu"])
    with raises(TypeError, "check_all_ops", "names", "list of op names or None", "str"):
        gradcheck.check_all_ops(names="linear")


@pytest.mark.parametrize("name", list(gradcheck.OP_CASES))
def test_every_case_builder_checks_its_generator(name):
    with raises(TypeError, "rng must be a numpy.random.Generator", "int 0"):
        gradcheck.OP_CASES[name](0)


@given(size=st.integers(max_value=0), which=st.sampled_from(["batch", "length", "width"]))
def test_case_builders_reject_sizes_below_one(size, which):
    with raises(ValueError, "relu_case", which, "int >= 1"):
        gradcheck.relu_case(np.random.default_rng(0), **{which: size})


def test_relative_error_rejects_tensors_of_two_shapes():
    with raises(ValueError, "relative_error", "analytic", "(2, 3)", "(3,)"):
        gradcheck.relative_error(np.ones(3), np.ones((2, 3)))


# -- course.check ----------------------------------------------------------------------------


def test_the_grader_offers_close_names_for_an_unknown_exercise():
    with raises(ValueError, "check", "name", "closest: layernorm_backward", "'layernorm_backwrd'"):
        check("layernorm_backwrd", lambda x, gamma, beta, dout: x)
    with pytest.raises(KeyError):  # also a KeyError, as EXERCISES[name] would raise
        check("layernorm_backwrd", lambda x, gamma, beta, dout: x)
    with raises(ValueError, "check", "name", "got 3"):
        check(3, lambda x: x)


@pytest.mark.parametrize("keywords, error, argument", [
    ({"student_fn": "relu_backward"}, TypeError, "student_fn must be a function"),
    ({"student_fn": None}, TypeError, "student_fn must be a function"),
    ({"seed": -1}, ValueError, "seed"),
    ({"unseen_seed": "7"}, TypeError, "unseen_seed"),
    ({"unseen_seed": -3}, ValueError, "unseen_seed"),
    ({"strict": 1}, TypeError, "strict"),
])
def test_the_grader_rejects_bad_arguments_before_grading(keywords, error, argument):
    arguments = {"student_fn": lambda x, dout: dout * (x > 0), **keywords}
    with raises(error, "check", argument):
        check("relu_backward", **arguments)


def test_a_student_function_with_the_wrong_arguments_is_graded_not_raised():
    report = check("relu_backward", lambda x: x, strict=False, unseen_seed=0)
    assert report.failed and "TypeError" in report.message
    assert "relu_backward" in EXERCISES


# -- viz -------------------------------------------------------------------------------------


def attention_maps(layers=2, heads=3, rows=4, columns=5, seed=0):
    return [np.random.default_rng(seed).dirichlet(np.ones(columns), size=(heads, rows)) for _ in range(layers)]


def tokens(n, prefix="t"):
    return [f"{prefix}{i}" for i in range(n)]


@contextlib.contextmanager
def draws_nothing():
    """No figure is created inside the block."""
    before = set(plt.get_fignums())
    yield
    assert set(plt.get_fignums()) == before


@settings(max_examples=25)
@given(rows=st.integers(1, 5), columns=st.integers(1, 5), n_rows=st.integers(0, 7), n_columns=st.integers(0, 7))
def test_attention_heatmaps_accepts_exactly_the_labels_that_fit(rows, columns, n_rows, n_columns):
    maps = attention_maps(1, 2, rows, columns)
    if 1 <= n_rows <= rows and 1 <= n_columns <= columns:
        viz.close(viz.attention_heatmaps(maps, tokens(n_rows), tokens(n_columns)))
        return
    bad = "query_tokens" if not 1 <= n_rows <= rows else "key_tokens"
    size = rows if bad == "query_tokens" else columns
    with draws_nothing(), raises(ValueError, "attention_heatmaps", bad, f"between 1 and {size} tokens"):
        viz.attention_heatmaps(maps, tokens(n_rows), tokens(n_columns))


@pytest.mark.parametrize("weights, rows, columns, error, words", [
    (attention_maps()[0], tokens(4), tokens(5), TypeError, ["weights must be a list over layers", "(3, 4, 5)"]),
    ([], tokens(4), tokens(5), ValueError, ["weights must hold at least one layer"]),
    ([np.ones((4, 5))], tokens(4), tokens(5), ValueError, ["weights[0] must have 3 dimensions", "(4, 5)"]),
    (attention_maps()[:1] + attention_maps(heads=2)[:1], tokens(4), tokens(5), ValueError,
     ["weights[1] must have the heads of weights[0], H = 3"]),
    ([[["a"]]], tokens(1), tokens(1), TypeError, ["weights[0] must be an array of numbers"]),
    (attention_maps(), "t0 t1 t2", tokens(5), TypeError, ["query_tokens must be a list of str tokens", "str"]),
    (attention_maps(), tokens(4), [1, 2, 3], TypeError, ["key_tokens must be a list of str tokens"]),
])
def test_attention_heatmaps_rejects_maps_and_labels_that_do_not_agree(weights, rows, columns, error, words):
    with draws_nothing(), raises(error, "attention_heatmaps", *words):
        viz.attention_heatmaps(weights, rows, columns)


BAD_FIGURES = {
    "training_curves: not a list": (lambda: viz.training_curves({"kind": "train"}), TypeError,
                                    ["records must be a list"]),
    "training_curves: a key missing": (lambda: viz.training_curves([{"kind": "eval", "step": 1, "valid_loss": 2.0}]),
                                       ValueError, ["records[0]", "valid_bleu"]),
    "training_curves: title": (lambda: viz.training_curves([], title=3), TypeError, ["title must be a str"]),
    "positional_encoding_figure": (lambda: viz.positional_encoding_figure(0, 16), ValueError, ["max_len", "int >= 1"]),
    "positional_encoding_figure: pairs": (lambda: viz.positional_encoding_figure(8, 16, pairs=(0, -1)), ValueError,
                                          ["pairs[1]", "int >= 0"]),
    "masks_figure: empty": (lambda: viz.masks_figure([]), ValueError, ["tokens must hold at least 1 token"]),
    "masks_figure: a sentence": (lambda: viz.masks_figure("le chat"), TypeError, ["tokens must be a list of str"]),
    "aer_heatmap: 1-D": (lambda: viz.aer_heatmap([0.1, 0.2]), ValueError, ["heads must have 2 dimensions", "(2,)"]),
    "aer_heatmap: ragged": (lambda: viz.aer_heatmap([[0.1, 0.2], [0.3]]), TypeError, ["heads must be an array"]),
    "gradcheck_chart": (lambda: viz.gradcheck_chart([1.0]), TypeError, ["report must be a gradcheck.GradcheckReport"]),
    "mutants_chart: lengths": (lambda: viz.mutants_chart(["a", "b"], [1.0]), ValueError, ["errors", "2 numbers"]),
    "mutants_chart: tolerances": (lambda: viz.mutants_chart(["a"], [1.0], tolerances=(0.0,)), ValueError,
                                  ["tolerances", "> 0"]),
    "alignment_figure: labels": (lambda: viz.alignment_figure([("head", np.ones((3, 2)))], tokens(3), tokens(2),
                                                              SimpleNamespace(sure={(0, 0)})),
                                 ValueError, ["source must hold between 1 and 2 tokens"]),
    "alignment_figure: gold": (lambda: viz.alignment_figure([("head", np.ones((3, 3)))], tokens(3), tokens(2),
                                                            SimpleNamespace(sure={(4, 0)})),
                               ValueError, ["gold's sure links", "[(4, 0)]"]),
    "alignment_figure: panels": (lambda: viz.alignment_figure([np.ones((3, 3))], tokens(3), tokens(2), None),
                                 TypeError, ["panels[0] must be a (name, scores) pair"]),
}


@pytest.mark.parametrize("case", list(BAD_FIGURES))
def test_every_figure_rejects_bad_input_before_drawing(case):
    call, error, words = BAD_FIGURES[case]
    with draws_nothing(), raises(error, case.split(":")[0], *words):
        call()


def test_a_path_whose_folder_cannot_be_created_is_refused_before_drawing(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    maps = attention_maps()
    with draws_nothing(), raises(ValueError, "attention_heatmaps", "path", "cannot be", "is a file"):
        viz.attention_heatmaps(maps, tokens(4), tokens(5), path=blocker / "figure.png")
    with draws_nothing(), raises(ValueError, "aer_heatmap", "path must name a file", "folder"):
        viz.aer_heatmap([[0.5]], path=tmp_path)
    with draws_nothing(), raises(TypeError, "aer_heatmap", "path must be a str or os.PathLike", "int"):
        viz.aer_heatmap([[0.5]], path=3)
    target = tmp_path / "new" / "folder" / "aer.png"  # a missing folder is created
    viz.close(viz.aer_heatmap([[0.5]], path=target))
    assert target.stat().st_size > 0


def explorer_sentence(maps=None, rows=None, columns=None):
    """One sentence for the explorer, with every kind it shows (whatever the kinds are called)."""
    kinds = getattr(viz, "EXPLORER_ORDER", None) or list(getattr(viz, "EXPLORER_KINDS", ()))
    maps = maps if maps is not None else attention_maps(2, 2, 4, 4)
    labels = (rows or tokens(4), columns or tokens(4))
    all_maps = {kind: maps for kind in kinds}
    return SimpleNamespace(sentence="le chat", translation="the cat", text="the cat", maps=all_maps,
                           attention=all_maps, labels={kind: labels for kind in kinds})


def test_the_explorer_rejects_labels_and_maps_that_do_not_fit(tmp_path):
    page = tmp_path / "page.html"
    with raises(ValueError, "attention_explorer", "row labels", "between 1 and 4 tokens", "got 6"):
        viz.attention_explorer(explorer_sentence(rows=tokens(6)), path=page)
    with raises(ValueError, "attention_explorer", "must have the heads of", "H = 2"):
        viz.attention_explorer([explorer_sentence(maps=attention_maps(1, 2, 4, 4) + attention_maps(1, 3, 4, 4))],
                               path=page)
    with raises(ValueError, "attention_explorer", "attentions", "no sentences"):
        viz.attention_explorer([])
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with raises(ValueError, "attention_explorer", "path", "is a file"):
        viz.attention_explorer(explorer_sentence(), path=blocker / "page.html")
    assert not page.exists()


def test_no_check_imports_matplotlib():
    """A refused call raises before Matplotlib is imported (``import npformer`` does not import it)."""
    code = ("import sys, npformer.viz as viz\n"
            "for call in (lambda: viz.aer_heatmap([1.0]), lambda: viz.attention_heatmaps([], ['a'], ['b']),\n"
            "             lambda: viz.masks_figure([]), lambda: viz.training_curves(3)):\n"
            "    try:\n        call()\n    except (TypeError, ValueError):\n        pass\n"
            "    else:\n        raise SystemExit('no error')\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
