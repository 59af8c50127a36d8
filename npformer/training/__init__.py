"""Training, generic: one step, the loop, checkpoints and Ctrl-C, for any npformer model.

* ``train_step``: forward, ``ops.cross_entropy``, backward, clipping, one optimizer update
  (``loss_and_gradients``: its first half, what a student's training loop calls);
* ``fit``: ``train_step`` in a loop with a warm-up-cosine schedule (the small models);
* ``save_checkpoint``, ``load_checkpoint``: atomic, pickle-free checkpoints;
* ``graceful_interrupts``: the first Ctrl-C stops after the step, the second at once;
* ``Snapshots``: the parameters of the last few evaluation points, and their mean (checkpoint averaging).

What each task does with them (the translator's run folder, trainer and evaluation, language
identification, ...) lives one layer up, in ``npformer.tasks``.
"""

from .averaging import Snapshots
from .checkpoint import CheckpointError, generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .interrupt import graceful_interrupts
from .loop import fit
from .step import StepResult, loss_and_gradients, train_step

__all__ = ["train_step", "loss_and_gradients", "StepResult", "fit", "Snapshots", "CheckpointError", "save_checkpoint", "load_checkpoint",
           "generator_state", "set_generator_state", "graceful_interrupts"]
