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


def test_a_lesson_run_by_hand_writes_its_figures_to_a_folder_of_its_own_and_says_where(tmp_path, monkeypatch):
    """Without NPFORMER_FIGURES a lesson never touches the repository's figures/: each run gets a
    fresh folder in the temporary folder, printed; with it, the folder asked for."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    committed = root / "figures" / "05_positional_encoding.png"
    before = committed.stat().st_mtime_ns
    env = {key: value for key, value in os.environ.items() if key != "NPFORMER_FIGURES"}
    env.update(MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "lessons/05_positional_encoding.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("figures of this run: ")]
    folder = pathlib.Path(line.split(": ", 1)[1].split(" (")[0])
    assert folder.parent == tmp_path and folder.name.startswith("npformer-figures-")
    assert {path.name for path in folder.iterdir()} == {"05_positional_encoding.png", "05_position_similarity.png"}
    assert committed.stat().st_mtime_ns == before
    another = subprocess.run([sys.executable, "-c", "from npformer import viz; viz.figures_dir(); viz.figures_dir()"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert another.stdout.count("figures of this run: ") == 1 and str(folder) not in another.stdout
    monkeypatch.setenv("NPFORMER_FIGURES", str(tmp_path / "asked"))
    assert viz.figures_dir() == tmp_path / "asked" and (tmp_path / "asked").is_dir()


def test_a_saved_figure_keeps_every_title_inside_its_edges(tmp_path):
    """Fixed-aspect maps once pushed the top row's titles off the canvas: the saved image's edges
    must be margin (white) only, every title and label inside."""
    rng = np.random.default_rng(0)
    maps = [rng.dirichlet(np.ones(7), size=(4, 8)) for _ in range(2)]
    path = tmp_path / "cross.png"
    plt.close(viz.attention_heatmaps(maps, [f"fr{i}" for i in range(8)], [f"en{i}" for i in range(7)], path=str(path)))
    image = plt.imread(str(path))[..., :3]
    edges = np.concatenate([image[:3].reshape(-1, 3), image[-3:].reshape(-1, 3),
                            image[:, :3].reshape(-1, 3), image[:, -3:].reshape(-1, 3)])
    assert edges.min() > 0.99, "something is drawn on the image's edge, cut off"
