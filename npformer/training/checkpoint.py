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
import zipfile
import zlib
from typing import Any

import numpy

from ..errors import UsageError


def atomic_write(path: str, write: Any) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    try:
        # mkstemp makes the file private (0600); give it the mode any other new file gets (umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def save_checkpoint(path: str, model: Any, optimizer: Any = None, meta: dict | None = None,
                    params_as: Any = None) -> None:
    """Write model parameters, optimizer state and ``meta`` (JSON-able) to ``path`` atomically.

    ``params_as``: a narrower dtype to store the parameters in (``numpy.float16`` halves a shipped
    model; ``load_checkpoint`` casts them back to the model's dtype), recorded in the metadata.
    """
    arrays = {f"param/{key}": value if params_as is None else value.astype(params_as)
              for key, value in model.state_dict().items()}
    meta = dict(meta or {})
    if params_as is not None:
        meta["params_stored_as"] = numpy.dtype(params_as).name
    if optimizer is not None:
        optimizer_state = optimizer.state_dict()
        for key, slots in optimizer_state.pop("state").items():
            for slot, value in slots.items():
                arrays[f"optim/{key}/{slot}"] = value
        meta["optimizer"] = optimizer_state
    text = json.dumps(meta, indent=1, sort_keys=True)
    arrays["meta"] = numpy.frombuffer(text.encode("utf-8"), dtype=numpy.uint8)
    atomic_write(path, lambda file: numpy.savez(file, **arrays))
    atomic_write(os.path.splitext(path)[0] + ".json", lambda file: file.write(text.encode("utf-8")))


class CheckpointError(ValueError, UsageError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


def read_arrays(path: str) -> dict[str, numpy.ndarray]:
    """Every entry of the archive, read without unpickling; ``CheckpointError`` names what is wrong."""
    if not zipfile.is_zipfile(path):  # also true of a zip cut short: its directory is at the end
        raise CheckpointError(f"{path} is not a complete .npz archive (a zip file): it is truncated, "
                              f"damaged or not a checkpoint")
    try:
        archive = numpy.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise CheckpointError(f"{path} cannot be opened as an .npz archive ({type(error).__name__}: {error})") from None
    arrays = {}
    with archive:
        for name in archive.files:
            try:
                arrays[name] = archive[name]
            except ValueError as error:
                if "allow_pickle" in str(error):
                    raise CheckpointError(f"{path}: entry {name!r} holds Python objects (an object array); "
                                          f"npformer never unpickles, so it cannot be loaded") from None
                raise CheckpointError(f"{path}: entry {name!r} is damaged ({error})") from None
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as error:
                raise CheckpointError(f"{path}: entry {name!r} cannot be read; the file is truncated or "
                                      f"damaged ({type(error).__name__}: {error})") from None
    return arrays


def load_checkpoint(path: str, model: Any, optimizer: Any = None) -> dict:
    """Load ``path`` into ``model`` (and ``optimizer``); return the metadata.

    Raises ``FileNotFoundError``, or ``CheckpointError`` (a ``ValueError``) naming the file and
    what is wrong: not a zip archive, a truncated entry, an object array, no metadata, or a key,
    shape or dtype that does not fit the model. Nothing in the model changes unless every
    parameter fits.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    arrays = read_arrays(path)
    if "meta" not in arrays:
        raise CheckpointError(f"{path} has no 'meta' entry, so it is not an npformer checkpoint")
    try:
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: its 'meta' entry is not JSON ({error})") from None
    params = {name[len("param/"):]: value for name, value in arrays.items() if name.startswith("param/")}
    if "params_stored_as" in meta:  # stored narrower on purpose (a shipped model): back to the model's dtype
        dtypes = {key: value.dtype for key, value in model.params().items()}
        params = {key: value.astype(dtypes[key]) if key in dtypes else value for key, value in params.items()}
    try:
        model.load_state_dict(params)
    except (KeyError, ValueError, TypeError) as error:
        reason = error.args[0] if error.args else str(error)
        raise CheckpointError(f"{path} does not fit the model: {reason}") from None
    if optimizer is not None:
        if "optimizer" not in meta:
            raise CheckpointError(f"{path} holds no optimizer state")
        state: dict[str, dict] = {}
        for name, value in arrays.items():
            if name.startswith("optim/"):
                key, slot = name[len("optim/"):].rsplit("/", 1)
                state.setdefault(key, {})[slot] = value
        optimizer.load_state_dict({**meta["optimizer"], "state": state})
    return meta


def generator_state(generator: Any) -> dict:
    """The JSON-able state of a random generator: NumPy's ``Generator`` or npformer's
    ``counter_random.CounterGenerator`` (what ``backend.default_rng`` gives on CuPy), both a dict.

    Raises ``TypeError`` for a generator whose state is not such a dict (CuPy's own: its state is in
    device memory, and ``bit_generator.state`` is a method).
    """
    state = getattr(getattr(generator, "bit_generator", None), "state", None)
    if not isinstance(state, dict):
        raise TypeError(f"generator_state: {type(generator).__name__} keeps no state that can be saved "
                        f"(bit_generator.state is {type(state).__name__}, not a dict); draw from "
                        f"npformer.backend.default_rng(seed), whose state can")
    return state


def set_generator_state(generator: Any, state: dict) -> bool:
    """Put ``state`` (from ``generator_state``) back into ``generator``; True when done.

    False, and ``generator`` unchanged, when ``state`` is another kind of generator's (a checkpoint
    written on CuPy, whose dropout stream was npformer's counter generator, resumed on NumPy, whose
    stream is PCG64, or the reverse): the two streams cannot continue each other.
    """
    current = generator_state(generator)
    if not isinstance(state, dict) or state.get("bit_generator") != current.get("bit_generator"):
        return False
    generator.bit_generator.state = state
    return True
