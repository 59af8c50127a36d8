"""Optimizers against their closed-form update rules; schedules; clipping; saving."""

import math

import numpy as np
import pytest

from conftest import import_crosscheck
from npformer import backend, nn, ops, optim

host = backend.to_numpy  # the parameters live on the active backend (NumPy, CuPy or the strict stand-in)


class Params(nn.Module):
    """A bag of parameters with gradients we set by hand."""

    def __init__(self, rng):
        super().__init__()
        self.add_param("w", backend.asarray(rng.standard_normal((3, 4))))
        self.add_param("b", backend.asarray(rng.standard_normal(4)))


def gradient_sequence(rng, steps=6):
    return [{"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)} for _ in range(steps)]


def run(optimizer_class, grads_per_step, rng_seed=0, **options):
    model = Params(np.random.default_rng(rng_seed))
    optimizer = optimizer_class(model, **options)
    for grads in grads_per_step:
        for key, value in grads.items():
            model.grad[key][...] = value
        optimizer.step()
    return model, optimizer


def adam_reference(p, grads, lr, betas, eps, weight_decay, decoupled):
    """Adam / AdamW written from the papers' formulas, one scalar at a time."""
    p = p.copy().ravel()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    beta1, beta2 = betas
    for t, g in enumerate(grads, start=1):
        g = g.ravel()
        for i in range(p.size):
            gi = g[i]
            if decoupled:
                p[i] = p[i] - lr * weight_decay * p[i]
            else:
                gi = gi + weight_decay * p[i]
            m[i] = beta1 * m[i] + (1 - beta1) * gi
            v[i] = beta2 * v[i] + (1 - beta2) * gi * gi
            m_hat = m[i] / (1 - beta1**t)
            v_hat = v[i] / (1 - beta2**t)
            p[i] = p[i] - lr * m_hat / (math.sqrt(v_hat) + eps)
    return p


@pytest.mark.parametrize("op_set", ["fast", "textbook"])
@pytest.mark.parametrize("cls, decoupled, weight_decay", [
    (optim.Adam, False, 0.0), (optim.Adam, False, 0.1), (optim.AdamW, True, 0.1), (optim.AdamW, True, 0.0),
])
def test_adam_and_adamw_follow_the_closed_form_over_several_steps(cls, decoupled, weight_decay, op_set):
    grads = gradient_sequence(np.random.default_rng(1))
    options = dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay)
    with ops.using(op_set):  # the optimizer's update is the op adam_step
        model, optimizer = run(cls, grads, **options)
    start = Params(np.random.default_rng(0))
    for key in ("w", "b"):
        # AdamW decays the weight matrix w and never the bias b (one axis); Adam's L2 reaches both
        decay = weight_decay if not decoupled or key == "w" else 0.0
        expected = adam_reference(host(getattr(start, key)), [g[key] for g in grads], 0.01, (0.8, 0.95), 1e-6,
                                  decay, decoupled).reshape(getattr(start, key).shape)
        np.testing.assert_allclose(host(getattr(model, key)), expected, rtol=1e-12, atol=1e-14)
    assert optimizer.step_count == len(grads)  # steps, not parameter tensors


def test_adam_defaults_match_pytorch():
    model = Params(np.random.default_rng(0))
    adam, adamw = optim.Adam(model), optim.AdamW(model)
    assert (adam.lr, adam.betas, adam.eps, adam.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 0.0)
    assert (adamw.lr, adamw.betas, adamw.eps, adamw.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 1e-2)


def test_sgd_with_momentum_nesterov_and_weight_decay():
    grads = gradient_sequence(np.random.default_rng(2), steps=4)
    for nesterov, dampening in ((False, 0.2), (True, 0.0)):
        model, _ = run(optim.SGD, grads, lr=0.1, momentum=0.9, dampening=dampening,
                       weight_decay=0.01, nesterov=nesterov)
        p = host(Params(np.random.default_rng(0)).w)
        buffer = None
        for g in grads:
            d = g["w"] + 0.01 * p
            buffer = d.copy() if buffer is None else 0.9 * buffer + (1 - dampening) * d
            p = p - 0.1 * (d + 0.9 * buffer if nesterov else buffer)
        np.testing.assert_allclose(host(model.w), p, rtol=1e-12)
    plain, _ = run(optim.SGD, grads[:1], lr=0.5)
    np.testing.assert_allclose(host(plain.w), host(Params(np.random.default_rng(0)).w) - 0.5 * grads[0]["w"])


def test_optimizer_state_dict_round_trip_continues_identically():
    grads = gradient_sequence(np.random.default_rng(3), steps=6)
    straight, _ = run(optim.AdamW, grads, lr=0.01)
    first, optimizer = run(optim.AdamW, grads[:3], lr=0.01)
    saved_params, saved_state = first.state_dict(), optimizer.state_dict()
    resumed = Params(np.random.default_rng(99))
    resumed.load_state_dict(saved_params)
    resumed_optimizer = optim.AdamW(resumed, lr=0.5)
    resumed_optimizer.load_state_dict(saved_state)
    assert resumed_optimizer.step_count == 3 and resumed_optimizer.lr == 0.01
    for g in grads[3:]:
        for key, value in g.items():
            resumed.grad[key][...] = value
        resumed_optimizer.step()
    np.testing.assert_array_equal(host(resumed.w), host(straight.w))
    with pytest.raises(ValueError, match="state is for 'AdamW', not 'SGD'"):
        optim.SGD(resumed).load_state_dict(saved_state)


def test_noam_schedule_values():
    schedule = optim.NoamSchedule(d_model=512, warmup_steps=4000)
    assert schedule(1) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert schedule(4000) == pytest.approx(512**-0.5 * 4000**-0.5)  # the peak
    assert schedule(16000) == pytest.approx(512**-0.5 * 16000**-0.5)
    assert schedule(4000) > schedule(3999) and schedule(4000) > schedule(4001)
    assert optim.NoamSchedule(64, 100, factor=2.0)(50) == pytest.approx(2 * 64**-0.5 * 50 * 100**-1.5)
    with pytest.raises(ValueError, match="step must be an int >= 1"):
        schedule(0)


def test_warmup_cosine_and_constant_schedules():
    schedule = optim.WarmupCosineSchedule(peak_lr=1e-3, warmup_steps=10, total_steps=110, min_lr=1e-5)
    assert schedule(1) == pytest.approx(1e-4)
    assert schedule(10) == pytest.approx(1e-3)
    assert schedule(60) == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5)  # half-way: cos(pi/2) = 0
    assert schedule(110) == pytest.approx(1e-5) and schedule(500) == pytest.approx(1e-5)
    assert optim.ConstantSchedule(3e-4)(12345) == 3e-4


def test_clip_grad_norm_scales_to_max_norm_and_returns_the_norm():
    model = Params(np.random.default_rng(0))
    model.grad["w"][...] = 3.0
    model.grad["b"][...] = 4.0
    norm = math.sqrt(12 * 9 + 4 * 16)
    assert optim.clip_grad_norm(model, 1.0) == pytest.approx(norm)
    clipped = math.sqrt(sum(float((g**2).sum()) for g in model.grads().values()))
    assert clipped == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(host(model.grad["w"] / model.grad["b"][0]), 0.75)  # direction kept
    assert optim.clip_grad_norm(model, 10.0) == pytest.approx(clipped)  # below max: unchanged
    assert math.sqrt(sum(float((g**2).sum()) for g in model.grads().values())) == pytest.approx(clipped)


@pytest.mark.parametrize("op_set", ["fast", "textbook"])
def test_optimizers_match_pytorch_when_it_is_installed(op_set):
    torch = import_crosscheck("torch","PyTorch is not installed (optional cross-check)")
    grads = gradient_sequence(np.random.default_rng(4), steps=5)
    cases = [(optim.Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.05)),
             (optim.AdamW, torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05)),
             (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))]
    for ours, theirs, options in cases:
        with ops.using(op_set):
            model, _ = run(ours, grads, **options)
        start = Params(np.random.default_rng(0))
        w = torch.tensor(host(start.w), requires_grad=True)
        b = torch.tensor(host(start.b), requires_grad=True)
        # AdamW as PyTorch users configure it: the bias in a group without decay
        groups = ([{"params": [w]}, {"params": [b], "weight_decay": 0.0}] if ours is optim.AdamW
                  else [{"params": [w, b]}])
        reference = theirs(groups, **options)
        for g in grads:
            w.grad, b.grad = torch.tensor(g["w"]), torch.tensor(g["b"])
            reference.step()
        np.testing.assert_allclose(host(model.w), w.detach().numpy(), rtol=1e-10, err_msg=ours.__name__)
        np.testing.assert_allclose(host(model.b), b.detach().numpy(), rtol=1e-10, err_msg=ours.__name__)
