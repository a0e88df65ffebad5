"""plmcourse.ref.word_vectors against hand-worked cases, finite differences and torch's own functions."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import ref


def sig(x):
    return 1 / (1 + math.exp(-x))


# ----------------------------------------------------------------------------
# log_softmax, log_sigmoid, one_hot


def test_log_softmax_hand_worked():
    np.testing.assert_allclose(ref.log_softmax(np.array([0.0, 0.0])), [-math.log(2)] * 2)
    np.testing.assert_allclose(ref.log_softmax(np.array([1.0, 2.0, 3.0])),
                               np.array([1.0, 2.0, 3.0]) - math.log(math.e + math.e**2 + math.e**3))


def test_log_softmax_is_exact_where_the_naive_one_fails():
    np.testing.assert_allclose(ref.log_softmax(np.array([1000.0, 0.0])), [0.0, -1000.0])
    np.testing.assert_allclose(ref.log_softmax(np.array([0.0, -1000.0])), [0.0, -1000.0])
    out = ref.log_softmax(np.array([[1e4, -1e4, 0.0]]))
    assert np.isfinite(out).all()


@pytest.mark.parametrize("shape, axis", [((5,), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)])
def test_log_softmax_matches_torch(shape, axis):
    x = np.random.default_rng(0).standard_normal(shape) * 10
    expected = torch.log_softmax(torch.from_numpy(x), dim=axis).numpy()
    np.testing.assert_allclose(ref.log_softmax(x, axis=axis), expected, atol=1e-12)


def test_log_softmax_minus_inf_entries_and_slices():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    before = x.copy()
    out = ref.log_softmax(x)
    assert np.isneginf(out[0, 1]) and np.isfinite(out[0, [0, 2]]).all()
    np.testing.assert_allclose(np.exp(out[0]).sum(), 1.0)
    assert np.isneginf(out[1]).all()
    np.testing.assert_array_equal(x, before)


def test_log_sigmoid_and_sigmoid_are_stable_and_match_torch():
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 2.0, 40.0, 1000.0])
    np.testing.assert_allclose(ref.log_sigmoid(x), F.logsigmoid(torch.from_numpy(x)).numpy(), atol=1e-12)
    np.testing.assert_allclose(ref.sigmoid(x), torch.sigmoid(torch.from_numpy(x)).numpy(), atol=1e-12)


def test_one_hot_rows_are_orthogonal():
    e = ref.one_hot(np.array([2, 0, 1]), 3)
    np.testing.assert_array_equal(e, [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(e @ e.T, np.eye(3))


# ----------------------------------------------------------------------------
# Count-based vectors


def test_cooccurrence_counts_hand_worked():
    ids = np.array([0, 1, 2, 0])
    X1 = ref.cooccurrence_counts(ids, 3, window=1)
    np.testing.assert_array_equal(X1, [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    X2 = ref.cooccurrence_counts(ids, 3, window=2)  # adds (0, 2) at distance 2 and (1, 0) at distance 2
    np.testing.assert_array_equal(X2, [[0, 2, 2], [2, 0, 1], [2, 1, 0]])
    H = ref.cooccurrence_counts(ids, 3, window=2, weighting="harmonic")
    np.testing.assert_allclose(H, [[0, 1.5, 1.5], [1.5, 0, 1], [1.5, 1, 0]])
    with pytest.raises(ValueError, match="weighting"):
        ref.cooccurrence_counts(ids, 3, weighting="linear")


def test_cooccurrence_counts_agree_with_a_loop():
    ids = np.random.default_rng(1).integers(0, 6, 200)
    expected = np.zeros((6, 6))
    for i in range(len(ids)):
        for j in range(max(0, i - 3), min(len(ids), i + 4)):
            if i != j:
                expected[ids[i], ids[j]] += 1
    np.testing.assert_array_equal(ref.cooccurrence_counts(ids, 6, window=3), expected)


def test_ppmi_hand_worked():
    counts = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 0.0]])
    total = counts.sum()
    expected = np.zeros_like(counts)
    for w in range(3):
        for c in range(3):
            if counts[w, c] > 0:
                pmi = math.log(counts[w, c] * total / (counts[w].sum() * counts[:, c].sum()))
                expected[w, c] = max(0.0, pmi)
    np.testing.assert_allclose(ref.ppmi(counts), expected)
    assert (ref.ppmi(counts, alpha=0.75) >= 0).all()


def test_svd_vectors_reconstruct_a_low_rank_matrix_and_are_deterministic():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 2))
    m = a @ a.T  # symmetric, rank 2
    v = ref.svd_vectors(m, dim=2, power=0.5)
    np.testing.assert_allclose(v @ v.T, m, atol=1e-10)  # U S^1/2 (U S^1/2)^T = U S U^T = M
    np.testing.assert_array_equal(v, ref.svd_vectors(m, dim=2, power=0.5))
    assert ref.svd_vectors(m, dim=1).shape == (8, 1)


def test_pca_finds_the_main_direction():
    t = np.linspace(-1, 1, 20)
    points = np.stack([t, 2 * t, np.zeros_like(t)], axis=1) + 5.0
    xy = ref.pca(points, k=2)
    np.testing.assert_allclose(np.abs(xy[:, 0]), np.abs(t) * math.sqrt(5), atol=1e-10)
    np.testing.assert_allclose(xy[:, 1], 0.0, atol=1e-10)


# ----------------------------------------------------------------------------
# word2vec


def test_sgns_loss_hand_worked():
    c, o, n = np.array([[1.0]]), np.array([[2.0]]), np.array([[[3.0]]])
    loss, gc, go, gn = ref.skipgram_negative_sampling_loss(c, o, n)
    assert loss == pytest.approx(math.log(1 + math.exp(-2)) + math.log(1 + math.exp(3)))
    assert gc[0, 0] == pytest.approx((sig(2) - 1) * 2 + sig(3) * 3)
    assert go[0, 0] == pytest.approx(sig(2) - 1)
    assert gn[0, 0, 0] == pytest.approx(sig(3))


def test_sgns_loss_is_the_mean_over_the_batch():
    rng = np.random.default_rng(3)
    c, o, n = rng.standard_normal((4, 5)), rng.standard_normal((4, 5)), rng.standard_normal((4, 3, 5))
    whole = ref.skipgram_negative_sampling_loss(c, o, n)[0]
    parts = [ref.skipgram_negative_sampling_loss(c[i:i + 1], o[i:i + 1], n[i:i + 1])[0] for i in range(4)]
    assert whole == pytest.approx(np.mean(parts))


@pytest.mark.parametrize("B, K, d", [(1, 1, 2), (3, 4, 5), (6, 2, 3)])
def test_sgns_gradients_match_finite_differences(B, K, d):
    rng = np.random.default_rng(B * 100 + K)
    c, o, n = rng.standard_normal((B, d)), rng.standard_normal((B, d)), rng.standard_normal((B, K, d))
    _, gc, go, gn = ref.skipgram_negative_sampling_loss(c, o, n)

    def loss(c_, o_, n_):
        return ref.skipgram_negative_sampling_loss(c_, o_, n_)[0]

    np.testing.assert_allclose(gc, ref.numerical_gradient(lambda x: loss(x, o, n), c), atol=1e-8)
    np.testing.assert_allclose(go, ref.numerical_gradient(lambda x: loss(c, x, n), o), atol=1e-8)
    np.testing.assert_allclose(gn, ref.numerical_gradient(lambda x: loss(c, o, x), n), atol=1e-8)


def test_sgns_gradients_match_torch_autograd():
    rng = np.random.default_rng(4)
    arrays = rng.standard_normal((5, 6)), rng.standard_normal((5, 6)), rng.standard_normal((5, 4, 6))
    loss, *grads = ref.skipgram_negative_sampling_loss(*arrays)
    c, o, n = (torch.tensor(a, requires_grad=True) for a in arrays)
    expected = -(F.logsigmoid((c * o).sum(-1)) + F.logsigmoid(-(n @ c[:, :, None])[..., 0]).sum(-1)).mean()
    expected.backward()
    assert loss == pytest.approx(expected.item(), abs=1e-12)
    for grad, tensor in zip(grads, (c, o, n)):
        np.testing.assert_allclose(grad, tensor.grad.numpy(), atol=1e-12)


def test_sgns_loss_is_finite_for_huge_scores_and_checks_shapes():
    c = np.full((1, 4), 30.0)
    loss, *grads = ref.skipgram_negative_sampling_loss(c, -c, c[:, None, :])  # scores -3600 and +3600
    assert loss == pytest.approx(2 * 3600.0)
    assert all(np.isfinite(g).all() for g in grads)
    with pytest.raises(ValueError, match="expected center"):
        ref.skipgram_negative_sampling_loss(c, c, c)


def test_skipgram_softmax_loss_matches_torch_cross_entropy():
    rng = np.random.default_rng(5)
    centers, C, targets = rng.standard_normal((7, 4)), rng.standard_normal((11, 4)), rng.integers(0, 11, 7)
    expected = F.cross_entropy(torch.from_numpy(centers @ C.T), torch.from_numpy(targets)).item()
    assert ref.skipgram_softmax_loss(centers, C, targets) == pytest.approx(expected, abs=1e-12)


def test_cbow_forward_averages_the_context():
    rng = np.random.default_rng(6)
    W, C = rng.standard_normal((9, 3)), rng.standard_normal((9, 3))
    context = np.array([[1, 2, 3, 4], [0, 0, 8, 5]])
    expected = np.stack([W[row].mean(axis=0) @ C.T for row in context])
    np.testing.assert_allclose(ref.cbow_forward(context, W, C), expected)


def test_noise_distribution_hand_worked():
    np.testing.assert_allclose(ref.noise_distribution(np.array([1, 16, 0]), power=0.5), [0.2, 0.8, 0.0])
    np.testing.assert_allclose(ref.noise_distribution(np.array([3, 5, 0, 2]), power=0.0), [1 / 3, 1 / 3, 0, 1 / 3])
    p = ref.noise_distribution(np.array([100, 1]))
    assert p[0] / p[1] == pytest.approx(100 ** 0.75)


def test_sample_negatives_is_seeded_and_follows_the_distribution():
    noise = np.array([0.5, 0.3, 0.2, 0.0])
    a = ref.sample_negatives(noise, (100_000,), np.random.default_rng(7))
    b = ref.sample_negatives(noise, (100_000,), np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.bincount(a, minlength=4) / len(a), noise, atol=0.01)
    assert ref.sample_negatives(noise, (3, 5), np.random.default_rng(0)).shape == (3, 5)
    with pytest.raises(TypeError, match="Generator"):
        ref.sample_negatives(noise, (3,), 0)


# ----------------------------------------------------------------------------
# GloVe, gradient checking


def test_glove_weight_and_loss_hand_worked():
    np.testing.assert_allclose(ref.glove_weight(np.array([0.0, 50.0, 100.0, 300.0])),
                               [0.0, 0.5 ** 0.75, 1.0, 1.0])
    w, wt = np.array([[1.0], [0.0]]), np.array([[2.0], [1.0]])
    b, bt = np.array([0.5, 0.0]), np.array([0.0, 1.0])
    X = np.array([[0.0, 100.0], [50.0, 0.0]])
    # pairs seen: (0, 1): fit 1*1 + 0.5 + 1 = 2.5, weight 1; (1, 0): fit 0 + 0 + 0 = 0, weight 0.5**0.75
    expected = (2.5 - math.log(100)) ** 2 + 0.5 ** 0.75 * (0 - math.log(50)) ** 2
    assert ref.glove_loss(w, wt, b, bt, X) == pytest.approx(expected)


def test_numerical_gradient_of_a_known_function():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    np.testing.assert_allclose(ref.numerical_gradient(lambda v: np.sum(v ** 3), x), 3 * x ** 2, atol=1e-6)
    np.testing.assert_array_equal(x, [[1.0, -2.0], [0.5, 3.0]])  # not modified


# ----------------------------------------------------------------------------
# Evaluation


def analogy_vectors():
    """man, woman, king, queen, banana: queen = king - man + woman exactly."""
    man, woman, king = np.array([1.0, 0, 0, 0]), np.array([0, 1.0, 0, 0]), np.array([1.0, 0, 1.0, 0])
    return np.stack([man, woman, king, king - man + woman, np.array([0, 0, 0, 1.0])]), \
        ["man", "woman", "king", "queen", "banana"]


def test_nearest_neighbours_and_analogy():
    vectors, words = analogy_vectors()
    ids, sims = ref.nearest_neighbours(vectors, 2, k=2)
    assert 2 not in ids and sims[0] >= sims[1]
    ids, _ = ref.analogy(vectors, 0, 2, 1)  # man : king :: woman : ?
    assert ids[0] == 3
    ids, _ = ref.nearest_neighbours(vectors, vectors[3], k=1, exclude=[3])  # a vector query
    assert ids[0] != 3
    wv = ref.WordVectors(vectors, words)
    assert wv.analogy("man", "king", "woman") == "queen"
    assert wv.evaluate_analogies([("man", "king", "woman", "queen"), ("a", "b", "c", "d")]) == (1.0, 1)
    assert wv.neighbours("king", k=1, exclude=["queen"])[0][0] in {"man", "woman"}
    assert wv.similarity("man", "banana") == 0.0 and "king" in wv and "prince" not in wv
    with pytest.raises(ValueError):
        ref.WordVectors(vectors, words[:3])


def test_cosine_similarity_of_a_zero_vector_is_zero():
    assert ref.cosine_similarity(np.zeros(3), np.ones(3)) == 0.0
    assert ref.cosine_similarity(np.array([1.0, 1.0]), np.array([2.0, 2.0])) == pytest.approx(1.0)


def test_spearman_hand_worked_with_ties():
    assert ref.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ref.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # x ranks [1, 2.5, 2.5, 4], y ranks [1, 2, 3, 4]: Pearson of the ranks
    rx, ry = np.array([1, 2.5, 2.5, 4]), np.array([1.0, 2, 3, 4])
    expected = np.corrcoef(rx, ry)[0, 1]
    assert ref.spearman([1, 5, 5, 9], [1, 2, 3, 4]) == pytest.approx(expected)


def test_evaluate_similarity_skips_unknown_words():
    vectors, words = analogy_vectors()
    stoi = {w: i for i, w in enumerate(words)}
    pairs = [("king", "queen", 6.0), ("king", "banana", 1.0), ("man", "king", 9.0), ("king", "dragon", 5.0)]
    rho, used = ref.evaluate_similarity(vectors, stoi, pairs)
    assert used == 3 and rho == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ref.evaluate_similarity(vectors, stoi, [("a", "b", 1.0)])
