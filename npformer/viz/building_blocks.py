"""Figures of the lessons' building blocks: the positional encoding and the masks.
"""

from __future__ import annotations

from typing import Any

from .base import finish, pyplot
from .checks import check_count, check_labels, check_path, check_text, got

def positional_encoding_figure(max_len: int = 64, d_model: int = 128, path: str | None = None,
                               pairs: tuple[int, ...] = (0, 5, 20)) -> Any:
    """The sinusoid table as a heatmap, and three of its (sin, cos) pairs over the position.

    The pairs are drawn as continuous curves of the position (the formula holds for any real
    ``p``), with a dot at each whole position, the only places a model reads them: the fast pairs
    would otherwise look jagged from being sampled once per position. Checked first: ``max_len``
    and ``d_model`` ints >= 1, ``pairs`` a tuple of ints >= 0 (those past ``d_model`` are left out).
    """
    import numpy

    from .. import backend, ops

    check_count("positional_encoding_figure", "max_len", max_len)
    check_count("positional_encoding_figure", "d_model", d_model)
    if not isinstance(pairs, (list, tuple)):
        raise TypeError(f"positional_encoding_figure: pairs must be a tuple of ints >= 0, got {got(pairs)}")
    for index, pair in enumerate(pairs):
        check_count("positional_encoding_figure", f"pairs[{index}]", pair, low=0)
    check_path("positional_encoding_figure", path)
    table = backend.to_numpy(ops.positional_encoding(max_len, d_model, dtype="float64"))
    pairs = tuple(pair for pair in pairs if 2 * pair + 1 < d_model) or (0,)
    figure = pyplot().figure(figsize=(13, 5), constrained_layout=True)
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
    return finish(figure, path)


def masks_figure(tokens: list[str], pad_token: str = "<pad>", path: str | None = None) -> Any:
    """Padding mask, look-ahead mask and their combination for one padded sequence.

    Checked first: ``tokens`` a non-empty list of str, ``pad_token`` a str."""
    import numpy

    check_labels("masks_figure", "tokens", tokens)
    check_text("masks_figure", "pad_token", pad_token)
    check_path("masks_figure", path)
    n = len(tokens)
    real = numpy.array([token != pad_token for token in tokens])
    padding = numpy.broadcast_to(real[None, :], (n, n))
    causal = numpy.tril(numpy.ones((n, n), dtype=bool))
    figure, axes = pyplot().subplots(1, 3, figsize=(14, 4.8), constrained_layout=True)
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
    return finish(figure, path)
