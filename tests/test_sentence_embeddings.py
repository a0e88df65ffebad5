"""Mean pooling: the NumPy reference by hand, PyTorch against it, and what padding must not do."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref


def test_reference_by_hand():
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]])
    mask = np.array([[True, True, False], [True, True, True]])
    np.testing.assert_array_equal(ref.mean_pool(hidden, mask), [[2.0, 3.0], [7.0, 8.0]])
    np.testing.assert_array_equal(ref.mean_pool(hidden, mask.astype(int)), [[2.0, 3.0], [7.0, 8.0]])


def test_a_row_without_real_tokens_gives_zeros_and_padding_never_leaks():
    hidden = np.array([[[np.nan, np.inf]], [[1.0, -1.0]]])
    mask = np.array([[False], [True]])
    out = ref.mean_pool(hidden, mask)
    np.testing.assert_array_equal(out, [[0.0, 0.0], [1.0, -1.0]])
    h = torch.tensor(hidden, requires_grad=True)
    torch_out = pnn.mean_pool(h, torch.tensor(mask))
    torch_out.sum().backward()
    np.testing.assert_array_equal(torch_out.detach().numpy(), out)
    np.testing.assert_array_equal(h.grad.numpy(), [[[0.0, 0.0]], [[1.0, 1.0]]])


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int64, torch.float32])
def test_torch_matches_the_reference_and_its_gradient(mask_dtype):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, 7, 5, dtype=torch.float64, generator=g, requires_grad=True)
    lengths = torch.tensor([7, 3, 1, 0])
    mask = torch.arange(7)[None, :] < lengths[:, None]
    out = pnn.mean_pool(hidden, mask.to(mask_dtype))
    np.testing.assert_allclose(out.detach().numpy(), ref.mean_pool(hidden.detach().numpy(), mask.numpy()),
                               atol=1e-12)
    upstream = torch.randn(4, 5, dtype=torch.float64, generator=g)
    out.backward(upstream)
    # d out[b] / d hidden[b, t] = mask[b, t] / max(count_b, 1)
    expected = upstream[:, None, :] * mask[..., None] / lengths.clamp(min=1)[:, None, None]
    torch.testing.assert_close(hidden.grad, expected.to(torch.float64))
    assert pnn.mean_pool(hidden.float(), mask).dtype == torch.float32


# ----------------------------------------------------------------------------
# Notebook 08: pooling, anisotropy, whitening, InfoNCE, alignment and uniformity, metrics

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def test_max_pool_by_hand_ignores_padding_and_gives_zeros_for_an_empty_row():
    hidden = np.array([[[1.0, -5.0], [3.0, -7.0], [100.0, 100.0]],
                       [[np.nan, 1.0], [2.0, 2.0], [0.0, 0.0]]])
    mask = np.array([[True, True, False], [False, False, False]])
    np.testing.assert_array_equal(ref.max_pool(hidden, mask), [[3.0, -5.0], [0.0, 0.0]])
    np.testing.assert_array_equal(pnn.max_pool(torch.tensor(hidden), torch.tensor(mask)).numpy(),
                                  [[3.0, -5.0], [0.0, 0.0]])
    assert pnn.cls_pool(torch.tensor(hidden))[0].tolist() == [1.0, -5.0]


def test_cosine_matrix_by_hand_and_against_torch():
    a = np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]])
    np.testing.assert_allclose(ref.cosine_matrix(a), [[1.0, 0.0, -0.6], [0.0, 0.0, 0.0], [-0.6, 0.0, 1.0]])
    x, y = np.random.default_rng(0).standard_normal((2, 5, 7))
    expected = F.cosine_similarity(torch.tensor(x)[:, None], torch.tensor(y)[None], dim=-1).numpy()
    np.testing.assert_allclose(ref.cosine_matrix(x, y), expected, atol=1e-12)


def test_anisotropy_by_hand():
    # Pairs (i != j) of [e1, e1, -e1]: cosines 1, -1, -1 in each direction -> mean -1/3.
    X = np.array([[1.0, 0.0], [2.0, 0.0], [-1.0, 0.0]])
    assert ref.anisotropy(X) == pytest.approx(-1 / 3)
    # A zero row has cosine 0 with the others, and its pairs count: (1 + 0 + 0) * 2 / 6.
    assert ref.anisotropy(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])) == pytest.approx(1 / 3)
    assert ref.anisotropy(np.ones((4, 3))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least two"):
        ref.anisotropy(np.ones((1, 3)))


def test_anisotropy_of_the_reference_and_the_torch_probe_agree():
    X = np.random.default_rng(1).standard_normal((50, 8)) + 2.0
    assert pnn.anisotropy(torch.tensor(X)) == pytest.approx(ref.anisotropy(X), abs=1e-6)


def cone(n=400, d=6, seed=0):
    """Anisotropic data with distinct variances along a random rotation, and a mean far from 0."""
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return rng.standard_normal((n, d)) * np.linspace(3.0, 0.5, d) @ rotation + 5.0


@pytest.mark.parametrize("k", [None, 6, 3, 1])
def test_whitening_gives_mean_zero_and_identity_covariance(k):
    X = cone()
    mu, W = ref.whitening(X, k)
    Z = ref.whiten(X, mu, W)
    kept = 6 if k is None else k
    assert W.shape == (6, kept) and mu.shape == (6,)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(np.cov(Z.T).reshape(kept, kept), np.eye(kept), atol=1e-10)
    assert abs(ref.anisotropy(Z)) < 0.01 < 0.8 < ref.anisotropy(X)


def test_whitening_keeps_the_directions_of_largest_variance_and_matches_torch():
    X = cone(seed=2)
    mu, W = ref.whitening(X, 2)
    eigenvalues, eigenvectors = torch.linalg.eigh(torch.cov(torch.tensor(X).T))  # ascending
    top = eigenvectors.flip(-1)[:, :2].numpy() / np.sqrt(eigenvalues.flip(-1)[:2].numpy())
    np.testing.assert_allclose(np.abs(W), np.abs(top), atol=1e-10)  # equal up to the sign of each column
    np.testing.assert_allclose(mu, X.mean(axis=0))
    with pytest.raises(ValueError, match="k must be between"):
        ref.whitening(X, 7)
    one = X[:, :1]  # d = 1: W is 1 / the standard deviation
    mu, W = ref.whitening(one)
    assert W.shape == (1, 1) and abs(W[0, 0]) == pytest.approx(1 / one.std(ddof=1))


def test_info_nce_by_hand():
    # Two orthogonal examples, identical views: logits [[1, 0], [0, 1]] / tau.
    z = np.eye(2)
    tau = 0.5
    expected = -np.log(np.exp(2.0) / (np.exp(2.0) + np.exp(0.0)))
    assert ref.info_nce_loss(z, z, tau) == pytest.approx(expected)
    # A hard negative equal to row 0's positive doubles that term in row 0's denominator
    # (logits [2, 0, 2]) and adds exp(0) to row 1's (logits [0, 2, 0]). Length does not matter.
    assert ref.info_nce_loss(z[:1], z[:1] * 3, tau, z[:1]) == pytest.approx(-np.log(0.5))
    row0 = -np.log(np.exp(2.0) / (2 * np.exp(2.0) + 1.0))
    row1 = -np.log(np.exp(2.0) / (np.exp(2.0) + 2.0))
    assert ref.info_nce_loss(z, z, tau, z[:1]) == pytest.approx((row0 + row1) / 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("negatives", [0, 1, 7])
def test_info_nce_matches_the_reference_and_torch_cross_entropy(device, negatives):
    g = torch.Generator().manual_seed(negatives)
    z1, z2, hard = (torch.randn(n, 5, generator=g, dtype=torch.float64) for n in (6, 6, max(negatives, 1)))
    z1[2] = 0.0  # a zero vector: cosine 0, never NaN
    hard = hard if negatives else None
    inputs = [t.clone().to(device).requires_grad_() for t in (z1, z2) + ((hard,) if negatives else ())]
    loss = pnn.info_nce_loss(inputs[0], inputs[1], 0.1, inputs[2] if negatives else None)
    expected = ref.info_nce_loss(z1.numpy(), z2.numpy(), 0.1, None if hard is None else hard.numpy())
    assert loss.dtype == torch.float64 and loss.device.type == device and loss.dim() == 0
    assert float(loss.detach()) == pytest.approx(expected, abs=1e-10)
    # torch's own pieces: cosine_similarity for the logits, cross_entropy for the loss
    candidates = z2 if hard is None else torch.cat([z2, hard])
    logits = F.cosine_similarity(z1[:, None], candidates[None], dim=-1, eps=1e-30) / 0.1
    assert float(F.cross_entropy(logits, torch.arange(6))) == pytest.approx(expected, abs=1e-10)
    loss.backward()
    assert all(torch.isfinite(t.grad).all() for t in inputs)


def test_info_nce_survives_a_tiny_temperature():
    z1, z2 = torch.randn(2, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    loss = pnn.info_nce_loss(z1, z2, temperature=1e-3)
    assert torch.isfinite(loss) and float(loss) == pytest.approx(ref.info_nce_loss(z1, z2, 1e-3), rel=1e-9)


def test_alignment_and_uniformity_by_hand_and_against_the_reference():
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [0.0, 5.0]])
    assert ref.alignment(x, y) == pytest.approx((2.0 + 0.0) / 2)  # |e1 - e2|^2 = 2, |e2 - e2|^2 = 0
    assert ref.uniformity(x) == pytest.approx(-4.0)  # one pair at squared distance 2: log exp(-2 * 2)
    a, b = np.random.default_rng(3).standard_normal((2, 30, 4))
    assert float(pnn.alignment(torch.tensor(a), torch.tensor(b))) == pytest.approx(ref.alignment(a, b))
    assert float(pnn.uniformity(torch.tensor(a))) == pytest.approx(ref.uniformity(a))


def test_metrics_by_hand():
    assert ref.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ref.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    pool = np.array([[0.0, 2.0], [3.0, 0.1], [-1.0, 0.0]])
    assert ref.retrieval_accuracy(queries, pool, [1, 1]) == 0.5  # query 0 finds pool 1, query 1 finds pool 0
    low, high = ref.bootstrap_interval(ref.spearman, np.arange(50.0), np.arange(50.0) ** 3)
    assert low == high == pytest.approx(1.0)  # a perfect ranking stays perfect on every resample
    noisy = np.arange(200.0) + np.random.default_rng(0).normal(0, 60, 200)
    low, high = ref.bootstrap_interval(ref.spearman, noisy, np.arange(200.0))
    assert low < ref.spearman(noisy, np.arange(200.0)) < high and 0.05 < high - low < 0.3
