"""The ``npformer`` command (also ``python -m npformer``).

Subcommands:

* ``gradcheck``: compare every op's hand-written backward pass with central
  finite differences in float64, print the table, exit 1 on any failure;
  ``gradcheck --model`` does the same for every parameter of a tiny Transformer.
"""

from __future__ import annotations

import argparse
import sys

from . import backend, gradcheck


def _run_gradcheck(args: argparse.Namespace) -> int:
    if args.list:
        print("\n".join(gradcheck.OP_CASES))
        return 0
    if args.model:
        config = dict(norm=args.norm, activation=args.activation,
                      tie_embeddings=args.tie_embeddings, dropout=args.dropout)
        report = gradcheck.check_model(seed=args.seed, tol=args.tol, **config)
        sizes = {k: gradcheck.TINY_MODEL[k] for k in ("d_model", "n_heads", "d_ff", "n_layers")}
        print(f"backend: {backend.get_backend()}, float64, seed {args.seed}; tiny Transformer "
              f"{sizes}, " + ", ".join(f"{k}={v}" for k, v in config.items())
              + f", label_smoothing={gradcheck.TINY_MODEL['label_smoothing']}; "
              "loss = cross-entropy on a padded batch")
        print(report.table())
        return 0 if report.passed else 1
    unknown = [name for name in args.op or [] if name not in gradcheck.OP_CASES]
    if unknown:
        print(
            f"npformer gradcheck: unknown op {', '.join(unknown)}; "
            f"choose from {', '.join(gradcheck.OP_CASES)}",
            file=sys.stderr,
        )
        return 2
    report = gradcheck.check_all_ops(seed=args.seed, names=args.op, tol=args.tol)
    print(f"backend: {backend.get_backend()}, float64, seed {args.seed}")
    print(report.table())
    return 0 if report.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npformer",
        description="A Transformer in pure NumPy with every backward pass written by hand.",
    )
    parser.add_argument(
        "--backend",
        choices=("numpy", "cupy"),
        default=None,
        help="array library (default: $NPFORMER_BACKEND, else numpy)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser(
        "gradcheck",
        help="check every backward pass against finite differences",
        description=(
            "Compare each op's hand-written gradients with central finite differences "
            "in float64 and print the worst relative error per tensor. "
            "Exits 1 if any tensor fails."
        ),
    )
    check.add_argument(
        "--op", action="append", metavar="NAME",
        help="check only this op (repeatable; see --list)",
    )
    check.add_argument("--list", action="store_true", help="list the ops that can be checked")
    check.add_argument(
        "--model", action="store_true",
        help="check every parameter of a tiny float64 Transformer through its loss (about 10 s)",
    )
    check.add_argument("--norm", choices=("post", "pre"), default="post", help="with --model")
    check.add_argument("--activation", choices=("relu", "gelu"), default="relu", help="with --model")
    check.add_argument("--tie-embeddings", action="store_true", help="with --model")
    check.add_argument("--dropout", type=float, default=gradcheck.TINY_MODEL["dropout"],
                       help="with --model (default: %(default)s; masks are replayed exactly)")
    check.add_argument("--seed", type=int, default=0, help="seed for inputs and upstream gradients")
    check.add_argument(
        "--tol", type=float, default=gradcheck.DEFAULT_TOL,
        help="pass threshold on the worst relative error (default: %(default)g)",
    )
    check.set_defaults(handler=_run_gradcheck)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.backend:
        try:
            backend.set_backend(args.backend)
        except backend.BackendUnavailableError as error:
            print(f"npformer: {error}", file=sys.stderr)
            return 2
    return args.handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
