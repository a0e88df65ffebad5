"""plmcourse.ref.gpt: the causal LM loss; hand-worked cases, torch."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import ref


# ----------------------------------------------------------------------------
# Losses


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
