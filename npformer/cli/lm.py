"""``npformer lm``: train the decoder-only language model on French, then sample from it."""

from __future__ import annotations

import argparse
import sys

from .arguments import add_arguments, values

TRAIN_HELP = {
    "data": "english<TAB>french file whose French side is used (default: the embedded corpus)",
    "steps": "training steps",
    "max_pairs": "use at most this many sentence pairs",
    "architecture": "2017: lesson 18's decoder (LayerNorm, learned positions, GELU); modern: RMSNorm, rotary "
                    "positions, SwiGLU, grouped-query attention, tied embeddings (lesson 28)",
    "minutes": "stop training after this many minutes (--steps is then a ceiling)",
}
SAMPLE_HELP = {
    "count": "how many samples",
    "temperature": "divides the logits before sampling; below 1 sharpens",
    "top_k": "sample among the k most probable words only",
    "seed": "seed of the samples",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..tasks.language_model import ARCHITECTURES, sample, train_french_lm

    lm = commands.add_parser(
        "lm", help="train the decoder-only language model on French and sample from it",
        description="Train a decoder-only (GPT-style) language model on French sentences, report validation "
                    "perplexity, and sample continuations of PROMPT with temperature and top-k on the KV cache.")
    lm.add_argument("prompt", nargs="*", help="French words to continue (default: from the start)")
    add_arguments(lm, train_french_lm, TRAIN_HELP, choices={"architecture": ARCHITECTURES})
    add_arguments(lm, sample, SAMPLE_HELP, flags={"count": "--samples"})
    lm.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks.language_model import sample, train_french_lm

    from ..models import ModernLanguageModel, summarize_modern
    from ..optim import AdamW

    result = train_french_lm(**values(args, TRAIN_HELP), stream=sys.stderr)
    model = result["model"]
    if isinstance(model, ModernLanguageModel):
        print(summarize_modern(model, 64, model.config.max_len, AdamW(model)), file=sys.stderr)
    print(f"validation perplexity: {result['valid_perplexity']:.2f} ({result['source']}, {result['architecture']} "
          f"decoder, {result['parameters']:,} parameters, {result['steps']} steps, "
          f"{result['tokens_per_second']:,.0f} tokens/s)")
    for text in sample(result["model"], result["vocab"], " ".join(args.prompt), **values(args, SAMPLE_HELP)):
        print(text)
    return 0
