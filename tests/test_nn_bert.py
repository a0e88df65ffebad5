"""plmcourse.nn.bert: the masked-LM loss."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import torch

from plmcourse import nn as pnn


def logits_and_targets(shape=(3, 6, 11), ignored=0.4, seed=0, dtype=torch.float64, device="cpu", scale=2.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=g, dtype=dtype) * scale
    targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
    targets[torch.rand(shape[:-1], generator=g) < ignored] = -100
    return logits.to(device).requires_grad_(), targets.to(device)


# ----------------------------------------------------------------------------
# Losses


def test_no_counted_position_gives_zero_not_nan():
    logits, targets = logits_and_targets(ignored=1.0)
    loss = pnn.mlm_loss(logits, targets)
    assert loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, logits)
    assert torch.equal(grad, torch.zeros_like(grad))
