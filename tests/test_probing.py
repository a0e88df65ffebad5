"""Probing (notebook 07): the datasets are the size and shape they claim, the splits do not
leak, and the probe, self-similarity and attention-share tools give exact answers on
hand-made inputs."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

from collections import Counter

import numpy as np
import pytest
import torch

from plmcourse import data
from plmcourse import nn as pnn

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def is_word(token):
    return any(c.isalnum() for c in token)


# ----------------------------------------------------------------------------
# Part of speech in context


@pytest.fixture(scope="module")
def pos():
    return data.pos_probe_examples()


def test_pos_sizes_and_balance(pos):
    train, test = pos
    assert (len(train), len(test)) == (288, 96)
    assert len(data.POS_WORDS) == 32 and len(data.POS_TEST_WORDS) == 8
    assert Counter(e.label for e in train) == {"NOUN": 144, "VERB": 144}
    assert Counter(e.label for e in test) == {"NOUN": 48, "VERB": 48}
    per_word = Counter((e.word, e.label) for e in train + test)
    assert set(per_word.values()) == {6} and len(per_word) == 64  # every word: 6 nouns, 6 verbs


def test_pos_split_is_by_word_and_test_words_never_occur_in_train(pos):
    train, test = pos
    assert {e.word for e in test} == set(data.POS_TEST_WORDS)
    assert {e.word for e in train} == set(data.POS_WORDS) - set(data.POS_TEST_WORDS)
    train_tokens = {w for e in train for w in e.words}
    assert not train_tokens & set(data.POS_TEST_WORDS)  # not even in another word's sentence


def test_pos_target_index_points_at_the_only_occurrence(pos):
    for e in pos.train + pos.test:
        assert e.words[e.index] == e.word and e.words.count(e.word) == 1
        assert e.label in ("NOUN", "VERB")


def test_pos_position_gives_the_label_away_for_no_word(pos):
    # Layer 0 sees the word and its position; the word is a noun as often as a verb, and
    # here each word's noun sentences put it at exactly the positions its verb sentences do.
    positions = {}
    for e in pos.train + pos.test:
        positions.setdefault((e.word, e.label), []).append(e.index)
    for word in data.POS_WORDS:
        assert sorted(positions[word, "NOUN"]) == sorted(positions[word, "VERB"]), word


def test_sentences_are_short_lower_case_and_distinct():
    sentences = data.probe_sentences()
    assert len(sentences) == 488 and len({tuple(s) for s in sentences}) == 488
    for words in sentences:
        assert 5 <= len(words) <= 14
        assert all(w == w.lower() and w.strip() == w and w and "'" not in w for w in words)
        assert not is_word(words[-1])  # every sentence ends with . or ?
    pos = data.pos_probe_examples()
    context = data.context_sentences()
    expected = [e.words for e in pos.train + pos.test] + [e.words for es in context.values() for e in es]
    assert sorted(map(tuple, sentences)) == sorted(map(tuple, expected))


def test_everything_is_deterministic():
    assert data.pos_probe_examples() == data.pos_probe_examples()
    assert data.context_sentences() == data.context_sentences()
    assert data.bigram_shift_examples(seed=3) == data.bigram_shift_examples(seed=3)
    assert data.bigram_shift_examples(seed=3) != data.bigram_shift_examples(seed=4)


# ----------------------------------------------------------------------------
# Bigram shift


def test_swap_bigram_swaps_a_copy():
    words = ["a", "b", "c"]
    assert data.swap_bigram(words, 1) == ["a", "c", "b"] and words == ["a", "b", "c"]


def test_bigram_shift_sizes_and_balance():
    train, test = data.bigram_shift_examples()
    assert (len(train), len(test)) == (366, 122)
    assert Counter(e.label for e in train) == {0: 183, 1: 183}
    assert Counter(e.label for e in test) == {0: 61, 1: 61}
    # Each sentence is used once, swapped or not, and train and test share none.
    originals = [tuple(e.original) for e in train + test]
    assert sorted(originals) == sorted(map(tuple, data.probe_sentences()))
    assert not {tuple(e.original) for e in train} & {tuple(e.original) for e in test}
    # Another fraction (439 would be the cut): both splits still balanced.
    train, test = data.bigram_shift_examples(seed=1, test_fraction=0.1)
    assert Counter(e.label for e in train) == {0: 219, 1: 219}
    assert Counter(e.label for e in test) == {0: 25, 1: 25}


def test_a_swap_changes_exactly_two_adjacent_words():
    train, test = data.bigram_shift_examples()
    for e in train + test:
        if e.label == 0:
            assert e.words == e.original and e.position is None
            continue
        changed = [k for k, (a, b) in enumerate(zip(e.words, e.original)) if a != b]
        i = e.position
        assert changed == [i, i + 1] and i >= 1  # never the first word
        assert e.words[i] == e.original[i + 1] and e.words[i + 1] == e.original[i]
        assert is_word(e.words[i]) and is_word(e.words[i + 1])  # never punctuation
        assert Counter(e.words) == Counter(e.original)  # the same bag of words


# ----------------------------------------------------------------------------
# Self-similarity sentences


def test_context_sentences():
    context = data.context_sentences()
    assert len(context) == 13 and set(context) == set(data.POLYSEMOUS) | set(data.MONOSEMOUS)
    assert {"bank", "bat", "light", "spring", "match"} <= set(data.POLYSEMOUS)
    for word, examples in context.items():
        assert len(examples) == 8 and len({tuple(e.words) for e in examples}) == 8
        for e in examples:
            assert e.word == word and e.words[e.index] == word and e.words.count(word) == 1
        senses = Counter(e.sense for e in examples)
        if word in data.POLYSEMOUS:
            assert len(senses) == 2 and set(senses.values()) == {4} and None not in senses
        else:
            assert senses == {None: 8}


# ----------------------------------------------------------------------------
# linear_probe


def blobs(n, d, seed, shift=4.0):
    """Two Gaussian blobs, `shift` apart along every axis: linearly separable for shift >> 1."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, d, generator=g) + shift * y[:, None]
    return x, y


@pytest.mark.parametrize("device", DEVICES)
def test_probe_separates_separable_data(device):
    x, y = blobs(300, 20, seed=0)
    names = np.array(["NOUN", "VERB"])[y.numpy()]
    x, y = x.to(device), y.to(device)
    # The test set in reverse order: a probe that scored anything but test_x would fail.
    assert pnn.linear_probe(x[:200], y[:200], x[200:].flip(0), y[200:].flip(0)) == 1.0
    # Labels of any kind; features of any scale (the probe standardises them).
    assert pnn.linear_probe(1e4 * x[:200], names[:200], 1e4 * x[200:], names[200:]) == 1.0


def test_probe_on_random_labels_is_near_chance():
    # 400 training points in 300 dimensions: the probe can fit the training labels, but
    # what it learns is noise, and the test accuracy must show that.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(800, 300, generator=g)
    y = torch.randint(0, 2, (800,), generator=g)
    accuracy = pnn.linear_probe(x[:400], y[:400], x[400:], y[400:])
    assert 0.4 < accuracy < 0.6


def test_probe_three_classes_unseen_labels_and_determinism():
    threads = torch.get_num_threads()
    g = torch.Generator().manual_seed(2)
    centres = 5 * torch.eye(3, 10)
    y = torch.arange(300) % 3
    x = centres[y] + torch.randn(300, 10, generator=g)
    assert pnn.linear_probe(x[:240], y[:240], x[240:], y[240:]) == 1.0
    # A label the probe never saw in training is always a mistake.
    y_test = y[240:].clone()
    y_test[:30] = 7
    assert pnn.linear_probe(x[:240], y[:240], x[240:], y_test) == pytest.approx(0.5)
    # Same seed, same answer, also when it stops early.
    noisy = torch.randint(0, 2, (300,), generator=g)
    runs = {pnn.linear_probe(x[:240], noisy[:240], x[240:], noisy[240:], steps=3, seed=5) for _ in range(3)}
    assert len(runs) == 1
    assert torch.get_num_threads() == threads  # the probe runs on one thread, then restores the setting


# ----------------------------------------------------------------------------
# self_similarity and anisotropy


def test_self_similarity_of_identical_orthogonal_and_mixed_vectors():
    v = torch.tensor([0.3, -1.0, 2.0])
    assert pnn.self_similarity(torch.stack([v, 2 * v, 5 * v])) == pytest.approx(1.0)  # length does not matter
    assert pnn.self_similarity(torch.eye(4)) == pytest.approx(0.0)
    # pairs (e1, e1) = 1, (e1, e2) = 0, (e1, e2) = 0: mean 1/3
    assert pnn.self_similarity([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]) == pytest.approx(1 / 3)
    assert pnn.self_similarity(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="two vectors"):
        pnn.self_similarity(torch.ones(1, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_anisotropy_leaves_out_pairs_of_the_same_word(device):
    vectors = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], device=device)
    s = 2 ** -0.5
    # all pairs: (0,1)=1 (0,2)=0 (0,3)=s (1,2)=0 (1,3)=s (2,3)=s
    assert pnn.anisotropy(vectors) == pytest.approx((1 + 3 * s) / 6)
    # rows 0 and 1 are the same word: their pair is left out
    assert pnn.anisotropy(vectors, words=["a", "a", "b", "c"]) == pytest.approx(3 * s / 5)
    with pytest.raises(ValueError, match="words"):
        pnn.anisotropy(vectors, words=["a", "b"])


# ----------------------------------------------------------------------------
# attention_shares

CLS, SEP, PAD = 101, 102, 0


def hand_made_attention():
    """Two sentences, T = 5: [CLS] x y z [SEP] and [CLS] x [SEP] pad pad; four heads.

    head 0  exact previous-token head ([CLS] attends to itself)
    head 1  everything on [CLS]
    head 2  exact next-token head (the last real token attends to itself)
    head 3  like a model that forgot the mask: uniform 0.2 in sentence 0; in sentence 1,
            0.1 on each real key and 0.35 on each padding key
    Padding queries get junk that must not count.
    """
    T = 5
    weights = torch.zeros(2, 4, T, T)
    lengths = [5, 3]
    for b, n in enumerate(lengths):
        for q in range(n):
            weights[b, 0, q, max(q - 1, 0)] = 1.0
            weights[b, 1, q, 0] = 1.0
            weights[b, 2, q, min(q + 1, n - 1)] = 1.0
        for q in range(n, T):  # padding queries: all weight on the [SEP] key
            weights[b, :, q, n - 1] = 1.0
    weights[0, 3] = 0.2
    weights[1, 3, :, :3] = 0.1
    weights[1, 3, :, 3:] = 0.35
    # Padding that happens to carry the [SEP] id must still not count as [SEP].
    ids = torch.tensor([[CLS, 7, 8, 9, SEP], [CLS, 7, SEP, SEP, SEP]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    return weights, ids, mask


@pytest.mark.parametrize("device", DEVICES)
def test_attention_shares_of_hand_made_heads(device):
    weights, ids, mask = (t.to(device) for t in hand_made_attention())
    shares = pnn.attention_shares(weights, ids, mask, cls_id=CLS, sep_id=SEP)
    assert set(shares) == {"cls", "sep", "previous", "next", "self"}
    # 8 real queries; 6 of them have a real previous token and 6 a real next token.
    expected = {
        #            prev-token  on-[CLS]  next-token  no mask
        "previous": [1.0,        2 / 6,    0.0,        (4 * 0.2 + 2 * 0.1) / 6],
        "next":     [0.0,        0.0,      1.0,        (4 * 0.2 + 2 * 0.1) / 6],
        "cls":      [4 / 8,      1.0,      0.0,        (5 * 0.2 + 3 * 0.1) / 8],
        "sep":      [0.0,        0.0,      4 / 8,      (5 * 0.2 + 3 * 0.1) / 8],
        "self":     [2 / 8,      2 / 8,    2 / 8,      (5 * 0.2 + 3 * 0.1) / 8],
    }
    for name, values in expected.items():
        assert isinstance(shares[name], np.ndarray) and shares[name].shape == (4,)
        np.testing.assert_allclose(shares[name], values, atol=1e-6, err_msg=name)


def test_attention_shares_of_a_uniform_head_are_one_over_length():
    # One sentence of 4 real tokens and no padding, a head that spreads evenly.
    weights = torch.full((1, 2, 4, 4), 0.25)
    ids = torch.tensor([[CLS, 5, 6, SEP]])
    shares = pnn.attention_shares(weights, ids, torch.ones(1, 4, dtype=torch.bool), CLS, SEP)
    for values in shares.values():
        np.testing.assert_allclose(values, [0.25, 0.25])
