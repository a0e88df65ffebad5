"""plmcourse.data: the built-in corpus is deterministic and the tokenizers round-trip."""

import plmcourse  # noqa: F401

import numpy as np
import pytest

from plmcourse import data


def test_corpus_is_deterministic_and_large_enough():
    a, b = data.python_corpus(), data.python_corpus()
    assert a == b
    assert len(a) > 500_000
    assert len(data.words(a)) > 80_000


def test_char_tokenizer_round_trip():
    text = data.python_docs()[:5000]
    tok = data.CharTokenizer(text)
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and tok.decode(ids) == text
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("\u2603")


def test_word_tokenizer_orders_by_count_and_maps_rare_words_to_unk():
    tokens = "the cat the dog the cat a".split()
    tok = data.WordTokenizer(tokens, min_count=2, specials=("<pad>",))
    assert tok.itos == ["<unk>", "<pad>", "the", "cat"]
    assert tok.decode(tok.encode(["the", "dog"])) == ["the", "<unk>"]
    assert tok.counts.tolist() == [0, 0, 3, 2]


def test_words_lowercases_and_drops_punctuation():
    assert data.words("Don't PANIC: 42 towels!") == ["don't", "panic", "towels"]


def test_split_is_the_last_tenth():
    train, val = data.split(list(range(100)))
    assert train == list(range(90)) and val == list(range(90, 100))
