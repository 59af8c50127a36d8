"""The op set: ``npformer.ops.<name>`` is always the textbook function of ``ops/<name>.py``, and the
set that the blocks, the loss and the optimizer run is a value of the context, set by ``ops.using``."""

import inspect
import pathlib
import threading

import numpy as np
import pytest

from npformer import ops, optim, threads
from npformer.models import Transformer, TransformerConfig
from npformer.ops import fast, linear
from npformer.tokens import PAD_ID

OPS_FOLDER = pathlib.Path(ops.__file__).parent


def _small_model(seed=0):
    return Transformer(TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=8, n_heads=2, d_ff=16,
                                         n_layers=1, dropout=0.0), seed=seed, dtype=np.float64)


def _batch():
    rng = np.random.default_rng(1)
    src, tgt = rng.integers(4, 11, (2, 5)), rng.integers(4, 13, (2, 6))
    src[1, 3:] = PAD_ID
    return src, tgt


def _assert_names_are_textbook():
    """Every op name is its textbook function; the residual rules a set may bring are the blocks'
    (``nn/residual.py``), never an op, and no built-in set defines them."""
    for name in ops.RULE_NAMES:
        assert not hasattr(ops, name) and not hasattr(ops.current(), name)
    for name in set(ops.OP_NAMES) - set(ops.RULE_NAMES):
        path = pathlib.Path(inspect.getsourcefile(getattr(ops, name)))
        assert path.parent == OPS_FOLDER and path.name != "switch.py", f"ops.{name} is {path}"


def test_every_public_op_name_is_its_textbook_function_whatever_set_runs():
    from npformer.training import train_step

    _assert_names_are_textbook()
    assert inspect.getsourcefile(ops.layernorm_forward) == str(OPS_FOLDER / "layernorm.py")
    with ops.using("fast"):
        _assert_names_are_textbook()
        assert ops.current().layernorm_forward is fast.layernorm_forward
    model, (src, tgt) = _small_model(), _batch()
    train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.Adam(model))  # the default set
    _assert_names_are_textbook()
    with ops.using({"linear_forward": print}, name="odd"):
        assert ops.linear_forward is linear.linear_forward


def test_the_built_in_sets_and_what_active_reports():
    with ops.using("textbook"):
        assert ops.current().linear_forward is linear.linear_forward
        assert set(ops.active().values()) == {"textbook"}
    with ops.using("fast"):
        assert ops.current().linear_forward is fast.linear_forward
        assert ops.active()["linear_forward"] == "fast" and ops.active()["relu_forward"] == "textbook"
    assert ops.active()["linear_forward"] == ops.DEFAULT  # nothing set here: the default


def test_using_reaches_every_block_the_loss_and_the_optimizer_at_call_time():
    from npformer.training import train_step

    model, (src, tgt) = _small_model(), _batch()
    optimizer = optim.Adam(model)  # made before the switch: it must still pick up the new ops
    calls = {}

    def counted(name):
        original = getattr(ops.current(), name)

        def call(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return original(*args, **kwargs)
        return call

    counting = {name: counted(name) for name in set(ops.OP_NAMES) - set(ops.RULE_NAMES)
                if name != "positional_encoding"}
    with ops.using(counting, name="counting"):
        assert set(ops.active().values()) == {"counting", ops.active()["positional_encoding"]}
        train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer)
    for name in ("embedding_forward", "embedding_backward", "linear_forward", "linear_backward",
                 "layernorm_forward", "layernorm_backward", "attention_forward", "attention_backward",
                 "relu_forward", "relu_backward", "cross_entropy_forward", "cross_entropy_backward",
                 "padding_mask", "causal_mask", "adam_step", "dropout_forward", "dropout_backward"):
        assert calls.get(name, 0) > 0, f"{name} was not called through the active set"
    assert ops.active()["linear_forward"] == ops.DEFAULT  # restored on exit


def test_npformers_worker_threads_run_the_callers_set(monkeypatch):
    """Adam splits its parameters over npformer's threads: each group must use the caller's update."""
    model = _small_model()
    for grad in model.grads().values():
        grad[...] = 1.0
    optimizer = optim.Adam(model)
    monkeypatch.setattr(threads, "_threads", 2)
    seen = []

    def adam_step(*args):
        seen.append(threading.current_thread().name)
        return ops.adam_step(*args)

    with ops.using({"adam_step": adam_step}, name="mine"):
        optimizer.step()
    assert len(seen) == len(model.params())
    assert any(name.startswith("npformer") for name in seen), "no group ran on a worker thread"


def test_two_threads_run_two_sets_at_once():
    """Each thread trains its own model under its own set, meeting in the middle of the step; each
    gets the results of its set alone (the set is a value of the thread's context, not of the process)."""
    from npformer.training import train_step

    def linear_forward_times_two(x, W, b):
        y, cache = ops.linear_forward(x, W, b)
        return 2 * y, cache

    sets = {"textbook": "textbook", "doubled": {"linear_forward": linear_forward_times_two}}
    both_inside = threading.Barrier(2, timeout=30)
    losses, errors = {}, []

    def run(label):
        try:
            model, (src, tgt) = _small_model(), _batch()
            with ops.using(sets[label], name=label):
                model.forward(src, tgt[:, :-1])
                both_inside.wait()  # both sets are in force at this moment
                losses[label] = train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.SGD(model, lr=0.0)).loss
                losses[label + " labels"] = set(ops.active().values())
        except Exception as error:  # noqa: BLE001 -- reported below
            errors.append(error)

    workers = [threading.Thread(target=run, args=(label,)) for label in sets]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, errors
    model, (src, tgt) = _small_model(), _batch()
    with ops.using("textbook"):
        expected_plain = train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.SGD(model, lr=0.0)).loss
    with ops.using({"linear_forward": linear_forward_times_two}):
        expected_doubled = train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optim.SGD(model, lr=0.0)).loss
    assert expected_plain != pytest.approx(expected_doubled)
    assert losses["textbook"] == pytest.approx(expected_plain, rel=1e-12)
    assert losses["doubled"] == pytest.approx(expected_doubled, rel=1e-12)
    assert losses["textbook labels"] == {"textbook"} and "doubled" in losses["doubled labels"]


def test_both_sets_train_the_same_model():
    from npformer.training import train_step

    results = {}
    for impl in ("textbook", "fast"):
        model, (src, tgt) = _small_model(), _batch()
        optimizer = optim.Adam(model, lr=1e-2)
        with ops.using(impl):
            losses = [train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer).loss for _ in range(3)]
        results[impl] = losses, model.params()
    np.testing.assert_allclose(results["fast"][0], results["textbook"][0], rtol=1e-12)
    for key, value in results["textbook"][1].items():
        np.testing.assert_allclose(results["fast"][1][key], value, rtol=1e-10, atol=1e-10, err_msg=key)


def test_missing_names_come_from_the_set_active_before():
    def my_relu_forward(x):
        return np.maximum(x, 0), {"positive": x > 0}

    with ops.using("textbook"):
        with ops.using({"relu_forward": my_relu_forward}, name="mine"):
            assert ops.current().relu_forward is my_relu_forward and ops.active()["relu_forward"] == "mine"
            assert ops.current().linear_forward is linear.linear_forward  # from the set before
        assert ops.current().relu_forward is not my_relu_forward
    plain = ops.using("textbook")  # a plain call stays in force
    assert ops.active()["linear_forward"] == "textbook"
    plain.__exit__(None, None, None)
    assert ops.active()["linear_forward"] == ops.DEFAULT


def test_a_module_or_object_gives_the_op_names_it_defines():
    import types

    module = types.ModuleType("student_ops")
    module.linear_forward, module.helper = linear.linear_forward, print
    with ops.using(module):
        assert ops.active()["linear_forward"] == "student_ops"
        assert ops.active()["layernorm_forward"] == ops.active()["layernorm_backward"]


def test_an_op_set_never_changes():
    op_set = ops.current()
    with pytest.raises(AttributeError, match="never changes"):
        op_set.linear_forward = print
    with ops.using(op_set):  # an OpSet is accepted as it is
        assert ops.current().linear_forward is op_set.linear_forward


@pytest.mark.parametrize("impl, error, message", [
    ("quick", ValueError, "impl must be 'fast', 'textbook', or a module"),
    ({"linear_forwrd": print}, ValueError, r"\['linear_forwrd'\] are not op names"),
    ({"linear_forward": 3}, TypeError, "linear_forward must be callable, got int"),
    (object(), ValueError, "'object' defines none of the op names"),
])
def test_bad_op_sets_are_refused_before_anything_changes(impl, error, message):
    before = ops.active()
    with pytest.raises(error, match=message):
        ops.using(impl)
    assert ops.active() == before
