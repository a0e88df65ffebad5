"""plmcourse.ref.bart: BART's and T5's noise functions, UniLM's and XLNet's masks; hand-worked cases, invariants."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest

from plmcourse import ref


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
