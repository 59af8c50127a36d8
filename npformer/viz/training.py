"""Figures of training and checking: the training curves, a gradient check's errors, the mutants'.
"""

from __future__ import annotations

from typing import Any

from .base import finish, pyplot
from .checks import check_labels, check_path, check_text, got, is_number

def training_curves(records: list[dict], path: str | None = None, title: str = "") -> Any:
    """Loss (train and validation), validation BLEU and learning rate against the step.

    ``records`` are the lines of ``metrics.jsonl``: ``{"kind": "train", "step", "loss",
    "lr", ...}`` and ``{"kind": "eval", "step", "valid_loss", "valid_bleu", ...}``; records of
    other kinds are skipped. Checked first: ``records`` a list of dicts, each of the two kinds with
    its keys; ``path`` and ``title`` as everywhere.
    """
    _check_records("training_curves", records)
    check_path("training_curves", path)
    check_text("training_curves", "title", title)
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    # A fixed layout (constrained_layout would measure every label and take longer than the drawing:
    # the trainer draws this figure at every evaluation)
    figure, (loss_axis, bleu_axis, lr_axis) = pyplot().subplots(1, 3, figsize=(14, 4), sharex=True)
    figure.subplots_adjust(left=0.07, right=0.985, bottom=0.13, top=0.86 if title else 0.91, wspace=0.24)
    if train:
        alone = "o" if len(train) == 1 else None  # a line through one point draws nothing: mark it
        loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train], marker=alone,
                       color="tab:blue", alpha=0.6, linewidth=1, label="train (label-smoothed)")
        lr_axis.plot([r["step"] for r in train], [r["lr"] for r in train], marker=alone, color="tab:purple")
    else:
        lr_axis.text(0.5, 0.5, "nothing logged yet", ha="center", va="center", transform=lr_axis.transAxes)
    if not evals:
        bleu_axis.text(0.5, 0.5, "no evaluation yet\n(every --eval-every steps)", ha="center", va="center",
                       transform=bleu_axis.transAxes)
    if evals:
        loss_axis.plot([r["step"] for r in evals], [r["valid_loss"] for r in evals], "o-",
                       color="tab:orange", label="validation")
        bleu_axis.plot([r["step"] for r in evals], [r["valid_bleu"] for r in evals], "o-",
                       color="tab:green")
    loss_axis.set(title="Cross-entropy loss", xlabel="step", ylabel="nats per token")
    loss_axis.set_yscale("log")
    if train or evals:
        loss_axis.legend()
    bleu_axis.set(title="Validation BLEU (greedy)", xlabel="step", ylabel="BLEU", ylim=(0, 100))
    lr_axis.set(title="Learning rate", xlabel="step")
    lr_axis.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    for axis in (loss_axis, bleu_axis, lr_axis):
        axis.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


_CURVE_KEYS = {"train": ("step", "loss", "lr"), "eval": ("step", "valid_loss", "valid_bleu")}


def _check_records(function: str, records: Any) -> None:
    """``records``: a list of dicts; a "train" or "eval" one holds the keys its curves read."""
    if not isinstance(records, (list, tuple)):
        raise TypeError(f"{function}: records must be a list of dicts (metrics.jsonl lines), got {got(records)}")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise TypeError(f"{function}: records[{index}] must be a dict, got {got(record)}")
        missing = [key for key in _CURVE_KEYS.get(record.get("kind"), ()) if key not in record]
        if missing:
            raise ValueError(f"{function}: records[{index}] must hold {', '.join(_CURVE_KEYS[record['kind']])} "
                             f"(kind {record['kind']!r}), got keys {', '.join(record)}; missing {', '.join(missing)}")


def gradcheck_chart(report: Any, path: str | None = None, title: str = "") -> Any:
    """Worst relative error per op and tensor, on a log scale, with the pass threshold marked.

    Checked first: ``report`` a ``gradcheck.GradcheckReport`` (``results`` and ``tol``) with rows."""
    if not (isinstance(getattr(report, "results", None), list) and report.results and hasattr(report, "tol")):
        raise TypeError(f"gradcheck_chart: report must be a gradcheck.GradcheckReport with at least one row, "
                        f"got {got(report)}")
    check_path("gradcheck_chart", path)
    check_text("gradcheck_chart", "title", title)
    results = report.results
    labels = [f"{r.op}: {r.tensor}" for r in results]
    errors = [max(r.max_rel_error, 1e-16) for r in results]
    colours = ["tab:green" if r.passed else "tab:red" for r in results]
    figure, axis = pyplot().subplots(figsize=(9, 0.28 * len(results) + 1.4), constrained_layout=True)
    axis.barh(range(len(results)), errors, color=colours)
    axis.axvline(report.tol, color="black", linestyle="--", label=f"pass threshold {report.tol:.0e}")
    axis.set_xscale("log")
    axis.set_yticks(range(len(results)), labels, fontsize=8)
    axis.invert_yaxis()
    axis.set(xlabel="worst elementwise relative error |a - n| / (|a| + |n|)",
             title=title or "Hand-written gradients against finite differences (float64)")
    axis.legend(loc="lower right")
    axis.grid(True, axis="x", alpha=0.3)
    return finish(figure, path)


def mutants_chart(names: list[str], errors: list[float], tolerances: tuple[float, ...] = (1e-6, 1e-2),
                  path: str | None = None, title: str = "") -> Any:
    """The worst relative error each bug causes (``gradcheck.mutants``), on a log scale, with the
    tolerances marked: a bug to the right of a tolerance is caught by a checker using it.

    Checked first: ``names`` a non-empty list of str, ``errors`` as many numbers, one to three
    ``tolerances`` > 0."""
    check_labels("mutants_chart", "names", names)
    if not isinstance(errors, (list, tuple)) or len(errors) != len(names) or not all(map(is_number, errors)):
        raise ValueError(f"mutants_chart: errors must be a list of {len(names)} numbers (one per name), "
                         f"got {got(errors)}")
    if not isinstance(tolerances, (list, tuple)) or not 1 <= len(tolerances) <= 3 or not all(
            is_number(t) and t > 0 for t in tolerances):
        raise ValueError(f"mutants_chart: tolerances must be one to three numbers > 0, got {got(tolerances)}")
    check_path("mutants_chart", path)
    check_text("mutants_chart", "title", title)
    figure, axis = pyplot().subplots(figsize=(9, 0.26 * len(names) + 1.5), constrained_layout=True)
    shown = [min(max(error, 1e-16), 10.0) for error in errors]  # a wrong shape counts as infinite: drawn at 10
    colours = ["tab:red" if error > max(tolerances) else "tab:orange" if error > min(tolerances) else "tab:gray"
               for error in shown]
    axis.barh(range(len(names)), shown, color=colours)
    for tolerance, style in zip(sorted(tolerances), ("--", ":", "-.")):
        axis.axvline(tolerance, color="black", linestyle=style, label=f"tolerance {tolerance:.0e}")
    axis.set_xscale("log")
    axis.set_yticks(range(len(names)), names, fontsize=8)
    axis.invert_yaxis()
    axis.set(xlabel="worst relative error the bug causes (a wrong shape is drawn at 10)",
             title=title or "Realistic backward bugs against the gradient checker")
    axis.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=len(tolerances), frameon=False)
    axis.grid(True, axis="x", alpha=0.3)
    return finish(figure, path)
