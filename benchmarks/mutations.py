"""Mutation check: does the test suite catch deliberate bugs?

Usage::

    python benchmarks/mutations.py [--only NAME ...] [--markdown] [--list]

Each mutant names a file under ``npformer/``, an exact ``old`` source snippet
(which must occur exactly once, so this script fails loudly when the code
changes) and its ``new`` replacement, plus the tests to run against it (a
targeted subset, so the whole check takes minutes, not hours).

The repository is copied once into a temporary folder (without ``.git``,
``runs/`` and caches). The unmutated copy must first pass the union of the
test subsets; then each mutant is applied there in turn, its tests run with
``python -m pytest -x -q -p no:cacheprovider`` (``PYTHONPATH`` and the working
folder set to the copy, so that the copy's ``npformer`` is imported), and the
file is restored. A mutant is *caught* when pytest exits non-zero; the first
``FAILED``/``ERROR`` test id is recorded. The working tree is never modified.

Exit status: 0 when every mutant is caught, 1 when one survives, 2 when the
unmutated copy fails its tests or a snippet no longer matches.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRUTH = "tests/test_decoding_truth.py"  # decoding tests being written; used when present
MUTANT_TIMEOUT_S = 900


@dataclass
class Mutant:
    name: str
    path: str  # relative to the repository root
    breaks: str  # what the bug breaks, in words
    old: str
    new: str
    tests: tuple[str, ...]  # test files or node ids; TRUTH is dropped when absent


MUTANTS = [
    Mutant(
        "beam-is-greedy", "npformer/tasks/translation/translator.py",
        "Translator runs greedy search when a beam is asked for",
        "hypotheses = beam_search(self.model, src, beam_size, max_len, length_penalty, record=record,\n"
        "                                     unk_allowed=unk_allowed)",
        "hypotheses = greedy_decode(self.model, src, max_len, record=record, unk_allowed=unk_allowed)",
        (TRUTH, "tests/test_decode_checkpoint.py",
         "tests/test_train.py::test_evaluate_reports_greedy_and_beam_bleu"),
    ),
    Mutant(
        "no-length-penalty", "npformer/tasks/translation/decoding.py",
        "beam search picks its final hypothesis without the GNMT length penalty",
        "    return ((5.0 + length) / 6.0) ** alpha",
        "    return ((5.0 + length) / 6.0) ** 0.0",
        (TRUTH, "tests/test_decode_checkpoint.py"),
    ),
    Mutant(
        "unk-copies-wrong-word", "npformer/tasks/translation/translator.py",
        "<unk> replaced by the least-attended copyable source word (argmin, not argmax)",
        "int(numpy.where(may_copy, looked_at[position], -numpy.inf).argmax())",
        "int(numpy.where(may_copy, looked_at[position], numpy.inf).argmin())",
        (TRUTH, "tests/test_decode_checkpoint.py"),
    ),
    Mutant(
        "unk-copies-next-word", "npformer/tasks/translation/translator.py",
        "<unk> replaced by the source word after the aligned one",
        "word = source.typed[source.word_index[copies[position]]]",
        "word = source.typed[min(source.word_index[copies[position]] + 1, len(source.typed) - 1)]",
        (TRUTH, "tests/test_decode_checkpoint.py"),
    ),
    Mutant(
        "temperature-ignored", "npformer/models/sampling.py",
        "LanguageModel.generate (and ModernLanguageModel's) samples at temperature 1 whatever it is given",
        "logits = backend.to_numpy(logits).astype(float) / temperature",
        "logits = backend.to_numpy(logits).astype(float) / 1.0",
        (TRUTH, "tests/test_language_model.py::test_cached_greedy_generation_equals_the_full_forward_pass",
         "tests/test_language_model.py::test_sampling_is_seeded_and_respects_top_k",
         "tests/test_language_model.py::test_bad_generation_arguments"),
    ),
    Mutant(
        "clip-does-nothing", "npformer/optim.py",
        "clip_grad_norm returns the norm but never scales the gradients",
        "    if scale < 1.0:\n        for grad in grads:",
        "    if False:\n        for grad in grads:",
        ("tests/test_optim.py",),
    ),
    Mutant(
        "resume-dropout-rng-not-restored", "npformer/tasks/translation/trainer.py",
        "a resumed run keeps a fresh dropout generator instead of the saved one",
        'set_generator_state(self.model.dropout_rng, meta["dropout_rng_state"])',
        'meta["dropout_rng_state"]',
        ("tests/test_train.py::test_resuming_reproduces_the_uninterrupted_losses_exactly",),
    ),
    Mutant(
        "resume-epoch-rng-not-restored", "npformer/tasks/translation/trainer.py",
        "each epoch's batches come from the generator as it is, not from the saved epoch state",
        'set_generator_state(self.data_rng, position["epoch_rng_state"])',
        'position["epoch_rng_state"]',
        ("tests/test_train.py::test_resuming_reproduces_the_uninterrupted_losses_exactly",),
    ),
    Mutant(
        "save-in-place", "npformer/training/checkpoint.py",
        "checkpoints are written in place: a crash mid-save destroys the previous one",
        "        with os.fdopen(handle, \"wb\") as file:\n"
        "            write(file)\n"
        "            file.flush()\n"
        "            os.fsync(file.fileno())\n"
        "        os.replace(temporary, path)\n",
        "        os.close(handle)\n"
        "        os.remove(temporary)\n"
        "        with open(path, \"wb\") as file:\n"
        "            write(file)\n"
        "            file.flush()\n"
        "            os.fsync(file.fileno())\n",
        ("tests/test_decode_checkpoint.py",),
    ),
    Mutant(
        "padding-mask-inverted", "npformer/ops/masks.py",
        "padding_mask is True on <pad> and False on real tokens",
        "return (ids != pad_id)[:, None, None, :]",
        "return (ids == pad_id)[:, None, None, :]",
        ("tests/test_ops_properties.py", "tests/test_architecture.py"),
    ),
    Mutant(
        "padding-mask-ignored", "npformer/ops/masks.py",
        "padding_mask lets every query attend to <pad> keys",
        "return (ids != pad_id)[:, None, None, :]",
        "return (ids == ids)[:, None, None, :]",
        ("tests/test_ops_properties.py", "tests/test_architecture.py"),
    ),
    Mutant(
        "causal-mask-ignored", "npformer/ops/masks.py",
        "causal_mask lets a position see the tokens after it",
        "return xp.tril(xp.ones((T, T), dtype=bool))",
        "return xp.ones((T, T), dtype=bool)",
        ("tests/test_ops_properties.py", "tests/test_architecture.py",
         "tests/test_language_model.py::test_the_model_is_causal"),
    ),
    Mutant(
        "french-elision-broken", "npformer/data/tokenizer.py",
        "French l'homme stays one token instead of l' + homme",
        'text = _ELISION.sub(r"\\1 ", text)',
        "text = text",
        ("tests/test_data.py",),
    ),
    Mutant(
        "bleu-no-brevity-penalty", "npformer/metrics.py",
        "BLEU does not punish hypotheses shorter than the references",
        "brevity = 1.0 if hyp_length >= ref_length else math.exp(1.0 - ref_length / hyp_length)",
        "brevity = 1.0",
        ("tests/test_metrics.py",),
    ),
    Mutant(
        "adam-no-bias-correction", "npformer/ops/fast/adam.py",
        "Adam's first and second moments are not bias-corrected (the fast form, the default)",
        "    correction2 = 1.0 / math.sqrt(1.0 - beta2**step)\n    step_size = lr / (1.0 - beta1**step)\n",
        "    correction2 = 1.0\n    step_size = lr\n",
        ("tests/test_optim.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "adam-no-second-bias-correction", "npformer/ops/fast/adam.py",
        "Adam's second moment is not bias-corrected (the first still is; the fast form)",
        "    correction2 = 1.0 / math.sqrt(1.0 - beta2**step)\n",
        "    correction2 = 1.0\n",
        ("tests/test_optim.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "textbook-adam-no-bias-correction", "npformer/ops/adam.py",
        "the textbook Adam step's moments are not bias-corrected",
        "    m_hat = m / (1.0 - beta1**step)\n    v_hat = v / (1.0 - beta2**step)\n",
        "    m_hat = m\n    v_hat = v\n",
        ("tests/test_optim.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "kv-cache-skips-own-key", "npformer/nn/attention.py",
        "cached self-attention attends to positions 0..p-1, not 0..p (own key missing after step 0)",
        "keys, values = key_buffer[:, :, :position + 1], value_buffer[:, :, :position + 1]",
        "keys, values = key_buffer[:, :, :max(position, 1)], value_buffer[:, :, :max(position, 1)]",
        ("tests/test_decode_checkpoint.py",
         "tests/test_language_model.py::test_cached_greedy_generation_equals_the_full_forward_pass"),
    ),
    Mutant(
        "layer-backward-in-forward-order", "npformer/nn/residual.py",
        "a layer's (and the decoder stack's) backward walks first to last instead of last to first",
        "    for layer_backward in reversed(layer_backwards):\n",
        "    for layer_backward in layer_backwards:\n",
        ("tests/test_nn_gradients.py", "tests/test_fastpath.py"),
    ),
    Mutant(
        "fused-gradient-into-the-first-columns", "npformer/nn/fused.py",
        "the fused q|k|v backward adds every run's dW into the first columns (cross-attention's k|v into q's)",
        "        self.weight_grad[:, columns] += d_weight",
        "        self.weight_grad[:, :d_weight.shape[1]] += d_weight",
        ("tests/test_fastpath.py", "tests/test_nn_gradients.py"),
    ),
    Mutant(
        "packed-logits-gradient-unscattered", "npformer/models/transformer.py",
        "the packed pass's logit gradient goes to the first packed rows, not to the rows whose logits were asked for",
        "        d_rows[0, self._chosen] = d_decoded",
        "        d_rows[0, :d_decoded.shape[0]] = d_decoded",
        ("tests/test_fastpath.py", "tests/test_train.py"),
    ),
    Mutant(
        "packed-heads-not-zeroed", "npformer/nn/layout.py",
        "the packed layout's heads are made with empty(), so the padding holds whatever memory held",
        "        parts = xp.zeros((n_parts, batch, n_heads, length, head_dim), dtype=rows.dtype)",
        "        parts = xp.empty((n_parts, batch, n_heads, length, head_dim), dtype=rows.dtype)",
        ("tests/test_fastpath.py", "tests/test_train.py"),
    ),
    Mutant(
        "decode-step-wrong-position", "npformer/models/transformer.py",
        "Transformer.decode_step embeds the new token with the previous position's encoding",
        "x = self._embed(ids, self.tgt_embed, self.tgt_dropout, start=position)",
        "x = self._embed(ids, self.tgt_embed, self.tgt_dropout, start=max(position - 1, 0))",
        ("tests/test_decode_checkpoint.py", "tests/test_nn_model.py::test_cached_decoding_gives_the_logits_of_the_full_pass"),
    ),
    Mutant(
        "vocab-min-freq-off-by-one", "npformer/data/vocab.py",
        "Vocab.build drops tokens seen exactly min_freq times",
        "c >= min_freq and t not in SPECIAL_TOKENS",
        "c > min_freq and t not in SPECIAL_TOKENS",
        ("tests/test_data.py",),
    ),
    Mutant(
        "batches-exceed-budget", "npformer/data/batching.py",
        "make_batches packs one example more than the token budget allows",
        "if current and (len(current) + 1) * max(longest, length) > token_budget:",
        "if current and len(current) * max(longest, length) > token_budget:",
        ("tests/test_data.py",),
    ),
    Mutant(
        "batches-drop-last", "npformer/data/batching.py",
        "make_batches drops the last (longest) batch",
        "    batches.append(pad_batch([examples[i] for i in current]))\n    if rng is not None:",
        "    if rng is not None:",
        ("tests/test_data.py",),
    ),
    Mutant(
        "label-smoothing-forward-weight", "npformer/ops/fast/cross_entropy.py",
        "smoothed loss keeps weight 1 (not 1 - eps) on the target term (the fast form)",
        "per_position = (1.0 - label_smoothing) * (log_norm - target_shifted)",
        "per_position = 1.0 * (log_norm - target_shifted)",
        ("tests/test_ops_properties.py", "tests/test_gradients.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "label-smoothing-backward-weight", "npformer/ops/fast/cross_entropy.py",
        "smoothed loss gradient spreads eps / (V - 1) instead of eps / V (the fast form)",
        "dlogits[rows] -= (eps / vocab_size * weight[rows])[:, None]",
        "dlogits[rows] -= (eps / (vocab_size - 1) * weight[rows])[:, None]",
        ("tests/test_ops_properties.py", "tests/test_gradients.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "textbook-label-smoothing-forward-weight", "npformer/ops/cross_entropy.py",
        "the textbook smoothed loss keeps weight 1 (not 1 - eps) on the target term",
        "per_position = (1.0 - eps) * nll + eps * -log_probs.mean(axis=-1)",
        "per_position = nll + eps * -log_probs.mean(axis=-1)",
        ("tests/test_ops_properties.py", "tests/test_gradients.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "textbook-label-smoothing-backward-weight", "npformer/ops/cross_entropy.py",
        "the textbook smoothed loss gradient spreads eps / (V - 1) instead of eps / V",
        "smoothed_targets = xp.zeros_like(probs) + eps / probs.shape[-1]",
        "smoothed_targets = xp.zeros_like(probs) + eps / (probs.shape[-1] - 1)",
        ("tests/test_ops_properties.py", "tests/test_gradients.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "input-style-not-lowercased", "npformer/tasks/translation/translator.py",
        "Translator.source_tokens ignores the run's lowercase input style",
        "read = [token.lower() for token in typed]",
        "read = list(typed)",
        ("tests/test_first_hour.py::test_input_as_people_type_it_is_read_like_the_training_text",),
    ),
    Mutant(
        "truecaser-not-applied", "npformer/tasks/translation/translator.py",
        "Translator.source_tokens reads a sentence typed in capitals as typed (no truecasing)",
        "elif self.truecaser is not None and typed_without_case(typed):",
        "elif self.truecaser is not None and False:",
        ("tests/test_typed_input.py",),
    ),
    Mutant(
        "unknown-name-not-written-back", "npformer/tasks/translation/translator.py",
        "the name read in place of an unknown one is left in the translation",
        "labels[position] = source.names[label]",
        "labels[position] = label",
        ("tests/test_typed_input.py",),
    ),
    Mutant(
        "long-input-cut", "npformer/tasks/translation/translator.py",
        "a sentence longer than the model reads is translated whole (and cut), not in parts",
        "if not too_many_words and sum(pieces) <= limit:",
        "if True:",
        ("tests/test_typed_input.py",),
    ),
    # Issue 49: the seven bugs that a fresh mutation round found uncaught (each now has a test), then
    # realistic bugs in the newer code the issue lists (the budget schedule, checkpoint averaging, Adam
    # in chunks, the threads' blocks, the grade sheet, the pretrained loader, the attention record).
    Mutant(
        "splits-in-file-order", "npformer/data/tatoeba.py",
        "Tatoeba's splits drawn in the file's (length) order: the test split is the shortest sentences",
        "    order = numpy.random.default_rng(seed).permutation(len(sources))\n",
        "    order = numpy.arange(len(sources))\n",
        ("tests/test_data.py",),
    ),
    Mutant(
        "rollout-layers-reversed", "npformer/tasks/translation/alignment.py",
        "attention rollout composes the encoder layers last to first",
        "        encoder_rollout = half_residual(weights) @ encoder_rollout\n",
        "        encoder_rollout = encoder_rollout @ half_residual(weights)\n",
        ("tests/test_alignment.py",),
    ),
    Mutant(
        "head-average-from-one-head", "npformer/tasks/translation/alignment.py",
        "attention --score's head-average row scores head 0 alone",
        "average_links[layer].append(argmax_links(weights[b].mean(axis=0), n_src, n_tgt))",
        "average_links[layer].append(argmax_links(weights[b, 0], n_src, n_tgt))",
        ("tests/test_alignment.py",),
    ),
    Mutant(
        "strict-lets-1d-host-arrays-in", "npformer/strict_backend.py",
        "the strict stand-in lets a 1-D host array into device math (a real GPU refuses it)",
        "    if isinstance(value, numpy.ndarray) and value.ndim > 0:\n",
        "    if isinstance(value, numpy.ndarray) and value.ndim > 1:\n",
        ("tests/test_strict_backend.py::test_host_arrays_are_refused_in_device_math_as_cupy_refuses_them",),
    ),
    Mutant(
        "timed-run-resumes-a-spent-budget", "npformer/tasks/translation/trainer.py",
        "a --minutes run resumed after its time is spent trains a second budget, its schedule started over",
        '(minutes is not None and max_steps is None and position["elapsed_seconds"] >= 60 * minutes)',
        "False",
        ("tests/test_typed_input.py",),
    ),
    Mutant(
        "timed-run-resumed-restarts-its-clock", "npformer/tasks/translation/trainer.py",
        "a --minutes run resumed halfway restarts its clock: it trains another whole budget, its schedule "
        "started over",
        'self._started, self._elapsed_before, self._tokens_seen = time.perf_counter(), position["elapsed_seconds"], 0',
        "self._started, self._elapsed_before, self._tokens_seen = time.perf_counter(), 0.0, 0",
        ("tests/test_train.py::test_a_timed_run_resumed_halfway_continues_its_clock_and_its_schedule",),
    ),
    Mutant(
        "timeout-after-passed-cases-credited", "npformer/course/grader.py",
        "a function that answers the public cases and then runs past its time on the unseen or a hidden "
        "case is credited",
        "    if len(replies) < len(items):  # no reply for a case: the job was stopped",
        "    if len(replies) < len(items) and not report.rows:  # no reply for a case: the job was stopped",
        ("tests/test_grading_slips.py",),
    ),
    Mutant(
        "hidden-verdict-from-last-tensor", "npformer/course/exercise_report.py",
        "a hidden case's verdict is its last tensor's: a wrong dx with a right db shows 'hidden 1 pass'",
        "verdicts[row.case] = verdicts.get(row.case, True) and row.passed",
        "verdicts[row.case] = row.passed",
        ("tests/test_grading_slips.py",),
    ),
    Mutant(
        "unmarked-input-read-as-typed", "npformer/tasks/translation/translator.py",
        "a sentence typed without a final mark is read without one by the shipped translator (28.5 BLEU)",
        "        if self.final_mark and not ends_with_a_mark(typed):",
        '        if self.final_mark == "." and not ends_with_a_mark(typed):',
        ("tests/test_prompt_input.py",),
    ),
    Mutant(
        "rare-name-not-stood-in", "npformer/tasks/translation/translator.py",
        "a name the training text holds too seldom to spell is left to the model's pieces ('Berlin' -> 'Blin')",
        "(not self.truecaser.knows(word) or word in self.truecaser.rare_names)",
        "not self.truecaser.knows(word)",
        ("tests/test_prompt_input.py",),
    ),
    Mutant(
        "failed-download-keeps-its-folder", "npformer/data/download.py",
        "a failed npformer data tatoeba leaves the empty data/fra-eng/ it made",
        "                made.rmdir()",
        "                pass",
        ("tests/test_download.py",),
    ),
    Mutant(
        "figure-edges-clipped", "npformer/viz/attention.py",
        "a saved figure is cut at the canvas: the heatmaps' top titles are clipped",
        "    return finish(figure, path, fit=True)",
        "    return finish(figure, path)",
        ("tests/test_viz.py",),
    ),
    Mutant(
        "float16-checkpoint-not-widened", "npformer/training/checkpoint.py",
        "a checkpoint stored in float16 (as the shipped models are) is not cast back: it no longer loads",
        '    if "params_stored_as" in meta:',
        "    if False:",
        ("tests/test_decode_checkpoint.py", "tests/test_pretrained.py"),
    ),
    Mutant(
        "collect-takes-the-stub-script", "npformer/course/collect.py",
        "course collect takes a lesson's stub script over the student's solved notebook of it",
        'for path in sorted(paths, key=lambda path: (path.suffix == ".ipynb", path.name)):',
        'for path in sorted(paths, key=lambda path: (path.suffix == ".py", path.name)):',
        ("tests/test_course.py",),
    ),
    Mutant(
        "adam-chunks-skip-the-last", "npformer/ops/fast/adam.py",
        "the fast Adam step updates whole chunks only: a tensor's last partial chunk never moves",
        "for start in range(0, flat[0].shape[0], CHUNK)]",
        "for start in range(0, flat[0].shape[0] - CHUNK + 1, CHUNK)]",
        ("tests/test_optim.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "adam-row-blocks-skip-the-last", "npformer/ops/fast/adam.py",
        "the fast Adam step on a fused weight's column block skips its last block of rows",
        "for start in range(0, param.shape[0], rows)]",
        "for start in range(0, param.shape[0] - rows + 1, rows)]",
        ("tests/test_optim.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "budget-schedule-ends-at-half", "npformer/optim.py",
        "the budget schedule's cosine covers a quarter turn: the rate ends at half its peak, not zero",
        "        return self.peak_lr * warmup * 0.5 * (1.0 + math.cos(math.pi * spent))\n",
        "        return self.peak_lr * warmup * 0.5 * (1.0 + math.cos(0.5 * math.pi * spent))\n",
        ("tests/test_optim.py", "tests/test_train.py::test_the_learning_rate_at_the_last_step_of_a_budget"),
    ),
    Mutant(
        "averaging-keeps-the-last-only", "npformer/training/averaging.py",
        "--average-last: the final model is the last snapshot, not the mean of the kept ones",
        "numpy.mean([params[key] for params in self.params], axis=0, dtype=numpy.float64)",
        "numpy.mean([self.params[-1][key]], axis=0, dtype=numpy.float64)",
        ("tests/test_train.py::test_average_last_makes_the_final_model_the_mean_of_the_last_snapshots",),
    ),
    Mutant(
        "snapshots-keep-the-first", "npformer/training/averaging.py",
        "--average-last keeps the first snapshots of the run instead of the last",
        "        del self.steps[:-self.keep], self.params[:-self.keep]\n",
        "        del self.steps[self.keep:], self.params[self.keep:]\n",
        ("tests/test_train.py::test_average_last_makes_the_final_model_the_mean_of_the_last_snapshots",),
    ),
    Mutant(
        "threads-drop-the-last-block", "npformer/threads.py",
        "split over threads, the last block of rows is never computed",
        "    return [slice(start, stop) for start, stop in zip(edges[:-1], edges[1:])]\n",
        "    return [slice(start, stop) for start, stop in zip(edges[:-2], edges[1:-1])] or [slice(0, n_rows)]\n",
        ("tests/test_threads.py", "tests/test_fast_ops.py"),
    ),
    Mutant(
        "grade-error-field-dropped", "npformer/course/grading.py",
        "the grade sheet says \"failed\" where the student's function raised or timed out",
        "    return report.status, report.detail\n",
        "    return (Status.WRONG if report.failed else report.status), report.detail\n",
        ("tests/test_grading_trust.py", "tests/test_instructor_kit.py"),
    ),
    Mutant(
        "worker-inherits-the-graders-environment", "npformer/course/isolation.py",
        "the grading worker sees the instructor's environment (tokens, paths) instead of an allow-list",
        '    return {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",',
        '    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",',
        ("tests/test_attacks.py",),
    ),
    Mutant(
        "numerical-gradient-never-timed", "npformer/course/variants/timed.py",
        "a backward pass by finite differences of the forward is never found out by its time",
        "    if seconds <= RATIO_LIMIT * forward or seconds < 0.005:",
        "    if True:",
        ("tests/test_variants.py", "tests/test_variant_class.py"),
    ),
    Mutant(
        "variant-graded-by-the-lessons-form", "npformer/course/variants/base.py",
        "a variant's answers are the lesson's own form's, so the textbook and a posted solution pass",
        "    return replace(exercise, signature=signature, reference=_answers(family, exercise, variant), forward=None,",
        "    return replace(exercise, signature=signature, reference=exercise.reference, forward=None,",
        ("tests/test_variants.py",),
    ),
    Mutant(
        "student-ops-run-the-lessons-forward", "npformer/course/student_ops.py",
        "a student's op set runs the lesson's forward under their variant's backward: wrong gradients in training",
        "    return StudentOps(with_variants(ops_from(usable), variants), exercises, str(source), variants,",
        "    return StudentOps(ops_from(usable), exercises, str(source), variants,",
        ("tests/test_student_ops.py",),
    ),
    Mutant(
        "job-filter-lets-processes-start", "npformer/course/isolation.py",
        "a student's function may fork, spawn and run programs in the grading worker",
        '    "clone", "clone3", "fork", "vfork", "execve", "execveat", "kill", "tkill", "tgkill",\n',
        '    "kill", "tkill", "tgkill",\n',
        ("tests/test_attacks.py",),
    ),
    Mutant(
        "grade-full-points-unless-failed", "npformer/course/grading.py",
        "a stub or a crash gets the exercise's points (only \"failed\" gets 0)",
        "return self.max_points if self.passed else 0",
        "return self.max_points if self.status is not Status.WRONG else 0",
        ("tests/test_grading_trust.py", "tests/test_instructor_kit.py"),
    ),
    Mutant(
        "pretrained-always-toy", "npformer/tasks/translation/pretrained.py",
        "pretrained(name) loads the toy translator whatever name it is given",
        "    return load_run(pretrained_folder(name))\n",
        "    return load_run(pretrained_folder(\"toy\"))\n",
        ("tests/test_pretrained.py",),
    ),
    Mutant(
        "beam-record-not-reordered", "npformer/tasks/translation/decoding.py",
        "beam search's attention record keeps each row's history when the beams are reordered",
        "                record.reorder(rows)\n",
        "                pass\n",
        ("tests/test_translation_result.py", "tests/test_decoding_truth.py"),
    ),
]


def _ignore(folder: str, names: list[str]) -> set[str]:
    skipped = {".git", "runs", "__pycache__", ".pytest_cache", ".pytest_tmp", ".pytest_run", ".hypothesis",
               ".mypy_cache", ".ruff_cache", "build", "dist", ".venv", "venv"}
    return {n for n in names if n in skipped or n.endswith(".egg-info")}


def _tests_for(mutant: Mutant, root: str) -> list[str]:
    return [t for t in mutant.tests if os.path.exists(os.path.join(root, t.split("::")[0]))]


def _union(test_lists: list[list[str]]) -> list[str]:
    files = {t for tests in test_lists for t in tests if "::" not in t}
    union: list[str] = []
    for tests in test_lists:
        for t in tests:
            if t not in union and (t in files or t.split("::")[0] not in files):
                union.append(t)
    return union


def _environment(copy: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = copy
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a patched file must never be shadowed by a stale .pyc
    env.pop("NPFORMER_HYPOTHESIS", None)
    return env


def _pytest(copy: str, tests: list[str], timeout: float) -> tuple[int | None, str, float]:
    """(exit status or None on timeout, combined output, seconds)."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=copy, env=_environment(copy), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        return None, output, time.perf_counter() - started
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        match = re.match(r"(FAILED|ERROR) (.+?)(?: - .*)?$", line)  # ids may hold spaces: "[L'homme est]"
        if match:
            return match.group(2).strip()
    lines = [line for line in output.splitlines() if line.strip()]
    return f"(pytest failed: {lines[-1][:80] if lines else 'no output'})"


def _check_snippet(mutant: Mutant, text: str) -> None:
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(f"mutations: {mutant.name}: the `old` snippet occurs {count} times in {mutant.path} "
                         f"(must be exactly once); update the mutant to the current code:\n{mutant.old}")


def _table(rows: list[dict], markdown: bool) -> str:
    header = ["mutant", "file", "what it breaks", "caught by"]
    body = [[r["name"], r["path"].removeprefix("npformer/"), r["breaks"], r["verdict"]] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for row in body:
            cells = [row[0], f"`{row[1]}`", row[2], row[3] if row[3] == "NOT CAUGHT" else f"`{row[3]}`"]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    widths[2] = min(widths[2], 60)
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for row in body:
        breaks = row[2] if len(row[2]) <= widths[2] else row[2][: widths[2] - 3] + "..."
        lines.append("  ".join(c.ljust(w) for c, w in zip([row[0], row[1], breaks, row[3]], widths)).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--markdown", action="store_true", help="also print a markdown table for RESULTS.md")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=float, default=MUTANT_TIMEOUT_S, help="seconds per pytest run")
    args = parser.parse_args(argv)

    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names), "mutant names must be distinct"
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:34} {m.path}: {m.breaks}")
        return 0
    selected = MUTANTS
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            parser.error(f"unknown mutant(s) {unknown}; known: {', '.join(names)}")
        selected = [m for m in MUTANTS if m.name in args.only]

    for m in selected:  # fail loudly before anything runs
        with open(os.path.join(ROOT, m.path), encoding="utf-8") as file:
            _check_snippet(m, file.read())

    with tempfile.TemporaryDirectory(prefix="npformer-mutations-") as temporary:
        copy = os.path.join(temporary, "repo")
        shutil.copytree(ROOT, copy, ignore=_ignore, symlinks=True)
        if not os.path.exists(os.path.join(copy, TRUTH)):
            print(f"note: {TRUTH} is absent; the mutants that list it run without it", flush=True)

        sanity = subprocess.run([sys.executable, "-c", "import npformer; print(npformer.__file__)"], cwd=copy,
                                env=_environment(copy), capture_output=True, text=True)
        imported = sanity.stdout.strip()
        print(f"sanity: the copy imports npformer from {imported}", flush=True)
        if sanity.returncode != 0 or not os.path.realpath(imported).startswith(os.path.realpath(copy) + os.sep):
            print(f"mutations: the copy does not import its own npformer ({imported or sanity.stderr.strip()})")
            return 2

        union = _union([_tests_for(m, copy) for m in selected])
        print(f"baseline: unmutated copy, {len(union)} test targets ...", flush=True)
        status, output, seconds = _pytest(copy, union, args.timeout * 2)
        if status != 0:
            print(output[-4000:])
            print(f"mutations: the UNMUTATED copy fails its tests (status {status}, first failure "
                  f"{_first_failure(output)}); fix that first")
            return 2
        print(f"baseline: passes ({seconds:.0f} s)", flush=True)

        rows = []
        for m in selected:
            target = os.path.join(copy, m.path)
            with open(target, encoding="utf-8") as file:
                original = file.read()
            _check_snippet(m, original)
            tests = _tests_for(m, copy)
            try:
                with open(target, "w", encoding="utf-8") as file:
                    file.write(original.replace(m.old, m.new))
                status, output, seconds = _pytest(copy, tests, args.timeout)
            finally:
                with open(target, "w", encoding="utf-8") as file:
                    file.write(original)
            if status is None:
                verdict = f"(timeout after {seconds:.0f} s)"
            elif status == 0:
                verdict = "NOT CAUGHT"
            else:
                verdict = _first_failure(output)
            rows.append({"name": m.name, "path": m.path, "breaks": m.breaks, "verdict": verdict})
            print(f"  {m.name}: {verdict} ({seconds:.0f} s)", flush=True)

    print()
    print(_table(rows, markdown=False))
    survivors = [r["name"] for r in rows if r["verdict"] == "NOT CAUGHT"]
    print(f"\n{len(rows) - len(survivors)} of {len(rows)} mutants caught"
          + (f"; surviving: {', '.join(survivors)}" if survivors else ""))
    if args.markdown:
        print()
        print(_table(rows, markdown=True))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
