"""plmcourse.nn.gpt: the causal LM loss; parity with torch's own cross-entropy."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn

CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                         reason="needs a CUDA device")])
DEVICES = ["cpu", CUDA]


def logits_and_targets(shape=(3, 6, 11), ignored=0.4, seed=0, dtype=torch.float64, device="cpu", scale=2.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=g, dtype=dtype) * scale
    targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
    targets[torch.rand(shape[:-1], generator=g) < ignored] = -100
    return logits.to(device).requires_grad_(), targets.to(device)


# ----------------------------------------------------------------------------
# Losses


@pytest.mark.parametrize("device", DEVICES)
def test_causal_lm_loss_matches_torch_on_shifted_targets(device):
    logits, tokens = logits_and_targets(ignored=0.2, device=device)
    ours = pnn.causal_lm_loss(logits, tokens)
    theirs = F.cross_entropy(logits[:, :-1].reshape(-1, 11), tokens[:, 1:].reshape(-1))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
