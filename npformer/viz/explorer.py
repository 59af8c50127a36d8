"""The interactive attention explorer: one self-contained HTML page (data and script inline).
"""

from __future__ import annotations

import os
from typing import Any

from .checks import check_maps, check_path, check_text, got, make_folder

EXPLORER_ORDER = ("cross", "encoder", "decoder")  # the explorer's buttons; names and titles: models.ATTENTION_KINDS


class AttentionExplorer:
    """An interactive attention explorer: one self-contained HTML page (data and script inline,
    no server, no network). ``save(path)`` writes it; in Jupyter it displays inline (in an
    ``iframe``, so that its script runs wherever the notebook's output is shown)."""

    def __init__(self, html: str, height: int = 720) -> None:
        self.html, self.height = html, height

    def save(self, path: Any) -> Any:
        """Write the page to ``path`` (its folder is created; checked first, as for the figures)."""
        if not path or not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"AttentionExplorer.save: path must be a str or os.PathLike file name, got {got(path)}")
        check_path("AttentionExplorer.save", path)
        make_folder(path)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.html)
        return path

    def _repr_html_(self) -> str:
        import html

        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; '
                f'height: {self.height}px; border: 1px solid #ddd;"></iframe>')


def attention_explorer(attentions: Any, path: Any = None, title: str = "npformer attention explorer") -> AttentionExplorer:
    """An interactive page of the attention of one or more sentences.

    ``attentions``: one ``Translation`` (``tasks.translation.attention_of``) or a list of them:
    each has ``sentence``, ``text``, ``attention[kind]`` (one ``(H, Tq, Tk)`` array per layer) and
    ``labels[kind]`` (row tokens, column tokens) for the kinds of ``models.ATTENTION_KINDS``
    (``"cross"``, ``"encoder"``, ``"decoder"``).
    The page chooses the sentence, the kind, the layer and one head or all of them; hovering a
    token highlights what it attends to (its row) and what attends to it (its column). Weights
    are stored to 4 decimals. Written to ``path`` when given. Checked before the page is written:
    at least one sentence, each kind's maps as in ``attention_heatmaps`` (one ``H`` across layers,
    labels that fit), ``path`` and ``title``.
    """
    import html
    import json
    from importlib import resources

    import numpy

    from .. import backend
    from ..models import ATTENTION_KINDS

    if not isinstance(attentions, (list, tuple)):
        attentions = [attentions]
    if not attentions:
        raise ValueError("attention_explorer: attentions must hold at least one sentence, got no sentences to show")
    check_path("attention_explorer", path)
    check_text("attention_explorer", "title", title)
    sentences = []
    for found in attentions:
        kinds = {}
        for kind in EXPLORER_ORDER:
            rows, columns = found.labels[kind]
            check_maps("attention_explorer", f"the {kind} maps of {found.sentence!r}", found.attention[kind], rows,
                        columns, (f"the {kind} row labels", f"the {kind} column labels"))
            layers = [numpy.round(backend.to_numpy(weights)[:, : len(rows), : len(columns)].astype(float), 4).tolist()
                      for weights in found.attention[kind]]
            kinds[kind] = {"short": kind, "title": ATTENTION_KINDS[kind], "self": kind != "cross",
                           "rows": list(rows), "cols": list(columns), "layers": layers}
        sentences.append({"sentence": found.sentence, "translation": found.text,
                          "order": list(EXPLORER_ORDER), "kinds": kinds})
    payload = json.dumps({"sentences": sentences}, ensure_ascii=False).replace("</", "<\\/")
    template = resources.files("npformer").joinpath("attention_explorer.html").read_text(encoding="utf-8")
    page = template.replace("__TITLE__", html.escape(title)).replace("__DATA__", payload)
    explorer = AttentionExplorer(page)
    if path:
        explorer.save(path)
    return explorer
