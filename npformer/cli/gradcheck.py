"""``npformer gradcheck``: every backward pass against finite differences, op by op or through a
whole model (``--model``), on npformer's ops or the student's (``--ops``), and the catalogue of
realistic backward bugs (``--mutants``)."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

from .. import backend
from ..errors import UsageError
from .arguments import add_arguments, add_ops_arguments, number, require, values
from .inputs import student_ops

MODEL_HELP = {
    "norm": "with --model: residual layout",
    "activation": "with --model: feed-forward activation",
    "tie_embeddings": "with --model: tie the target embedding and the output projection",
    "dropout": "with --model: dropout rate (masks are replayed exactly)",
}


def base_sizes() -> dict[str, Any]:
    """The model of ``gradcheck --model --base``: the paper's sizes (``MODEL_PRESETS["large"]``).

    GELU, not ReLU: at this size some of the ~100,000 hidden ReLUs sit within a finite-difference
    step of their kink, where the difference is meaningless (ReLU's backward is checked op by op and
    in the tiny model, away from the kink)."""
    from ..models import MODEL_PRESETS

    return {**MODEL_PRESETS["large"], "src_vocab": 1000, "tgt_vocab": 1000, "activation": "gelu",
            "batch": 1, "src_len": 4, "tgt_len": 4}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from .. import gradcheck
    from ..models import TransformerConfig

    parser = commands.add_parser(
        "gradcheck", help="check every backward pass against finite differences",
        description="Compare each op's hand-written gradients with central finite differences in float64 "
                    "and print the worst relative error per tensor. Exits 1 if any tensor fails.")
    parser.add_argument("--op", action="append", metavar="NAME", help="check only this op (repeatable; see --list)")
    parser.add_argument("--list", action="store_true", help="list the ops that can be checked")
    parser.add_argument("--model", action="store_true",
                        help="check every parameter of a tiny float64 Transformer through its loss (seconds)")
    parser.add_argument("--fast", action="store_true",
                        help="with --model: one random direction per tensor instead of every entry")
    parser.add_argument("--base", action="store_true",
                        help="with --model: the paper's base sizes (512, 8 heads, 2048, 6 layers); use with --fast")
    parser.add_argument("--mutants", action="store_true",
                        help="apply each realistic backward bug of the catalogue and show which check catches it")
    add_arguments(parser, TransformerConfig, {k: v for k, v in MODEL_HELP.items() if k != "dropout"},
                  choices={"norm": ("post", "pre"), "activation": ("relu", "gelu")})
    parser.add_argument("--dropout", type=number("dropout", float), default=gradcheck.TINY_MODEL["dropout"],
                        help=MODEL_HELP["dropout"] + " (default: %(default)s)")
    add_arguments(parser, gradcheck.check_all_ops, {"seed": "seed for inputs and upstream gradients",
                                                    "tol": "pass threshold on the worst relative error"})
    add_ops_arguments(parser, "with --model: check the model's gradients through your own ops")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from .. import gradcheck

    if args.list:
        print("\n".join(gradcheck.OP_CASES))
        return 0
    if args.mutants:
        return _mutants(args)
    require(args.model or not (args.fast or args.base),
            "--fast and --base apply to --model: npformer gradcheck --model --fast --base")
    require(args.model or not args.ops, "--ops applies to --model: npformer gradcheck --model --ops FILE")
    if args.model:
        return _model(args)
    unknown = [name for name in args.op or [] if name not in gradcheck.OP_CASES]
    if unknown:
        raise UsageError(f"unknown op {', '.join(unknown)}; choose from {', '.join(gradcheck.OP_CASES)}")
    report = gradcheck.check_all_ops(seed=args.seed, names=args.op, tol=args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}")
    print(report.table())
    return 0 if report.passed else 1


def _model(args: argparse.Namespace) -> int:
    from .. import gradcheck, ops

    student = student_ops(args)
    config = {**values(args, MODEL_HELP), **(base_sizes() if args.base else {})}
    sizes = {k: config.get(k, gradcheck.TINY_MODEL[k]) for k in ("d_model", "n_heads", "d_ff", "n_layers")}
    config = {k: v for k, v in config.items() if k not in sizes}  # the rest: options, vocabularies, batch
    started = time.perf_counter()
    with ops.using(student) if student is not None else contextlib.nullcontext():
        report = gradcheck.check_model(seed=args.seed, tol=args.tol, directions=1 if args.fast else None,
                                       **config, **sizes)
    seconds = time.perf_counter() - started
    method = "one random direction per tensor" if args.fast else "every entry"
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}; "
          f"{'base' if args.base else 'tiny'} Transformer {sizes}, "
          + ", ".join(f"{k}={v}" for k, v in config.items())
          + f", label_smoothing={gradcheck.TINY_MODEL['label_smoothing']}; "
          f"loss = cross-entropy on a padded batch; {method}")
    print(report.table())
    print(f"{seconds:.1f} s")
    if student is not None:
        print(_blame_student_ops(args, student, report))
    return 0 if report.passed else 1


def _mutants(args: argparse.Namespace) -> int:
    from ..gradcheck import mutants

    results = mutants.run_mutants(seed=args.seed, tol=None if args.tol == mutants.DEFAULT_TOL else args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}, tolerance {args.tol:.0e}")
    print(mutants.results_table(results))
    return 0 if all(result.caught for result in results) else 1


def _blame_student_ops(args: argparse.Namespace, student: Any, report: Any) -> str:
    """The verdict on a model check through the student's ops; on a failure, each of the student's
    ops is checked alone (its op case) to name the one, and its lesson, that breaks the model."""
    from .. import gradcheck, ops
    from ..course.student_ops import EXERCISE_OPS

    if report.passed:
        return f"the model's gradients through your ops pass ({len(student.yours())} of {len(ops.OP_NAMES)} ops yours)"
    failing = [entry for entry in student.exercises if entry.status == "failing"]  # allowed in, yet wrong
    culprits = [f"{entry.name} (lesson {entry.lesson})" for entry in failing]
    blamed_ops = {op for entry in failing for op in EXERCISE_OPS[entry.name]}
    for entry in (entry for entry in student.exercises if entry.status == "passed"):
        if blamed_ops & set(EXERCISE_OPS[entry.name]):
            continue  # it shares its op with a function already named (the loss, with and without smoothing)
        cases = {op.rsplit("_", 1)[0] for op in EXERCISE_OPS[entry.name]} & set(gradcheck.OP_CASES)
        with ops.using({op: student[op] for op in EXERCISE_OPS[entry.name] if op in student}, name="yours"):
            for case in sorted(cases):
                try:
                    passed = gradcheck.check_op(case, seed=args.seed).passed
                except Exception:  # noqa: BLE001 -- the student's function raising is a failure too
                    passed = False
                if not passed:
                    culprits.append(f"{entry.name} (lesson {entry.lesson})")
                    break
    return ("the model's gradients fail through your ops; "
            + (f"the culprits (each fails its exercise or its op check): {', '.join(culprits)}" if culprits
               else "each of your ops passes its exercise and its own check: look at how they combine"))
