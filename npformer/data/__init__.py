"""Data: the embedded toy corpus, Tatoeba TSV files, tokenisation, vocabularies, batching."""

from .batching import Batch, encode_pairs, encode_tokens, make_batches, pad_batch, pad_rows
from .bpe import BPE, BPEVocab, join_pieces, learn_merges
from .download import download_pairs, find_pairs_file
from .files import DataError, DataFileNotFoundError, read_pairs_file
from .tatoeba import ATTRIBUTION, LoadReport, check_splits, load_pairs, sentence_splits, split_by_source, split_hint
from .tokenizer import detokenize, normalize, tokenize
from .toy_corpus import Alignment, Splits, noun_phrase, sentence_pair, toy_corpus
from .unknown_words import copy_links, drawn_links, hide_links, invent_links, swap_in_words, WordInventor
from .vocab import Vocab

__all__ = ["Alignment", "BPE", "BPEVocab", "join_pieces", "learn_merges", "Batch", "encode_pairs", "encode_tokens", "make_batches", "pad_batch", "pad_rows", "ATTRIBUTION", "LoadReport",
           "DataError", "DataFileNotFoundError", "download_pairs", "find_pairs_file", "read_pairs_file", "check_splits", "load_pairs", "sentence_splits", "split_by_source", "split_hint", "detokenize", "normalize", "tokenize", "Splits",
           "noun_phrase", "sentence_pair", "toy_corpus", "copy_links", "drawn_links", "hide_links", "invent_links", "swap_in_words", "WordInventor", "Vocab"]
