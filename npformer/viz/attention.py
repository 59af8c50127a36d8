"""Attention as heatmaps: one subplot per layer and head, alignments beside gold, AER per head.
"""

from __future__ import annotations

from typing import Any

from .base import finish, pyplot
from .checks import check_array, check_labels, check_maps, check_path, check_text, got

def attention_heatmaps(weights: list, query_tokens: list[str], key_tokens: list[str],
                       title: str = "", path: str | None = None) -> Any:
    """One subplot per layer (rows) and head (columns), a shared colour scale and one colour bar.

    ``weights`` is a list over layers of ``(H, Tq, Tk)`` arrays (one sentence), each cut to
    ``query_tokens`` rows and ``key_tokens`` columns. Readable up to about 20 tokens per axis.
    Checked first: every layer 3-D with the same ``H``, and no more tokens than ``Tq`` and ``Tk``.
    """
    import numpy

    layers = check_maps("attention_heatmaps", "weights", weights, query_tokens, key_tokens,
                         ("query_tokens", "key_tokens"))
    check_text("attention_heatmaps", "title", title)
    check_path("attention_heatmaps", path)
    n_layers, n_heads = len(layers), layers[0].shape[0]
    size = max(len(query_tokens), len(key_tokens))
    cell = 0.22 * max(size, 12)  # a small grid still gets readable labels
    width = max(cell * n_heads + 1.8, 0.11 * len(title.split("\n")[-1]) + 1.0, 5.0)
    figure, axes = pyplot().subplots(n_layers, n_heads, figsize=(width, cell * n_layers + 1.4),
                                squeeze=False, constrained_layout=True)
    vmax = max(float(numpy.max(layer)) for layer in layers)
    for row, layer in enumerate(layers):
        for head in range(n_heads):
            axis = axes[row, head]
            image = axis.imshow(layer[head][: len(query_tokens), : len(key_tokens)], cmap="viridis",
                                vmin=0, vmax=vmax, interpolation="nearest")
            # Every map has the same tokens: labels on the bottom row and the first column only, so
            # that no row's labels run into the titles of the row below.
            axis.set_xticks(range(len(key_tokens)), key_tokens if row == n_layers - 1 else [],
                            rotation=70, ha="right", fontsize=7)
            axis.set_yticks(range(len(query_tokens)), query_tokens if head == 0 else [], fontsize=7)
            if n_layers > 1 or n_heads > 1:  # one map needs no name
                axis.set_title(f"layer {row}, head {head}", fontsize=9)
            if row == n_layers - 1:
                axis.set_xlabel("key (attended to)", fontsize=8)
            if head == 0:
                axis.set_ylabel("query (attending)", fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        figure.suptitle(title)
    return finish(figure, path, fit=True)   # the top row's titles stay inside the image


def alignment_figure(panels: list, source: list[str], target: list[str], gold: Any,
                     path: str | None = None, title: str = "") -> Any:
    """Explanations of one sentence pair beside its gold alignment.

    ``panels``: ``(name, scores (Tt + 1, Ts))`` pairs, row ``i`` producing French token ``i``
    (the last row, ``<eos>``, is not drawn); ``gold``: a ``data.Alignment``. Each panel is scaled
    to its own largest value; sure gold links are outlined in white, the argmax of each row
    (the alignment the panel proposes) is marked with a dot. Checked first: at least one panel,
    each a (str, 2-D scores) pair with at least ``len(target)`` rows and ``len(source)`` columns,
    and every sure link of ``gold`` inside them.
    """
    _check_alignment_panels("alignment_figure", panels, source, target, gold)
    check_path("alignment_figure", path)
    check_text("alignment_figure", "title", title)
    import numpy
    from matplotlib.patches import Rectangle

    figure, axes = pyplot().subplots(1, len(panels), figsize=(3.3 * len(panels) + 0.6, 0.34 * len(target) + 1.6),
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
    return finish(figure, path)


def _check_alignment_panels(function: str, panels: Any, source: Any, target: Any, gold: Any) -> None:
    """The panels, labels and gold links of ``alignment_figure`` fit each other (see its docstring)."""
    check_labels(function, "source", source)
    check_labels(function, "target", target)
    if not isinstance(panels, (list, tuple)) or not panels:
        raise TypeError(f"{function}: panels must be a non-empty list of (name, scores) pairs, got {got(panels)}")
    for index, panel in enumerate(panels):
        if not (isinstance(panel, (list, tuple)) and len(panel) == 2 and isinstance(panel[0], str)):
            raise TypeError(f"{function}: panels[{index}] must be a (name, scores) pair, got {got(panel)}")
        scores = check_array(function, f"panels[{index}] scores", panel[1], 2, "(Tt + 1, Ts)")
        check_labels(function, "target", target, scores.shape[0], f"the rows of panels[{index}] scores")
        check_labels(function, "source", source, scores.shape[1], f"the columns of panels[{index}] scores")
    if not hasattr(gold, "sure"):
        raise TypeError(f"{function}: gold must be a data.Alignment (with sure links), got {got(gold)}")
    outside = sorted((e, f) for e, f in gold.sure if not (0 <= e < len(source) and 0 <= f < len(target)))
    if outside:
        raise ValueError(f"{function}: gold's sure links (english, french) must lie in [0, {len(source)}) x "
                         f"[0, {len(target)}) (source x target tokens), got {outside}")


def aer_heatmap(heads: list[list[float]], path: str | None = None, title: str = "") -> Any:
    """Alignment error rate by layer (rows) and head (columns), each cell labelled.

    Checked first: ``heads`` a non-empty 2-D table of numbers (a list of equal-length rows)."""
    table = check_array("aer_heatmap", "heads", heads, 2, "(layers, heads)")
    check_path("aer_heatmap", path)
    check_text("aer_heatmap", "title", title)
    figure, axis = pyplot().subplots(figsize=(1.0 * table.shape[1] + 2.4, 0.8 * table.shape[0] + 1.6),
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
    return finish(figure, path)
