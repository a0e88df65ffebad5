"""Sentence embeddings from token vectors, in NumPy (float64 reference).

A transformer gives one vector per token; a sentence embedding is one vector per
sentence. Sentence-BERT and all-MiniLM-L6-v2 average the vectors of the real tokens
(mean pooling): padding must not count, or the same sentence would get another
vector in a batch with a longer one.

Notebook 08 asks how good such vectors are for similarity, and how to make them better:

    mean_pool, max_pool      token vectors (B, T, d) + mask (B, T) -> sentence vectors (B, d)
    cosine_matrix(a, b)      all cosine similarities between the rows of a and b (a zero row: 0)
    anisotropy(X)            mean cosine over pairs of different rows: near 1 = a narrow cone
    whitening(X, k)          BERT-whitening: (mu, W) such that (X - mu) @ W has identity covariance
    info_nce_loss(z1, z2)    SimCSE's contrastive loss (the PyTorch version trains; this one checks it)
    alignment, uniformity    Wang & Isola's two properties of a good embedding space
    spearman(x, y)           rank correlation, the metric of STS benchmarks
    retrieval_accuracy       how often a query's nearest pool sentence is its answer
    bootstrap_interval       how much a metric on a small set moves by chance
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import _log_softmax  # one stable log-softmax for the references
from plmcourse.ref.word_vectors import _unit_rows, spearman  # one spearman for words and sentences

__all__ = ["mean_pool", "max_pool", "cosine_matrix", "anisotropy", "whitening", "whiten", "info_nce_loss",
           "alignment", "uniformity", "spearman", "retrieval_accuracy", "bootstrap_interval"]


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


def max_pool(hidden, mask):
    """Largest value of each feature over the real tokens: (B, T, d), (B, T) -> (B, d); zeros for an empty row."""
    hidden = np.asarray(hidden)
    real = np.asarray(mask).astype(bool)[..., None]  # (B, T, 1)
    best = np.where(real, hidden, -np.inf).max(axis=1)  # (B, d)
    return np.where(real.any(axis=1), best, 0).astype(hidden.dtype)


def cosine_matrix(a, b=None):
    """(n, d), (m, d) -> (n, m) cosine similarities; b defaults to a. A zero row's cosines are 0."""
    a = _unit_rows(a)
    b = a if b is None else _unit_rows(b)
    return a @ b.T


def anisotropy(X):
    """Mean cosine similarity over all pairs (i, j) of different rows of X (n >= 2, d).

    Near 0: the vectors point every which way. Near 1: they all sit in a narrow cone,
    and a high cosine between two sentences says little about them. A zero row has
    cosine 0 with every other row; its pairs still count.
    """
    X = np.asarray(X)
    n = len(X)
    if n < 2:
        raise ValueError(f"anisotropy needs at least two vectors, got {n}")
    cos = cosine_matrix(X)  # (n, n)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))  # the diagonal (each row with itself) left out


def whitening(X, k=None):
    """BERT-whitening (Su et al. 2021): mu (d,) and W (d, k) such that (X - mu) @ W has mean 0 and
    identity covariance, keeping the k directions of largest variance (all d when k is None).

    With the covariance C = np.cov(X.T) = U diag(s) U^T (an SVD; s sorted from large to small),
    W = U[:, :k] / sqrt(s[:k]): rotate onto the principal directions, then scale each to variance 1.
    Needs more rows than columns (or k at most C's rank): a zero variance cannot be scaled to 1.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    k = d if k is None else k
    if not 1 <= k <= d:
        raise ValueError(f"k must be between 1 and d={d}, got {k}")
    mu = X.mean(axis=0)  # (d,)
    cov = np.atleast_2d(np.cov(X.T))  # (d, d), divides by n - 1 (np.cov gives a bare number for d = 1)
    U, s, _ = np.linalg.svd(cov)  # cov is symmetric: U holds its eigenvectors, s its eigenvalues, largest first
    W = U[:, :k] / np.sqrt(s[:k])  # (d, k): column j divided by the standard deviation along it
    return mu, W


def whiten(X, mu, W):
    """Apply a whitening: (X - mu) @ W, (n, d) -> (n, k)."""
    return (np.asarray(X, dtype=np.float64) - mu) @ W


def info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None):
    """SimCSE's InfoNCE loss, in float64.

    z1, z2: (B, d); row i of each is a view of example i (the positive pair). Every other
    z2 row, and every row of hard_negatives (M, d), is a negative for z1[i].
    logits = cos(z1, [z2; hard_negatives]) / temperature, (B, B + M); the loss is the mean
    over i of the cross-entropy with target i.
    """
    candidates = np.asarray(z2, dtype=np.float64)
    if hard_negatives is not None:
        candidates = np.concatenate([candidates, np.asarray(hard_negatives, dtype=np.float64)])  # (B + M, d)
    logits = cosine_matrix(z1, candidates) / temperature  # (B, B + M)
    rows = np.arange(len(logits))
    return float(-_log_softmax(logits)[rows, rows].mean())


def alignment(x, y, alpha=2):
    """Mean distance between positive pairs, E ||x_i - y_i||^alpha, on unit vectors (lower is better)."""
    return float((np.linalg.norm(_unit_rows(x) - _unit_rows(y), axis=-1) ** alpha).mean())


def uniformity(x, t=2):
    """log E exp(-t ||x_i - x_j||^2) over pairs i < j of unit vectors (lower = more evenly spread)."""
    x = _unit_rows(x)
    i, j = np.triu_indices(len(x), k=1)
    squared = ((x[i] - x[j]) ** 2).sum(axis=-1)
    return float(np.log(np.exp(-t * squared).mean()))


def retrieval_accuracy(queries, pool, answers):
    """Share of queries whose most similar pool row (cosine) is their answer: (n, d), (m, d), (n,) ints."""
    best = cosine_matrix(queries, pool).argmax(axis=1)
    return float((best == np.asarray(answers)).mean())


def bootstrap_interval(metric, *columns, n_resamples=1000, level=0.95, seed=0):
    """The central `level` interval of metric(*columns) over resamples (with replacement) of the rows.

    On a set of a few hundred pairs a Spearman correlation moves by several hundredths from
    sample to sample: two models closer than the interval's width are not told apart.
    """
    rng = np.random.default_rng(seed)
    columns = [np.asarray(c) for c in columns]
    n = len(columns[0])
    values = [metric(*(c[rows] for c in columns)) for rows in rng.integers(0, n, (n_resamples, n))]
    tail = (1 - level) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))
