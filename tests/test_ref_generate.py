"""plmcourse.ref.generate: the decoding filters top-k and top-p; hand-worked cases."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest

from plmcourse import ref


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
