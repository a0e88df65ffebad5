"""Mean pooling: the NumPy reference by hand, PyTorch against it, and what padding must not do."""

import numpy as np
import pytest
import torch

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
