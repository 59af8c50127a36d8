"""The training step's fast path equals its textbook twin in float64: a ``Transformer`` run in the
packed layout (``forward(..., only_at=counted)``: the real tokens packed, only the counted targets
projected) gives the padded pass's logits and, after ``backward``, every gradient of it, on both op
sets; the fused q|k|v projections (``nn.FusedLinear``) equal three ``Linear`` calls, belong to the
attention block from its construction, and a step never changes the model's structure."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer import backend, ops
from npformer.models import Transformer, TransformerConfig
from npformer.nn import FusedLinear, Packed
from npformer.tokens import PAD_ID


def padded_ids(rng, lengths, width, vocab, first_id=4):
    """One row per length: ``length`` random word ids, then ``<pad>`` up to ``width``."""
    ids = np.full((len(lengths), width), PAD_ID)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(first_id, vocab, size=length)
    return ids


def make_model(n_heads, norm, tie, seed):
    config = TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=n_heads, d_ff=12, n_layers=2,
                               dropout=0.0, norm=norm, tie_embeddings=tie, max_len=16)
    return Transformer(config, seed=seed, dtype=np.float64)


def padded_step(model, src, tgt_in, tgt_out, label_smoothing):
    """The textbook step: every position computed, the padding ignored by the loss."""
    logits = model.forward(src, tgt_in)
    loss, cache = ops.cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID, label_smoothing=label_smoothing)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    return float(loss), {name: backend.to_numpy(grad).copy() for name, grad in model.grads().items()}, logits


def packed_step(model, src, tgt_in, tgt_out, label_smoothing):
    positions = tgt_out != PAD_ID
    logits = model.forward(src, tgt_in, only_at=positions)
    loss, cache = ops.cross_entropy_forward(logits, tgt_out[positions], ignore_index=PAD_ID,
                                            label_smoothing=label_smoothing)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    return float(loss), {name: backend.to_numpy(grad).copy() for name, grad in model.grads().items()}, logits


def assert_packed_equals_padded(model, src, tgt, label_smoothing=0.0, op_set="textbook"):
    """The padded step on the textbook set (the twin) against the packed step on ``op_set``."""
    src, tgt = backend.asarray(src), backend.asarray(tgt)  # on the active backend's device
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    if not (tgt_out != PAD_ID).any():
        return
    with ops.using("textbook"):
        loss, grads, logits = padded_step(model, src, tgt_in, tgt_out, label_smoothing)
    with ops.using(op_set):
        packed_loss, packed_grads, packed_logits = packed_step(model, src, tgt_in, tgt_out, label_smoothing)
    assert packed_loss == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(backend.to_numpy(packed_logits), backend.to_numpy(logits[tgt_out != PAD_ID]),
                               rtol=1e-11, atol=1e-13)
    for name, grad in grads.items():
        np.testing.assert_allclose(packed_grads[name], grad, rtol=1e-9, atol=1e-12, err_msg=name)


def sentence_pairs(rng, batch, src_width, tgt_width, src_lengths, tgt_lengths):
    """Sources of the given lengths (0: a fully padded row); targets ``<bos> words <eos>`` padded."""
    src = padded_ids(rng, src_lengths, src_width, 11)
    tgt = padded_ids(rng, [length + 2 for length in tgt_lengths], tgt_width + 1, 13)
    for row, length in enumerate(tgt_lengths):
        tgt[row, 0], tgt[row, length + 1] = 1, 2  # <bos>, <eos>
    return src, tgt


@settings(deadline=None, max_examples=40)
@given(data=st.data(), n_heads=st.sampled_from([1, 2]), norm=st.sampled_from(["post", "pre"]),
       tie=st.booleans(), label_smoothing=st.sampled_from([0.0, 0.1]), op_set=st.sampled_from(["textbook", "fast"]))
def test_packed_step_equals_the_padded_step_on_drawn_batches(data, n_heads, norm, tie, label_smoothing, op_set):
    """Batches drawn by hypothesis: one sentence or several, length 1, rows of no padding and rows of
    mostly padding, a fully padded source row; every gradient equal in float64."""
    batch = data.draw(st.integers(1, 4), label="batch")
    src_width = data.draw(st.integers(1, 7), label="source width")
    tgt_width = data.draw(st.integers(2, 7), label="target width")
    src_lengths = data.draw(st.lists(st.integers(0, src_width), min_size=batch, max_size=batch), label="src lengths")
    tgt_lengths = data.draw(st.lists(st.integers(0, tgt_width - 1), min_size=batch, max_size=batch),
                            label="tgt lengths")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    src, tgt = sentence_pairs(rng, batch, src_width, tgt_width, src_lengths, tgt_lengths)
    assert_packed_equals_padded(make_model(n_heads, norm, tie, seed=1), src, tgt, label_smoothing, op_set)


@pytest.mark.parametrize("padding", ["heavy", "none"])
def test_packed_step_equals_the_padded_step_with_heavy_padding_and_none(padding):
    rng = np.random.default_rng(0)
    batch, width = 6, 7
    if padding == "heavy":  # most rows one or two words in a width of seven, one source fully padded
        src_lengths, tgt_lengths = [1, 2, 0, 7, 1, 2], [0, 1, 2, 5, 1, 1]
    else:
        src_lengths, tgt_lengths = [width] * batch, [width - 1] * batch
    src, tgt = sentence_pairs(rng, batch, width, width, src_lengths, tgt_lengths)
    if padding == "none":
        assert (src != PAD_ID).all() and (tgt != PAD_ID).all()
    assert_packed_equals_padded(make_model(2, "post", False, seed=2), src, tgt)


def test_attention_and_input_gradients_at_real_positions_equal_the_padded_pass():
    """What saliency and the attention maps read after the packed forward: the weights of every
    real query, and the gradients of the embedded inputs, zero at the padding."""
    rng = np.random.default_rng(3)
    src, tgt = sentence_pairs(rng, 3, 5, 5, [5, 2, 3], [4, 1, 2])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    positions = tgt_out != PAD_ID
    model = make_model(2, "post", False, seed=4)
    logits = model.forward(src, tgt_in)
    padded_maps = model.attention_maps()
    d_src, d_tgt = model.backward_to_inputs(np.where(positions[..., None], logits, 0.0))
    model.zero_grad()
    packed_logits = model.forward(src, tgt_in, only_at=positions)
    packed_maps = model.attention_maps()
    packed_d_src, packed_d_tgt = model.backward_to_inputs(packed_logits)
    np.testing.assert_allclose(packed_d_src, d_src, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(packed_d_tgt, d_tgt, rtol=1e-10, atol=1e-13)
    real_queries = {"encoder": src != PAD_ID, "decoder": tgt_in != PAD_ID, "cross": tgt_in != PAD_ID}
    for kind, rows in real_queries.items():
        for padded, packed in zip(padded_maps[kind], packed_maps[kind]):
            for head in range(padded.shape[1]):
                np.testing.assert_allclose(packed[:, head][rows], padded[:, head][rows], rtol=1e-11, atol=1e-14)


def test_packing_keeps_the_real_tokens_in_reading_order_and_unpacks_with_zeros():
    keep = np.array([[True, True, False], [False, False, False], [True, False, False]])
    values = np.arange(9.0).reshape(3, 3, 1)
    packing = Packed(keep)
    packed = packing.pack(values)
    assert packed.shape == (1, 3, 1) and packed.ravel().tolist() == [0.0, 1.0, 6.0]
    np.testing.assert_array_equal(packing.unpack(packed), np.where(keep[..., None], values, 0.0))
    with pytest.raises(ValueError, match="boolean"):
        Packed(np.ones((2, 3), dtype=int))


def test_the_packed_forward_checks_its_inputs_first():
    model = make_model(1, "post", False, seed=0)
    src = np.array([[4, 5]])
    with pytest.raises(ValueError, match="only_at must be a boolean array shaped like tgt_in_ids"):
        model.forward(src, np.array([[1, 4]]), only_at=np.array([[True]]))


def test_the_training_step_runs_packed_in_float32():
    """The step the trainer takes (``only_counted_targets``) stays float32 on the packed layout."""
    from npformer import optim
    from npformer.training import train_step

    rng = np.random.default_rng(5)
    src, tgt = sentence_pairs(rng, 4, 6, 6, [6, 1, 3, 0], [5, 0, 2, 3])
    config = TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=12, n_layers=1, dropout=0.1)
    model = Transformer(config, seed=0)
    result = train_step(model, (backend.asarray(src), backend.asarray(tgt[:, :-1])), backend.asarray(tgt[:, 1:]),
                        optim.Adam(model), only_counted_targets=True)
    assert np.isfinite(result.loss)
    assert all(grad.dtype == np.float32 for grad in model.grads().values())


def test_a_subclass_that_changes_the_embedding_is_packed_after_it():
    """``_embed`` runs on the padded ids and is packed after it, so a subclass that changes it (lesson
    05's learned positions) trains through the packed step with its own embedding."""

    class DoubledPositions(Transformer):
        def _embed(self, ids, table, dropout, start=0):
            x = table.forward(ids) * self.embed_scale
            return dropout.forward(x + 2.0 * self.positions[start:start + ids.shape[1]])

    config = TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=12, n_layers=1, dropout=0.0)
    src, tgt = sentence_pairs(np.random.default_rng(6), 3, 5, 5, [5, 2, 0], [4, 1, 2])
    assert_packed_equals_padded(DoubledPositions(config, seed=3, dtype=np.float64), src, tgt)


# -- the fused projections --------------------------------------------------------------------------

def _linears(count, seed=0, d_in=6, d_out=4):
    from npformer import nn

    rng = np.random.default_rng(seed)
    layers = tuple(nn.Linear(d_in, d_out, rng=rng, dtype=np.float64) for _ in range(count))
    for layer in layers:
        layer.b[...] = backend.asarray(rng.standard_normal(d_out))
    return layers


@pytest.mark.parametrize("layers", [slice(0, 3), slice(0, 1), slice(1, 3)])
@pytest.mark.parametrize("op_set", ["textbook", "fast"])
def test_fused_projections_equal_one_linear_call_each(layers, op_set):
    """All three, the query's alone and cross-attention's k|v: one product each, the twins' numbers."""
    rng = np.random.default_rng(7)
    count = layers.stop - layers.start
    x, dy = backend.asarray(rng.standard_normal((2, 5, 6))), backend.asarray(rng.standard_normal((2, 5, 4 * count)))
    linears, twins = _linears(3), _linears(3)
    with ops.using("textbook"):
        chosen = twins[layers]
        expected = np.concatenate([backend.to_numpy(twin.forward(x)) for twin in chosen], axis=-1)
        expected_dx = sum(backend.to_numpy(twin.backward(dy[..., 4 * i:4 * (i + 1)])) for i, twin in enumerate(chosen))
    with ops.using(op_set):
        fused = FusedLinear(linears)
        y, cache = fused.forward(x, layers)
        dx = fused.backward(dy, cache, layers)
    np.testing.assert_allclose(backend.to_numpy(y), expected, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(backend.to_numpy(dx), expected_dx, rtol=1e-12, atol=1e-13)
    for layer, twin in zip(linears, twins):
        for key in ("W", "b"):
            np.testing.assert_allclose(backend.to_numpy(layer.grad[key]), backend.to_numpy(twin.grad[key]),
                                       rtol=1e-12, atol=1e-13)


def test_the_layers_parameters_are_views_of_one_weight():
    """The layers' W, b and gradients are views of the fused arrays, so an optimizer's in-place
    update, load_state_dict and the textbook Linear all see one set of numbers."""
    from npformer import optim

    layers = _linears(3, seed=1)
    values = [layer.W.copy() for layer in layers]
    fusion = FusedLinear(layers)
    for layer, value in zip(layers, values):
        assert layer.W.base is fusion.weight and layer.grad["W"].base is fusion.weight_grad
        np.testing.assert_array_equal(layer.W, value)                # same values, same names
    fusion.weight_grad[...] = 1.0
    optimizer = optim.SGD(layers[1], lr=0.5)
    optimizer.step()                                                  # in place, through the view
    np.testing.assert_allclose(fusion.weight[:, 4:8], values[1] - 0.5)
    layers[2].load_state_dict({"W": np.zeros((6, 4)), "b": np.zeros(4)})
    assert not fusion.weight[:, 8:].any()


def test_a_step_never_changes_the_model_and_a_copy_keeps_its_fusion():
    """The attention block owns its fused q|k|v from construction: a fast training step rebinds no
    parameter (every array is the one it was), and a deep copy's q, k, v are views of the copy's own
    fused weight, so training the copy trains what it computes with."""
    import copy

    from npformer import optim
    from npformer.training import train_step

    rng = np.random.default_rng(9)
    src, tgt = sentence_pairs(rng, 3, 5, 5, [5, 2, 3], [4, 1, 2])
    model = make_model(2, "post", False, seed=6)
    block = model.encoder.layers[0].self_attn
    assert block.q.W.base is block.qkv.weight and block.v.grad["b"].base is block.qkv.bias_grad
    arrays = {key: id(value) for key, value in {**model.params(), **model.grads()}.items()}
    train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.Adam(model), only_counted_targets=True)
    assert {key: id(value) for key, value in {**model.params(), **model.grads()}.items()} == arrays
    twin = copy.deepcopy(model).encoder.layers[0].self_attn
    assert twin.k.W.base is twin.qkv.weight and twin.qkv.weight is not block.qkv.weight
    np.testing.assert_array_equal(twin.qkv.weight, block.qkv.weight)


def test_a_training_step_on_the_fast_path_keeps_the_model_equal_to_its_textbook_twin():
    """Three Adam steps through ``train_step(only_counted_targets=True)`` (packed, fast ops) and
    through the textbook step (padded, textbook ops): the same losses and weights."""
    from npformer import optim
    from npformer.training import train_step

    rng = np.random.default_rng(8)
    src, tgt = sentence_pairs(rng, 4, 6, 6, [6, 1, 3, 0], [5, 0, 2, 3])
    results = {}
    for fast_path, op_set in ((False, "textbook"), (True, "fast")):
        model = make_model(2, "pre", True, seed=5)
        optimizer = optim.Adam(model, lr=1e-2)
        with ops.using(op_set):
            losses = [train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer,
                                 only_counted_targets=fast_path).loss for _ in range(3)]
        results[fast_path] = losses, model.params()
    np.testing.assert_allclose(results[True][0], results[False][0], rtol=1e-10)
    for key, value in results[False][1].items():
        np.testing.assert_allclose(results[True][1][key], value, rtol=1e-8, atol=1e-10, err_msg=key)


def test_decode_reads_the_layout_from_the_memory_it_is_given():
    """``decode`` takes the memory's layout from its shape, not from whichever ``encode`` ran last."""
    rng = np.random.default_rng(10)
    src_a, tgt = sentence_pairs(rng, 2, 5, 5, [5, 2], [4, 1])
    src_b, _ = sentence_pairs(rng, 2, 5, 5, [3, 5], [4, 1])
    tgt_in = tgt[:, :-1]
    only = tgt[:, 1:] != PAD_ID
    model = make_model(2, "post", False, seed=7)
    expected = model.forward(src_a, tgt_in)
    for packed, only_at in ((True, only), (False, None), (True, None), (False, only)):
        memory, mask = model.encode(src_a, packed=packed)
        model.encode(src_b, packed=not packed)                      # another pass in between
        logits = model.decode(tgt_in, memory, mask, only_at=only_at)
        np.testing.assert_allclose(logits, expected if only_at is None else expected[only], rtol=1e-11, atol=1e-13)


def test_cross_attention_over_given_heads_has_no_backward():
    """Decoding's cross-attention reads keys and values computed once: its backward says so rather
    than sending gradients from an earlier memory."""
    from npformer import nn

    rng = np.random.default_rng(11)
    block = nn.MultiHeadAttention(8, 2, rng=rng, dtype=np.float64)
    query, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 4, 8))
    with pytest.raises(nn.BackwardBeforeForwardError):
        block.backward(query)
    block.backward(block.forward(query, memory))                     # a full pass: fine
    block.forward(query, None, memory_heads=block.project_keys_values(memory))
    with pytest.raises(RuntimeError, match="memory_heads"):
        block.backward(query)


def test_a_built_in_set_runs_the_blocks_own_residual_rules():
    """``ops.using("textbook")`` inside a student's set runs the blocks' own rules: a reference is
    never computed with the student's ``residual_backward``."""
    from npformer import nn

    calls = []

    def mine(*args):
        calls.append(1)
        return nn.residual_backward(*args)

    layer = nn.EncoderLayer(8, n_heads=2, d_ff=12, dropout=0.0, dropout_rng=None, pre_norm=False,
                            activation="relu", rng=np.random.default_rng(0), dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((1, 3, 8))
    with ops.using({"residual_backward": mine}, name="yours"):
        layer.backward(layer.forward(x, None))
        assert len(calls) == 2 and ops.active()["residual_backward"] == "yours"
        with ops.using("textbook"):
            layer.backward(layer.forward(x, None))
            assert "residual_backward" not in ops.active()
    assert len(calls) == 2
