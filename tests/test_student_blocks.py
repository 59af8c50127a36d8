"""A student's walks through a layer's blocks run the model: an op set's ``encoder_layer_backward``
(lesson 9) and ``decoder_backward`` (lesson 10) take the place of npformer's walks, and the model's
gradients are the same to rounding, post-norm and pre-norm; a wrong walk breaks the model check."""

import numpy as np
import pytest

from npformer import gradcheck, ops

from lesson_solutions import solution


def _counted(function, calls, name):
    def counted(*args):
        calls[name] = calls.get(name, 0) + 1
        return function(*args)
    return counted


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_students_walks_give_npformers_gradients(norm):
    grads = {}
    calls = {}
    walks = {name: _counted(solution(name), calls, name) for name in ("encoder_layer_backward", "decoder_backward")}
    for label, op_set in (("npformer", "textbook"), ("student", walks)):
        model, src, tgt_in, tgt_out = gradcheck.model_case(seed=3, dropout=0.0, norm=norm)
        with ops.using(op_set):
            logits = model.forward(src, tgt_in)
            loss, cache = ops.current().cross_entropy_forward(logits, tgt_out)
            model.zero_grad()
            model.backward(ops.current().cross_entropy_backward(1.0, cache))
        grads[label] = {key: value.copy() for key, value in model.grads().items()}
    assert calls == {"encoder_layer_backward": 2, "decoder_backward": 1}, calls  # two encoder layers, one decoder
    for key, value in grads["npformer"].items():
        np.testing.assert_allclose(grads["student"][key], value, rtol=1e-10, atol=1e-12, err_msg=key)


def test_a_walk_in_the_forward_order_breaks_the_model_check():
    right = solution("encoder_layer_backward")

    def first_block_first(dout, blocks, pre_norm):
        return right(dout, list(reversed(blocks)), pre_norm)

    with ops.using({"encoder_layer_backward": first_block_first}):
        report = gradcheck.check_model(seed=0, directions=1)
    assert not report.passed
    assert all(row.passed for row in report.results if not row.tensor.startswith(("encoder", "src_embed")))
