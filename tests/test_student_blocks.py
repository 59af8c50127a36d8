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


def _model_gradients(op_set, seed, **options):
    """Every parameter's gradient of a tiny model's loss, computed under ``op_set``."""
    model, src, tgt_in, tgt_out = gradcheck.model_case(seed=seed, dropout=0.0, **options)
    with ops.using(op_set):
        logits = model.forward(src, tgt_in)
        loss, cache = ops.current().cross_entropy_forward(logits, tgt_out)
        model.zero_grad()
        model.backward(ops.current().cross_entropy_backward(1.0, cache))
    return {key: value.copy() for key, value in model.grads().items()}


def _assert_same_gradients(ours, npformers):
    for key, value in npformers.items():
        np.testing.assert_allclose(ours[key], value, rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_students_walks_give_npformers_gradients(norm):
    grads = {}
    calls = {}
    walks = {name: _counted(solution(name), calls, name) for name in ("encoder_layer_backward", "decoder_backward")}
    for label, op_set in (("npformer", "textbook"), ("student", walks)):
        grads[label] = _model_gradients(op_set, 3, norm=norm)
    assert calls == {"encoder_layer_backward": 2, "decoder_backward": 1}, calls  # two encoder layers, one decoder
    _assert_same_gradients(grads["student"], grads["npformer"])


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
        grads[label] = _model_gradients(op_set, 4, **options)
    assert calls == {"transformer_backward": 1}
    _assert_same_gradients(grads["student"], grads["npformer"])


def test_a_whole_model_backward_that_forgets_the_scale_breaks_the_model_check():
    right = solution("transformer_backward")

    def unscaled(dlogits, *parts, d_model):
        return right(dlogits, *parts, 1)

    with ops.using({"transformer_backward": lambda *args: unscaled(*args[:-1], d_model=args[-1])}):
        report = gradcheck.check_model(seed=0, directions=1)
    failing = {row.tensor for row in report.results if not row.passed}
    assert failing == {"src_embed.W", "tgt_embed.W"}, failing


def _student_attention(function):
    from npformer.course.op_adapters import ops_from

    return ops_from({"multi_head_attention_backward": function})


@pytest.mark.parametrize("options", [{"norm": "post"}, {"norm": "pre", "tie_embeddings": True}])
def test_the_students_multi_head_attention_gives_npformers_gradients(options):
    """Lesson 08's backward, which has no biases, runs every attention block (the biases as rows of ones)."""
    grads, calls = {}, {}
    rule = _student_attention(_counted(solution("multi_head_attention_backward"), calls, "mha"))
    for label, op_set in (("npformer", "textbook"), ("student", rule)):
        grads[label] = _model_gradients(op_set, 6, **options)
    assert calls == {"mha": 2 + 2 * 2}, calls  # two encoder layers (self), two decoder layers (self, cross)
    _assert_same_gradients(grads["student"], grads["npformer"])


@pytest.mark.parametrize("students", [
    lambda: {"transformer_backward": solution("transformer_backward")},
    lambda: _student_attention(solution("multi_head_attention_backward"))], ids=["whole model", "attention"])
def test_the_students_backward_runs_the_packed_training_step(students):
    from npformer import optim
    from npformer.training import train_step

    losses = {}
    for label, op_set in (("npformer", "textbook"), ("student", students())):
        model, src, tgt_in, tgt_out = gradcheck.model_case(seed=5, dropout=0.0)
        optimizer = optim.Adam(model, lr=1e-2)
        with ops.using(op_set):
            losses[label] = [train_step(model, (src, tgt_in), tgt_out, optimizer, only_counted_targets=True).loss
                             for _ in range(3)]
    np.testing.assert_allclose(losses["student"], losses["npformer"], rtol=1e-10)


def test_a_multi_head_attention_without_the_output_transpose_breaks_the_model_check():
    right = solution("multi_head_attention_backward")

    def without_wo_transpose(query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout):
        return right(query, memory, Wq, Wk, Wv, Wo.T, n_heads, mask, dout)[:5] + (right(
            query, memory, Wq, Wk, Wv, Wo, n_heads, mask, dout)[5],)

    with ops.using(_student_attention(without_wo_transpose)):
        report = gradcheck.check_model(seed=0, directions=1)
    failing = {row.tensor for row in report.results if not row.passed}
    # every attention block's input projections are wrong; the last block's output projection is not
    assert {f"encoder.layers.{i}.self_attn.{name}.W" for i in (0, 1) for name in "qkv"} <= failing, failing
    assert "decoder.layers.1.cross_attn.o.W" not in failing, failing


@pytest.mark.parametrize("variant", ["alibi", "scaled-by-d"])
def test_a_students_attention_variant_decodes_with_the_scores_its_training_saw(variant):
    """Cached decoding hands attention one query at a time; a variant that reads positions (ALiBi) is given
    the query's own (``ops.queries_from``), so every step's logits are the full pass's at that position."""
    from npformer.course.op_adapters import ops_from
    from npformer.course.student_variants import with_variants

    op_set = with_variants(ops_from({"attention_backward": solution("attention_backward")}),
                           {"attention_backward": variant})
    model, src, tgt_in, _ = gradcheck.model_case(seed=8, dropout=0.0, batch=1)
    with ops.using(op_set), model.evaluating():
        full = model.forward(src, tgt_in)[0]                                    # (T, V)
        cache = model.start_decoding(src)
        steps = np.stack([model.decode_step(cache, tgt_in[:, t])[0] for t in range(tgt_in.shape[1])])
    np.testing.assert_allclose(steps, full, rtol=1e-9, atol=1e-12)
    with ops.using("textbook"), model.evaluating():
        assert np.abs(model.forward(src, tgt_in)[0] - full).max() > 1e-3   # the variant changed the model
