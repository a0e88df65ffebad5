"""Sentence embeddings from token vectors, in NumPy (float64 reference).

A transformer gives one vector per token; a sentence embedding is one vector per
sentence. Sentence-BERT and all-MiniLM-L6-v2 average the vectors of the real tokens
(mean pooling): padding must not count, or the same sentence would get another
vector in a batch with a longer one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mean_pool"]


def mean_pool(hidden, mask):
    """Average of the token vectors where `mask` is true.

    hidden: (B, T, d) token vectors; mask: (B, T), True (or 1) for real tokens, False (or 0)
    for padding. Returns (B, d) in hidden's dtype. A row with no real token gives zeros, not NaN.
    """
    hidden = np.asarray(hidden)
    real = np.asarray(mask).astype(bool)[..., None]  # (B, T, 1)
    # np.where, not hidden * mask: padding may hold anything (NaN * 0 is NaN).
    total = np.where(real, hidden, 0).sum(axis=1)  # (B, d)
    count = real.sum(axis=1).astype(hidden.dtype)  # (B, 1) real tokens per row
    return total / np.maximum(count, 1)  # a row without real tokens: 0 / 1 = 0
