"""Figures (Matplotlib) and the interactive attention explorer (one HTML file).

Each figure function returns the Figure and saves it when given a path.

This module never chooses Matplotlib's backend and never closes the figures it
returns: in a notebook they show inline, in a script they go to the files
given as ``path`` (Matplotlib falls back to a file-only backend on a machine
without a display). Code that draws many figures in a loop, such as the
trainer, releases each one with ``close(figure)``.
"""

from __future__ import annotations

from typing import Any


def _pyplot() -> Any:
    """``matplotlib.pyplot``, imported when the first figure is drawn (not by ``import npformer``)."""
    import matplotlib.pyplot

    return matplotlib.pyplot


def _finish(figure: Any, path: Any) -> Any:
    """Save ``figure`` to ``path`` (if given) and return it, still open."""
    if path:
        figure.savefig(path, dpi=110)
    return figure


def close(figure: Any) -> None:
    """Release ``figure``'s memory (Matplotlib keeps every open figure until it is closed)."""
    _pyplot().close(figure)


def training_curves(records: list[dict], path: str | None = None, title: str = "") -> Any:
    """Loss (train and validation), validation BLEU and learning rate against the step.

    ``records`` are the lines of ``metrics.jsonl``: ``{"kind": "train", "step", "loss",
    "lr", ...}`` and ``{"kind": "eval", "step", "valid_loss", "valid_bleu", ...}``.
    """
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    figure, (loss_axis, bleu_axis, lr_axis) = _pyplot().subplots(1, 3, figsize=(14, 4), sharex=True,
                                                          constrained_layout=True)
    if train:
        loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train],
                       color="tab:blue", alpha=0.6, linewidth=1, label="train (label-smoothed)")
        lr_axis.plot([r["step"] for r in train], [r["lr"] for r in train], color="tab:purple")
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
    return _finish(figure, path)


def positional_encoding_figure(max_len: int = 64, d_model: int = 128, path: str | None = None,
                               pairs: tuple[int, ...] = (0, 5, 20)) -> Any:
    """The sinusoid table as a heatmap, and three of its (sin, cos) pairs over the position.

    The pairs are drawn as continuous curves of the position (the formula holds for any real
    ``p``), with a dot at each whole position, the only places a model reads them: the fast pairs
    would otherwise look jagged from being sampled once per position.
    """
    import numpy

    from . import backend, ops

    table = backend.to_numpy(ops.positional_encoding(max_len, d_model, dtype="float64"))
    pairs = tuple(pair for pair in pairs if 2 * pair + 1 < d_model) or (0,)
    figure = _pyplot().figure(figsize=(13, 5), constrained_layout=True)
    grid = figure.add_gridspec(len(pairs), 2, width_ratios=[1.3, 1])
    heat = figure.add_subplot(grid[:, 0])
    image = heat.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    heat.set(title=f"Positional encoding PE[p, j]  ({max_len} positions, d_model = {d_model})",
             xlabel="dimension j  (even: sin, odd: cos)", ylabel="position p")
    figure.colorbar(image, ax=heat, shrink=0.9, label="PE[p, j]")
    smooth = numpy.linspace(0, max_len - 1, 40 * max_len)
    whole = numpy.arange(max_len)
    for row, pair in enumerate(pairs):
        axis = figure.add_subplot(grid[row, 1])
        frequency = 10000.0 ** (-2 * pair / d_model)
        for function, style, name, column in ((numpy.sin, "-", "sin", 2 * pair), (numpy.cos, "--", "cos", 2 * pair + 1)):
            line, = axis.plot(smooth, function(smooth * frequency), style, linewidth=1,
                              label=f"j = {column} ({name})")
            axis.plot(whole, table[:, column], "o", markersize=2.5, color=line.get_color())
        axis.set(ylim=(-1.25, 1.25), ylabel="value",
                 title=f"pair {pair}: wavelength {2 * numpy.pi / frequency:,.0f} positions", xlim=(0, max_len - 1))
        axis.title.set_fontsize(9)
        axis.legend(fontsize=7, loc="upper right", ncol=2)
        axis.grid(True, alpha=0.3)
        if row == len(pairs) - 1:
            axis.set_xlabel("position p (dots: the whole positions a model reads)")
    return _finish(figure, path)


def masks_figure(tokens: list[str], pad_token: str = "<pad>", path: str | None = None) -> Any:
    """Padding mask, look-ahead mask and their combination for one padded sequence."""
    import numpy

    n = len(tokens)
    real = numpy.array([token != pad_token for token in tokens])
    padding = numpy.broadcast_to(real[None, :], (n, n))
    causal = numpy.tril(numpy.ones((n, n), dtype=bool))
    figure, axes = _pyplot().subplots(1, 3, figsize=(14, 4.8), constrained_layout=True)
    panels = [("Padding mask: keys that are real tokens", padding),
              ("Look-ahead (causal) mask: key <= query", causal),
              ("Decoder self-attention: both", padding & causal)]
    for axis, (title, mask) in zip(axes, panels):
        axis.imshow(mask, cmap="Greens", vmin=0, vmax=1.3, interpolation="nearest")
        axis.set_xticks(range(n), tokens, rotation=60, ha="right", fontsize=8)
        axis.set_yticks(range(n), tokens, fontsize=8)
        axis.set(title=title, xlabel="key (attended to)", ylabel="query (attending)")
        for i in range(n):
            for j in range(n):
                axis.text(j, i, "1" if mask[i, j] else "0", ha="center", va="center", fontsize=7,
                          color="black" if mask[i, j] else "0.6")
    figure.suptitle("Boolean attention masks: True (1) = may attend; a False score becomes -inf")
    return _finish(figure, path)


def attention_heatmaps(weights: list, query_tokens: list[str], key_tokens: list[str],
                       title: str = "", path: str | None = None) -> Any:
    """One subplot per layer (rows) and head (columns), a shared colour scale and one colour bar.

    ``weights`` is a list over layers of ``(H, Tq, Tk)`` arrays (one sentence).
    Readable up to about 20 tokens per axis.
    """
    import numpy

    from . import backend

    layers = [backend.to_numpy(w) for w in weights]
    n_layers, n_heads = len(layers), layers[0].shape[0]
    size = max(len(query_tokens), len(key_tokens))
    cell = 0.22 * max(size, 12)  # a small grid still gets readable labels
    width = max(cell * n_heads + 1.8, 0.11 * len(title.split("\n")[-1]) + 1.0, 5.0)
    figure, axes = _pyplot().subplots(n_layers, n_heads, figsize=(width, cell * n_layers + 1.4),
                                squeeze=False, constrained_layout=True)
    vmax = max(float(numpy.max(layer)) for layer in layers)
    for row, layer in enumerate(layers):
        for head in range(n_heads):
            axis = axes[row, head]
            image = axis.imshow(layer[head][: len(query_tokens), : len(key_tokens)], cmap="viridis",
                                vmin=0, vmax=vmax, interpolation="nearest")
            axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=70, ha="right", fontsize=7)
            axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=7)
            if n_layers > 1 or n_heads > 1:  # one map needs no name
                axis.set_title(f"layer {row}, head {head}", fontsize=9)
            if row == n_layers - 1:
                axis.set_xlabel("key (attended to)", fontsize=8)
            if head == 0:
                axis.set_ylabel("query (attending)", fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        figure.suptitle(title)
    return _finish(figure, path)


EXPLORER_KINDS = {  # kind: (button, title, rows and columns are the same tokens)
    "cross": ("cross-attention", "Decoder cross-attention: output token (row) -> source (column)", False),
    "enc": ("encoder self", "Encoder self-attention", True),
    "dec": ("decoder self", "Decoder self-attention (causal)", True),
}


class AttentionExplorer:
    """An interactive attention explorer: one self-contained HTML page (data and script inline,
    no server, no network). ``save(path)`` writes it; in Jupyter it displays inline (in an
    ``iframe``, so that its script runs wherever the notebook's output is shown)."""

    def __init__(self, html: str, height: int = 720) -> None:
        self.html, self.height = html, height

    def save(self, path: Any) -> Any:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.html)
        return path

    def _repr_html_(self) -> str:
        import html

        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; '
                f'height: {self.height}px; border: 1px solid #ddd;"></iframe>')


def attention_explorer(attentions: Any, path: Any = None, title: str = "npformer attention explorer") -> AttentionExplorer:
    """An interactive page of the attention of one or more sentences.

    ``attentions``: one ``SentenceAttention`` (``tasks.translation.attention_of``) or a list of them:
    each has ``sentence``, ``translation``, ``maps[kind]`` (one ``(H, Tq, Tk)`` array per layer) and
    ``labels[kind]`` (row tokens, column tokens) for the kinds ``"cross"``, ``"enc"`` and ``"dec"``.
    The page chooses the sentence, the kind, the layer and one head or all of them; hovering a
    token highlights what it attends to (its row) and what attends to it (its column). Weights
    are stored to 4 decimals. Written to ``path`` when given.
    """
    import html
    import json
    from importlib import resources

    import numpy

    from . import backend

    if not isinstance(attentions, (list, tuple)):
        attentions = [attentions]
    if not attentions:
        raise ValueError("attention_explorer: no sentences to show")
    sentences = []
    for found in attentions:
        kinds = {}
        for kind, (short, kind_title, is_self) in EXPLORER_KINDS.items():
            rows, columns = found.labels[kind]
            layers = [numpy.round(backend.to_numpy(weights)[:, : len(rows), : len(columns)].astype(float), 4).tolist()
                      for weights in found.maps[kind]]
            kinds[kind] = {"short": short, "title": kind_title, "self": is_self, "rows": list(rows),
                           "cols": list(columns), "layers": layers}
        sentences.append({"sentence": found.sentence, "translation": found.translation,
                          "order": list(EXPLORER_KINDS), "kinds": kinds})
    payload = json.dumps({"sentences": sentences}, ensure_ascii=False).replace("</", "<\\/")
    template = resources.files("npformer").joinpath("attention_explorer.html").read_text(encoding="utf-8")
    page = template.replace("__TITLE__", html.escape(title)).replace("__DATA__", payload)
    explorer = AttentionExplorer(page)
    if path:
        explorer.save(path)
    return explorer


def alignment_figure(panels: list, source: list[str], target: list[str], gold: Any,
                     path: str | None = None, title: str = "") -> Any:
    """Explanations of one sentence pair beside its gold alignment.

    ``panels``: ``(name, scores (Tt + 1, Ts))`` pairs, row ``i`` producing French token ``i``
    (the last row, ``<eos>``, is not drawn); ``gold``: a ``data.Alignment``. Each panel is scaled
    to its own largest value; sure gold links are outlined in white, the argmax of each row
    (the alignment the panel proposes) is marked with a dot.
    """
    import numpy
    from matplotlib.patches import Rectangle

    figure, axes = _pyplot().subplots(1, len(panels), figsize=(3.3 * len(panels) + 0.6, 0.34 * len(target) + 1.6),
                                squeeze=False, constrained_layout=True)
    for axis, (name, scores) in zip(axes[0], panels):
        shown = numpy.asarray(scores)[: len(target), : len(source)]
        axis.imshow(shown / max(float(shown.max()), 1e-12), cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        for english, french in gold.sure:
            axis.add_patch(Rectangle((english - 0.5, french - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=1.8))
        axis.plot(shown.argmax(axis=1), range(len(target)), "o", color="tab:red", markersize=4)
        axis.set_xticks(range(len(source)), source, rotation=70, ha="right", fontsize=8)
        axis.set_yticks(range(len(target)), target, fontsize=8)
        axis.set_title(name, fontsize=9)
    if title:
        figure.suptitle(title, fontsize=10)
    return _finish(figure, path)


def aer_heatmap(heads: list[list[float]], path: str | None = None, title: str = "") -> Any:
    """Alignment error rate by layer (rows) and head (columns), each cell labelled."""
    import numpy

    table = numpy.asarray(heads, dtype=float)
    figure, axis = _pyplot().subplots(figsize=(1.0 * table.shape[1] + 2.4, 0.8 * table.shape[0] + 1.6),
                                constrained_layout=True)
    image = axis.imshow(table, cmap="magma_r", vmin=0, vmax=1, interpolation="nearest")
    for layer in range(table.shape[0]):
        for head in range(table.shape[1]):
            axis.text(head, layer, f"{table[layer, head]:.2f}", ha="center", va="center", fontsize=9,
                      color="white" if table[layer, head] > 0.55 else "black")
    axis.set_xticks(range(table.shape[1]), [f"head {h}" for h in range(table.shape[1])])
    axis.set_yticks(range(table.shape[0]), [f"layer {l}" for l in range(table.shape[0])])
    figure.colorbar(image, ax=axis, shrink=0.8, label="AER (0 = gold alignment)")
    axis.set_title(title or "Cross-attention heads against the gold alignment", fontsize=10)
    return _finish(figure, path)


def gradcheck_chart(report: Any, path: str | None = None, title: str = "") -> Any:
    """Worst relative error per op and tensor, on a log scale, with the pass threshold marked."""
    results = report.results
    labels = [f"{r.op}: {r.tensor}" for r in results]
    errors = [max(r.max_rel_error, 1e-16) for r in results]
    colours = ["tab:green" if r.passed else "tab:red" for r in results]
    figure, axis = _pyplot().subplots(figsize=(9, 0.28 * len(results) + 1.4), constrained_layout=True)
    axis.barh(range(len(results)), errors, color=colours)
    axis.axvline(report.tol, color="black", linestyle="--", label=f"pass threshold {report.tol:.0e}")
    axis.set_xscale("log")
    axis.set_yticks(range(len(results)), labels, fontsize=8)
    axis.invert_yaxis()
    axis.set(xlabel="worst elementwise relative error |a - n| / (|a| + |n|)",
             title=title or "Hand-written gradients against finite differences (float64)")
    axis.legend(loc="lower right")
    axis.grid(True, axis="x", alpha=0.3)
    return _finish(figure, path)


def mutants_chart(names: list[str], errors: list[float], tolerances: tuple[float, ...] = (1e-6, 1e-2),
                  path: str | None = None, title: str = "") -> Any:
    """The worst relative error each bug causes (``gradcheck.mutants``), on a log scale, with the
    tolerances marked: a bug to the right of a tolerance is caught by a checker using it."""
    figure, axis = _pyplot().subplots(figsize=(9, 0.26 * len(names) + 1.5), constrained_layout=True)
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
    return _finish(figure, path)


def figures_dir() -> Any:
    """Where the lessons write figures, as a ``pathlib.Path``.

    ``$NPFORMER_FIGURES`` when set; else, in quick mode (``NPFORMER_QUICK=1``, short runs whose
    figures are not the course's), ``npformer-quick-figures`` in the system's temporary folder, so
    that quick runs never overwrite the committed figures; else the repository's ``figures/``
    (found from the repository root or from ``lessons/``).
    """
    import os
    import tempfile
    from pathlib import Path

    if os.environ.get("NPFORMER_FIGURES"):
        folder = Path(os.environ["NPFORMER_FIGURES"])
    elif os.environ.get("NPFORMER_QUICK") == "1":
        folder = Path(tempfile.gettempdir()) / "npformer-quick-figures"
    elif (Path.cwd().parent / "figures").is_dir() and Path.cwd().name == "lessons":
        folder = Path.cwd().parent / "figures"
    else:
        folder = Path.cwd() / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
