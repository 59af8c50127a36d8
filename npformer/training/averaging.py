"""Checkpoint averaging: the final model is the mean of the parameters at the last few evaluation
points (Vaswani et al., 2017, section 6.1: the base models average the last 5 checkpoints).

Late in training the parameters wander around a minimum along directions that the loss barely
sees; their mean sits nearer its middle than any one of them. ``Snapshots`` keeps host copies of
the last ``keep`` parameter sets, in memory and in one ``.npz`` beside the checkpoint (written
atomically, read without unpickling), so that a resumed run averages the same ones.
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from .checkpoint import atomic_write, read_arrays

__all__ = ["Snapshots"]


class Snapshots:
    """The parameters of the last ``keep`` steps given to ``take``, and their mean.

    ``keep`` 1 keeps nothing (no averaging). ``path``: the ``.npz`` that holds them; read at the
    start when it exists.
    """

    def __init__(self, path: str, keep: int) -> None:
        self.path, self.keep = path, keep
        self.steps: list[int] = []
        self.params: list[dict[str, numpy.ndarray]] = []
        if keep > 1 and os.path.exists(path):
            arrays = read_arrays(path)
            self.steps = [int(step) for step in arrays.pop("steps")]
            self.params = [{key.split("/", 1)[1]: value for key, value in arrays.items()
                            if key.split("/", 1)[0] == str(index)} for index in range(len(self.steps))]

    def take(self, model: Any, step: int) -> None:
        """Keep a copy of ``model``'s parameters at ``step`` (the oldest beyond ``keep`` is dropped)."""
        if self.keep <= 1 or (self.steps and self.steps[-1] == step):
            return
        self.steps.append(step)
        self.params.append(model.state_dict())
        del self.steps[:-self.keep], self.params[:-self.keep]
        arrays = {f"{index}/{key}": value for index, params in enumerate(self.params) for key, value in params.items()}
        arrays["steps"] = numpy.array(self.steps)
        atomic_write(self.path, lambda file: numpy.savez(file, **arrays))

    def mean(self) -> dict[str, numpy.ndarray]:
        """Every parameter's mean over the kept steps (summed in float64), in its own dtype."""
        return {key: numpy.mean([params[key] for params in self.params], axis=0, dtype=numpy.float64)
                .astype(value.dtype) for key, value in self.params[-1].items()}

    def load_mean_into(self, model: Any) -> None:
        model.load_state_dict(self.mean())
