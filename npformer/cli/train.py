"""``npformer train``: train an English -> French translator into ``runs/NAME``."""

from __future__ import annotations

import argparse
import contextlib
import os

from ..errors import UsageError
from .arguments import add_arguments, add_ops_arguments, values, with_flags
from .inputs import student_ops

HELP = {
    "data": "english<TAB>french file (e.g. fra.txt from manythings.org/anki); default: the embedded corpus",
    "name": "run name (default: <data>-<preset>)",
    "runs_dir": "where run folders go",
    "resume": "continue the run from its checkpoint",
    "preset": "model size",
    "minutes": "stop after this much wall-clock time (the result then depends on the machine; default: "
               "30 with --data when --max-steps is not given)",
    "max_steps": "stop after this many optimizer steps (default: {steps} on the embedded corpus, about a minute "
                 "on two cores, when --minutes is not given)",
    "max_words": "with --data: longest side in words",
    "long_words": "with --data: also train on longer pairs, up to this many words a side (the validation and "
                  "test splits stay those of --max-words; a tenth of the longer English sentences is held out "
                  "in the run folder's long.tsv)",
    "max_pairs": "use at most this many pairs",
    "lowercase": "with --data: lower-case both sides",
    "d_model": "override the preset's width",
    "n_layers": "override the preset's layers per stack",
    "n_heads": "override the preset's heads",
    "d_ff": "override the preset's feed-forward width",
    "norm": "residual layout",
    "activation": "feed-forward activation",
    "tie_embeddings": "tie the target embedding and the output projection",
    "share_embeddings": "one embedding table for source and target (needs --joint-vocab)",
    "dropout": "dropout rate",
    "label_smoothing": "label smoothing of the loss",
    "min_freq": "vocabulary: minimum count",
    "max_vocab": "vocabulary: maximum size per language",
    "tokenizer": "word: one id per word (rare words become <unk>); bpe: subword pieces learned by byte-pair "
                 "encoding, so that no word made of known characters is <unk>",
    "bpe_merges": "with --tokenizer bpe: merges to learn (the vocabulary is about this size plus the alphabet)",
    "joint_vocab": "with --tokenizer bpe: one vocabulary learned on both languages",
    "unk_rate": "the chance that an aligned word pair of a training sentence (a name or number written alike on "
                "both sides; on the embedded corpus a gold link) is made unknown on both sides, drawn each epoch: "
                "<unk> with --tokenizer word, an invented word with --tokenizer bpe; so that the model learns to "
                "copy what it does not know, and translate passes new names through (npformer.data.unknown_words)",
    "token_budget": "padded tokens per batch",
    "lr": "peak learning rate",
    "warmup": "warm-up steps",
    "schedule": "learning rate: budget = warm-up, then a cosine decay to zero at the end of --max-steps or "
                "--minutes (whichever is spent first); noam = the paper's warm-up and 1/sqrt(step) decay "
                "(default: budget with --data, noam on the embedded corpus)",
    "average_last": "the final model is the mean of the parameters at the last N evaluation points and the "
                    "last step (as in the paper); 1 keeps the last step's",
    "clip": "gradient-norm clip",
    "eval_every": "steps between evaluations",
    "eval_sentences": "validation BLEU sample size",
    "test_sentences": "final test BLEU sample size",
    "beam_size": "beam size of the final test",
    "seed": "seed of the data split, the initialisation and dropout",
}
FLAGS = {"n_layers": "--layers", "n_heads": "--heads", "beam_size": "--beam"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..tasks.translation import PRESETS, TrainOptions
    from ..tasks.translation.options import DEFAULT_STEPS, SCHEDULES, TOKENIZERS

    parser = commands.add_parser(
        "train", help="train an English -> French translator",
        description="Train a Transformer translator into runs/NAME: the embedded toy corpus by default "
                    "(about a minute), or a Tatoeba TSV file with --data. Ctrl-C saves a checkpoint; "
                    "--resume continues.")
    add_arguments(parser, TrainOptions, {**HELP, "max_steps": HELP["max_steps"].format(steps=DEFAULT_STEPS)},
                  flags=FLAGS, choices={"preset": tuple(PRESETS), "norm": ("post", "pre"),
                                        "activation": ("relu", "gelu"), "tokenizer": TOKENIZERS,
                                        "schedule": SCHEDULES})
    add_ops_arguments(parser, "train on your own ops")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from .. import ops
    from ..tasks.translation import TrainOptions, train

    options = TrainOptions(**values(args, HELP))
    try:
        options.check()  # the combinations; each number was checked as it was parsed
    except ValueError as error:
        raise UsageError(with_flags(str(error), HELP, FLAGS)) from None
    student = student_ops(args)
    loop = student.train_loop if student is not None else None
    with ops.using(student) if student is not None else contextlib.nullcontext():
        status = train(options, loop=loop)
    if student is not None:
        whose = "yours (train_loop, lesson 13)" if loop is not None else "npformer's"
        print(f"trained on your ops: {len(student.yours())} of {len(ops.OP_NAMES)} ({args.ops}); the rest npformer's; "
              f"the training loop {whose}")
    if student is not None and student.variants:
        _record_variants(student.variants, os.path.join(options.runs_dir, options.run_name()))
    return status


def _record_variants(variants: dict, run_folder: str) -> None:
    """The run was trained with the forwards of the student's variants: say which, and keep them in
    the run folder (``variants.json``), since the model computes them and npformer's own ops do not."""
    import json

    from ..course.inert import write_atomically

    words = ", ".join(f"{exercise} '{variant}'" for exercise, variant in variants.items())
    print(f"your variants ran in the model: {words}; written to {run_folder}/variants.json (run this model "
          "with your ops: npformer's own compute the lessons' forms)")
    if os.path.isdir(run_folder):
        write_atomically(os.path.join(run_folder, "variants.json"), json.dumps(variants, indent=1) + "\n")
