"""Figures (Matplotlib) and the interactive attention explorer (one HTML file).

Each figure function returns the Figure and saves it when given a path; every one checks its
arguments before Matplotlib is imported (``checks``). ``base``: Matplotlib imported on first use,
``close``, ``figures_dir``; ``training``: curves and gradient-check charts; ``building_blocks``:
positional encodings and masks; ``attention``: heatmaps, alignments and AER; ``explorer``: the HTML
explorer.
"""

from .attention import aer_heatmap, alignment_figure, attention_heatmaps
from .base import close, figures_dir
from .building_blocks import masks_figure, positional_encoding_figure
from .explorer import EXPLORER_ORDER, AttentionExplorer, attention_explorer
from .training import gradcheck_chart, mutants_chart, training_curves

__all__ = ["close", "figures_dir", "training_curves", "gradcheck_chart", "mutants_chart", "positional_encoding_figure",
           "masks_figure", "attention_heatmaps", "alignment_figure", "aer_heatmap", "AttentionExplorer",
           "attention_explorer", "EXPLORER_ORDER"]
