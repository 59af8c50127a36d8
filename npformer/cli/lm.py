"""``npformer lm``: train the decoder-only language model on French, then sample from it."""

from __future__ import annotations

import argparse
import sys

from .arguments import add_arguments, values

TRAIN_HELP = {
    "data": "english<TAB>french file whose French side is used (default: the embedded corpus)",
    "steps": "training steps",
    "max_pairs": "use at most this many sentence pairs",
}
SAMPLE_HELP = {
    "count": "how many samples",
    "temperature": "divides the logits before sampling; below 1 sharpens",
    "top_k": "sample among the k most probable words only",
    "seed": "seed of the samples",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..tasks.language_model import sample, train_french_lm

    lm = commands.add_parser(
        "lm", help="train the decoder-only language model on French and sample from it",
        description="Train a decoder-only (GPT-style) language model on French sentences, report validation "
                    "perplexity, and sample continuations of PROMPT with temperature and top-k on the KV cache.")
    lm.add_argument("prompt", nargs="*", help="French words to continue (default: from the start)")
    add_arguments(lm, train_french_lm, TRAIN_HELP)
    add_arguments(lm, sample, SAMPLE_HELP, flags={"count": "--samples"})
    lm.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks.language_model import sample, train_french_lm

    result = train_french_lm(**values(args, TRAIN_HELP), stream=sys.stderr)
    print(f"validation perplexity: {result['valid_perplexity']:.2f} ({result['source']})")
    for text in sample(result["model"], result["vocab"], " ".join(args.prompt), **values(args, SAMPLE_HELP)):
        print(text)
    return 0
