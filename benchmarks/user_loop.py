"""A user's own training loop and ``train_step``, both op sets, against PyTorch eager, in one process.

    python benchmarks/user_loop.py [PRESET ...] [--rounds N] [--old /tmp/oldpkg]

The user's loop is the textbook step of the lessons and the design, written with the default op
set and none of npformer's training code (``benchmarks/loops.py``)::

    logits = model.forward(src, tgt_in)
    loss, cache = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
    model.zero_grad(); model.backward(ops.current().cross_entropy_backward(1.0, cache)); optimizer.step()

It computes the padded batch, as PyTorch eager does; ``train_step(..., only_counted_targets=True)``
takes the fast path (no work on padding). All contenders live in one process, on the bench's
shapes and batches (``npformer bench``), with 2 BLAS threads and ``torch.set_num_threads(2)``; the
rounds run one step of each in turn (the order rotating), so that the machine's drift hits all
alike; the table gives each one's median step time and the median (and quartiles) of its time over
PyTorch's in the same round. More contenders in one process slow each other (memory, PyTorch's
OpenMP threads): ``--only "fast ops"`` keeps PyTorch and the default set's two loops.

``--old DIR``: also time an older npformer tree, copied to ``DIR/npformer_old`` with its absolute
imports renamed (as ``benchmarks/ab_in_process.py`` describes), with its own loop and step.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import npformer  # noqa: E402
from npformer import bench  # noqa: E402
from loops import training_loop  # noqa: E402  (benchmarks/loops.py)


def npformer_contenders(package, name, label):
    """The user's loop and ``train_step`` of one npformer tree, each on both op sets."""
    return {f"{label}{loop}, {op_set} ops": training_loop(package, name, loop, op_set)
            for op_set in ("fast", "textbook") for loop in ("the user's loop", "train_step")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", default=["small", "base"])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--old", help="a folder holding npformer_old, an older tree")
    parser.add_argument("--only", nargs="+", default=None, help="the contenders' labels to keep (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    with open("/proc/cpuinfo") as cpuinfo:
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; npformer {npformer.__version__}, NumPy {__import__('numpy').__version__}, "
          f"PyTorch {torch.__version__}; {args.rounds} rounds after 2 warm-up steps each; median step time")
    old = None
    if args.old:
        sys.path.insert(0, args.old)
        import npformer_old as old  # noqa: F811
        import npformer_old.bench  # noqa: F401
    for name in args.presets:
        torch.manual_seed(0)
        _, torch_step = bench.torch_translator(name)
        contenders = {"PyTorch eager": lambda s, t: torch_step(torch.from_numpy(s), torch.from_numpy(t))}
        contenders.update(npformer_contenders(npformer, name, ""))
        if old is not None:
            contenders.update(npformer_contenders(old, name, "before: "))
        if args.only:
            contenders = {label: step for label, step in contenders.items()
                          if label == "PyTorch eager" or any(part in label for part in args.only)}
        batches = bench.random_batches(bench.PRESETS[name], 4)
        times = {label: [] for label in contenders}
        labels = list(contenders)
        for warm_up in range(2):
            for label in labels:
                contenders[label](*batches[warm_up])
        for round_ in range(args.rounds):
            order = labels[round_ % len(labels):] + labels[:round_ % len(labels)]
            src, tgt = batches[round_ % len(batches)]
            for label in order:
                start = time.perf_counter()
                contenders[label](src, tgt)
                times[label].append(time.perf_counter() - start)
        print(f"{name}:{' ' * 36}median    (min)   time / PyTorch's in the same round: median (quartiles)")
        for label in labels:
            ratios = [mine / theirs for mine, theirs in zip(times[label], times["PyTorch eager"])]
            low, middle, high = statistics.quantiles(ratios, n=4)
            print(f"  {label:40s} {1000 * statistics.median(times[label]):7.1f} ms ({1000 * min(times[label]):6.1f})  "
                  f"{middle:5.2f}x ({low:.2f}-{high:.2f})")


if __name__ == "__main__":
    main()
