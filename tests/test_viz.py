"""Figures: each function returns a Figure and writes a PNG when given a path."""

import matplotlib.pyplot as plt
import numpy as np

from npformer import gradcheck, viz


def test_every_figure_is_written(tmp_path):
    figures = {
        "pe.png": lambda p: viz.positional_encoding_figure(32, 16, path=p),
        "masks.png": lambda p: viz.masks_figure(["<bos>", "le", "chat", "<pad>"], path=p),
        "attention.png": lambda p: viz.attention_heatmaps(
            [np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 4)) for _ in range(2)],
            ["a", "b", "c", "d"], ["w", "x", "y", "z", "."], title="test", path=p),
        "gradcheck.png": lambda p: viz.gradcheck_chart(gradcheck.check_op("linear"), path=p),
        "curves.png": lambda p: viz.training_curves(
            [{"kind": "train", "step": s, "loss": 5 / s, "lr": 1e-3} for s in range(1, 50)]
            + [{"kind": "eval", "step": 25, "valid_loss": 0.5, "valid_bleu": 40.0}], path=p),
    }
    for name, draw in figures.items():
        figure = draw(str(tmp_path / name))
        try:
            assert figure.axes, name
            assert (tmp_path / name).stat().st_size > 5_000, name
        finally:
            viz.close(figure)
        assert not plt.fignum_exists(figure.number), name


def test_a_curve_of_one_point_is_marked_and_an_empty_panel_says_why():
    """A run shorter than two log lines draws its one point with a marker (a line through one point
    draws nothing); a panel with no data says so instead of being a blank axis."""
    figure = viz.training_curves([{"kind": "train", "step": 10, "loss": 7.5, "lr": 1e-4}])
    try:
        loss_axis, bleu_axis, lr_axis = figure.axes
        for axis in (loss_axis, lr_axis):
            [line] = axis.get_lines()
            assert line.get_marker() == "o" and len(line.get_xdata()) == 1
        assert "no evaluation yet" in " ".join(text.get_text() for text in bleu_axis.texts)
    finally:
        viz.close(figure)
    many = viz.training_curves([{"kind": "train", "step": s, "loss": 1.0, "lr": 1e-4} for s in (10, 20)])
    try:
        assert many.axes[0].get_lines()[0].get_marker() in ("None", None, "")
    finally:
        viz.close(many)


def test_attention_maps_label_the_bottom_row_and_first_column_only():
    """Every map has the same tokens: labels on the bottom row and the first column, so that no
    row's rotated labels run into the titles of the row below."""
    layers = [np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 2)) for _ in range(2)]
    figure = viz.attention_heatmaps(layers, ["le", "chat"], ["the", "cat", "."])
    try:
        axes = [axis for axis in figure.axes if axis.get_images()]
        labelled = [[tick.get_text() for tick in axis.get_xticklabels()] for axis in axes]
        assert labelled[:2] == [["", "", ""]] * 2 and labelled[2:] == [["the", "cat", "."]] * 2
        rows = [[tick.get_text() for tick in axis.get_yticklabels()] for axis in axes]
        assert rows[0] == rows[2] == ["le", "chat"] and rows[1] == rows[3] == ["", ""]
    finally:
        viz.close(figure)
