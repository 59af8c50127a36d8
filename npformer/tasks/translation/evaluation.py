"""Evaluating a translator: the teacher-forced loss, validation during training, and the test BLEU."""

from __future__ import annotations

from typing import Any, Iterable

from ... import backend, ops
from ...data import make_batches, tokenize
from ...metrics import bleu, chrf, edit_distance, sentence_bleu
from ...tokens import PAD_ID
from .decoding import LENGTH_PENALTY
from .translator import Translator


def evaluate_loss(model: Any, batches: Iterable[Any]) -> tuple[float, float]:
    """Mean cross-entropy per target token (no label smoothing) and token accuracy, teacher-forced.

    ``batches`` hold ``src``, ``tgt_in`` and ``tgt_out`` host arrays (``data.Batch``).
    The model runs in eval mode and is put back in the mode it had.
    """
    total_loss = total_correct = total_tokens = 0.0
    with model.evaluating():
        for batch in batches:
            tgt_out = backend.asarray(batch.tgt_out)
            logits = model.forward(backend.asarray(batch.src), backend.asarray(batch.tgt_in))
            loss, _ = ops.current().cross_entropy_forward(logits, tgt_out, ignore_index=PAD_ID)
            real = tgt_out != PAD_ID
            n = int(real.sum())
            total_loss += float(loss) * n
            total_correct += int((logits.argmax(-1)[real] == tgt_out[real]).sum())
            total_tokens += n
    return total_loss / max(total_tokens, 1), total_correct / max(total_tokens, 1)


def corpus_bleu(translator: Translator, pairs: list[tuple[str, str]], beam_size: int = 1,
                progress: bool = False, length_penalty: float = LENGTH_PENALTY) -> tuple[float, list[str]]:
    """BLEU of the translations of the English sides against the French sides, and the translations
    (``length_penalty``: beam search's alpha, ``decoding``)."""
    hypotheses = translator.translate([english for english, _ in pairs], beam_size=beam_size,
                                      length_penalty=length_penalty, progress=progress)
    return bleu(hypotheses, [french for _, french in pairs]), hypotheses


def validate(translator: Translator, examples: list, pairs: list[tuple[str, str]], token_budget: int,
             sentences: int) -> tuple[dict, list[str]]:
    """Validation loss and token accuracy on every example, greedy BLEU on the first ``sentences``
    pairs; returns the record for ``metrics.jsonl`` and lines to print (three sample translations)."""
    loss, accuracy = evaluate_loss(translator.model, make_batches(examples, token_budget))
    sample = pairs[:sentences]
    score, hypotheses = corpus_bleu(translator, sample)
    record = {"kind": "eval", "valid_loss": loss, "valid_accuracy": accuracy, "valid_bleu": score,
              "bleu_sentences": len(sample)}
    lines = [f"valid loss {loss:.3f}, token accuracy {accuracy:.1%}, BLEU {score:.1f} on {len(sample)} sentences"]
    lines += [f"  {english}  ->  {hypothesis}   (reference: {french})"
              for (english, french), hypothesis in list(zip(sample, hypotheses))[:3]]
    return record, lines


def test_bleu(translator: Translator, pairs: list[tuple[str, str]], beam_size: int, progress: bool = False,
              worst: int = 0, length_penalty: float = LENGTH_PENALTY) -> dict:
    """Greedy and beam BLEU on ``pairs``, as a ``metrics.jsonl`` record; with ``worst``, also the
    ``worst`` beam translations by sentence BLEU (``metrics.sentence_bleu``, sacreBLEU's: a short exact
    translation scores 100), as (english, reference, translation, score), those below 100 only (a
    perfect translation is never listed as a bad one). ``length_penalty``: the beam
    search's alpha (``decoding``)."""
    greedy, greedy_translations = corpus_bleu(translator, pairs, 1, progress)
    beam, beam_translations = corpus_bleu(translator, pairs, beam_size, progress, length_penalty)
    references = [french for _, french in pairs]
    record = {"kind": "test", "sentences": len(pairs), "bleu_greedy": greedy, "bleu_beam": beam,
              "chrf_greedy": chrf(greedy_translations, references), "chrf_beam": chrf(beam_translations, references),
              "beam_size": beam_size, "length_penalty": length_penalty}
    if worst:
        scored = [(english, french, hypothesis, sentence_bleu(hypothesis, french))
                  for (english, french), hypothesis in zip(pairs, beam_translations)]
        record["worst"] = [row for row in sorted(scored, key=lambda row: row[3]) if row[3] < 100][:worst]
    return record


test_bleu.__test__ = False  # not a pytest test, despite the name


def unknown_words_copied(translator: Translator, pairs: list[tuple[str, str]], words: list[str],
                         beam_size: int = 1, near: int = 2) -> dict:
    """How often unseen words pass through: ``pairs[n]`` holds ``words[n]`` on both sides
    (``data.swap_in_words``); counts the translations that hold it as a token (in lower case
    when the translator reads lower case), those that instead hold a token within ``near``
    edits of it (``metrics.edit_distance``: "Zorvan" -> "Forvan" is 1), and scores them.

    Returns ``{"sentences", "copied", "near", "bleu", "examples"}``, ``examples`` the first five
    (english, reference, translation)."""
    if len(words) != len(pairs):
        raise ValueError(f"unknown_words_copied: {len(pairs)} pairs but {len(words)} words")
    score, translations = corpus_bleu(translator, pairs, beam_size)

    def case(text: str) -> str:  # a run trained on lower-case text writes the name in lower case
        return text.lower() if translator.lowercase else text

    closest = [min((edit_distance(case(word), token) for token in tokenize(case(translation), translator.tgt_lang)),
                   default=len(word))
               for word, translation in zip(words, translations)]
    return {"sentences": len(pairs), "copied": sum(distance == 0 for distance in closest),
            "near": sum(0 < distance <= near for distance in closest), "bleu": score,
            "examples": [(english, french, translation) for (english, french), translation in zip(pairs[:5], translations)]}


def metrics_line(record: dict[str, Any]) -> str:
    line = f"test BLEU on {record['sentences']} sentences: greedy {record['bleu_greedy']:.1f}, " \
           f"beam {record['beam_size']} {record['bleu_beam']:.1f}"
    if "chrf_greedy" in record:  # records written before chrF was reported lack it
        line += f"; chrF greedy {record['chrf_greedy']:.1f}, beam {record['chrf_beam']:.1f}"
    return line
