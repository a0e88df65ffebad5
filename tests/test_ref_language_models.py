"""plmcourse.ref.language_models against hand-worked cases and torch's own functions."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import ref


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    assert ref.perplexity(np.zeros((10, 7)), np.arange(10) % 7) == pytest.approx(7.0)


def test_perplexity_matches_torch_with_ignored_positions():
    rng = np.random.default_rng(0)
    logits, targets = rng.standard_normal((3, 5, 8)), rng.integers(0, 8, (3, 5))
    targets[0, :2] = -100
    expected = math.exp(F.cross_entropy(torch.from_numpy(logits).reshape(-1, 8),
                                        torch.from_numpy(targets).reshape(-1), ignore_index=-100).item())
    assert ref.perplexity(logits, targets) == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------
# n-grams


def test_bigram_add_k_hand_worked():
    ids = [0, 1, 0, 1, 2]  # bigrams: (0,1) twice, (1,0) once, (1,2) once
    lm = ref.NGramLM(2, vocab_size=3, k=1.0).fit(ids)
    np.testing.assert_allclose(lm.next_distribution([0]), [1 / 5, 3 / 5, 1 / 5])  # (c + 1) / (2 + 3)
    np.testing.assert_allclose(lm.next_distribution([1]), [2 / 5, 1 / 5, 2 / 5])
    np.testing.assert_allclose(lm.next_distribution([2]), [1 / 3] * 3)  # history never seen: uniform
    np.testing.assert_allclose(lm.next_distribution([2, 0]), lm.next_distribution([0]))  # last word only
    log_probs = lm.log_probs(ids)
    assert len(log_probs) == 4
    assert log_probs[0] == pytest.approx(math.log(3 / 5))
    assert lm.perplexity(ids) == pytest.approx(math.exp(-np.mean(log_probs)))


def test_unigram_and_the_start_of_a_stream():
    lm = ref.NGramLM(1, vocab_size=4, k=0.0).fit([0, 0, 1, 3])
    np.testing.assert_allclose(lm.next_distribution([3, 2]), [0.5, 0.25, 0.0, 0.25])
    trigram = ref.NGramLM(3, vocab_size=3, k=1.0).fit([0, 1, 2, 0, 1, 2])
    # position 1 has only one word of history: the bigram estimate is used there
    assert len(trigram.log_probs([0, 1, 2])) == 2


def test_interpolation_mixes_the_orders():
    ids = [0, 1, 2, 0, 1, 1, 2]
    lm = ref.NGramLM(2, vocab_size=3, k=0.5, lambdas=(0.3, 0.7)).fit(ids)
    unigram = ref.NGramLM(1, vocab_size=3, k=0.5).fit(ids).next_distribution([])
    bigram = ref.NGramLM(2, vocab_size=3, k=0.5).fit(ids).next_distribution([1])
    np.testing.assert_allclose(lm.next_distribution([1]), 0.3 * unigram + 0.7 * bigram)
    np.testing.assert_allclose(lm.next_distribution([1]).sum(), 1.0)
    with pytest.raises(ValueError, match="summing to 1"):
        ref.NGramLM(2, 3, lambdas=(0.5, 0.6))
    with pytest.raises(ValueError, match="fit"):
        ref.NGramLM(2, 3).next_distribution([0])


def test_smoothing_keeps_unseen_words_finite():
    lm = ref.NGramLM(3, vocab_size=5, k=0.01).fit([0, 1, 2, 0, 1, 2])
    assert math.isfinite(lm.perplexity([4, 3, 4, 3]))
    unsmoothed = ref.NGramLM(3, vocab_size=5, k=0.0).fit([0, 1, 2, 0, 1, 2])
    assert math.isinf(unsmoothed.perplexity([0, 1, 0]))  # "0 1" was always followed by 2 in training
    assert math.isfinite(ref.NGramLM(3, vocab_size=5, k=0.01).fit([0, 1, 2, 0, 1, 2]).perplexity([0, 1, 0]))


# ----------------------------------------------------------------------------
# biLM loss and scalar mix


def test_bilm_loss_hand_worked():
    V = 3
    logits_f = np.zeros((1, 3, V))
    logits_f[0, 0, 1] = math.log(2)  # at t=0 the forward LM gives token 1 twice the weight: p = 2/4
    logits_b = np.zeros((1, 3, V))
    logits_b[0, 2, 1] = math.log(3)  # at t=2 the backward LM gives token 1 three times the weight: p = 3/5
    targets = np.array([[0, 1, 2]])
    # forward predictions: t=0 -> token 1 (p 1/2), t=1 -> token 2 (p 1/3)
    # backward predictions: t=1 -> token 0 (p 1/3), t=2 -> token 1 (p 3/5)
    expected = -(math.log(1 / 2) + math.log(1 / 3)) / 2 - (math.log(1 / 3) + math.log(3 / 5)) / 2
    assert ref.bilm_loss(logits_f, logits_b, targets) == pytest.approx(expected)


def test_bilm_loss_ignores_predictions_to_and_from_padding():
    rng = np.random.default_rng(1)
    f, b = rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 4))
    targets = np.array([[0, 1, 2, 3, 1], [2, 3, 1, -100, -100]])
    forward_terms, backward_terms = [], []
    for row in range(2):
        for t in range(5):
            if targets[row, t] == -100:
                continue
            if t + 1 < 5 and targets[row, t + 1] != -100:
                forward_terms.append(-ref.log_softmax(f[row, t])[targets[row, t + 1]])
            if t > 0 and targets[row, t - 1] != -100:
                backward_terms.append(-ref.log_softmax(b[row, t])[targets[row, t - 1]])
    assert len(forward_terms) == len(backward_terms) == 6
    assert ref.bilm_loss(f, b, targets) == pytest.approx(np.mean(forward_terms) + np.mean(backward_terms))
    # what the padding positions hold does not matter
    f2, b2 = f.copy(), b.copy()
    f2[1, 3:], b2[1, 3:] = 100.0, -100.0
    assert ref.bilm_loss(f2, b2, targets) == pytest.approx(ref.bilm_loss(f, b, targets))


def test_scalar_mix_hand_worked():
    layers = np.stack([np.full((2, 3), 1.0), np.full((2, 3), 4.0)])
    np.testing.assert_allclose(ref.scalar_mix(layers, np.zeros(2), 2.0), np.full((2, 3), 5.0))  # 2 * mean
    w = np.array([0.0, math.log(3)])  # softmax: [1/4, 3/4]
    np.testing.assert_allclose(ref.scalar_mix(layers, w, 1.0), np.full((2, 3), 0.25 + 3.0))
    np.testing.assert_allclose(ref.scalar_mix(layers, w + 1000.0, 1.0), np.full((2, 3), 3.25))  # stable
