"""The gradient checker itself: it must catch wrong backward passes, not only bless right ones."""

import numpy as np
import pytest

from npformer import gradcheck, ops


def test_a_correct_backward_passes_and_the_report_is_readable(rng):
    report = gradcheck.check_gradients(
        ops.layernorm_forward, ops.layernorm_backward,
        {"x": rng.standard_normal((2, 3, 4)), "gamma": rng.standard_normal(4),
         "beta": rng.standard_normal(4)},
        name="layernorm",
    )
    assert report.passed
    table = str(report)
    for fragment in ("op", "tensor", "shape", "max rel error", "layernorm", "gamma",
                     "(2, 3, 4)", "pass", "3 tensors checked", "all passed"):
        assert fragment in table


def _layernorm_backward_without_the_variance_term(dy, cache):
    """A classic student mistake: forgetting that the variance depends on x."""
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True))
    return dx, (dy * x_hat).sum((0, 1)), dy.sum((0, 1))


def _softmax_backward_that_returns_zeros(dy, cache):
    return np.zeros_like(cache["y"])


@pytest.mark.parametrize("broken, forward, shapes, bad_tensor", [
    (_layernorm_backward_without_the_variance_term, ops.layernorm_forward,
     {"x": (2, 3, 4), "gamma": (4,), "beta": (4,)}, "x"),
    (_softmax_backward_that_returns_zeros, ops.softmax_forward, {"x": (2, 5)}, "x"),
])
def test_a_wrong_backward_fails(rng, broken, forward, shapes, bad_tensor):
    inputs = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    report = gradcheck.check_gradients(forward, broken, inputs, name="broken")
    assert not report.passed
    assert [r.tensor for r in report.failures] == [bad_tensor]
    assert "FAIL" in str(report) and "1 FAILED" in str(report)


def test_the_upstream_gradient_is_random_not_all_ones(rng):
    """With dout = 1 the gradient of sum(softmax(x)) is exactly zero, so a backward that
    returns zeros would pass; the checker's random dout must expose it."""
    x = rng.standard_normal((3, 4))
    y, cache = ops.softmax_forward(x)
    assert np.allclose(ops.softmax_backward(np.ones_like(y), cache), 0)  # the trap
    report = gradcheck.check_gradients(ops.softmax_forward, _softmax_backward_that_returns_zeros,
                                       {"x": x})
    assert report.failures and report.failures[0].max_rel_error == pytest.approx(1.0)


def test_wrong_count_shape_or_nan_gradients_fail_with_a_note(rng):
    x = {"x": rng.standard_normal((2, 3)), "W": rng.standard_normal((3, 4)),
         "b": rng.standard_normal(4)}
    too_few = gradcheck.check_gradients(ops.linear_forward, lambda d, c: ops.linear_backward(d, c)[:2], x)
    assert not too_few.passed and "returned 2 gradient(s), expected 3" in str(too_few)

    def transposed(d, c):
        dx, dW, db = ops.linear_backward(d, c)
        return dx, dW.T, db

    wrong_shape = gradcheck.check_gradients(ops.linear_forward, transposed, x)
    assert [r.tensor for r in wrong_shape.failures] == ["W"]
    assert "shape (4, 3), expected (3, 4)" in str(wrong_shape)

    nan = gradcheck.check_gradients(ops.relu_forward, lambda d, c: d * np.nan,
                                    {"x": rng.standard_normal(3) + 5})
    assert not nan.passed


def test_inputs_are_copied_to_float64_and_left_untouched(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    before = x.copy()
    report = gradcheck.check_gradients(ops.relu_forward, ops.relu_backward, {"x": x + 3})
    assert report.passed
    np.testing.assert_array_equal(x, before)


def test_numerical_gradient_of_a_known_function():
    x = np.array([1.0, 2.0, 3.0])
    dout = np.array([0.5, -1.0, 2.0])
    grad = gradcheck.numerical_gradient(lambda: x**3, x, dout)
    np.testing.assert_allclose(grad, 3 * x**2 * dout, rtol=1e-9)


def test_check_all_ops_covers_the_registry_and_passes():
    report = gradcheck.check_all_ops(seed=1)
    assert report.passed, report
    # Independent of the registry: every differentiable op of npformer.ops, named by its *_forward,
    # plus the variants (cross-attention, tanh-approximated GELU) the command promises.
    from npformer import ops

    expected = {name[: -len("_forward")] for name in ops.__all__ if name.endswith("_forward")}
    expected |= {"cross_attention", "gelu_tanh"}
    assert {r.op for r in report.results} == expected
    assert len(expected) >= 14


def test_check_op_rejects_unknown_names():
    with pytest.raises(ValueError, match="name must be one of"):
        gradcheck.check_op("convolution")


def test_the_base_models_options_are_all_ones_check_model_takes():
    """``npformer gradcheck --model --base`` passes ``base_sizes()`` to ``check_model``: every key must
    be a field of ``TransformerConfig`` or a size of ``model_case`` (a key left over from a removed
    option made the command fail before any work)."""
    import dataclasses

    from npformer.cli.gradcheck import base_sizes
    from npformer.models import TransformerConfig

    accepted = {field.name for field in dataclasses.fields(TransformerConfig)} | {"batch", "src_len", "tgt_len"}
    assert set(base_sizes()) <= accepted, set(base_sizes()) - accepted
