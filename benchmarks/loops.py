"""The two training loops the speed comparisons time, for any npformer tree (this one, or an older
one copied as ``npformer_old``): ``train_step`` on the fast path, and the loop a user writes from
the lessons with the active op set (forward, loss, backward, Adam, on the padded batch as PyTorch
eager computes it). Used by ``user_loop.py`` and ``ab_in_process.py``."""


def training_loop(package, name, loop, op_set="fast"):
    """``step(src, tgt) -> loss`` for a fresh model of the bench preset ``name`` and its Adam:
    ``loop`` is "train_step" or "the user's loop"; ``op_set`` is held around each step."""
    ops = package.ops
    active = getattr(ops, "current", lambda: ops)  # before issue 43, the package's names were the active set
    preset_model = getattr(package.bench, "preset_model", None) or package.bench._model  # _model before issue 62
    model = preset_model(package.bench.PRESETS[name])
    optimizer = package.optim.Adam(model, lr=1e-4)

    def step(src, tgt):
        with ops.using(op_set):
            if loop == "train_step":
                return package.training.train_step(model, (src, tgt[:, :-1]), tgt[:, 1:], optimizer,
                                                   only_counted_targets=True).loss
            logits = model.forward(src, tgt[:, :-1])
            loss, cache = active().cross_entropy_forward(logits, tgt[:, 1:], ignore_index=0)
            model.zero_grad()
            model.backward(active().cross_entropy_backward(1.0, cache))
            optimizer.step()
            return float(loss)

    return step
