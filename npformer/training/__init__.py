"""Training: one step, the small models' loop, run folders, checkpoints, evaluation, Ctrl-C.

* ``train_step``: forward, ``ops.cross_entropy``, backward, clipping, one optimizer update;
* ``fit``: ``train_step`` in a loop with a warm-up-cosine schedule (the small models);
* ``RunFolder``, ``load_run``: what a translation run writes and how it is loaded back;
* ``save_checkpoint``, ``load_checkpoint``: atomic, pickle-free checkpoints;
* ``evaluate_loss``: teacher-forced loss and token accuracy;
* ``graceful_interrupts``: the first Ctrl-C stops after the step, the second at once.

What each task does with them (the translator's trainer with BLEU evaluation,
language identification, ...) lives one layer up, in ``npformer.tasks``.
"""

from .checkpoint import CheckpointError, generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .evaluation import evaluate_loss
from .interrupt import graceful_interrupts
from .loop import fit
from .options import check_option, option_bound
from .paths import OutputPathError, check_file_can_be_written, check_folder_can_be_created
from .run_folder import CHECKPOINT, Run, RunError, RunFolder, latest_run, load_run, read_tsv, write_tsv
from .step import StepResult, train_step

__all__ = ["train_step", "StepResult", "fit", "RunFolder", "Run", "RunError", "load_run", "latest_run", "read_tsv",
           "write_tsv", "CHECKPOINT", "CheckpointError", "save_checkpoint", "load_checkpoint", "generator_state",
           "set_generator_state", "evaluate_loss", "graceful_interrupts", "check_option", "option_bound",
           "OutputPathError", "check_file_can_be_written", "check_folder_can_be_created"]
