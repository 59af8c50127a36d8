"""End to end: the whole stack (ops, modules, backward, Adam, schedule, clipping) learns.

A seeded copy task: the source is 3-8 random symbols, the target is the same
symbols between <bos> and <eos>. The model must reach 99% token accuracy on a
held-out batch within 400 steps (about 15 s on two cores), both with teacher
forcing and when decoding greedily through the KV cache.
"""

import numpy as np

from npformer import backend, models, nn, optim, tokens
from npformer.training import train_step
from npformer.tasks.translation import greedy_decode

VOCAB, MAX_SYMBOLS, BATCH, STEPS = 14, 8, 64, 400


def copy_batch(rng, batch, max_symbols=MAX_SYMBOLS, vocab=VOCAB):
    """Source ``(B, max_symbols)``, decoder input and target ``(B, max_symbols + 1)``."""
    lengths = rng.integers(3, max_symbols + 1, size=batch)
    symbols = rng.integers(4, vocab, size=(batch, max_symbols))
    real = np.arange(max_symbols)[None, :] < lengths[:, None]
    src = np.where(real, symbols, tokens.PAD_ID)
    target = np.zeros((batch, max_symbols + 2), dtype=np.int64)
    target[:, 0] = tokens.BOS_ID
    target[:, 1:-1] = src
    target[np.arange(batch), lengths + 1] = tokens.EOS_ID
    return (backend.asarray(src), backend.asarray(target[:, :-1]), backend.asarray(target[:, 1:]))


def test_copy_task_reaches_99_percent_token_accuracy():
    config = models.TransformerConfig(VOCAB, VOCAB, d_model=32, n_heads=4, d_ff=64, n_layers=2,
                                  max_len=16, dropout=0.0)
    model = models.Transformer(config, seed=0)
    optimizer = optim.Adam(model, lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    schedule = optim.WarmupCosineSchedule(3e-3, warmup_steps=50, total_steps=STEPS, min_lr=1.5e-4)
    rng = np.random.default_rng(0)
    first_loss = None
    for step in range(1, STEPS + 1):
        src, tgt_in, tgt_out = copy_batch(rng, BATCH)
        optimizer.lr = schedule(step)
        loss = train_step(model, (src, tgt_in), tgt_out, optimizer, max_norm=1.0).loss
        first_loss = first_loss or loss
    assert loss < 0.05 * first_loss

    model.eval()
    src, tgt_in, tgt_out = copy_batch(np.random.default_rng(123), 256)
    real = tgt_out != tokens.PAD_ID
    predictions = model.forward(src, tgt_in).argmax(-1)
    teacher_forced = float((predictions[real] == tgt_out[real]).mean())
    decoded = np.zeros_like(tgt_out)  # each hypothesis, then <eos>, then padding
    for row, ids in enumerate(greedy_decode(model, src, max_len=tgt_out.shape[1])):
        ids = (ids + [tokens.EOS_ID])[: tgt_out.shape[1]]
        decoded[row, : len(ids)] = ids
    greedy = float((decoded[real] == tgt_out[real]).mean())
    assert teacher_forced >= 0.99, teacher_forced
    assert greedy >= 0.99, greedy
