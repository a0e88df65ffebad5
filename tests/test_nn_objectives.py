"""plmcourse.nn.objectives: cross-entropy and the losses built on it (mlm_loss, causal_lm_loss);
parity with plmcourse.ref and with torch's own functions."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref

CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                         reason="needs a CUDA device")])
DEVICES = ["cpu", CUDA]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def logits_and_targets(shape=(3, 6, 11), ignored=0.4, seed=0, dtype=torch.float64, device="cpu", scale=2.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=g, dtype=dtype) * scale
    targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
    targets[torch.rand(shape[:-1], generator=g) < ignored] = -100
    return logits.to(device).requires_grad_(), targets.to(device)


# ----------------------------------------------------------------------------
# Losses


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_cross_entropy_matches_torch_value_and_gradient(device, dtype, scale):
    logits, targets = logits_and_targets(dtype=dtype, device=device, scale=scale)
    ours = pnn.cross_entropy(logits, targets)
    theirs = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1), ignore_index=-100)
    assert ours.dim() == 0 and ours.dtype == dtype and ours.device == logits.device
    torch.testing.assert_close(ours, theirs, rtol=TOL[dtype], atol=TOL[dtype] * scale)
    (g_ours,) = torch.autograd.grad(ours, logits)
    (g_theirs,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(g_ours, g_theirs, rtol=TOL[dtype], atol=TOL[dtype])


def test_losses_match_ref_in_float64():
    logits, targets = logits_and_targets(shape=(2, 3, 5, 9))
    x, y = logits.detach().numpy(), targets.numpy()
    assert math.isclose(pnn.cross_entropy(logits, targets).item(), ref.cross_entropy(x, y), rel_tol=1e-13)
    assert math.isclose(pnn.mlm_loss(logits, targets).item(), ref.mlm_loss(x, y), rel_tol=1e-13)
    assert math.isclose(pnn.causal_lm_loss(logits, targets).item(), ref.causal_lm_loss(x, y), rel_tol=1e-13)


def test_gradcheck():
    logits, targets = logits_and_targets(shape=(2, 4, 5))
    assert torch.autograd.gradcheck(lambda x: pnn.mlm_loss(x, targets), (logits,))
    assert torch.autograd.gradcheck(lambda x: pnn.causal_lm_loss(x, targets), (logits,))
