"""Figure plumbing: Matplotlib imported when the first figure is drawn, saving, closing, and the
folder the lessons write figures to.

This package never chooses Matplotlib's backend and never closes the figures it returns: in a
notebook they show inline, in a script they go to the files given as ``path``. Code that draws
many figures in a loop, such as the trainer, releases each one with ``close(figure)``.
"""

from __future__ import annotations

import os
from typing import Any

from .checks import make_folder


def pyplot() -> Any:
    """``matplotlib.pyplot``, imported when the first figure is drawn (not by ``import npformer``)."""
    import matplotlib.pyplot

    return matplotlib.pyplot


def finish(figure: Any, path: Any, fit: bool = False) -> Any:
    """Save ``figure`` to ``path`` (if given; its folder is created) and return it, still open.
    ``fit``: the saved image is cut to what the figure draws, with a small margin, for a grid of
    fixed-aspect maps whose titles the layout can push off the canvas (``attention_heatmaps``; an
    extra drawing pass, so only where it is needed; Jupyter shows every figure so inline)."""
    if path:
        if isinstance(path, (str, os.PathLike)):
            make_folder(path)
        figure.savefig(path, dpi=110, **({"bbox_inches": "tight", "pad_inches": 0.1} if fit else {}))
    return figure


# -- argument checks: one line each, "<function>: <argument> must be <expected>, got <received>" --


def close(figure: Any) -> None:
    """Release ``figure``'s memory (Matplotlib keeps every open figure until it is closed)."""
    pyplot().close(figure)


_RUN_FIGURES: list = []   # this process's figures folder, made on the first call of figures_dir


def figures_dir() -> Any:
    """Where the lessons write figures, as a ``pathlib.Path``; made if missing.

    ``$NPFORMER_FIGURES`` when set (``NPFORMER_FIGURES=figures python lessons/05_...py``
    regenerates the repository's committed figures; ``npformer course notebooks OUT`` sets
    ``OUT/figures``). Otherwise a folder of this run alone, made in the system's temporary folder
    on the first call (``npformer-figures-`` and a random suffix), whose path is printed then: a
    lesson run by hand never overwrites the committed figures, and two runs never share a folder.
    """
    import tempfile
    from pathlib import Path

    if os.environ.get("NPFORMER_FIGURES"):
        folder = Path(os.environ["NPFORMER_FIGURES"])
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    if not _RUN_FIGURES:
        _RUN_FIGURES.append(Path(tempfile.mkdtemp(prefix="npformer-figures-")))
        print(f"figures of this run: {_RUN_FIGURES[0]} (NPFORMER_FIGURES=folder to choose; "
              "NPFORMER_FIGURES=figures rewrites the repository's)")
    _RUN_FIGURES[0].mkdir(parents=True, exist_ok=True)  # again, should a cleaner have removed it
    return _RUN_FIGURES[0]
