"""plmcourse.ref.objectives and plmcourse.ref.generate: hand-worked cases, invariants, statistics, torch."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import ref

SPECIALS = (0, 1, 2, 3)  # [PAD], [CLS], [SEP], [MASK]
MASK = 3


# ----------------------------------------------------------------------------
# Losses


def test_cross_entropy_by_hand():
    # Two equal logits: p = 1/2 for either class, loss log 2.
    assert math.isclose(ref.cross_entropy(np.zeros((1, 2)), np.array([0])), math.log(2))
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    expected = (-(2 - math.log(math.exp(2) + 2)) + math.log(3)) / 2
    assert math.isclose(ref.cross_entropy(logits, np.array([0, 1])), expected)


def test_cross_entropy_skips_ignored_positions_and_averages_over_the_rest():
    logits = np.array([[0.0, 0.0], [5.0, -5.0], [0.0, 0.0]])
    assert math.isclose(ref.cross_entropy(logits, np.array([0, -100, 1])), math.log(2))
    assert ref.cross_entropy(logits, np.array([-100, -100, -100])) == 0.0  # torch would give NaN


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_cross_entropy_matches_torch(scale):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5, 7)) * scale
    targets = rng.integers(0, 7, (3, 5))
    targets[rng.random((3, 5)) < 0.3] = -100
    expected = F.cross_entropy(torch.from_numpy(logits).reshape(-1, 7), torch.from_numpy(targets).reshape(-1))
    assert math.isclose(ref.cross_entropy(logits, targets), expected.item(), rel_tol=1e-12)


def test_cross_entropy_rejects_bad_targets():
    with pytest.raises(ValueError, match="must lie in 0..2"):
        ref.cross_entropy(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        ref.cross_entropy(np.zeros((2, 3)), np.array([0]))


def test_causal_lm_loss_is_the_shifted_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 6, 5))
    tokens = rng.integers(0, 5, (2, 6))
    assert ref.causal_lm_loss(logits, tokens) == ref.cross_entropy(logits[:, :-1], tokens[:, 1:])
    expected = F.cross_entropy(torch.from_numpy(logits[:, :-1]).reshape(-1, 5), torch.from_numpy(tokens[:, 1:]).reshape(-1))
    assert math.isclose(ref.causal_lm_loss(logits, tokens), expected.item(), rel_tol=1e-12)


def test_causal_lm_loss_of_a_perfect_predictor_is_zero():
    tokens = np.array([[1, 2, 3, 0]])
    logits = np.full((1, 4, 4), -1e3)
    for t in range(3):
        logits[0, t, tokens[0, t + 1]] = 1e3  # position t is sure of token t + 1
    assert ref.causal_lm_loss(logits, tokens) < 1e-12


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


# ----------------------------------------------------------------------------
# BART's noise functions


def test_token_masking_and_deletion_rates():
    tokens = np.arange(10, 20010)
    masked = ref.token_masking(tokens, np.random.default_rng(0), mask_id=1, p=0.2)
    assert masked.shape == tokens.shape and abs((masked == 1).mean() - 0.2) < 0.01
    assert np.array_equal(masked[masked != 1], tokens[masked != 1])
    kept = ref.token_deletion(tokens, np.random.default_rng(0), p=0.2)
    assert abs(len(kept) / len(tokens) - 0.8) < 0.01 and np.all(np.diff(kept) > 0)  # order kept


def infilling_runs(out, n, first=10, mask_id=1):
    """(masks, removed) for each stretch between kept tokens, for distinct input ids first.."""
    runs, masks, previous = [], 0, -1
    for value in list(out) + [None]:
        if value == mask_id:
            masks += 1
            continue
        index = n if value is None else value - first
        assert index > previous
        if masks or index - previous - 1:
            runs.append((masks, index - previous - 1))
        masks, previous = 0, index
    return runs


def test_text_infilling_by_hand_and_invariants():
    tokens = np.arange(10, 20010)
    out = ref.text_infilling(tokens, np.random.default_rng(0), mask_id=1)
    runs = infilling_runs(out, len(tokens))
    removed = sum(r for _, r in runs)
    masks = sum(m for m, _ in runs)
    assert removed == round(0.3 * len(tokens))  # exactly the budget: spans never overlap
    assert all(m >= 1 for m, _ in runs)  # nothing disappears without a mask
    assert 2.7 < removed / masks < 3.3  # Poisson(3) lengths, one mask each
    assert sum(m for m, r in runs if r == 0) / masks > 0.02  # zero-length spans insert a mask


def test_text_infilling_edges():
    rng = np.random.default_rng(0)
    tokens = np.arange(10, 30)
    assert np.array_equal(ref.text_infilling(tokens, rng, 1, mask_ratio=0.0), tokens)
    everything = ref.text_infilling(tokens, rng, 1, mask_ratio=1.0)
    assert set(everything.tolist()) == {1}
    assert ref.text_infilling(np.array([], dtype=np.int64), rng, 1).size == 0
    a = ref.text_infilling(tokens, np.random.default_rng(3), 1)
    b = ref.text_infilling(tokens, np.random.default_rng(3), 1)
    assert np.array_equal(a, b)


def test_sentence_permutation_keeps_every_sentence_whole():
    sep = 0
    tokens = np.array([5, 6, 0, 7, 0, 8, 9, 10, 0, 11, 0])
    for seed in range(10):
        out = ref.sentence_permutation(tokens, np.random.default_rng(seed), sep)
        sentences = sorted(tuple(s) for s in np.split(out, np.flatnonzero(out == sep) + 1) if len(s))
        assert sentences == sorted([(5, 6, 0), (7, 0), (8, 9, 10, 0), (11, 0)])
    outs = {tuple(ref.sentence_permutation(tokens, np.random.default_rng(s), sep)) for s in range(30)}
    assert len(outs) > 10  # 24 orders possible


def test_document_rotation_is_a_rotation():
    tokens = np.arange(20)
    for seed in range(5):
        out = ref.document_rotation(tokens, np.random.default_rng(seed))
        start = out[0]
        assert np.array_equal(out, np.roll(tokens, -start))


def test_t5_span_corruption_round_trip():
    tokens = np.arange(100, 140)
    sentinels = list(range(10))
    inputs, targets = ref.t5_span_corruption(tokens, np.random.default_rng(0), sentinels, noise_density=0.25)
    # Put each span back in place of its sentinel: the original comes back.
    spans, current = {}, None
    for t in targets.tolist():
        if t in sentinels:
            current = t
            spans[t] = []
        else:
            spans[current].append(t)
    rebuilt = [x for t in inputs.tolist() for x in (spans[t] if t in sentinels else [t])]
    assert rebuilt == tokens.tolist()
    assert sum(len(s) for s in spans.values()) == 10  # 25% of 40
    assert targets[-1] == sentinels[len(spans) - 1] and len(spans[targets[-1]]) == 0


# ----------------------------------------------------------------------------
# Masks


def test_prefix_lm_mask_by_hand():
    expected = np.array([
        [1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ], dtype=bool)
    assert np.array_equal(ref.prefix_lm_mask(5, 2), expected)
    assert np.array_equal(ref.prefix_lm_mask(6, 0), ref.causal_mask(6))
    assert ref.prefix_lm_mask(6, 6).all()
    with pytest.raises(ValueError):
        ref.prefix_lm_mask(3, 4)


def test_permutation_mask_by_hand_and_its_properties():
    # Order 2, 0, 3, 1: position 2 sees nothing, 0 sees 2, 3 sees 2 and 0, 1 sees the rest.
    expected = np.array([
        [0, 0, 1, 0],
        [1, 0, 1, 1],
        [0, 0, 0, 0],
        [1, 0, 1, 0],
    ], dtype=bool)
    assert np.array_equal(ref.permutation_mask([2, 0, 3, 1]), expected)
    assert np.array_equal(ref.permutation_mask([2, 0, 3, 1], include_self=True), expected | np.eye(4, dtype=bool))
    # The identity order is the causal mask without the diagonal.
    assert np.array_equal(ref.permutation_mask(np.arange(5)), np.tril(np.ones((5, 5), dtype=bool), -1))
    order = np.random.default_rng(0).permutation(9)
    m = ref.permutation_mask(order)
    assert not (m & m.T).any()  # never both ways
    assert np.array_equal(np.sort(m.sum(1)), np.arange(9))  # the t-th position sees t others
    with pytest.raises(ValueError):
        ref.permutation_mask([0, 0, 1])


# ----------------------------------------------------------------------------
# Decoding filters


def test_top_k_filter_by_hand():
    logits = np.array([[1.0, 3.0, 2.0, 0.0]])
    assert np.array_equal(ref.top_k_filter(logits, 2), [[-np.inf, 3.0, 2.0, -np.inf]])
    assert np.array_equal(ref.top_k_filter(logits, 0), logits)
    assert np.array_equal(ref.top_k_filter(logits, 9), logits)


def test_top_p_filter_by_hand():
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(probs)[None]
    assert np.isneginf(ref.top_p_filter(logits, 0.6)).tolist() == [[False, False, True, True]]
    assert np.isneginf(ref.top_p_filter(logits, 0.5 - 1e-9)).tolist() == [[False, True, True, True]]
    assert np.isneginf(ref.top_p_filter(logits, 0.01)).tolist() == [[False, True, True, True]]
    assert np.array_equal(ref.top_p_filter(logits, 1.0), logits)
    with pytest.raises(ValueError):
        ref.top_p_filter(logits, 0.0)
