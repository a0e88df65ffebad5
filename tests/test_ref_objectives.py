"""plmcourse.ref.objectives: cross-entropy, the loss every objective is built on; hand-worked cases, torch."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import ref


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
