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


@pytest.mark.parametrize("options", [{"norm": "post"}, {"norm": "pre", "tie_embeddings": True}])
def test_the_students_whole_model_backward_gives_npformers_gradients(options):
    grads, calls = {}, {}
    walk = _counted(solution("transformer_backward"), calls, "transformer_backward")
    for label, op_set in (("npformer", "textbook"), ("student", {"transformer_backward": walk})):
        model, src, tgt_in, tgt_out = gradcheck.model_case(seed=4, dropout=0.0, **options)
        with ops.using(op_set):
            logits = model.forward(src, tgt_in)
            loss, cache = ops.current().cross_entropy_forward(logits, tgt_out)
            model.zero_grad()
            model.backward(ops.current().cross_entropy_backward(1.0, cache))
        grads[label] = {key: value.copy() for key, value in model.grads().items()}
    assert calls == {"transformer_backward": 1}
    for key, value in grads["npformer"].items():
        np.testing.assert_allclose(grads["student"][key], value, rtol=1e-10, atol=1e-12, err_msg=key)


def test_the_students_whole_model_backward_runs_the_packed_training_step():
    from npformer import optim
    from npformer.training import train_step

    losses = {}
    for label, op_set in (("npformer", "textbook"), ("student", {"transformer_backward": solution("transformer_backward")})):
        model, src, tgt_in, tgt_out = gradcheck.model_case(seed=5, dropout=0.0)
        optimizer = optim.Adam(model, lr=1e-2)
        with ops.using(op_set):
            losses[label] = [train_step(model, (src, tgt_in), tgt_out, optimizer, only_counted_targets=True).loss
                             for _ in range(3)]
    np.testing.assert_allclose(losses["student"], losses["npformer"], rtol=1e-10)


def test_a_whole_model_backward_that_forgets_the_scale_breaks_the_model_check():
    right = solution("transformer_backward")

    def unscaled(dlogits, *parts, d_model):
        return right(dlogits, *parts, 1)

    with ops.using({"transformer_backward": lambda *args: unscaled(*args[:-1], d_model=args[-1])}):
        report = gradcheck.check_model(seed=0, directions=1)
    failing = {row.tensor for row in report.results if not row.passed}
    assert failing == {"src_embed.W", "tgt_embed.W"}, failing
