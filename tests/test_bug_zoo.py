"""The bug zoo (npformer.course.zoo): every entry's symptom shows for its buggy function and not for
its fixed one; a buggy function put in the fixed slot turns the check red; the fixed functions are
what npformer computes; the crashes and the numbers the lesson explains; the two sanity checks."""

import math
from dataclasses import replace

import numpy as np
import pytest

from npformer import ops
from npformer.course import zoo
from npformer.nn import DecoderLayer, FeedForward, LayerNorm
from npformer.tokens import PAD_ID

BUGS = zoo.BUGS
IDS = [f"{bug.number:02d}" for bug in BUGS]


def check_entry(bug):
    """The zoo's promise for one entry: the symptom is above the threshold for the buggy function,
    and at or below it for the fixed one."""
    buggy, fixed = bug.measure(bug.buggy), bug.measure(bug.fixed)
    where = f"bug {bug.number} ({bug.name})"
    assert buggy > bug.threshold, f"{where}: no symptom in the buggy version: {buggy:.3g}"
    assert fixed <= bug.threshold, f"{where}: the fixed version has the symptom: {fixed:.3g}"


def test_the_zoo_holds_the_eleven_bugs_numbered_once():
    assert [bug.number for bug in BUGS] == list(range(1, 12))
    assert len({bug.name for bug in BUGS}) == 11
    assert all(bug.tutorial and bug.measures and bug.buggy is not bug.fixed for bug in BUGS)
    assert zoo.bug(8) is BUGS[7]
    with pytest.raises(ValueError, match="number must be one of 1..11"):
        zoo.bug(12)


@pytest.mark.parametrize("bug", BUGS, ids=IDS)
def test_the_symptom_shows_for_the_buggy_version_only(bug):
    check_entry(bug)
    assert bug.shows(bug.buggy) and not bug.shows(bug.fixed)


@pytest.mark.parametrize("bug", BUGS, ids=IDS)
def test_a_buggy_function_in_the_fixed_slot_turns_the_check_red(bug):
    with pytest.raises(AssertionError, match="the fixed version has the symptom"):
        check_entry(replace(bug, fixed=bug.buggy))


# -- the fixed versions are what npformer computes ---------------------------------------------------

def test_the_fixed_positional_table_is_npformers():
    np.testing.assert_allclose(zoo.positional_table_fixed(40, 12),
                               ops.positional_encoding(40, 12, dtype=np.float64), atol=1e-12)


def test_the_fixed_positions_go_by_position_and_the_buggy_ones_by_batch_row():
    table = ops.positional_encoding(16, 8, dtype=np.float64)
    x = np.random.default_rng(0).standard_normal((3, 5, 8))
    np.testing.assert_array_equal(zoo.add_positions_fixed(x, table), x + table[None, :5])
    np.testing.assert_array_equal(zoo.add_positions_buggy(x, table), x + table[:3, None, :])


def test_the_fixed_attention_is_npformers_and_the_buggy_one_crashes_when_lengths_differ():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 2, 3, 4))
    k, v = rng.standard_normal((2, 2, 2, 5, 4))  # five keys for three queries
    np.testing.assert_allclose(zoo.attention_fixed(q, k, v), ops.attention_forward(q, k, v)[0], atol=1e-12)
    with pytest.raises(ValueError):
        zoo.attention_buggy(q, k, v)


def test_the_fixed_scores_are_npformers_and_the_buggy_ones_agree_with_one_head_only():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 2, 4, 6, 8))
    _, cache = ops.attention_forward(q, k, v)
    weights, _ = ops.softmax_forward(zoo.scaled_scores_fixed(q, k))
    np.testing.assert_allclose(weights, cache["weights"], atol=1e-12)
    one_head = q[:, :1], k[:, :1]
    np.testing.assert_array_equal(zoo.scaled_scores_buggy(*one_head), zoo.scaled_scores_fixed(*one_head))
    # 4 heads: the buggy scores are the right ones divided by sqrt(4)
    np.testing.assert_allclose(zoo.scaled_scores_buggy(q, k), zoo.scaled_scores_fixed(q, k) / 2)


def test_the_fixed_cross_attention_mask_is_the_sources_and_the_buggy_one_crashes_when_lengths_differ():
    src_ids, tgt_ids = np.array([[5, 6, 7, 0]]), np.array([[1, 5, 0]])
    expected = [[[[True, True, True, False]]]]
    np.testing.assert_array_equal(zoo.cross_attention_mask_fixed(src_ids, tgt_ids), expected)
    q, k = np.ones((1, 1, 3, 2)), np.ones((1, 1, 4, 2))
    ops.attention_forward(q, k, k, zoo.cross_attention_mask_fixed(src_ids, tgt_ids))
    with pytest.raises(ValueError, match="mask must be broadcastable"):
        ops.attention_forward(q, k, k, zoo.cross_attention_mask_buggy(src_ids, tgt_ids))


def test_the_fixed_decoder_layer_is_npformers():
    rng = np.random.default_rng(0)
    layer = DecoderLayer(8, n_heads=2, d_ff=16, dropout=0.0, dropout_rng=rng, pre_norm=False,
                         activation="relu", rng=rng, dtype=np.float64)
    x, memory = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 3, 8))
    memory_mask = ops.padding_mask(np.array([[5, 6, 7], [5, 0, 0]]))
    expected = layer.forward(x, memory, ops.causal_mask(4), memory_mask)
    arguments = (layer, x, memory, ops.causal_mask(4), memory_mask)
    np.testing.assert_allclose(zoo.decoder_layer_fixed(*arguments), expected, atol=1e-12)
    assert np.abs(zoo.decoder_layer_buggy(*arguments) - expected).max() > 1e-3


def test_the_fixed_feed_forward_is_npformers_and_the_buggy_one_is_one_matrix():
    rng = np.random.default_rng(0)
    ffn = FeedForward(6, 24, rng=rng, dtype=np.float64)
    ffn.fc1.b[...] = rng.standard_normal(24)  # biases start at zero: make them count
    x = rng.standard_normal((10, 6))
    np.testing.assert_allclose(zoo.feed_forward_fixed(ffn, x), ffn.forward(x), atol=1e-12)
    W1, b1, W2, b2 = ffn.fc1.W, ffn.fc1.b, ffn.fc2.W, ffn.fc2.b
    np.testing.assert_allclose(zoo.feed_forward_buggy(ffn, x), x @ (W1 @ W2) + (b1 @ W2 + b2), atol=1e-12)


def test_the_fixed_layer_norm_is_npformers_and_the_buggy_one_has_mean_one_and_variance_d_minus_1_over_d():
    x = np.random.default_rng(0).standard_normal((50, 8)) * 4 + 3
    np.testing.assert_allclose(zoo.layer_norm_fixed(x), LayerNorm(8, dtype=np.float64).forward(x), atol=1e-12)
    y = zoo.layer_norm_buggy(x)
    np.testing.assert_allclose(y.mean(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 7 / 8, rtol=1e-5)


def test_the_fixed_loss_is_npformers_and_the_double_softmax_has_the_floor_ln_e_plus_v_minus_1_minus_1():
    rng = np.random.default_rng(0)
    logits, targets = rng.standard_normal((2, 3, 12)), rng.integers(1, 12, (2, 3))
    loss, cache = ops.cross_entropy_forward(logits, targets)
    assert zoo.loss_fixed(logits, targets)[0] == pytest.approx(float(loss))
    np.testing.assert_allclose(zoo.loss_fixed(logits, targets)[1], ops.cross_entropy_backward(1.0, cache))
    assert zoo.loss_floor(zoo.loss_buggy) == pytest.approx(math.log(math.e + 11) - 1, abs=1e-9)


def test_the_double_softmax_gradient_is_its_loss_gradient():
    """The buggy loss's gradient is right for the buggy loss (the bug is the model, not the calculus)."""
    rng = np.random.default_rng(0)
    logits, targets = rng.standard_normal((2, 3, 6)), rng.integers(1, 6, (2, 3))
    _, analytic = zoo.loss_buggy(logits, targets)
    numeric = np.zeros_like(logits)
    for index in np.ndindex(logits.shape):
        step = np.zeros_like(logits)
        step[index] = 1e-6
        plus, minus = zoo.loss_buggy(logits + step, targets)[0], zoo.loss_buggy(logits - step, targets)[0]
        numeric[index] = (plus - minus) / 2e-6
    np.testing.assert_allclose(analytic, numeric, atol=1e-8)


def test_the_accuracies_on_a_half_padded_batch():
    targets = zoo.padded_targets()
    assert (targets == PAD_ID).mean() == 0.5
    perfect = np.eye(12)[targets]
    assert zoo.accuracy_fixed(perfect, targets) == 1.0 == zoo.accuracy_buggy(perfect, targets)
    wrong = np.eye(12)[np.where(targets == PAD_ID, PAD_ID, 3)]  # <unk> for every real token
    assert zoo.accuracy_fixed(wrong, targets) == 0.0 and zoo.accuracy_buggy(wrong, targets) == 0.5


# -- bug 8 in full: the loss falls to about 0, generation fails ----------------------------------------

def test_the_unshifted_decoder_fits_its_training_data_and_cannot_generate():
    for pairs in (zoo.decoder_pairs_buggy, zoo.decoder_pairs_fixed):
        model, losses = zoo.train_reversal(pairs)
        assert losses[-1] < 0.05 < losses[0]
    buggy_model = zoo.train_reversal(zoo.decoder_pairs_buggy)[0]
    assert zoo.teacher_forced_and_generated(buggy_model, zoo.decoder_pairs_buggy) == (1.0, 0.0)
    fixed_model = zoo.train_reversal(zoo.decoder_pairs_fixed)[0]
    assert zoo.teacher_forced_and_generated(fixed_model, zoo.decoder_pairs_fixed)[1] > 0.9


def test_the_decoder_pairs():
    tgt = np.array([[1, 7, 8, 2]])
    tgt_in, tgt_out = zoo.decoder_pairs_fixed(tgt)
    np.testing.assert_array_equal(tgt_in, [[1, 7, 8]])
    np.testing.assert_array_equal(tgt_out, [[7, 8, 2]])
    assert all(part is tgt for part in zoo.decoder_pairs_buggy(tgt))


# -- the sanity checks ------------------------------------------------------------------------------

def test_the_loss_at_initialisation_is_near_ln_v_and_a_standard_normal_output_layer_is_not():
    V = zoo.SANITY_VOCAB
    src, tgt = zoo.reversal_batch(np.random.default_rng(3), 64, V)
    model = zoo.tiny_transformer(V)
    assert abs(zoo.loss_at_initialisation(model, src, tgt) - math.log(V)) < 0.5
    model.out_proj.W[...] = np.random.default_rng(4).standard_normal(model.out_proj.W.shape)
    assert zoo.loss_at_initialisation(model, src, tgt) - math.log(V) > 3


def test_a_tiny_model_overfits_one_batch_and_the_double_softmax_cannot():
    right, double_softmax = zoo.overfit_one_batch(zoo.loss_fixed), zoo.overfit_one_batch(zoo.loss_buggy)
    assert len(right) == 300 and right[-1] < 0.05
    floor = math.log(math.e + zoo.SANITY_VOCAB - 1) - 1
    assert min(double_softmax) > floor


def test_reversal_batches():
    src, tgt = zoo.reversal_batch(np.random.default_rng(0), 5, 12, length=3)
    assert src.shape == (5, 3) and tgt.shape == (5, 5)
    assert src.min() >= 4 and src.max() < 12
    np.testing.assert_array_equal(tgt[:, 1:-1], src[:, ::-1])
    assert (tgt[:, 0] == 1).all() and (tgt[:, -1] == 2).all()
