"""A/B in one process: the training step of an older npformer tree against this one, step by step.

    cp -r OLD_TREE/npformer /tmp/oldpkg/npformer_old
    sed -i 's/from npformer\\b/from npformer_old/; s/import npformer\\b/import npformer_old/' $(grep -rl npformer /tmp/oldpkg --include=*.py)
    OMP_NUM_THREADS=2 python benchmarks/ab_in_process.py base 20

The old tree (before issue 10: ``nn.Transformer``, ``model.loss``, ``model.criterion``) is imported
as ``npformer_old`` from /tmp/oldpkg; both models are built from the same seed and updated by Adam;
their steps alternate (old-new, new-old, ...) on the same batches, so drift hits both alike. The
min and the median step time of each are printed.
"""
import sys, time
sys.path.insert(0, "/tmp/oldpkg")
import numpy as np
import npformer_old as old
import npformer as new
from npformer import bench, optim
from npformer.training import train_step
p = bench.PRESETS[sys.argv[1] if len(sys.argv) > 1 else "base"]
kw = {k: p[k] for k in ("src_vocab","tgt_vocab","d_model","n_heads","d_ff","n_layers")}
mo = old.nn.Transformer(old.nn.TransformerConfig(**kw, dropout=0.0), seed=0)
mn = new.models.Transformer(new.models.TransformerConfig(**kw, dropout=0.0), seed=0)
oo = old.optim.Adam(mo, lr=1e-4); on = new.optim.Adam(mn, lr=1e-4)
batches = bench.random_batches(p, 4)
def step_old(s, t):
    logits = mo.forward(s, t[:, :-1]); loss = mo.loss(logits, t[:, 1:]); mo.zero_grad(); mo.backward(mo.criterion.backward()); oo.step(); return float(loss)
def step_new(s, t):
    return train_step(mn, (s, t[:, :-1]), t[:, 1:], on, only_counted_targets=True).loss
for s, t in batches: step_old(s, t); step_new(s, t)
times = {"old": [], "new": []}
for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 20):
    for name, f in (("old", step_old), ("new", step_new)) if r % 2 == 0 else (("new", step_new), ("old", step_old)):
        s, t = batches[r % 4]
        start = time.perf_counter(); f(s, t); times[name].append(time.perf_counter() - start)
for k, v in times.items():
    v = sorted(v); print(k, "min %.1f ms, median %.1f ms" % (1000 * v[0], 1000 * v[len(v)//2]))
print("new/old min %.3f median %.3f" % (min(times["new"]) / min(times["old"]), sorted(times["new"])[len(times["new"])//2] / sorted(times["old"])[len(times["old"])//2]))
