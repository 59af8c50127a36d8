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


def finish(figure: Any, path: Any) -> Any:
    """Save ``figure`` to ``path`` (if given; its folder is created) and return it, still open."""
    if path:
        if isinstance(path, (str, os.PathLike)):
            make_folder(path)
        figure.savefig(path, dpi=110)
    return figure


# -- argument checks: one line each, "<function>: <argument> must be <expected>, got <received>" --


def close(figure: Any) -> None:
    """Release ``figure``'s memory (Matplotlib keeps every open figure until it is closed)."""
    pyplot().close(figure)


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
