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
