"""``Translator.translations``: one encoding and one decoding per sentence, and the attention it
records is that of the decoded tokens, equal to a teacher-forced pass over them."""

from __future__ import annotations

import collections
import importlib

import numpy
import pytest

import npformer
from npformer import backend, cli
from npformer.data import BPEVocab, Vocab, tokenize
from npformer.models import ATTENTION_KINDS, Transformer, TransformerConfig
from npformer.tasks.translation import Translator, attention_of
from npformer.tokens import BOS_ID

SENTENCES = ["the black cat eats the white apple.", "she sees a bird.", "where are the big green houses?"]


def teacher_forced_maps(model, found):
    """Every attention map of one teacher-forced forward pass over the source ids and the decoded tokens."""
    positions = len(found.labels["cross"][0])
    src = numpy.array([found.source_ids])
    tgt_in = numpy.array([[BOS_ID] + found.output_ids[: positions - 1]])
    with model.evaluating():
        model.forward(backend.asarray(src), backend.asarray(tgt_in))
    return {kind: [backend.to_numpy(layer[0]) for layer in model.attention_maps()[kind]] for kind in ATTENTION_KINDS}


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_recorded_maps_are_those_of_a_teacher_forced_pass_over_the_decoded_tokens(beam_size):
    run = npformer.pretrained("toy")
    found = Translator.from_run(run).translations(SENTENCES, beam_size=beam_size)  # one padded batch
    for one in found:
        again = teacher_forced_maps(run.model, one)
        for kind in ATTENTION_KINDS:
            rows, columns = one.labels[kind]
            for recorded, forced in zip(one.attention[kind], again[kind]):
                assert recorded.shape == (run.model.config.n_heads, len(rows), len(columns))
                numpy.testing.assert_allclose(recorded, forced, atol=2e-5, err_msg=f"{one.sentence}: {kind}")
        assert one.ended and one.labels["cross"][0][-1] == "<eos>"
        assert one.text == Translator.from_run(run).translate([one.sentence], beam_size=beam_size)[0]


def test_one_encoding_and_one_decoding_per_sentence_and_no_teacher_forced_pass(monkeypatch):
    run = npformer.pretrained("toy")
    calls = {"start_decoding": 0, "forward": 0, "encoder": 0}
    model = run.model
    for name, owner in (("start_decoding", model), ("forward", model), ("encoder", model.encoder)):
        method = getattr(owner, "forward" if name == "encoder" else name)

        def counted(*args, _method=method, _name=name, **kwargs):
            calls[_name] += 1
            return _method(*args, **kwargs)

        monkeypatch.setattr(owner, "forward" if name == "encoder" else name, counted)
    found = attention_of(run, SENTENCES[0], beam_size=4)
    assert calls == {"start_decoding": 1, "forward": 0, "encoder": 1}
    Translator.from_run(run).translations(SENTENCES, beam_size=1)
    assert calls == {"start_decoding": 2, "forward": 0, "encoder": 2}  # the three sentences: one batch
    assert found.text == "le chat noir mange la pomme blanche."


@pytest.mark.parametrize("name", ["toy", "fra"])
def test_npformer_translate_reads_each_sentence_once(name, monkeypatch, capsys):
    """The unknown words, the length notes and the translation of ``npformer translate`` come from one
    reading of the sentence (``Translator.read``): one tokenisation, and the pieces and ids of that
    reading alone (before issue 62, toy: 5 tokenisations, 12 ``pieces`` and 31 ``encode`` calls)."""
    calls = collections.Counter()
    for owner, method in [(importlib.import_module("npformer.tasks.translation.translator"), "tokenize"),
                          (Vocab, "pieces"), (Vocab, "encode"), (BPEVocab, "pieces"), (BPEVocab, "encode")]:
        def counted(*args, _method=getattr(owner, method), _name=method, **kwargs):
            calls[_name] += 1
            return _method(*args, **kwargs)

        monkeypatch.setattr(owner, method, counted)
    sentence = "The black cat eats the white apple with Zorglub"
    assert cli.main(["translate", "--pretrained", name, "--beam", "1", sentence]) == 0
    assert "Zorglub" in capsys.readouterr().err
    assert calls["tokenize"] == 1, calls
    by_the_command = dict(calls)
    calls.clear()
    Translator.from_run(npformer.pretrained(name)).read(sentence)
    assert by_the_command == dict(calls)


def test_bpe_labels_follow_the_decoded_pieces_even_where_the_text_would_segment_otherwise():
    """An untrained BPE model writes pieces in orders the segmenter would not choose; the labels and
    the maps follow the pieces as decoded, where re-encoding the text (the old way) would not."""
    french = [tokenize(s, "fr") for s in ["le chat noir mange la pomme.", "les chats voient les oiseaux.",
                                          "la maison blanche est grande."] * 5]
    english = [tokenize(s, "en") for s in SENTENCES * 5]
    src_vocab, tgt_vocab = BPEVocab.learn(english, 40), BPEVocab.learn(french, 40)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=16, n_heads=2, d_ff=32,
                                          n_layers=2, max_len=40, dropout=0.0), seed=3)
    found = Translator(model, src_vocab, tgt_vocab).translations(SENTENCES, beam_size=3, max_len=12)
    differ = 0
    for one in found:
        again = teacher_forced_maps(model, one)  # beams that swap places: the record follows the kept rows
        for kind in ATTENTION_KINDS:
            for recorded, forced in zip(one.attention[kind], again[kind]):
                numpy.testing.assert_allclose(recorded, forced, atol=2e-5, err_msg=f"{one.sentence}: {kind}")
        rows, columns = one.labels["cross"]
        assert len(rows) == len(one.output_ids) + one.ended and len(columns) == len(one.source_ids)
        assert [layer.shape[1:] for layer in one.attention["cross"]] == [(len(rows), len(columns))] * 2
        assert one.labels["decoder"][0][0] == "<bos>"
        differ += one.output_ids != tgt_vocab.encode(tokenize(one.text, "fr"))
    assert differ > 0, "this seed must show a segmentation that re-encoding the text would change"


def test_the_record_follows_each_kept_row_back_through_the_beams():
    """A synthetic record whose weights name their (step, row): the trace must read, at each step,
    the row that the finished sequence descends from."""
    from npformer.tasks.translation.attention_record import AttentionRecord

    record = AttentionRecord()
    record.encoder = [numpy.zeros((1, 1, 2, 2))]
    parents = [numpy.array([0, 0, 1]), numpy.array([2, 0, 1]), numpy.array([1, 2, 0])]
    for step, kept in enumerate(parents):
        cross = numpy.array([[[10.0 * step + row, 0.0]] for row in range(3)])  # (rows, H=1, Ts=2)
        record.steps.append({"decoder": [numpy.zeros((3, 1, step + 1))], "cross": [cross]})
        record.parents.append(kept)
    # final row 0 <- row 1 at step 2 <- row 0 at step 1 <- row 0 at step 0
    traced = record.trace(row=0, source=0, n_positions=3, n_source=2)["cross"][0][0, :, 0]
    assert traced.tolist() == [0.0, 10.0, 21.0]
