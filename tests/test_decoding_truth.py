"""Decoding checked against ground truth computed independently in the test.

* beam search against exhaustive enumeration of every hypothesis under a stub model whose
  next-token distribution is a fixed table indexed by (source, prefix);
* the GNMT length penalty ``score = log P / ((5 + |y|) / 6) ** alpha`` computed by hand;
* ``Translator`` copying unknown words through a known cross-attention alignment;
* ``LanguageModel.generate`` sampling frequencies against ``softmax(logits / T)`` over the top k.

``|y|`` counts every generated token including the final ``<eos>`` (the number of terms of
``log P``); a hypothesis cut at ``max_len`` without ``<eos>`` has ``|y| = max_len``.
"""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy
import pytest

from npformer import backend
from npformer.data import Vocab
from npformer.models.language_model import LanguageModel, LanguageModelConfig
from npformer.tasks.translation.decoding import beam_search, greedy_decode
from npformer.tasks.translation.translator import Translator
from npformer.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

A, B, C = 4, 5, 6  # the real tokens of the stub vocabulary
VOCAB = 7  # <pad> <bos> <eos> <unk> A B C
CHOICES = (EOS_ID, A, B, C)  # tokens a stub can emit (the others get probability 0)


# -- a stub decoder: next-token distribution = table[(source key, prefix)] ------------------------

AFTER_THE_END = numpy.log(numpy.array([0.005, 0.005, 0.005, 0.005, 0.97, 0.005, 0.005]))


class _Cache:
    def __init__(self, keys: list[int], prefixes: list[tuple[int, ...]]) -> None:
        self.keys, self.prefixes, self.length = keys, prefixes, 0

    def select(self, rows, same_sources=False) -> "_Cache":
        rows = backend.to_numpy(rows).tolist()
        if same_sources:  # the search promises that every row keeps its source: hold it to that
            assert [self.keys[r] for r in rows] == self.keys, "a beam left its sentence"
        chosen = _Cache([self.keys[r] for r in rows], [self.prefixes[r] for r in rows])
        chosen.length = self.length
        return chosen


class StubDecoder:
    """``log_probs(key, prefix)`` -> log-probabilities over ``VOCAB`` (``-inf`` = impossible);
    the key of a source row is its first id. ``prefix`` excludes ``<bos>``."""

    def __init__(self, log_probs) -> None:
        self.log_probs = log_probs
        self.in_eval = False
        self.steps = 0

    @contextlib.contextmanager
    def evaluating(self):
        self.in_eval = True
        try:
            yield self
        finally:
            self.in_eval = False

    def start_decoding(self, src_ids, max_len=None):
        assert self.in_eval
        keys = [int(k) for k in backend.to_numpy(src_ids)[:, 0]]
        self.shape = {"batch": len(keys), "source": src_ids.shape[1], "rows": len(keys), "length": 0}
        return _Cache(keys, [None] * len(keys))

    def attention_maps(self):
        """Uniform weights (one layer, one head) of the right shapes, for the Translator to record."""
        batch, source, rows, length = (self.shape[k] for k in ("batch", "source", "rows", "length"))
        return {"encoder": [numpy.full((batch, 1, source, source), 1.0 / source)],
                "decoder": [numpy.full((rows, 1, 1, length), 1.0 / max(length, 1))],
                "cross": [numpy.full((rows, 1, 1, source), 1.0 / source)]}

    def decode_step(self, cache: _Cache, next_ids):
        assert self.in_eval
        self.steps += 1
        next_ids = backend.to_numpy(next_ids).tolist()
        out = numpy.empty((len(next_ids), VOCAB))
        for row, (key, prefix, token) in enumerate(zip(cache.keys, cache.prefixes, next_ids)):
            if prefix is None:  # the first step feeds <bos>
                assert token == BOS_ID and cache.length == 0
                prefix = ()
            else:
                prefix = prefix + (token,)
            cache.prefixes[row] = prefix
            # After <eos> (or <pad>) a row is finished and what the model says is meaningless: make
            # it say "A, surely" so that a search which lets finished rows go on is caught.
            live = all(t in (A, B, C) for t in prefix)
            out[row] = self.log_probs(key, prefix) if live else AFTER_THE_END
        cache.length += 1
        self.shape.update(rows=len(next_ids), length=cache.length)
        return backend.asarray(out)


def table_log_probs(rows: dict[tuple[int, ...], dict[int, float]]):
    """A log-prob function from ``{prefix: {token: probability}}`` (probabilities sum to 1)."""
    def log_probs(key, prefix):
        out = numpy.full(VOCAB, -numpy.inf)
        for token, p in rows[key].get(prefix, FLAT).items():  # unreachable prefixes: any row
            out[token] = math.log(p)
        return out
    return log_probs


def random_log_probs(seed: int):
    """A fixed pseudo-random distribution over ``CHOICES`` for every (key, prefix)."""
    def log_probs(key, prefix):
        logits = numpy.random.default_rng([seed, key, *prefix]).normal(scale=1.5, size=len(CHOICES))
        out = numpy.full(VOCAB, -numpy.inf)
        out[list(CHOICES)] = logits - numpy.log(numpy.exp(logits).sum())
        return out
    return log_probs


def gnmt(log_p: float, length: int, alpha: float) -> float:
    return log_p / ((5 + length) / 6) ** alpha


def all_hypotheses(log_probs, key: int, max_len: int):
    """Every hypothesis as ``(tokens without <eos>, log P, |y|)``: ended by ``<eos>`` after 0 to
    ``max_len - 1`` real tokens, or cut off after ``max_len`` real tokens."""
    sequences = [body + (EOS_ID,) for n in range(max_len) for body in itertools.product((A, B, C), repeat=n)]
    sequences += list(itertools.product((A, B, C), repeat=max_len))
    out = []
    for seq in sequences:
        log_p = sum(log_probs(key, seq[:i])[seq[i]] for i in range(len(seq)))
        out.append(([t for t in seq if t != EOS_ID], log_p, len(seq)))
    return out


def best_hypothesis(log_probs, key: int, max_len: int, alpha: float):
    return max(all_hypotheses(log_probs, key, max_len), key=lambda h: gnmt(h[1], h[2], alpha))


def score_of(log_probs, key: int, tokens: list[int], max_len: int, alpha: float) -> float:
    seq = list(tokens) + ([EOS_ID] if len(tokens) < max_len else [])
    log_p = sum(log_probs(key, tuple(seq[:i]))[seq[i]] for i in range(len(seq)))
    return gnmt(log_p, len(seq), alpha)


def src(*keys: int):
    return backend.asarray(numpy.array([[k, 7, 8] for k in keys], dtype=numpy.int64))


# -- 1. beam search against exhaustive search ------------------------------------------------------

# Source 10: greedy takes A (0.5) but every continuation of A is flat; B (0.4) then <eos> (0.9)
# is the best translation: P(B <eos>) = 0.36 > P(A <eos>) = 0.15, and no longer one comes close.
# Source 20: the same trap with other tokens: greedy takes C, the best is A C <eos>.
TRAP = {
    10: {
        (): {A: 0.5, B: 0.4, C: 0.06, EOS_ID: 0.04},
        (A,): {EOS_ID: 0.3, A: 0.26, B: 0.24, C: 0.2},
        (B,): {EOS_ID: 0.9, A: 0.04, B: 0.03, C: 0.03},
    },
    20: {
        (): {C: 0.45, A: 0.42, B: 0.08, EOS_ID: 0.05},
        (C,): {EOS_ID: 0.27, A: 0.26, B: 0.25, C: 0.22},
        (A,): {C: 0.95, EOS_ID: 0.01, A: 0.02, B: 0.02},
        (A, C): {EOS_ID: 0.97, A: 0.01, B: 0.01, C: 0.01},
    },
}
FLAT = {EOS_ID: 0.25, A: 0.25, B: 0.25, C: 0.25}


def trap_log_probs(key, prefix):
    rows = TRAP[key]
    return table_log_probs({key: {prefix: rows.get(prefix, FLAT)}})(key, prefix)


def test_the_trap_defeats_greedy_by_construction():
    for key, greedy_answer, best_answer in ((10, [A], [B]), (20, [C], [A, C])):
        for alpha in (0.0, 0.6):
            tokens, _, _ = best_hypothesis(trap_log_probs, key, 3, alpha)
            assert tokens == best_answer
        # a flat row has ties; greedy (argmax: first maximum) then picks <eos> after A / C
        assert greedy_decode(StubDecoder(trap_log_probs), src(key), max_len=3) == [greedy_answer]


@pytest.mark.parametrize("beam_size", [2, 3])
def test_beam_search_finds_the_best_translation_that_greedy_misses(beam_size):
    model = StubDecoder(trap_log_probs)
    keys = (10, 20)
    beam = beam_search(model, src(*keys), beam_size=beam_size, max_len=3)
    greedy = greedy_decode(StubDecoder(trap_log_probs), src(*keys), max_len=3)
    assert not model.in_eval  # eval mode only inside the search
    for row, key in enumerate(keys):
        best = best_hypothesis(trap_log_probs, key, 3, 0.6)
        assert beam[row] == best[0]
        beam_score = score_of(trap_log_probs, key, beam[row], 3, 0.6)
        assert beam_score > score_of(trap_log_probs, key, greedy[row], 3, 0.6) + 0.1


def test_translator_uses_beam_search_when_asked_for_a_beam():
    """Through the string-to-string Translator: beam 2 finds "bee" where greedy says "ay"."""

    class TrapModel(StubDecoder):
        class config:
            max_len = 8

    words = [f"w{i}" for i in range(len(SPECIAL_TOKENS), 21)]  # source word w10 has id 10, w20 id 20
    src_vocab = Vocab(list(SPECIAL_TOKENS) + words)
    tgt_vocab = Vocab(list(SPECIAL_TOKENS) + ["ay", "bee", "sea"])  # A, B, C
    translator = Translator(TrapModel(trap_log_probs), src_vocab, tgt_vocab)
    assert translator.translate(["w10", "w20"], beam_size=1, max_len=3) == ["ay", "sea"]
    assert translator.translate(["w10", "w20"], beam_size=2, max_len=3) == ["bee", "ay sea"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_a_beam_as_wide_as_the_search_space_is_exhaustive_search(seed, alpha):
    """With room for every hypothesis nothing is pruned, so beam search must return exactly the
    argmax of the penalised score over all sequences of up to max_len tokens, for each source."""
    log_probs = random_log_probs(seed)
    max_len, keys = 3, (11, 12)
    result = beam_search(StubDecoder(log_probs), src(*keys), beam_size=64, max_len=max_len,
                         length_penalty=alpha)
    for row, key in enumerate(keys):
        hypotheses = all_hypotheses(log_probs, key, max_len)
        assert len(hypotheses) == 1 + 3 + 9 + 27  # ended after 0, 1, 2 tokens, or cut off after 3
        scores = sorted(gnmt(lp, n, alpha) for _, lp, n in hypotheses)
        assert scores[-1] > scores[-2] + 1e-9  # a unique best
        assert result[row] == best_hypothesis(log_probs, key, max_len, alpha)[0]


@pytest.mark.parametrize("seed", range(8))
def test_beam_1_is_greedy_and_no_beam_beats_exhaustive_search(seed):
    """A beam of 1 is greedy search; a wider beam scores at most the exhaustive optimum."""
    log_probs = random_log_probs(100 + seed)
    max_len, keys = 4, (11, 12)
    greedy = greedy_decode(StubDecoder(log_probs), src(*keys), max_len=max_len)
    one = beam_search(StubDecoder(log_probs), src(*keys), beam_size=1, max_len=max_len)
    assert one == greedy
    for beam_size in (2, 3):
        result = beam_search(StubDecoder(log_probs), src(*keys), beam_size=beam_size, max_len=max_len)
        for row, key in enumerate(keys):
            best = best_hypothesis(log_probs, key, max_len, 0.6)
            assert score_of(log_probs, key, result[row], max_len, 0.6) <= gnmt(best[1], best[2], 0.6) + 1e-12


# -- 2. the length penalty ---------------------------------------------------------------------------

# Short: A <eos>, P = 0.5 * 0.6 = 0.3, |y| = 2.   Long: B C C <eos>, P = 0.4 * 1 * 0.625 * 1 = 0.25, |y| = 4.
# The short one is more probable; the long one wins once alpha exceeds
# ln(ln 0.25 / ln 0.3) / ln(lp(4) / lp(2)) = ln(1.1514) / ln(9 / 7) = 0.5603.
LENGTH = {
    0: {
        (): {A: 0.5, B: 0.4, EOS_ID: 0.1},
        (A,): {EOS_ID: 0.6, C: 0.4},
        (A, C): {EOS_ID: 1.0},
        (B,): {C: 1.0},
        (B, C): {C: 0.625, EOS_ID: 0.375},
        (B, C, C): {EOS_ID: 1.0},
    }
}


@pytest.mark.parametrize("alpha, winner", [(0.0, [A]), (0.5, [A]), (0.6, [B, C, C]), (1.0, [B, C, C])])
def test_the_length_penalty_decides_between_a_short_and_a_long_translation(alpha, winner):
    short = math.log(0.5 * 0.6) / ((5 + 2) / 6) ** alpha
    long = math.log(0.4 * 1.0 * 0.625 * 1.0) / ((5 + 4) / 6) ** alpha
    assert (long > short) == (winner == [B, C, C])  # the hand computation agrees with the table
    log_probs = table_log_probs(LENGTH)
    assert best_hypothesis(log_probs, 0, 4, alpha)[0] == winner
    for beam_size in (2, 3):
        result = beam_search(StubDecoder(log_probs), src(0, 0), beam_size=beam_size, max_len=4,
                             length_penalty=alpha)
        assert result == [winner, winner]


# -- 3. copying unknown words --------------------------------------------------------------------------

SRC_VOCAB = Vocab(list(SPECIAL_TOKENS) + ["the", "cat", "sees", "."])
TGT_VOCAB = Vocab(list(SPECIAL_TOKENS) + ["le", "chat", "voit", "."])
S, T = SRC_VOCAB.index, TGT_VOCAB.index

# source ids (unknown words read as <unk>) -> (target ids, {target position: aligned source position})
TRANSLATIONS = {
    (UNK_ID, S["sees"], UNK_ID, S["."]): ([UNK_ID, T["voit"], UNK_ID, T["."]], {0: 2, 2: 0}),
    (S["the"], S["cat"], S["sees"], S["the"], S["cat"], S["."]):
        ([T["le"], T["chat"], T["voit"], T["le"], T["chat"], T["."]], {}),
    (UNK_ID, S["sees"], S["the"], S["cat"], S["."]):
        ([T["le"], T["chat"], T["voit"], UNK_ID, T["."]], {3: 0}),
}


class _Config:
    max_len = 32


class StubTranslationModel(StubDecoder):
    """Emits the translation of ``TRANSLATIONS``. Each ``decode_step`` leaves cross-attention weights
    (3 heads, 2 layers) whose last layer's head average points at the aligned source word, while each
    head alone, the max over heads and the first layer point elsewhere; ``forward`` (a second,
    teacher-forced pass) must never be needed."""

    config = _Config()

    def __init__(self) -> None:
        super().__init__(self._log_probs)
        self.maps = None
        self.forwarded = []

    def start_decoding(self, src_ids, max_len=None):
        cache = super().start_decoding(src_ids, max_len)
        rows = backend.to_numpy(src_ids).tolist()
        cache.keys = [tuple(t for t in row if t != PAD_ID) for row in rows]
        width = len(rows[0])
        self.maps = {"encoder": [backend.asarray(numpy.full((len(rows), 3, width, width), 1.0 / width))] * 2}
        return cache

    def _log_probs(self, key, prefix):
        target = TRANSLATIONS[key][0] + [EOS_ID]
        out = numpy.full(VOCAB_T, -8.0)
        if len(prefix) < len(target) and list(prefix) == target[: len(prefix)]:
            out[target[len(prefix)]] = 4.0
        return out - numpy.log(numpy.exp(out).sum())

    def decode_step(self, cache, next_ids):
        assert self.in_eval
        next_ids = backend.to_numpy(next_ids).tolist()
        out = numpy.empty((len(next_ids), VOCAB_T))
        width = max(len(key) for key in cache.keys)
        first, last = numpy.zeros((2, len(next_ids), 3, 1, width))
        for row, (key, prefix, token) in enumerate(zip(cache.keys, cache.prefixes, next_ids)):
            prefix = () if prefix is None else prefix + (token,)
            cache.prefixes[row] = prefix
            out[row] = self._log_probs(key, prefix)
            position, n = len(prefix), len(key)
            aligned = TRANSLATIONS[key][1].get(position, position % n)
            # every head alone, and the max over heads, point at a decoy; the mean at `aligned`
            # (0.417 against 0.2, 0.2, 0.183); the first layer points elsewhere
            for head, weight in enumerate((0.4, 0.4, 0.45)):
                decoy = (aligned + 1 + head) % n
                last[row, head, 0, aligned], last[row, head, 0, decoy] = weight, 1 - weight
                first[row, head, 0, (aligned + 1) % n] = 1.0
        self_weights = numpy.full((len(next_ids), 3, 1, cache.length + 1), 1.0 / (cache.length + 1))
        self.maps = {**self.maps, "decoder": [backend.asarray(self_weights)] * 2,
                     "cross": [backend.asarray(first), backend.asarray(last)]}
        cache.length += 1
        return backend.asarray(out)

    def forward(self, src_ids, tgt_in):
        self.forwarded.append((src_ids, tgt_in))
        raise AssertionError("the Translator must not run a second, teacher-forced pass")

    def attention_maps(self):
        return self.maps


VOCAB_T = len(TGT_VOCAB)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_translator_copies_each_unknown_word_from_the_aligned_source_position(beam_size):
    model = StubTranslationModel()
    translator = Translator(model, SRC_VOCAB, TGT_VOCAB, lowercase=True, final_mark=".")
    sentences = ["The cat sees the cat.", "Zorblax sees Quux", "McGonagall sees the cat"]
    out = translator.translate(sentences, beam_size=beam_size)
    assert out == ["le chat voit le chat.", "Quux voit Zorblax.", "le chat voit McGonagall."]
    assert model.forwarded == []  # the attention of the one decoding, no second pass
    found = translator.translations(sentences, beam_size=beam_size)
    assert [one.copies for one in found] == [{}, {0: 2, 2: 0}, {3: 0}]
    assert found[1].output_tokens == ["<unk>", "voit", "<unk>", "."]
    assert found[1].output_labels == ["Quux", "voit", "Zorblax", "."]
    assert found[1].labels["cross"] == (["Quux", "voit", "Zorblax", ".", "<eos>"], ["Zorblax", "sees", "Quux", "."])
    assert translator.unknown_words(sentences) == ["Zorblax", "Quux", "McGonagall"]
    # the same through several batches (the rows of a later batch restart at 0)
    assert translator.translate(sentences[::-1] + sentences, beam_size=beam_size, batch_size=2) == out[::-1] + out


# -- 4. sampling in LanguageModel.generate ------------------------------------------------------------

LOGITS = numpy.array([0.3, -1.0, 1.6, 1.1, 0.0, -0.4, 2.0])


def fixed_logits_model() -> LanguageModel:
    """A language model whose head ignores its input: every step's logits are ``LOGITS``."""
    model = LanguageModel(LanguageModelConfig(vocab=len(LOGITS), d_model=8, n_heads=2, d_ff=16,
                                              n_layers=1, max_len=64, dropout=0.0), seed=0)
    model.head.W[...] = 0
    model.head.b[...] = backend.asarray(LOGITS.astype(backend.to_numpy(model.head.b).dtype))
    for layer in model.blocks.layers:  # the head ignores the blocks' output: skip their work (speed)
        layer.step = lambda x, position, keys, values: x
    return model


def samples(model, rng, n_calls, **kwargs) -> numpy.ndarray:
    out = []
    for _ in range(n_calls):
        out += model.generate([BOS_ID], max_new_tokens=63, rng=rng, **kwargs)
    return numpy.array(out)


def expected_probs(temperature: float, top_k: int | None) -> numpy.ndarray:
    z = LOGITS / temperature
    keep = numpy.argsort(-LOGITS)[: top_k or len(LOGITS)]
    p = numpy.zeros_like(z)
    p[keep] = numpy.exp(z[keep] - z[keep].max())
    return p / p.sum()


@pytest.mark.parametrize("temperature, top_k", [(0.5, None), (2.0, None), (1.0, 3), (2.0, 4)])
def test_sampling_frequencies_match_the_tempered_top_k_softmax(temperature, top_k):
    model = fixed_logits_model()
    tokens = samples(model, numpy.random.default_rng(1234), 80, temperature=temperature, top_k=top_k)
    n = len(tokens)
    assert n == 80 * 63
    freq = numpy.bincount(tokens, minlength=len(LOGITS)) / n
    p = expected_probs(temperature, top_k)
    if top_k is not None:
        assert numpy.all(freq[p == 0] == 0), "a token outside the top k was sampled"
        assert numpy.count_nonzero(freq) == top_k
    bound = 5 * numpy.sqrt(p * (1 - p) / n) + 1e-12
    assert numpy.all(numpy.abs(freq - p) <= bound), (freq, p, bound)


def test_the_temperatures_tested_are_told_apart_by_the_bound():
    """The check above has power: T = 0.5, 1 and 2 give frequencies far outside each other's bound."""
    n = 80 * 63
    for t1, t2 in ((0.5, 1.0), (1.0, 2.0)):
        p1, p2 = expected_probs(t1, None), expected_probs(t2, None)
        assert numpy.max(numpy.abs(p1 - p2) / numpy.sqrt(p1 * (1 - p1) / n)) > 20


def test_a_tiny_temperature_and_top_k_1_are_greedy():
    model = fixed_logits_model()
    best = int(LOGITS.argmax())
    assert set(samples(model, numpy.random.default_rng(0), 5, temperature=1e-3).tolist()) == {best}
    for temperature in (1.0, 5.0):
        tokens = samples(model, numpy.random.default_rng(1), 5, temperature=temperature, top_k=1)
        assert set(tokens.tolist()) == {best}


def test_sampling_is_reproducible_from_the_seed_and_stops_at_stop_id():
    model = fixed_logits_model()
    first = model.generate([BOS_ID], 40, numpy.random.default_rng(7), temperature=2.0)
    again = model.generate([BOS_ID], 40, numpy.random.default_rng(7), temperature=2.0)
    assert first == again and len(first) == 40
    stopped = model.generate([BOS_ID], 40, numpy.random.default_rng(7), temperature=2.0, stop_id=first[5])
    assert stopped == first[: first.index(first[5]) + 1]
