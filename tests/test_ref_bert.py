"""plmcourse.ref.bert: BERT's masking and masked-LM loss; hand-worked cases, invariants, statistics."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest

from plmcourse import ref

SPECIALS = (0, 1, 2, 3)  # [PAD], [CLS], [SEP], [MASK]
MASK = 3


# ----------------------------------------------------------------------------
# Losses


def test_mlm_loss_counts_only_labelled_positions():
    logits = np.zeros((1, 3, 4))
    logits[0, 1, 2] = 100.0
    assert ref.mlm_loss(logits, np.array([[-100, 2, -100]])) < 1e-12


# ----------------------------------------------------------------------------
# mlm_mask


def batch(rng, shape=(400, 100), vocab_size=60):
    tokens = rng.integers(4, vocab_size, shape)
    tokens[:, 0], tokens[:, -1] = 1, 2
    tokens[::3, -10:] = 0  # padding in a third of the rows
    return tokens


def test_mlm_mask_invariants_and_80_10_10():
    rng = np.random.default_rng(0)
    tokens = batch(rng)
    inputs, labels = ref.mlm_mask(tokens, np.random.default_rng(1), 60, MASK, SPECIALS)
    special = np.isin(tokens, SPECIALS)
    chosen = labels != -100
    assert not (chosen & special).any() and np.array_equal(inputs[special], tokens[special])
    assert np.array_equal(labels[chosen], tokens[chosen])
    assert np.array_equal(inputs[~chosen], tokens[~chosen])  # only chosen positions change
    assert abs(chosen[~special].mean() - 0.15) < 0.01
    masked = (inputs[chosen] == MASK).mean()
    kept = (inputs[chosen] == tokens[chosen]).mean()
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(1 - masked - kept - 0.1) < 0.02
    replaced = chosen & (inputs != MASK) & (inputs != tokens)
    assert not np.isin(inputs[replaced], SPECIALS).any()
    assert len(np.unique(inputs[replaced])) > 40  # spread over the 56 ordinary ids


def test_mlm_mask_is_reproducible_and_draws_only_from_rng():
    tokens = batch(np.random.default_rng(0), (4, 30))
    a = ref.mlm_mask(tokens, np.random.default_rng(5), 60, MASK, SPECIALS)
    np.random.seed(123)
    b = ref.mlm_mask(tokens, np.random.default_rng(5), 60, MASK, SPECIALS)
    c = ref.mlm_mask(tokens, np.random.default_rng(6), 60, MASK, SPECIALS)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[1], c[1])


def test_mlm_mask_edge_probabilities_and_shapes():
    tokens = batch(np.random.default_rng(0), (5, 20))
    inputs, labels = ref.mlm_mask(tokens, np.random.default_rng(0), 60, MASK, set(SPECIALS), p=0.0)
    assert np.array_equal(inputs, tokens) and (labels == -100).all()
    inputs, labels = ref.mlm_mask(tokens, np.random.default_rng(0), 60, MASK, SPECIALS, p=1.0)
    assert ((labels != -100) == ~np.isin(tokens, SPECIALS)).all()
    one = ref.mlm_mask(np.arange(4, 50), np.random.default_rng(0), 60, MASK, SPECIALS)[0]
    assert one.shape == (46,)
    with pytest.raises(ValueError):
        ref.mlm_mask(tokens, np.random.default_rng(0), 60, MASK, SPECIALS, p=1.5)
