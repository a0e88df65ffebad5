"""Decoding filters in NumPy: which tokens a sampler may still choose.

Both return logits of the same shape with the removed entries set to -inf (their
probability after the softmax is exactly 0), so they can be chained:
top_p_filter(top_k_filter(logits, 50), 0.9). They work along the last axis, one
distribution per row.
"""

import numpy as np

from plmcourse.ref.attention import softmax

__all__ = ["top_k_filter", "top_p_filter"]


def top_k_filter(logits, k):
    """Keep the k largest logits of each row, set the others to -inf.

    k = None, k <= 0 or k >= V keeps everything. Exactly k entries survive (ties
    at the k-th value are broken by position), so the sampler chooses among k tokens.
    """
    logits = np.asarray(logits, dtype=np.float64)
    V = logits.shape[-1]
    if k is None or k <= 0 or k >= V:
        return logits.copy()
    # argsort of -logits with a stable sort: the k largest, earlier positions first on ties.
    top = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    keep = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(keep, top, True, axis=-1)
    return np.where(keep, logits, -np.inf)


def top_p_filter(logits, p):
    """Nucleus filtering: keep the smallest set of most likely tokens whose probability reaches p.

    Sort the probabilities in decreasing order; a token is kept when the mass of the
    tokens before it is still below p. The most likely token is always kept; p >= 1
    keeps everything. p must be positive.
    """
    logits = np.asarray(logits, dtype=np.float64)
    if p <= 0:
        raise ValueError(f"top_p must be positive, got {p}.")
    if p >= 1.0:
        return logits.copy()
    probs = softmax(logits, axis=-1)
    order = np.argsort(-probs, axis=-1, kind="stable")  # most likely first
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep_sorted = mass_before < p
    keep = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, logits, -np.inf)
