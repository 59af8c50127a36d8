"""Translators that ship inside the package, trained and ready: ``npformer.pretrained("toy")``.

* ``toy``: the default run of ``npformer train`` (the ``tiny`` preset on the embedded toy corpus,
  900 steps, seed 0), with the weights alone (no optimizer state, about 1 MB) and its test split.
* ``fra``: an English-to-French translator trained on Tatoeba by the documented command of
  ``docs/translation.md`` (the ``small`` preset, BPE pieces, pairs of up to 16 words), its weights
  stored as float16 (about 8 MB; loaded back as float32) with its test split, its truecaser and
  its held-out long pairs. Data: Tatoeba Project (tatoeba.org),
  CC-BY 2.0 FR, via manythings.org/anki; the commands that read it say so on stderr.

Each is a run folder in ``npformer/data/pretrained/NAME/``. Its ``record.json`` holds the test BLEU
it reached when it was built, the command and the machine; ``tests/test_pretrained.py`` checks
that the shipped weights still give that BLEU. ``python benchmarks/build_pretrained.py`` rebuilds
``toy``, and ``python benchmarks/build_pretrained.py fra --run RUN --command ...`` packages ``fra``.

    run = npformer.pretrained("toy")              # a Run: model, vocabularies, config, folder
    Translator.from_run(run).translate(["the black cat eats the apple."])
    npformer translate --pretrained toy "the black cat eats the apple."
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .run_folder import RunError, load_run

PRETRAINED_DIR = Path(__file__).resolve().parents[2] / "data" / "pretrained"


def available() -> list[str]:
    """The names of the shipped translators."""
    return sorted(path.name for path in PRETRAINED_DIR.iterdir() if (path / "config.json").is_file()) \
        if PRETRAINED_DIR.is_dir() else []


def pretrained_folder(name: str) -> str:
    """The run folder of the shipped translator ``name``; a one-line error naming the ones there are."""
    if name not in available():
        raise RunError(f"no pretrained translator named {name!r}; there is: {', '.join(available()) or 'none'}")
    return str(PRETRAINED_DIR / name)


def pretrained(name: str = "toy") -> Any:
    """The shipped translator ``name`` as a loaded run (``.model`` in eval mode, ``.src_vocab``,
    ``.tgt_vocab``, ``.config``, ``.folder``)."""
    return load_run(pretrained_folder(name))


def pretrained_record(name: str = "toy") -> dict:
    """What the shipped translator scored when it was built (test BLEU greedy and beam, the command)."""
    return json.loads((Path(pretrained_folder(name)) / "record.json").read_text(encoding="utf-8"))
