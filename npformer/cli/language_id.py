"""``npformer language-id``: train the encoder-only classifier to tell English from French, then
classify sentences."""

from __future__ import annotations

import argparse
import sys

from .arguments import add_arguments, values

HELP = {
    "data": "english<TAB>french file (default: the embedded corpus)",
    "steps": "training steps",
    "max_pairs": "use at most this many sentence pairs",
    "pooling": "how the encoder's outputs become one vector",
    "seed": "seed of the split, the initialisation and the batches",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..tasks.language_id import train_language_id

    language = commands.add_parser(
        "language-id", help="train the encoder-only classifier to tell English from French",
        description="Train an encoder-only Transformer classifier (learned positions, masked pooling) to "
                    "tell English sentences from French ones, report held-out accuracy, and classify SENTENCES.")
    language.add_argument("sentences", nargs="*", help="sentences to classify after training")
    add_arguments(language, train_language_id, HELP, choices={"pooling": ("mean", "max")})
    language.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks.language_id import predict, train_language_id

    result = train_language_id(**values(args, HELP), stream=sys.stderr)
    print(f"held-out accuracy: {result['test_accuracy']:.2%} on {result['test_sentences']:,} sentences "
          f"({result['source']})")
    for sentence, language in zip(args.sentences, predict(result["model"], result["vocab"], args.sentences,
                                                              lowercase=result["lowercase"])):
        print(f"{language:8s} {sentence}")
    return 0
