"""Checkpoints: parameters, optimizer state and random-generator states, saved safely.

One checkpoint is one ``.npz`` file (NumPy's zip of arrays), holding

* ``param/<key>``: every model parameter, by its dotted key;
* ``optim/<key>/<slot>``: the optimizer's per-parameter state (Adam's moments);
* ``meta``: a JSON document, stored as UTF-8 bytes, with the step, the
  optimizer's step count and hyperparameters, the random-generator states
  and anything the trainer adds.

A readable copy of ``meta`` is written beside it as ``<name>.json``.

Safety:

* **Loading never runs code.** ``numpy.load(..., allow_pickle=False)`` reads
  plain arrays only; the metadata is JSON, not pickle.
* **Saving is atomic.** The file is written under a temporary name in the same
  folder, flushed to disk, and then renamed over the old one with ``os.replace``,
  which is atomic on POSIX and Windows. A crash mid-save leaves the previous
  checkpoint intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy


def _atomic_write(path: str, write: Any) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def save_checkpoint(path: str, model: Any, optimizer: Any = None, meta: dict | None = None) -> None:
    """Write model parameters, optimizer state and ``meta`` (JSON-able) to ``path`` atomically."""
    arrays = {f"param/{key}": value for key, value in model.state_dict().items()}
    meta = dict(meta or {})
    if optimizer is not None:
        optimizer_state = optimizer.state_dict()
        for key, slots in optimizer_state.pop("state").items():
            for slot, value in slots.items():
                arrays[f"optim/{key}/{slot}"] = value
        meta["optimizer"] = optimizer_state
    text = json.dumps(meta, indent=1, sort_keys=True)
    arrays["meta"] = numpy.frombuffer(text.encode("utf-8"), dtype=numpy.uint8)
    _atomic_write(path, lambda file: numpy.savez(file, **arrays))
    _atomic_write(os.path.splitext(path)[0] + ".json", lambda file: file.write(text.encode("utf-8")))


def load_checkpoint(path: str, model: Any, optimizer: Any = None) -> dict:
    """Load ``path`` into ``model`` (and ``optimizer``); return the metadata.

    Raises ``FileNotFoundError``, or ``ValueError`` for a file that is not an
    npformer checkpoint; ``load_state_dict`` names any key, shape or dtype that
    does not fit the model.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    try:
        with numpy.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as error:
        raise ValueError(f"load_checkpoint: {path} is not a readable .npz checkpoint ({error})") from None
    if "meta" not in arrays:
        raise ValueError(f"load_checkpoint: {path} has no 'meta' entry; not an npformer checkpoint")
    meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    model.load_state_dict({name[len("param/"):]: value for name, value in arrays.items()
                           if name.startswith("param/")})
    if optimizer is not None:
        if "optimizer" not in meta:
            raise ValueError(f"load_checkpoint: {path} holds no optimizer state")
        state: dict[str, dict] = {}
        for name, value in arrays.items():
            if name.startswith("optim/"):
                key, slot = name[len("optim/"):].rsplit("/", 1)
                state.setdefault(key, {})[slot] = value
        optimizer.load_state_dict({**meta["optimizer"], "state": state})
    return meta


def generator_state(generator: Any) -> dict:
    """The JSON-able state of a NumPy ``Generator`` (a CuPy one cannot be saved: None)."""
    bit_generator = getattr(generator, "bit_generator", None)
    return bit_generator.state if bit_generator is not None and hasattr(bit_generator, "state") else None


def set_generator_state(generator: Any, state: dict | None) -> None:
    if state is not None:
        generator.bit_generator.state = state

