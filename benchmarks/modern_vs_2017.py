"""Does the modern block beat the 2017 one on the same data, the same parameters and the same CPU time?

    python benchmarks/modern_vs_2017.py --data ../shared/data/fra-eng/fra.txt --minutes 5 --seed 0 --out benchmarks/modern_2026-11-27
    python benchmarks/modern_vs_2017.py --minutes 0.2            # the embedded corpus, a smoke run

Trains lesson 18's decoder (``LanguageModel``: LayerNorm, learned positions, GELU, untied head) and
the LLaMA-style one (``ModernLanguageModel``: RMSNorm, rotary positions, SwiGLU, grouped-query attention,
tied embeddings) on the French side of the same pairs, with the same batch, learning rate, warm-up and
seed, each for the same minutes (``fit(minutes=...)``: the cosine follows the clock and lands at zero
at the end), one after the other on this machine. Both use no dropout. The modern model's width is
chosen so that its parameter count is the closest to the 2017 model's (tied embeddings count once),
with ``d_ff`` the multiple of 8 nearest ``8/3 d_model`` (LLaMA's rule). Prints and writes (``--out``)
the parameter counts, steps, tokens per second and validation perplexity of each, with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import os

from npformer.data import Vocab, tokenize
from npformer.models import LanguageModel, LanguageModelConfig, ModernLanguageModel, ModernLanguageModelConfig
from npformer.tasks.language_model import french_sentences, train_french_lm

from lesson_times import cpu_name  # benchmarks/lesson_times.py, beside this script


def matched_modern_config(vocab: int, target: int, n_layers: int, max_len: int) -> dict:
    """The modern configuration (4 query heads, 2 key/value heads) whose parameter count is closest to ``target``."""
    best = None
    for d_model in range(16, 513, 8):
        d_ff = 8 * round(8 * d_model / 3 / 8)
        config = dict(d_model=d_model, n_heads=4, n_kv_heads=2, d_ff=d_ff, n_layers=n_layers, max_len=max_len)
        count = ModernLanguageModel(ModernLanguageModelConfig(vocab=vocab, **config)).num_params()
        if best is None or abs(count - target) < abs(best[0] - target):
            best = (count, config)
    return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="english<TAB>french file (default: the embedded corpus)")
    parser.add_argument("--max-pairs", type=int, default=60000)
    parser.add_argument("--minutes", type=float, default=5.0, help="training minutes for each model")
    parser.add_argument("--d-model", type=int, default=64, help="the 2017 model's width")
    parser.add_argument("--seed", type=int, default=0, help="the data split, the initialisation and the batches")
    parser.add_argument("--out", default=None, help="folder for result-seedN.json")
    args = parser.parse_args()

    train, _, _ = french_sentences(args.data, args.max_pairs, args.seed, lambda text: None)
    vocab = len(Vocab.build((tokenize(s, "fr") for s in train), min_freq=2 if args.data else 1))  # as train_french_lm
    old = dict(d_model=args.d_model, n_heads=4, d_ff=4 * args.d_model, n_layers=2, max_len=32, dropout=0.0)
    old_params = LanguageModel(LanguageModelConfig(vocab=vocab, **old)).num_params()
    modern = matched_modern_config(vocab, old_params, 2, 32)
    common = dict(data=args.data, max_pairs=args.max_pairs, steps=10**7, minutes=args.minutes, warmup=100, seed=args.seed)
    results = {"cpu": cpu_name(), "cores": os.cpu_count(), "vocab": vocab, "minutes": args.minutes,
               "data": args.data or "embedded corpus", "max_pairs": args.max_pairs, "seed": args.seed}
    for name, architecture, config in (("2017", "2017", old), ("modern", "modern", modern)):
        result = train_french_lm(architecture=architecture, **common, **config)
        results[name] = {"config": config, "parameters": result["parameters"], "steps": result["steps"],
                         "seconds": round(result["seconds"], 1), "tokens_per_second": round(result["tokens_per_second"]),
                         "valid_perplexity": round(result["valid_perplexity"], 2),
                         "valid_sentences": result["valid_sentences"], "last_losses": result["losses"][-5:]}
        print(f"{name:>6}: {result['parameters']:,} parameters, {result['steps']:,} steps in {result['seconds']:.0f} s, "
              f"{result['tokens_per_second']:,.0f} tokens/s, validation perplexity {result['valid_perplexity']:.2f}",
              flush=True)
    ratio = results["modern"]["parameters"] / results["2017"]["parameters"]
    print(f"CPU: {results['cpu']} ({results['cores']} cores); vocabulary {vocab:,} words; parameters modern/2017 {ratio:.3f}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"result-seed{args.seed}.json"), "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
