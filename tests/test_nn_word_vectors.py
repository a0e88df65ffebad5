"""plmcourse.nn.word_vectors: parity with plmcourse.ref (losses and gradients), the data pipeline,
and trainers that are deterministic and learn the synthetic corpus's structure."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch

from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.nn import word_vectors as nwv

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


@pytest.fixture(scope="module")
def corpus_ids():
    corpus = data.synthetic_corpus(20000, seed=0)
    tokenizer = data.WordTokenizer(corpus.tokens())
    return tokenizer.encode(corpus.tokens()), tokenizer


def quality(embeddings, tokenizer):
    vectors = ref.WordVectors(embeddings, tokenizer.itos)
    rho, _ = vectors.evaluate_similarity(data.SIMILARITY_PAIRS)
    return rho, {group: vectors.evaluate_analogies(q)[0] for group, q in data.ANALOGIES.items()}


# ----------------------------------------------------------------------------
# Losses: nn against ref in float64


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("B, K, d", [(1, 1, 3), (4, 5, 8), (16, 2, 6)])
def test_sgns_loss_and_autograd_gradients_match_ref(B, K, d, device):
    rng = np.random.default_rng(B + K + d)
    arrays = rng.standard_normal((B, d)), rng.standard_normal((B, d)), rng.standard_normal((B, K, d))
    loss_ref, *grads_ref = ref.skipgram_negative_sampling_loss(*arrays)
    tensors = [torch.tensor(a, device=device, requires_grad=True) for a in arrays]
    loss = pnn.skipgram_negative_sampling_loss(*tensors)
    grads = torch.autograd.grad(loss, tensors)
    assert loss.item() == pytest.approx(loss_ref, abs=1e-10)
    for grad, want in zip(grads, grads_ref):
        np.testing.assert_allclose(grad.cpu().numpy(), want, atol=1e-10)


def test_sgns_loss_is_finite_for_huge_scores():
    c = torch.full((2, 4), 30.0, dtype=torch.float64, requires_grad=True)
    loss = pnn.skipgram_negative_sampling_loss(c, -c, c[:, None, :])
    loss.backward()
    assert loss.item() == pytest.approx(7200.0) and torch.isfinite(c.grad).all()


def test_cbow_loss_is_sgns_with_the_context_mean_as_center():
    rng = np.random.default_rng(1)
    h, center, neg = (torch.tensor(a) for a in (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)),
                                                  rng.standard_normal((3, 2, 4))))
    assert nwv.cbow_negative_sampling_loss(h, center, neg).item() == pytest.approx(
        ref.skipgram_negative_sampling_loss(h.numpy(), center.numpy(), neg.numpy())[0])


def test_glove_loss_matches_ref():
    rng = np.random.default_rng(2)
    V, d = 6, 3
    w, wt = rng.standard_normal((V, d)), rng.standard_normal((V, d))
    b, bt = rng.standard_normal(V), rng.standard_normal(V)
    X = rng.integers(0, 200, (V, V)).astype(np.float64) * (rng.random((V, V)) < 0.6)
    rows, cols = np.nonzero(X)
    got = nwv.glove_loss(*(torch.tensor(a) for a in (w, wt, b, bt)), torch.tensor(rows), torch.tensor(cols),
                         torch.tensor(X[rows, cols]))
    assert got.item() == pytest.approx(ref.glove_loss(w, wt, b, bt, X), rel=1e-12)


def test_noise_distribution_matches_ref():
    counts = np.array([5, 0, 100, 1, 7])
    for power in (0.0, 0.75, 1.0):
        np.testing.assert_allclose(pnn.noise_distribution(counts, power).numpy(),
                                   ref.noise_distribution(counts, power), atol=1e-15)


# ----------------------------------------------------------------------------
# Pairs and subsampling


def test_skipgram_pairs_with_window_one_are_the_neighbours():
    g = torch.Generator().manual_seed(0)
    centers, contexts = pnn.skipgram_pairs(torch.tensor([10, 11, 12]), 1, g)
    assert sorted(zip(centers.tolist(), contexts.tolist())) == [(10, 11), (11, 10), (11, 12), (12, 11)]


def test_skipgram_pairs_use_near_words_more_often():
    stream = torch.arange(20000)  # every id distinct: the distance of a pair is contexts - centers
    centers, contexts = pnn.skipgram_pairs(stream, 4, torch.Generator().manual_seed(1))
    distance = (contexts - centers).abs()
    assert distance.min() == 1 and distance.max() == 4
    share = torch.bincount(distance, minlength=5)[1:].double() / len(distance)
    expected = torch.tensor([4.0, 3.0, 2.0, 1.0]) / 10  # distance t kept with probability (5 - t) / 4
    torch.testing.assert_close(share, expected.double(), atol=0.01, rtol=0)
    right, left = (contexts > centers).sum().item(), (contexts < centers).sum().item()
    assert abs(right - left) < 0.001 * len(distance)  # both sides equally (up to the stream's ends)


def test_subsampling_drops_frequent_words_and_keeps_rare_ones():
    stream = torch.tensor([0] * 9000 + [1] * 1000 + [2] * 10)
    counts = torch.bincount(stream)
    kept = pnn.subsample(stream, counts, 1e-3, torch.Generator().manual_seed(0))
    kept_counts = torch.bincount(kept, minlength=3)
    assert kept_counts[2] == 10  # rare: always kept
    share = 0.9
    expected = ((1e-3 / share) ** 0.5 + 1e-3 / share) * 9000
    assert abs(kept_counts[0].item() - expected) < 0.2 * expected


# ----------------------------------------------------------------------------
# Trainers


def test_hand_written_step_equals_the_autograd_step():
    rng = np.random.default_rng(3)
    V, d, B, K = 7, 4, 16, 3
    W0, C0 = rng.standard_normal((V, d)).astype(np.float32), rng.standard_normal((V, d)).astype(np.float32)
    centers, contexts = torch.tensor(rng.integers(0, V, B)), torch.tensor(rng.integers(0, V, B))
    negatives = torch.tensor(rng.integers(0, V, (B, K)))
    W, C = torch.tensor(W0, requires_grad=True), torch.tensor(C0, requires_grad=True)
    nwv._skipgram_step(W, C, torch.optim.Adam([W, C], lr=0.1), centers, contexts, negatives)
    W2, C2 = torch.tensor(W0, requires_grad=True), torch.tensor(C0, requires_grad=True)
    optimizer = torch.optim.Adam([W2, C2], lr=0.1)
    loss = pnn.skipgram_negative_sampling_loss(W2[centers], C2[contexts], C2[negatives])
    loss.backward()
    optimizer.step()
    torch.testing.assert_close(W.detach(), W2.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(C.detach(), C2.detach(), atol=1e-6, rtol=0)


def test_train_skipgram_is_deterministic_and_learns_the_corpus(corpus_ids):
    ids, tokenizer = corpus_ids
    a, stats = pnn.train_skipgram(ids, len(tokenizer), dim=50, epochs=3, seed=0, device="cpu", progress=False)
    b, _ = pnn.train_skipgram(ids, len(tokenizer), dim=50, epochs=3, seed=0, device="cpu", progress=False)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (len(tokenizer), 50) and a.dtype == np.float32
    assert set(stats) >= {"loss", "pairs", "seconds", "words_per_second", "pairs_per_second",
                          "output_embeddings", "device"}
    assert stats["loss"][-1] < stats["loss"][0] and stats["words_per_second"] > 0
    rho, analogies = quality(a, tokenizer)
    assert rho > 0.7 and min(analogies.values()) > 0.9


def test_train_skipgram_with_another_seed_is_different_but_as_good(corpus_ids):
    ids, tokenizer = corpus_ids
    a, _ = pnn.train_skipgram(ids, len(tokenizer), epochs=3, seed=5, device="cpu", progress=False)
    b, _ = pnn.train_skipgram(ids, len(tokenizer), epochs=3, seed=6, device="cpu", progress=False)
    assert not np.array_equal(a, b)
    for embeddings in (a, b):
        rho, analogies = quality(embeddings, tokenizer)
        assert rho > 0.7 and min(analogies.values()) > 0.9


def test_train_cbow_and_glove_learn_the_corpus(corpus_ids):
    ids, tokenizer = corpus_ids
    V = len(tokenizer)
    cbow, stats = pnn.train_cbow(ids, V, epochs=5, seed=0, device="cpu", progress=False)
    assert stats["loss"][-1] < stats["loss"][0]
    rho, analogies = quality(cbow, tokenizer)
    assert rho > 0.6 and analogies["capital"] > 0.8
    X = ref.cooccurrence_counts(ids, V, window=5, weighting="harmonic")
    glove, stats = pnn.train_glove(X, epochs=200, lr=0.1, seed=0, device="cpu", progress=False)
    assert stats["loss"][-1] < 0.1 * stats["loss"][0] and glove.shape == (V, 50)
    rho, analogies = quality(glove, tokenizer)
    assert rho > 0.6 and min(analogies.values()) > 0.9


def test_trainers_reject_bad_streams():
    with pytest.raises(ValueError, match="1-D"):
        pnn.train_skipgram(np.zeros((2, 3), dtype=int), 5, progress=False)
    with pytest.raises(ValueError, match="must lie in"):
        pnn.train_cbow(np.array([0, 7]), 5, progress=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_skipgram_on_cuda(corpus_ids):
    ids, tokenizer = corpus_ids
    embeddings, stats = pnn.train_skipgram(ids, len(tokenizer), epochs=3, seed=0, device="cuda", progress=False)
    assert stats["device"].startswith("cuda")
    rho, analogies = quality(embeddings, tokenizer)
    assert rho > 0.7 and min(analogies.values()) > 0.9
