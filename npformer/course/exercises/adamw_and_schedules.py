"""Lesson 12: AdamW over a model's parameters, and the auto-graded parts of its open questions.

``adamw_step`` is one step of training over a dict of parameters (name -> array): the gradients clipped
together to a global norm, the decoupled decay of the weight matrices and embedding tables only (two or
more axes), then the student's Adam update; its reference is ``optim.clip_grad_norm`` and
``optim.AdamW`` themselves, run on a module that holds the dict, its moments loaded and its step count set. ``sgd_largest_stable_lr`` (question 1): the largest learning rate at which SGD converges on
the valley ``f(w) = w^T H w / 2`` from every start (from the eigenvalues of ``H``). ``adagrad_step``
(question 2): AdaGrad's update of one array. ``noam_peak`` (question 3): the step and the learning rate
at which the paper's schedule peaks, found by running ``optim.NoamSchedule`` over the steps.
"""

from __future__ import annotations

import numpy

from ... import nn, optim
from ..hints import Hint
from .base import Case, Exercise, WrongSolution, normal, size


# -- AdamW over a dict of parameters ------------------------------------------------------------------------

class _Holder(nn.Module):
    """A module whose parameters are the dict's arrays (copies), their gradients set."""

    def __init__(self, params, grads):
        super().__init__()
        for key in sorted(params):
            self.add_param(key, numpy.array(params[key], dtype=numpy.float64))
            self.grad[key][...] = grads[key]


def _adamw_step(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    """(params, m, v), three dicts: the gradients clipped together to max_norm (``optim.clip_grad_norm``), then
    npformer's AdamW, one step, from the moments m and v after step - 1 steps."""
    holder = _Holder(params, grads)
    optim.clip_grad_norm(holder, max_norm)
    optimizer = optim.AdamW(holder, lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    for key in params:
        optimizer.state[key]["exp_avg"][...] = m[key]
        optimizer.state[key]["exp_avg_sq"][...] = v[key]
    optimizer.step_count = step - 1
    optimizer.step()
    new_params = holder.params()
    return ({key: new_params[key].copy() for key in params},
            {key: optimizer.state[key]["exp_avg"].copy() for key in params},
            {key: optimizer.state[key]["exp_avg_sq"].copy() for key in params})


def _as_flat(result, inputs):
    """The three dicts as three flat arrays, the keys in sorted order (what the grader compares)."""
    keys = sorted(inputs["params"])
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise TypeError("expected (params, m, v): three dicts")
    flat = []
    for name, entry in zip(("params", "m", "v"), result):
        if not isinstance(entry, dict) or sorted(entry) != keys:
            raise TypeError(f"{name} must be a dict with the keys of params: {keys}")
        flat.append(numpy.concatenate([numpy.asarray(entry[key], dtype=float).reshape(-1) for key in keys]))
    return tuple(flat)


_SHAPES = {"embed": (5, 4), "W_q": (4, 4), "ln_gamma": (4,), "ln_beta": (4,), "b_ff": (6,), "W_ff": (4, 6)}


def _model_inputs(rng, step, fresh, scale=1.0, shapes=None):
    shapes = shapes or _SHAPES
    params = {key: normal(rng, *shape) for key, shape in shapes.items()}
    grads = {key: scale * normal(rng, *shape) for key, shape in shapes.items()}
    m = {key: numpy.zeros(shape) if fresh else 0.1 * scale * normal(rng, *shape) for key, shape in shapes.items()}
    v = {key: numpy.zeros(shape) if fresh else 0.01 * scale**2 * rng.random(shape) for key, shape in shapes.items()}
    return {"params": params, "grads": grads, "m": m, "v": v, "step": step}


def _adamw_cases(rng):
    hyper = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.98, "eps": 1e-9, "weight_decay": 0.1, "max_norm": 100.0}
    return [
        Case("a small model's parameters, step 1 from m = v = 0, no clipping (norm below max_norm)",
             {**_model_inputs(rng, 1, True), **hyper}),
        Case("step 7, moments already running, gradients clipped (norm about 9, max_norm 1)",
             {**_model_inputs(rng, 7, False), **hyper, "max_norm": 1.0}),
        Case("zero gradients: only the decay moves anything",
             {**_model_inputs(rng, 3, False, scale=0.0), **hyper, "lr": 0.5, "weight_decay": 0.5}),
        Case("step 1000, lr 1e-3, weight_decay 0.01, large gradients clipped to 5",
             {**_model_inputs(rng, 1000, False, scale=30.0), **hyper, "lr": 1e-3, "weight_decay": 0.01,
              "max_norm": 5.0}),
    ]


def _unseen_adamw(rng):
    shapes = {f"w{index}": tuple(size(rng, 1, 5) for _ in range(int(rng.integers(1, 4)))) for index in range(4)}
    step = size(rng, 1, 50)
    hyper = {"lr": float(rng.uniform(1e-3, 0.1)), "beta1": 0.9, "beta2": float(rng.choice([0.98, 0.999])),
             "eps": 1e-8, "weight_decay": float(rng.uniform(0.01, 0.5)), "max_norm": float(rng.uniform(0.5, 3.0))}
    return [Case(f"parameters {shapes}, step {step}", {**_model_inputs(rng, step, step == 1, shapes=shapes), **hyper})]


def _adamw_hint(got, expected, inputs, output):
    if output != "params" or got.shape != expected.shape:
        return ""
    keys = sorted(inputs["params"])
    sizes = [inputs["params"][key].size for key in keys]
    wrong = [key for key, part, right in zip(keys, numpy.split(got, numpy.cumsum(sizes)[:-1]),
                                             numpy.split(expected, numpy.cumsum(sizes)[:-1]))
             if not numpy.allclose(part, right, rtol=1e-6, atol=1e-10)]
    if not wrong:
        return ""
    norm = float(numpy.sqrt(sum(float((inputs["grads"][key] ** 2).sum()) for key in keys)))
    if norm > inputs["max_norm"]:
        unclipped = _adamw_step(*{**inputs, "max_norm": 2 * norm + 1.0}.values())
        if numpy.allclose(got, _as_flat(unclipped, inputs)[0], rtol=1e-9):
            return Hint(f"the gradients' global norm is {norm:.3g}, above max_norm = {inputs['max_norm']:g}, and "
                        "your step is the one their unclipped values give")
        apart = _adamw_clipped_per_parameter(*inputs.values())
        if numpy.allclose(got, _as_flat(apart, inputs)[0], rtol=1e-9):
            return Hint(f"the gradients' global norm is {norm:.3g}, above max_norm = {inputs['max_norm']:g}: your "
                        "step is not what one common scaling of all of them gives (the steps of the parameters "
                        "changed against each other)", "the norm is one number over every entry of every gradient")
    flat = [key for key in wrong if inputs["params"][key].ndim == 1]
    if flat:
        return Hint(f"wrong for {', '.join(flat)}, which have one axis (gains and biases)"
                    + ("" if len(flat) < len(wrong) else ", right for every parameter of two or more axes"),
                    "decay the weight matrices and tables (two or more axes), never the gains and biases")
    return Hint(f"wrong for {', '.join(wrong)}, the parameters of two or more axes, right for the gains and "
                "biases: the decay's part of the step differs (compare a step with zero gradients, where only "
                "the decay moves anything)", "the decay shrinks the parameter itself by lr * weight_decay, apart "
                "from Adam's update")


# -- question 1: SGD's largest stable learning rate on a quadratic valley ------------------------------------

def _sgd_largest_stable_lr(hessian):
    """2 / the largest eigenvalue of H: beyond it, SGD's iteration w <- (I - lr H) w grows along that direction."""
    return float(2.0 / numpy.linalg.eigvalsh(numpy.asarray(hessian, dtype=float)).max())


def _tilted(rng, curvatures):
    rotation, _ = numpy.linalg.qr(normal(rng, len(curvatures), len(curvatures)))
    return rotation @ numpy.diag(curvatures) @ rotation.T


def _stable_cases(rng):
    return [Case("the lesson's valley: H = diag(100, 1)", {"hessian": numpy.diag([100.0, 1.0])}),
            Case("the same curvatures, the valley turned", {"hessian": _tilted(rng, [100.0, 1.0])}),
            Case("three directions, turned", {"hessian": _tilted(rng, [3.0, 0.5, 20.0])})]


def _unseen_stable(rng):
    curvatures = rng.uniform(0.1, 50.0, size=size(rng, 2, 5))
    return [Case(f"{len(curvatures)} directions, turned", {"hessian": _tilted(rng, curvatures)})]


def _stable_hint(got, expected, inputs, output):
    got = float(numpy.asarray(got, dtype=float))
    hessian = numpy.asarray(inputs["hessian"])
    if numpy.isclose(got, expected / 2):
        return Hint("half the bound: SGD still converges on this valley at 1.5 times your rate")
    if numpy.isclose(got, 2 / numpy.diag(hessian).max()) and not numpy.allclose(hessian, numpy.diag(numpy.diag(hessian))):
        return Hint("right on the lesson's valley, wrong once the same valley is turned: the bound cannot depend "
                    "on the axes the valley is written in")
    return ""


# -- question 2: AdaGrad's update ----------------------------------------------------------------------------

def _adagrad_step(param, grad, sum_of_squares, lr, eps):
    """(param, sum_of_squares): G += g^2, then each entry steps by lr g / (sqrt(G) + eps)."""
    sum_of_squares = sum_of_squares + grad * grad
    return param - lr * grad / (numpy.sqrt(sum_of_squares) + eps), sum_of_squares


def _adagrad_cases(rng):
    return [Case("first step, G = 0", {"param": normal(rng, 3, 4), "grad": normal(rng, 3, 4),
                                       "sum_of_squares": numpy.zeros((3, 4)), "lr": 0.1, "eps": 1e-10}),
            Case("G already summed over earlier steps", {"param": normal(rng, 5), "grad": normal(rng, 5),
                                                         "sum_of_squares": 3 * rng.random(5), "lr": 0.05, "eps": 1e-10})]


def _unseen_adagrad(rng):
    shape = (size(rng, 1, 4), size(rng, 1, 6))
    return [Case(f"shape {shape}", {"param": normal(rng, *shape), "grad": normal(rng, *shape),
                                    "sum_of_squares": 5 * rng.random(shape), "lr": float(rng.uniform(0.01, 0.5)),
                                    "eps": 1e-10})]


def _adagrad_hint(got, expected, inputs, output):
    if output != "param" or got.shape != expected.shape or not numpy.any(inputs["sum_of_squares"]):
        return ""
    if numpy.allclose(numpy.abs(inputs["param"] - got), inputs["lr"], rtol=1e-6):
        return Hint("every entry moved by exactly lr, whatever the gradients before: the earlier squared "
                    "gradients did not slow any entry down")
    return ""


# -- question 3: the peak of the paper's schedule ------------------------------------------------------------

def _noam_peak(d_model, warmup_steps):
    """(step, learning rate) where optim.NoamSchedule is largest, over steps 1 .. 2 * warmup_steps + 2."""
    schedule = optim.NoamSchedule(d_model, warmup_steps)
    steps = numpy.arange(1, 2 * warmup_steps + 3)
    rates = numpy.array([schedule(int(step)) for step in steps])
    return int(steps[rates.argmax()]), float(rates.max())


def _peak_cases(rng):
    return [Case("D = 512, w = 4000 (the question's)", {"d_model": 512, "warmup_steps": 4000}),
            Case("D = 64, w = 100", {"d_model": 64, "warmup_steps": 100}),
            Case("D = 1024, w = 1: no warm-up", {"d_model": 1024, "warmup_steps": 1})]


def _unseen_peak(rng):
    sizes = {"d_model": int(rng.choice([32, 128, 256, 768, 2048])), "warmup_steps": size(rng, 1, 6000)}
    return [Case(", ".join(f"{key}={value}" for key, value in sizes.items()), sizes)]


def _peak_hint(got, expected, inputs, output):
    if output != "lr":
        return ""
    got = float(numpy.asarray(got, dtype=float))
    if got < expected * (1 - 1e-9):
        return Hint(f"the schedule reaches {expected:.4g} at step {inputs['warmup_steps']}, above your peak")
    if got > expected * (1 + 1e-9):
        return Hint(f"your peak {got:.4g} is above every learning rate the schedule takes")
    return ""


EXERCISES: list[Exercise] = [
    Exercise("adamw_step", "adamw_step(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm) -> (params, "
             "m, v): dicts name -> array (grads, m, v with params' keys and shapes); the gradients clipped "
             "together to max_norm, then one AdamW step", "12", _adamw_step,
             _adamw_cases, ("params", "m", "v"), hints=(_adamw_hint,), convert=_as_flat, unseen=_unseen_adamw),
    Exercise("sgd_largest_stable_lr", "sgd_largest_stable_lr(hessian) -> float: H (n, n) symmetric, positive "
             "eigenvalues; the largest lr at which SGD converges on f(w) = w^T H w / 2 from every start", "12",
             _sgd_largest_stable_lr, _stable_cases, ("lr",), hints=(_stable_hint,), unseen=_unseen_stable, question=1),
    Exercise("adagrad_step", "adagrad_step(param, grad, sum_of_squares, lr, eps) -> (param, sum_of_squares)", "12",
             _adagrad_step, _adagrad_cases, ("param", "sum_of_squares"), hints=(_adagrad_hint,),
             unseen=_unseen_adagrad, question=2),
    Exercise("noam_peak", "noam_peak(d_model, warmup_steps) -> (step, learning rate) where the paper's schedule "
             "peaks", "12", _noam_peak, _peak_cases, ("step", "lr"), hints=(_peak_hint,), unseen=_unseen_peak,
             question=3),
]


# -- the mistakes students make ------------------------------------------------------------------------------

def _adam(param, grad, m, v, step, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
    return param - lr * m_hat / (numpy.sqrt(v_hat) + eps), m, v


def _clipped(grads, max_norm):
    norm = numpy.sqrt(sum(float((grad**2).sum()) for grad in grads.values()))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return {key: grad * scale for key, grad in grads.items()}


def _adamw_decaying_everything(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    grads = _clipped(grads, max_norm)
    new = [_adam(params[key] * (1 - lr * weight_decay), grads[key], m[key], v[key], step, lr, beta1, beta2, eps)
           for key in params]
    return tuple({key: parts[index] for key, parts in zip(params, new)} for index in range(3))


def _adamw_as_l2(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    grads, new = _clipped(grads, max_norm), {}
    for key in params:
        grad = grads[key] + weight_decay * params[key] if params[key].ndim >= 2 else grads[key]
        new[key] = _adam(params[key], grad, m[key], v[key], step, lr, beta1, beta2, eps)
    return tuple({key: parts[index] for key, parts in new.items()} for index in range(3))


def _numpy_adamw(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay):
    new = {key: _adam(params[key] * (1 - lr * weight_decay) if params[key].ndim >= 2 else params[key], grads[key],
                      m[key], v[key], step, lr, beta1, beta2, eps) for key in params}
    return tuple({key: parts[index] for key, parts in new.items()} for index in range(3))


def _adamw_unclipped(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    return _numpy_adamw(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay)


def _adamw_clipped_per_parameter(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay, max_norm):
    grads = {key: _clipped({key: grad}, max_norm)[key] for key, grad in grads.items()}
    return _numpy_adamw(params, grads, m, v, step, lr, beta1, beta2, eps, weight_decay)


def _adagrad_forgetting(param, grad, sum_of_squares, lr, eps):
    return param - lr * grad / (numpy.abs(grad) + eps), sum_of_squares + grad * grad


WRONG_SOLUTIONS: list[WrongSolution] = [
    WrongSolution("adamw_step", "every parameter decayed, gains and biases too", _adamw_decaying_everything,
                  "which have one axis"),
    WrongSolution("adamw_step", "the decay added to the gradient (Adam's L2), not to the parameter", _adamw_as_l2,
                  "right for the gains and biases"),
    WrongSolution("adamw_step", "the gradients never clipped", _adamw_unclipped, "unclipped values"),
    WrongSolution("adamw_step", "each parameter's gradient clipped on its own", _adamw_clipped_per_parameter,
                  "one common scaling"),
    WrongSolution("sgd_largest_stable_lr", "1 / lambda_max", lambda hessian: 1.0 / numpy.linalg.eigvalsh(hessian).max(),
                  "half the bound"),
    WrongSolution("sgd_largest_stable_lr", "2 / the largest diagonal entry", lambda hessian: 2.0 / numpy.diag(hessian).max(),
                  "turned"),
    WrongSolution("adagrad_step", "the current gradient's square alone", _adagrad_forgetting, "exactly lr"),
    WrongSolution("noam_peak", "the peak read from the warm-up term alone, D^-1/2 w^-3/2",
                  lambda d_model, warmup_steps: (warmup_steps, d_model**-0.5 * warmup_steps**-1.5), "above your peak"),
]
