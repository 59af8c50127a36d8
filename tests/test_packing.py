"""No work on padding: ``Transformer.forward_positions`` packs the real tokens (``nn.Packing``) and
must give the padded pass's logits and, after ``backward``, every gradient of it (float64)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer import backend, ops
from npformer.models import Transformer, TransformerConfig
from npformer.nn import Packing
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
    return float(loss), {name: grad.copy() for name, grad in model.grads().items()}, logits


def packed_step(model, src, tgt_in, tgt_out, label_smoothing):
    positions = tgt_out != PAD_ID
    logits = model.forward_positions(src, tgt_in, positions)
    loss, cache = ops.cross_entropy_forward(logits, tgt_out[positions], ignore_index=PAD_ID,
                                            label_smoothing=label_smoothing)
    model.zero_grad()
    model.backward(ops.cross_entropy_backward(1.0, cache))
    return float(loss), {name: grad.copy() for name, grad in model.grads().items()}, logits


def assert_packed_equals_padded(model, src, tgt, label_smoothing=0.0):
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    if not (tgt_out != PAD_ID).any():
        return
    loss, grads, logits = padded_step(model, src, tgt_in, tgt_out, label_smoothing)
    packed_loss, packed_grads, packed_logits = packed_step(model, src, tgt_in, tgt_out, label_smoothing)
    assert packed_loss == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(packed_logits, logits[tgt_out != PAD_ID], rtol=1e-11, atol=1e-13)
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
       tie=st.booleans(), label_smoothing=st.sampled_from([0.0, 0.1]))
def test_packed_step_equals_the_padded_step_on_drawn_batches(data, n_heads, norm, tie, label_smoothing):
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
    assert_packed_equals_padded(make_model(n_heads, norm, tie, seed=1), src, tgt, label_smoothing)


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
    """What saliency and the attention maps read after ``forward_positions``: the weights of every
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
    packed_logits = model.forward_positions(src, tgt_in, positions)
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
    packing = Packing(keep)
    packed = packing.pack(values)
    assert packed.shape == (1, 3, 1) and packed.ravel().tolist() == [0.0, 1.0, 6.0]
    np.testing.assert_array_equal(packing.unpack(packed), np.where(keep[..., None], values, 0.0))
    with pytest.raises(ValueError, match="boolean"):
        Packing(np.ones((2, 3), dtype=int))


def test_forward_positions_checks_positions_first():
    model = make_model(1, "post", False, seed=0)
    src = np.array([[4, 5]])
    with pytest.raises(ValueError, match="positions must be a boolean array shaped like tgt_in_ids"):
        model.forward_positions(src, np.array([[1, 4]]), np.array([[True]]))


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
