"""A bug zoo: eleven bugs of the kind that Keras and PyTorch Transformer tutorials make.

Four entries (2, 4, 7, 9) cite, in ``Bug.source``, the public tutorial or code where the bug was
found and reported; the other seven are common slips of the same kinds, not attributed to one source.

Each bug is a ``Bug``: a name, what the tutorial does (in its own style), a ``buggy`` and a
``fixed`` function with the same signature, and a ``symptom``: a function that takes either
implementation and returns one number, **above** ``threshold`` when the bug is there::

    bug = BUGS[0]                          # 1. cosine in one column of the positional table
    bug.measure(bug.buggy)                 # 1.0: a (sin, cos) pair is off the unit circle
    bug.measure(bug.fixed)                 # 0.0
    bug.shows(bug.fixed)                   # False: measure(...) <= threshold

None of them raises an error on the shapes a tutorial tries (two of them do on others), and
most let the training loss fall. The lesson (``lessons/22_a_bug_zoo.py``) and the tests
(``tests/test_bug_zoo.py``) share these definitions.

    positions   1 cosine in one column              2 positions indexed by batch
    attention   3 K Q^T instead of Q K^T             4 scaled by sqrt(d_model), not sqrt(d_head)
                10 cross-attention masked with the decoder's padding
    blocks      5 cross-attention queries from the raw decoder input
                6 a feed-forward block without its activation
                7 layer norm with the unbiased std and beta initialised to ones
    training    8 the decoder input not shifted      9 a softmax, then a loss "from logits"
                11 accuracy that counts padding

Two sanity checks catch bugs before any of this: ``loss_at_initialisation`` (near ln V) and
``overfit_one_batch`` (a tiny model drives the loss on one batch to near zero).

Everything here runs on host NumPy, in float64 unless a model says otherwise; ``Bug.measure``
switches the backend to NumPy for the call, as the exercise grader does.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import backend, ops, optim
from ..models import Transformer, TransformerConfig
from ..nn import DecoderLayer, FeedForward
from ..tasks.translation import greedy_decode
from ..tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS


@dataclass(frozen=True)
class Bug:
    """One entry of the zoo. ``symptom(implementation) -> float``; the bug shows above ``threshold``."""

    number: int
    name: str
    tutorial: str        # what the tutorial does, in its own words
    buggy: Callable
    fixed: Callable
    symptom: Callable[[Callable], float]
    threshold: float
    measures: str        # what the symptom's number is
    source: str = ""     # the public code or tutorial where the bug was found and reported, if cited

    def measure(self, implementation: Callable) -> float:
        """``symptom(implementation)``, on NumPy whatever the active backend."""
        active = backend.get_backend()
        backend.set_backend("numpy")
        try:
            return float(self.symptom(implementation))
        finally:
            backend.set_backend(active)

    def shows(self, implementation: Callable) -> bool:
        """True when ``implementation`` has the symptom: ``measure(implementation) > threshold``."""
        return self.measure(implementation) > self.threshold


# -- the tiny task that the training bugs and the sanity checks train on -------------------------

def reversal_batch(rng: np.random.Generator, size: int, vocab: int, length: int = 4) -> tuple:
    """``src (size, length)``: random ordinary tokens; ``tgt (size, length + 2)``: ``<bos>``, the
    source reversed, ``<eos>``. Every sentence has the same length: no padding."""
    src = rng.integers(len(SPECIAL_TOKENS), vocab, size=(size, length))
    tgt = np.concatenate([np.full((size, 1), BOS_ID), src[:, ::-1], np.full((size, 1), EOS_ID)], axis=1)
    return src, tgt


def tiny_transformer(vocab: int, seed: int = 0) -> Transformer:
    """One layer, ``d_model = 16``, two heads, no dropout: trains in a second."""
    config = TransformerConfig(vocab, vocab, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=16,
                               dropout=0.0)
    return Transformer(config, seed=seed)


def fit(model: Any, batches: Any, loss_and_gradient: Callable, lr: float = 1e-2) -> list[float]:
    """Adam on ``(src, tgt_in, tgt_out)`` batches; ``loss_and_gradient(logits, tgt_out) ->
    (loss, dlogits)``. Returns the loss of every step (before its update)."""
    optimizer = optim.Adam(model, lr=lr)
    losses = []
    for src, tgt_in, tgt_out in batches:
        loss, dlogits = loss_and_gradient(model.forward(src, tgt_in), tgt_out)
        model.zero_grad()
        model.backward(dlogits)
        optimizer.step()
        losses.append(loss)
    return losses


# == positions ====================================================================================

# -- 1. cosine in one column of the positional table ---------------------------------------------

def _angles(max_len: int, d_model: int) -> np.ndarray:
    """``p / 10000^(2i / d_model)`` for position ``p`` (rows) and column ``2i`` or ``2i + 1``."""
    columns = np.arange(d_model)
    return np.arange(max_len)[:, None] / 10000.0 ** (2 * (columns // 2) / d_model)


def positional_table_buggy(max_len: int, d_model: int) -> np.ndarray:
    table = np.sin(_angles(max_len, d_model))
    table[:, 1] = np.cos(_angles(max_len, d_model)[:, 1])           # column 1 only
    return table


def positional_table_fixed(max_len: int, d_model: int) -> np.ndarray:
    table = np.sin(_angles(max_len, d_model))
    table[:, 1::2] = np.cos(_angles(max_len, d_model)[:, 1::2])     # every odd column
    return table


def off_the_unit_circle(positional_table: Callable) -> float:
    """Largest ``|PE[p, 2i]^2 + PE[p, 2i+1]^2 - 1|``: every (sin, cos) pair lies on the unit circle,
    which is what makes ``PE[p + k]`` a rotation of ``PE[p]``, the same for every ``p``."""
    table = positional_table(50, 16)
    return np.abs(table[:, 0::2] ** 2 + table[:, 1::2] ** 2 - 1).max()


# -- 2. the positional table indexed by batch, not position --------------------------------------

def add_positions_buggy(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``x (B, T, D)``; the tutorial's table is ``(max_len, 1, D)``, written for ``(T, B, D)`` input."""
    pe = table[:, None, :]
    return x + pe[: x.shape[0]]                    # x.size(0) is B here: row b gets PE[b] everywhere


def add_positions_fixed(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return x + table[: x.shape[1]]                 # position t gets PE[t], in every row


def depends_on_batch_row(add_positions: Callable) -> float:
    """Three copies of one sentence in a batch: the largest difference between what row 0 and
    another row get. Positions do not depend on where a sentence sits in the batch: 0 when right."""
    x = np.zeros((3, 5, 8))                        # one sentence of five identical tokens, three times
    out = add_positions(x, ops.positional_encoding(16, 8, dtype=np.float64))
    return np.abs(out - out[:1]).max()


# == attention ====================================================================================

# -- 3. scores as K Q^T instead of Q K^T ----------------------------------------------------------

def attention_buggy(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``q (..., Tq, Dh)``, ``k`` and ``v (..., Tk, Dh)`` -> ``(..., Tq, Dh)``."""
    scores = k @ q.swapaxes(-1, -2) / math.sqrt(q.shape[-1])         # (Tk, Tq)
    return ops.softmax_forward(scores)[0] @ v                        # needs Tq == Tk


def attention_fixed(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])         # (Tq, Tk)
    return ops.softmax_forward(scores)[0] @ v


def query_leak(attention: Callable) -> float:
    """Move query 0 only: the largest change in the outputs of the other queries. Each output
    row reads its own query and nothing else: 0 when right. (``Tq = Tk``: the bug runs.)"""
    q, k, v = np.random.default_rng(0).standard_normal((3, 2, 5, 4))
    moved = q.copy()
    moved[:, 0] += 1.0
    return np.abs(attention(moved, k, v)[:, 1:] - attention(q, k, v)[:, 1:]).max()


# -- 4. scores scaled by sqrt(d_model) instead of sqrt(d_head) ------------------------------------

def scaled_scores_buggy(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``q (B, H, Tq, Dh)``, ``k (B, H, Tk, Dh)`` -> ``(B, H, Tq, Tk)``."""
    d_model = q.shape[1] * q.shape[-1]
    return q @ k.swapaxes(-1, -2) / math.sqrt(d_model)              # the model's width


def scaled_scores_fixed(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])          # the width of one head


def score_scale_error(scaled_scores: Callable) -> float:
    """``|ln std(scores)|`` for ``q``, ``k`` of unit variance and 8 heads of 8. The scaling exists
    to keep the scores at standard deviation 1 (Vaswani et al., 3.2.1): near 0 when right."""
    q, k = np.random.default_rng(0).standard_normal((2, 4, 8, 16, 8))
    return abs(math.log(scaled_scores(q, k).std()))


# -- 10. cross-attention masked with the decoder's padding ----------------------------------------

def cross_attention_mask_buggy(src_ids: np.ndarray, tgt_ids: np.ndarray) -> np.ndarray:
    return ops.padding_mask(tgt_ids)               # (B, 1, 1, Tt): the decoder's padding


def cross_attention_mask_fixed(src_ids: np.ndarray, tgt_ids: np.ndarray) -> np.ndarray:
    return ops.padding_mask(src_ids)               # (B, 1, 1, Ts): the keys are source positions


def weight_on_source_padding(cross_attention_mask: Callable) -> float:
    """Both sides padded to length 5, with different padding: the largest attention weight that a
    real target position puts on source ``<pad>`` keys, in all. 0 when right."""
    src_ids = np.array([[5, 6, 7, 8, 9], [5, 6, 0, 0, 0]])
    tgt_ids = np.array([[1, 5, 0, 0, 0], [1, 5, 6, 7, 8]])
    q, k, v = np.random.default_rng(0).standard_normal((3, 2, 2, 5, 4))    # (B, H, T, Dh)
    _, cache = ops.attention_forward(q, k, v, cross_attention_mask(src_ids, tgt_ids))
    on_padding = (cache["weights"] * (src_ids == PAD_ID)[:, None, None, :]).sum(axis=-1)  # (B, H, Tt)
    real_queries = np.broadcast_to((tgt_ids != PAD_ID)[:, None, :], on_padding.shape)
    return on_padding[real_queries].max()


# == blocks =======================================================================================

# -- 5. cross-attention queries from the raw decoder input ----------------------------------------

def decoder_layer_buggy(layer: DecoderLayer, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
    """A post-norm decoder layer (no dropout) on ``x (B, Tt, D)`` and ``memory (B, Ts, D)``."""
    h = layer.norm1.forward(x + layer.self_attn.forward(x, self_mask))
    h = layer.norm2.forward(h + layer.cross_attn.forward(x, memory, memory_mask))   # queries: x
    return layer.norm3.forward(h + layer.ffn.forward(h))


def decoder_layer_fixed(layer: DecoderLayer, x: Any, memory: Any, self_mask: Any, memory_mask: Any) -> Any:
    h = layer.norm1.forward(x + layer.self_attn.forward(x, self_mask))
    h = layer.norm2.forward(h + layer.cross_attn.forward(h, memory, memory_mask))   # queries: h
    return layer.norm3.forward(h + layer.ffn.forward(h))


def context_blind_cross_attention(decoder_layer: Callable) -> float:
    """Change target token 0 only. The share of the later target positions whose cross-attention
    weights stay exactly the same: positions that choose where to look in the source without
    reading the target words before them. 0 when right (the self-attention output carries them)."""
    rng = np.random.default_rng(0)
    layer = DecoderLayer(16, n_heads=2, d_ff=32, dropout=0.0, dropout_rng=rng, pre_norm=False,
                         activation="relu", rng=rng, dtype=np.float64)
    x, memory = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 6, 16))
    changed = x.copy()
    changed[:, 0] = rng.standard_normal((2, 16))
    weights = []
    for target in (x, changed):
        decoder_layer(layer, target, memory, ops.causal_mask(5), None)
        weights.append(layer.cross_attn.attn_weights[:, :, 1:].copy())           # (B, H, Tt - 1, Ts)
    unchanged = np.abs(weights[0] - weights[1]).max(axis=(1, 3)) < 1e-12          # (B, Tt - 1)
    return unchanged.mean()


# -- 6. a feed-forward block without its activation ----------------------------------------------

def feed_forward_buggy(ffn: FeedForward, x: Any) -> Any:
    return ffn.fc2.forward(ffn.fc1.forward(x))                                  # two linears in a row


def feed_forward_fixed(ffn: FeedForward, x: Any) -> Any:
    return ffn.fc2.forward(ops.relu_forward(ffn.fc1.forward(x))[0])             # ReLU between them


def explained_by_one_matrix(feed_forward: Callable) -> float:
    """R^2 of the best single affine map ``x @ A + c`` fitted to the block's outputs (least squares
    on 200 inputs): the share of the output's variance one matrix explains. 1 when the block is a
    single matrix in disguise."""
    rng = np.random.default_rng(0)
    ffn = FeedForward(8, 32, rng=rng, dtype=np.float64)
    x = rng.standard_normal((200, 8))
    y = feed_forward(ffn, x)
    inputs = np.hstack([x, np.ones((200, 1))])
    residual = y - inputs @ np.linalg.lstsq(inputs, y, rcond=None)[0]
    return 1.0 - (residual ** 2).sum() / ((y - y.mean(axis=0)) ** 2).sum()


# -- 7. layer norm with the unbiased std and beta initialised to ones -----------------------------

def layer_norm_buggy(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The tutorial's layer norm over the last axis, at initialisation."""
    gamma, beta = np.ones(x.shape[-1]), np.ones(x.shape[-1])         # beta initialised to ones
    std = x.std(axis=-1, ddof=1, keepdims=True)                      # torch's x.std(): unbiased
    return gamma * (x - x.mean(axis=-1, keepdims=True)) / (std + eps) + beta


def layer_norm_fixed(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    gamma, beta = np.ones(x.shape[-1]), np.zeros(x.shape[-1])        # beta starts at zero
    variance = x.var(axis=-1, keepdims=True)                         # biased, as nn.LayerNorm
    return gamma * (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(variance + eps) + beta


def not_normalised(layer_norm: Callable) -> float:
    """Rows of 8 with their own means and scales: ``max |row mean| + max |row variance - 1|`` of
    the output. At initialisation layer norm gives every row mean 0 and variance 1: near 0 when right."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-5, 5, (100, 1)) + rng.uniform(1, 5, (100, 1)) * rng.standard_normal((100, 8))
    y = layer_norm(x)
    return np.abs(y.mean(axis=-1)).max() + np.abs(y.var(axis=-1) - 1).max()


# == training and measuring =======================================================================

# -- 8. the decoder input not shifted -------------------------------------------------------------

def decoder_pairs_buggy(tgt_ids: np.ndarray) -> tuple:
    """``tgt_ids (B, T)`` = ``<bos> y_1 ... y_n <eos>`` -> ``(decoder input, targets)``."""
    return tgt_ids, tgt_ids                        # input t is target t: copy it


def decoder_pairs_fixed(tgt_ids: np.ndarray) -> tuple:
    return tgt_ids[:, :-1], tgt_ids[:, 1:]         # input t is target t - 1: predict the next


REVERSAL_VOCAB = 12      # the four special tokens and eight words
TRAINING_STEPS = 200     # with Adam at 1e-2 on batches of 32: the shifted model learns the task


@functools.lru_cache(maxsize=None)
def train_reversal(decoder_pairs: Callable, steps: int = TRAINING_STEPS) -> tuple:
    """A tiny Transformer trained to reverse four tokens, on fresh batches whose decoder input and
    targets come from ``decoder_pairs``. Returns ``(model, losses)``. Cached: the lesson and the
    tests ask for the same run several times (treat the model as read-only)."""
    rng = np.random.default_rng(0)
    model = tiny_transformer(REVERSAL_VOCAB)
    batches = ((src, *decoder_pairs(tgt)) for src, tgt in
               (reversal_batch(rng, 32, REVERSAL_VOCAB) for _ in range(steps)))
    return model, fit(model, batches, loss_fixed)


def teacher_forced_and_generated(model: Transformer, decoder_pairs: Callable) -> tuple[float, float]:
    """On 200 new sentences, the share reversed exactly: with the true decoder input (teacher
    forcing: every argmax right) and by greedy generation from ``<bos>``."""
    src, tgt = reversal_batch(np.random.default_rng(1), 200, REVERSAL_VOCAB)
    tgt_in, tgt_out = decoder_pairs(tgt)
    with model.evaluating():
        teacher_forced = (model.forward(src, tgt_in).argmax(axis=-1) == tgt_out).all(axis=-1).mean()
    generated = greedy_decode(model, src, max_len=tgt.shape[1])
    exact = [out == row[1:-1].tolist() for out, row in zip(generated, tgt)]
    return float(teacher_forced), float(np.mean(exact))


def generation_gap(decoder_pairs: Callable) -> float:
    """Teacher-forced exact match minus generated exact match after training: what the training
    loss promises and generation does not deliver. Near 0 when right."""
    teacher_forced, generated = teacher_forced_and_generated(train_reversal(decoder_pairs)[0], decoder_pairs)
    return teacher_forced - generated


# -- 9. a softmax layer, then a loss "from logits" ------------------------------------------------

def loss_buggy(logits: Any, targets: Any) -> tuple[float, Any]:
    """``(loss, dlogits)`` of the mean cross-entropy, ``<pad>`` targets ignored."""
    probabilities, softmax_cache = ops.softmax_forward(logits)       # the model's softmax layer
    loss, cache = ops.cross_entropy_forward(probabilities, targets)  # softmaxes again
    return float(loss), ops.softmax_backward(ops.cross_entropy_backward(1.0, cache), softmax_cache)


def loss_fixed(logits: Any, targets: Any) -> tuple[float, Any]:
    loss, cache = ops.cross_entropy_forward(logits, targets)         # one softmax, inside the loss
    return float(loss), ops.cross_entropy_backward(1.0, cache)


def loss_floor(loss_and_gradient: Callable) -> float:
    """The loss of a perfect prediction (logit 30 on the right word, 0 elsewhere; V = 12). A
    right and certain model costs nothing: near 0 when right. Twice softmaxed, the certain
    probability 1 becomes ``e / (e + V - 1)``."""
    targets = np.random.default_rng(0).integers(len(SPECIAL_TOKENS), 12, size=(4, 5))
    return loss_and_gradient(30.0 * np.eye(12)[targets], targets)[0]


# -- 11. accuracy that counts padding -------------------------------------------------------------

def accuracy_buggy(logits: np.ndarray, targets: np.ndarray) -> float:
    return float((logits.argmax(axis=-1) == targets).mean())          # every position, <pad> too


def accuracy_fixed(logits: np.ndarray, targets: np.ndarray) -> float:
    real = targets != PAD_ID
    return float((logits.argmax(axis=-1) == targets)[real].mean())    # real tokens only


def padded_targets() -> np.ndarray:
    """Four target rows of 2, 3, 5 and 10 real tokens, padded to 10: half the batch is ``<pad>``."""
    targets = np.full((4, 10), PAD_ID)
    for row, length in enumerate((2, 3, 5, 10)):
        targets[row, :length] = np.arange(length) % 8 + len(SPECIAL_TOKENS)
    return targets


def accuracy_of_knowing_nothing(accuracy: Callable) -> float:
    """The accuracy credited to a model that predicts ``<pad>`` everywhere, on ``padded_targets()``.
    It gets no real token right: 0 when right."""
    targets = padded_targets()
    return accuracy(np.eye(12)[np.full(targets.shape, PAD_ID)], targets)


# == the catalogue ================================================================================

BUGS = [
    Bug(1, "cosine in one column of the positional table",
        "pe = np.sin(angles); pe[:, 1] = np.cos(angles[:, 1])",
        positional_table_buggy, positional_table_fixed, off_the_unit_circle, 1e-9,
        "largest |sin^2 + cos^2 - 1| over the pairs of columns"),
    Bug(2, "positional table indexed by batch, not position",
        "x = x + self.pe[:x.size(0)]   # pe (max_len, 1, d_model), x (batch, seq, d_model)",
        add_positions_buggy, add_positions_fixed, depends_on_batch_row, 1e-9,
        "largest difference between two batch rows holding the same sentence",
        "the table's (seq, batch, d_model) layout comes from PyTorch's tutorial \"Language Modeling with "
        "nn.Transformer and torchtext\"; the bug is copying it into a batch-first model"),
    Bug(3, "attention scores as K Q^T",
        "scores = tf.matmul(k, q, transpose_b=True) / tf.sqrt(d_k)",
        attention_buggy, attention_fixed, query_leak, 1e-9,
        "largest change in other queries' outputs when query 0 moves"),
    Bug(4, "scores scaled by sqrt(d_model), not sqrt(d_head)",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)",
        scaled_scores_buggy, scaled_scores_fixed, score_scale_error, 0.25,
        "|ln std(scores)| for unit-variance q and k, 8 heads",
        "Aladdin Persson's \"Transformer from scratch\" (aladdinpersson/Machine-Learning-Collection, "
        "transformer_from_scratch.py, reported in its issue #65); the single-head form, scaled by the "
        "embedding width, was fixed in Karpathy's \"Let's build GPT\" code (karpathy/ng-video-lecture, PR #6)"),
    Bug(5, "cross-attention queries from the raw decoder input",
        "out1 = norm1(x + mha1(x, x, x)); attn2 = mha2(x, enc, enc)   # query x, not out1",
        decoder_layer_buggy, decoder_layer_fixed, context_blind_cross_attention, 0.5,
        "share of cross-attention rows blind to the earlier target words"),
    Bug(6, "feed-forward without its activation",
        "self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model))",
        feed_forward_buggy, feed_forward_fixed, explained_by_one_matrix, 0.999,
        "R^2 of the best single affine map"),
    Bug(7, "layer norm with the unbiased std and beta = ones",
        "self.b = nn.Parameter(torch.ones(d)); (x - x.mean(-1)) / (x.std(-1) + eps) + self.b",
        layer_norm_buggy, layer_norm_fixed, not_normalised, 1e-3,
        "max |row mean| + max |row variance - 1| at initialisation",
        "the unbiased x.std(-1) with eps outside the root: The Annotated Transformer's LayerNorm "
        "(harvardnlp/annotated-transformer, PR #119 and issue #122), copied into codertimo/BERT-pytorch "
        "(its issue #30); beta = ones is this entry's own second slip, not from a cited source"),
    Bug(8, "decoder input not shifted",
        "model.fit([src, tgt], tgt)   # the decoder reads the very tokens it must predict",
        decoder_pairs_buggy, decoder_pairs_fixed, generation_gap, 0.5,
        "teacher-forced minus generated exact match after training"),
    Bug(9, "a softmax layer, then a loss from logits",
        "Dense(vocab, activation='softmax'); SparseCategoricalCrossentropy(from_logits=True)",
        loss_buggy, loss_fixed, loss_floor, 0.01,
        "loss of a right and certain prediction (V = 12)",
        "a softmax output fed to a loss that applies its own softmax: the RNN spam-prediction recipe of "
        "Nick McClure's TensorFlow Machine Learning Cookbook (nfmcclure/tensorflow_cookbook, issue #87)"),
    Bug(10, "cross-attention masked with the decoder's padding",
        "attn2 = mha2(out1, enc, enc, mask=padding_mask(tgt))",
        cross_attention_mask_buggy, cross_attention_mask_fixed, weight_on_source_padding, 1e-9,
        "largest attention weight on source <pad> keys"),
    Bug(11, "accuracy that counts padding",
        "accuracy = (logits.argmax(-1) == targets).float().mean()",
        accuracy_buggy, accuracy_fixed, accuracy_of_knowing_nothing, 0.01,
        "accuracy of a model that predicts <pad> everywhere"),
]


def bug(number: int) -> Bug:
    """The zoo's entry ``number`` (1 to 11)."""
    for entry in BUGS:
        if entry.number == number:
            return entry
    raise ValueError(f"bug: number must be one of 1..{len(BUGS)}, got {number!r}")


# == sanity checks ================================================================================

SANITY_VOCAB = 64        # large enough that the initial loss sits close to ln V


def loss_at_initialisation(model: Transformer, src: Any, tgt: Any) -> float:
    """The mean cross-entropy of an untrained model on ``(src, tgt)`` (``tgt`` with ``<bos>`` and
    ``<eos>``). Its logits are small and nearly alike, so it should sit near ``ln V``, a uniform
    guess; well above means the logits start too large (a bad initialisation)."""
    with model.evaluating():
        loss, _ = ops.cross_entropy_forward(model.forward(src, tgt[:, :-1]), tgt[:, 1:])
    return float(loss)


@functools.lru_cache(maxsize=None)
def overfit_one_batch(loss_and_gradient: Callable = loss_fixed, steps: int = 300) -> tuple[float, ...]:
    """The losses of a tiny Transformer trained ``steps`` times on one batch of 16 reversals
    (``V = SANITY_VOCAB``). Any model that can learn must drive them to near 0. Cached."""
    src, tgt = reversal_batch(np.random.default_rng(5), 16, SANITY_VOCAB)
    model = tiny_transformer(SANITY_VOCAB)
    return tuple(fit(model, [(src, tgt[:, :-1], tgt[:, 1:])] * steps, loss_and_gradient))
