"""Sentence embeddings from token vectors, in PyTorch: the conventions of
`plmcourse.ref.sentence_embeddings`, on any device, with gradients."""

from __future__ import annotations

import torch

__all__ = ["mean_pool"]


def mean_pool(hidden, mask):
    """hidden (B, T, d), mask (B, T) True/1 for real tokens -> (B, d); zeros for a row with none."""
    real = mask.bool().unsqueeze(-1)  # (B, T, 1)
    # masked_fill, not hidden * mask: whatever padding holds (even NaN or inf, and NaN * 0 is
    # NaN) never enters the sum, and its gradient is exactly 0.
    total = hidden.masked_fill(~real, 0.0).sum(dim=1)  # (B, d)
    count = real.sum(dim=1).clamp(min=1).to(hidden.dtype)  # (B, 1); a row without real tokens: 0 / 1 = 0
    return total / count
