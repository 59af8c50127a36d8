"""Bad input raises ValueError/TypeError whose message names the argument,
what was expected and what was received."""

import contextlib

import numpy as np
import pytest

from npformer import backend, ops

F = np.float32


@contextlib.contextmanager
def raises(error, *fragments):
    """pytest.raises that also checks that every fragment appears in the message."""
    with pytest.raises(error) as info:
        yield info
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


def test_linear_rejects_mismatched_and_wrong_rank_shapes():
    x, W, b = np.zeros((2, 3, 4), F), np.zeros((5, 6), F), np.zeros(6, F)
    with raises(ValueError, "linear_forward", "x", "Din = 5", "(2, 3, 4)"):
        ops.linear_forward(x, W, b)
    with raises(ValueError, "W", "2 dimensions", "(4,)"):
        ops.linear_forward(x, np.zeros(4, F), b)
    with raises(ValueError, "b", "(6,)", "(5,)"):
        ops.linear_forward(np.zeros((2, 5), F), W, np.zeros(5, F))


def test_linear_rejects_lists_and_mixed_dtypes():
    with raises(TypeError, "x", "numpy array", "builtins.list"):
        ops.linear_forward([[1.0, 2.0]], np.zeros((2, 2), F))
    with raises(TypeError, "x=float64", "W=float32"):
        ops.linear_forward(np.zeros((1, 2)), np.zeros((2, 2), F))
    with raises(TypeError, "x", "floating dtype", "int64"):
        ops.linear_forward(np.zeros((1, 2), dtype=np.int64), np.zeros((2, 2), F))


def test_embedding_rejects_float_and_out_of_range_ids():
    W = np.zeros((10, 4), F)
    with raises(TypeError, "ids", "integer dtype", "float"):
        ops.embedding_forward(np.array([[1.0, 2.0]]), W)
    with raises(ValueError, "ids", "[0, 10)", "[3, 10]"):
        ops.embedding_forward(np.array([[3, 10]]), W)
    with raises(ValueError, "ids", "[0, 10)", "[-1, 2]"):
        ops.embedding_forward(np.array([[-1, 2]]), W)
    with raises(ValueError, "W", "2 dimensions", "(10,)"):
        ops.embedding_forward(np.array([[1]]), np.zeros(10, F))


def test_attention_rejects_wrong_ranks_shapes_and_masks():
    q, k = np.zeros((2, 4, 3, 8), F), np.zeros((2, 4, 5, 8), F)
    with raises(ValueError, "q", "4 dimensions", "(B, H, T, Dh)", "(4, 3, 8)"):
        ops.attention_forward(np.zeros((4, 3, 8), F), k, k)
    with raises(ValueError, "k", "(2, 4, Tk, 8)", "(2, 4, 5, 7)"):
        ops.attention_forward(q, np.zeros((2, 4, 5, 7), F), np.zeros((2, 4, 5, 7), F))
    with raises(ValueError, "v", "(B, H, Tk, Dv) = (2, 4, 5, Dv)", "(2, 4, 6, 8)"):
        ops.attention_forward(q, k, np.zeros((2, 4, 6, 8), F))
    with raises(ValueError, "mask", "(B, H, Tq, Tk) = (2, 4, 3, 5)", "(2, 1, 1, 6)"):
        ops.attention_forward(q, k, k, np.ones((2, 1, 1, 6), bool))
    with raises(ValueError, "mask", "(1, 2, 4, 3, 5)"):
        ops.attention_forward(q, k, k, np.ones((1, 2, 4, 3, 5), bool))
    with raises(TypeError, "mask", "boolean", "int64"):
        ops.attention_forward(q, k, k, np.ones((2, 1, 1, 5), dtype=np.int64))


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, float("nan"), "0.5", True])
def test_dropout_rejects_p_outside_zero_one(p):
    with raises(ValueError, "dropout_forward", "p", "[0, 1)"):
        ops.dropout_forward(np.zeros(3, F), p, backend.default_rng(0), True)


def test_dropout_needs_a_generator_when_training():
    with raises(TypeError, "rng", "Generator", "int"):
        ops.dropout_forward(np.zeros(3, F), 0.5, 42, True)


def test_layernorm_rejects_wrong_parameter_shapes():
    with raises(ValueError, "gamma", "(D,) = (4,)", "(3,)"):
        ops.layernorm_forward(np.zeros((2, 4), F), np.ones(3, F), np.zeros(4, F))
    with raises(ValueError, "eps", "> 0"):
        ops.layernorm_forward(np.zeros((2, 4), F), np.ones(4, F), np.zeros(4, F), eps=0.0)


def test_cross_entropy_rejects_bad_targets():
    logits = np.zeros((2, 3, 5), F)
    with raises(ValueError, "targets", "(2, 3)", "(2, 4)"):
        ops.cross_entropy_forward(logits, np.ones((2, 4), int))
    with raises(TypeError, "targets", "integer dtype", "float"):
        ops.cross_entropy_forward(logits, np.ones((2, 3)))
    with raises(ValueError, "targets", "[0, 5)", "[1, 7]"):
        ops.cross_entropy_forward(logits, np.array([[1, 7, 0], [2, 3, 4]]))
    with raises(ValueError, "label_smoothing", "[0, 1]", "1.5"):
        ops.cross_entropy_forward(logits, np.ones((2, 3), int), label_smoothing=1.5)


def test_softmax_and_activations_reject_bad_input():
    with raises(ValueError, "axis", "[-2, 2)", "2"):
        ops.softmax_forward(np.zeros((2, 3), F), axis=2)
    with raises(TypeError, "x", "floating dtype", "int"):
        ops.relu_forward(np.arange(3))
    with raises(ValueError, "approximate", "'fast'"):
        ops.gelu_forward(np.zeros(3, F), approximate="fast")


def test_helpers_reject_bad_sizes_and_ids():
    with raises(ValueError, "max_len", "positive int", "0"):
        ops.positional_encoding(0, 8)
    with raises(ValueError, "d_model", "positive int", "2.5"):
        ops.positional_encoding(4, 2.5)
    with raises(ValueError, "T", "positive int", "-1"):
        ops.causal_mask(-1)
    with raises(ValueError, "ids", "2 dimensions", "(B, T)", "(5,)"):
        ops.padding_mask(np.arange(5))
    with raises(TypeError, "ids", "integer dtype"):
        ops.padding_mask(np.zeros((2, 3)))
