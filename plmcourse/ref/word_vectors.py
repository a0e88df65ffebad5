"""Static word vectors in plain NumPy (float64): counts, PPMI + SVD, word2vec's losses, GloVe, evaluation.

Notation (shared with `plmcourse.nn.word_vectors`):

    V  vocabulary size     d  vector size     B  batch of (center, context) pairs
    K  negatives per pair  W  input ("center") vectors (V, d)   C  output ("context") vectors (V, d)

Skip-gram with negative sampling (SGNS) scores a pair (center c, context o) by the
dot product c.o and learns to tell observed pairs from K "negative" words n_k drawn
from a noise distribution:

    loss = mean over the batch of  -log sigma(c.o) - sum_k log sigma(-c.n_k)

Randomness comes from an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "log_softmax",
    "log_sigmoid",
    "sigmoid",
    "one_hot",
    "cooccurrence_counts",
    "ppmi",
    "svd_vectors",
    "skipgram_negative_sampling_loss",
    "skipgram_softmax_loss",
    "cbow_forward",
    "glove_weight",
    "glove_loss",
    "noise_distribution",
    "sample_negatives",
    "numerical_gradient",
    "cosine_similarity",
    "pca",
    "nearest_neighbours",
    "analogy",
    "spearman",
    "evaluate_similarity",
    "evaluate_analogies",
    "WordVectors",
]


# ----------------------------------------------------------------------------
# Stable building blocks


def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, numerically stable; the input is not modified.

    log softmax(x)_i = x_i - log sum_j exp(x_j) = (x_i - m) - log sum_j exp(x_j - m)
    for any m; with m = max_j x_j every exp(x_j - m) <= 1 (no overflow) and the sum
    is >= 1 (its log is finite). Computing log(softmax(x)) instead underflows: for
    x = [0, -1000] the softmax is [1, 0] in float64 and log 0 = -inf, not -1000.
    An entry of -inf gives -inf; a slice that is entirely -inf gives -inf throughout.
    """
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)  # an all -inf slice: avoid -inf - (-inf) = NaN
    shifted = x - m
    with np.errstate(divide="ignore", invalid="ignore"):  # an all -inf slice: log(0), then -inf - -inf
        log_total = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        out = shifted - log_total
    return np.where(np.isneginf(log_total), -np.inf, out)


def log_sigmoid(x):
    """log sigma(x) = -log(1 + exp(-x)), stable for large |x| (np.logaddexp(0, -x))."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def sigmoid(x):
    """sigma(x) = 1 / (1 + exp(-x)) without overflow warnings for large |x|."""
    return np.exp(log_sigmoid(x))


def one_hot(ids, vocab_size):
    """(..., V) float64 rows with a single 1 at each id: the representation word vectors replace."""
    ids = np.asarray(ids)
    return (ids[..., None] == np.arange(vocab_size)).astype(np.float64)


# ----------------------------------------------------------------------------
# Count-based vectors


def cooccurrence_counts(token_ids, vocab_size, window=2, weighting="uniform"):
    """Symmetric (V, V) co-occurrence counts within `window` positions on either side.

    X[i, j] counts how often word j appears within `window` tokens of word i.
    weighting="uniform" counts every neighbour 1; "harmonic" counts a neighbour at
    distance t as 1/t (GloVe's choice). The stream is treated as one sequence.
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    if weighting not in ("uniform", "harmonic"):
        raise ValueError(f'weighting must be "uniform" or "harmonic", got {weighting!r}.')
    counts = np.zeros(vocab_size * vocab_size, dtype=np.float64)
    for t in range(1, window + 1):
        weight = 1.0 if weighting == "uniform" else 1.0 / t
        left, right = ids[:-t], ids[t:]
        # Each pair at distance t is counted both ways: j is a neighbour of i and i of j.
        counts += weight * np.bincount(left * vocab_size + right, minlength=vocab_size**2)
        counts += weight * np.bincount(right * vocab_size + left, minlength=vocab_size**2)
    return counts.reshape(vocab_size, vocab_size)


def ppmi(counts, alpha=1.0):
    """Positive pointwise mutual information of a (V, V) count matrix.

    PMI(w, c) = log P(w, c) / (P(w) P(c)); PPMI clips it at 0 (a pair seen less often
    than chance says little, and an unseen pair would give log 0 = -inf).
    alpha < 1 smooths the context distribution (P(c) from counts**alpha), which
    lowers the PMI of rare contexts; word2vec's 0.75 plays the same role.
    """
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    p_word = counts.sum(axis=1, keepdims=True) / total  # (V, 1)
    context = counts.sum(axis=0) ** alpha
    p_context = (context / context.sum())[None, :]  # (1, V)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(counts / total) - np.log(p_word) - np.log(p_context)
    pmi[~np.isfinite(pmi)] = 0.0  # unseen pairs and unused words
    return np.maximum(pmi, 0.0)


def svd_vectors(matrix, dim, power=0.5):
    """Rows of U_d S_d**power from the SVD of `matrix`: dense (V, dim) vectors.

    The truncated SVD is the best rank-`dim` approximation of the matrix; power=0.5
    splits the singular values evenly between words and contexts, which usually
    gives better similarities than power=1. Signs are fixed (the largest entry of
    each column of U is positive) so the result is deterministic.
    """
    u, s, _ = np.linalg.svd(np.asarray(matrix, dtype=np.float64), full_matrices=False)
    u, s = u[:, :dim], s[:dim]
    signs = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])])
    return u * signs * s**power


# ----------------------------------------------------------------------------
# word2vec


def skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs):
    """SGNS loss and its gradients for a batch of pairs.

    center_vecs: (B, d) the center words' input vectors c_b.
    context_vecs: (B, d) the observed context words' output vectors o_b.
    negative_vecs: (B, K, d) the output vectors n_bk of K sampled negatives per pair.

    loss = (1/B) sum_b [ -log sigma(c_b.o_b) - sum_k log sigma(-c_b.n_bk) ]

    Returns (loss, grad_center (B, d), grad_context (B, d), grad_negatives (B, K, d)),
    the gradients of this mean loss. With s = c.o and s_k = c.n_k:
        d/ds  [-log sigma(s)]   = sigma(s) - 1        (negative: pull o towards c)
        d/ds_k[-log sigma(-s_k)] = sigma(s_k)          (positive: push n_k away)
    so grad_center = ((sigma(s) - 1) o + sum_k sigma(s_k) n_k) / B,
       grad_context = (sigma(s) - 1) c / B,  grad_negatives[:, k] = sigma(s_k) c / B.
    """
    c = np.asarray(center_vecs, dtype=np.float64)
    o = np.asarray(context_vecs, dtype=np.float64)
    n = np.asarray(negative_vecs, dtype=np.float64)
    if c.ndim != 2 or o.shape != c.shape or n.ndim != 3 or n.shape[::2] != c.shape:
        raise ValueError(f"expected center (B, d), context (B, d), negatives (B, K, d); got "
                         f"{c.shape}, {o.shape}, {n.shape}.")
    B = c.shape[0]
    positive = np.sum(c * o, axis=-1)  # (B,)    s_b = c_b . o_b
    negative = np.einsum("bkd,bd->bk", n, c)  # (B, K)  s_bk = c_b . n_bk
    loss = -(np.sum(log_sigmoid(positive)) + np.sum(log_sigmoid(-negative))) / B
    g_pos = (sigmoid(positive) - 1.0) / B  # (B,)    dloss/ds_b
    g_neg = sigmoid(negative) / B  # (B, K)  dloss/ds_bk
    grad_center = g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)
    grad_context = g_pos[:, None] * c
    grad_negatives = g_neg[:, :, None] * c[:, None, :]
    return float(loss), grad_center, grad_context, grad_negatives


def skipgram_softmax_loss(center_vecs, output_embeddings, context_ids):
    """The original skip-gram cost: mean over the batch of -log softmax(C c_b)[o_b].

    center_vecs (B, d), output_embeddings C (V, d), context_ids (B,). Every pair
    needs a score for all V words: O(V d) per pair, which negative sampling avoids.
    """
    scores = np.asarray(center_vecs, dtype=np.float64) @ np.asarray(output_embeddings, dtype=np.float64).T
    log_p = log_softmax(scores, axis=-1)  # (B, V)
    ids = np.asarray(context_ids)
    return float(-np.mean(log_p[np.arange(len(ids)), ids]))


def cbow_forward(context_ids, input_embeddings, output_embeddings):
    """CBOW: average the context words' input vectors, score every word: logits (B, V).

    context_ids: (B, 2m) the words around each center; the center is predicted by
    softmax(logits). h_b = mean_j W[context_ids[b, j]], logits = h C^T.
    """
    W = np.asarray(input_embeddings, dtype=np.float64)
    C = np.asarray(output_embeddings, dtype=np.float64)
    h = W[np.asarray(context_ids)].mean(axis=-2)  # (B, d)
    return h @ C.T  # (B, V)


def noise_distribution(counts, power=0.75):
    """P_n(w) proportional to count(w)**power, normalised to sum to 1.

    power=0.75 (word2vec) flattens the unigram distribution: frequent words are
    drawn less often than their share, rare words more often; power=1 is the raw
    unigram distribution, power=0 uniform over the words seen at least once.
    """
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.where(counts > 0, counts, 0.0) ** power
    weights = np.where(counts > 0, weights, 0.0)  # 0**0 = 1 must not give unseen words mass
    return weights / weights.sum()


def sample_negatives(noise, shape, rng):
    """Word ids drawn independently from the distribution `noise` (V,), an array of `shape`."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator, e.g. np.random.default_rng(0).")
    noise = np.asarray(noise, dtype=np.float64)
    return rng.choice(len(noise), size=shape, p=noise)


# ----------------------------------------------------------------------------
# GloVe


def glove_weight(x, x_max=100.0, alpha=0.75):
    """GloVe's weighting f(x) = (x / x_max)**alpha below x_max, 1 above; f(0) = 0."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < x_max, (x / x_max) ** alpha, 1.0)


def glove_loss(w, w_tilde, b, b_tilde, counts, x_max=100.0, alpha=0.75):
    """J = sum over pairs with X_ij > 0 of f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2.

    w, w_tilde: (V, d) word and context vectors; b, b_tilde: (V,) biases; counts X (V, V).
    A weighted least-squares fit of log co-occurrence counts: frequent pairs count
    more, up to x_max, and pairs never seen do not count at all (log 0 is undefined).
    """
    X = np.asarray(counts, dtype=np.float64)
    seen = X > 0
    log_x = np.log(np.where(seen, X, 1.0))
    fit = np.asarray(w) @ np.asarray(w_tilde).T + np.asarray(b)[:, None] + np.asarray(b_tilde)[None, :]
    return float(np.sum(np.where(seen, glove_weight(X, x_max, alpha) * (fit - log_x) ** 2, 0.0)))


# ----------------------------------------------------------------------------
# Gradient checking


def numerical_gradient(f, x, eps=1e-6):
    """Central differences (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) for every entry of x.

    f: a function of one float64 array returning a number. Costs two calls per
    entry: for checking small cases, not for training. Error is O(eps^2).
    """
    x = np.array(x, dtype=np.float64)  # a copy: x is perturbed in place below
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + eps
        up = f(x)
        x[index] = saved - eps
        down = f(x)
        x[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


# ----------------------------------------------------------------------------
# Evaluation


def _unit_rows(embeddings):
    e = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(e, axis=-1, keepdims=True)
    return e / np.where(norms == 0, 1.0, norms)  # a zero vector stays zero (cosine 0)


def cosine_similarity(a, b):
    """Cosine of the angle between the last axes of a and b (0 for a zero vector)."""
    return np.sum(_unit_rows(a) * _unit_rows(b), axis=-1)


def pca(vectors, k=2):
    """Project rows onto their k principal directions: (n, k) coordinates, for 2-D plots.

    The rows are centred, and the directions are the top right singular vectors of
    the centred matrix (signs fixed as in svd_vectors), so the plot is deterministic.
    """
    x = np.asarray(vectors, dtype=np.float64)
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    directions = vt[:k].T  # (d, k)
    signs = np.sign(directions[np.argmax(np.abs(directions), axis=0), np.arange(directions.shape[1])])
    return x @ (directions * signs)


def nearest_neighbours(embeddings, query, k=5, exclude=()):
    """The k rows most cosine-similar to `query`: (ids (k,), similarities (k,)).

    query: a word id (that word itself is excluded) or a vector (d,).
    exclude: more ids to leave out.
    """
    unit = _unit_rows(embeddings)
    excluded = set(int(i) for i in exclude)
    if np.ndim(query) == 0:
        excluded.add(int(query))
        query = unit[int(query)]
    sims = unit @ _unit_rows(query)
    if excluded:
        sims = sims.copy()
        sims[list(excluded)] = -np.inf
    order = np.argsort(-sims, kind="stable")[:k]
    return order, sims[order]


def analogy(embeddings, a, b, c, k=1):
    """3CosAdd: "a is to b as c is to ?" -> the ids d maximising cos(d, b - a + c).

    With unit vectors, argmax_d cos(d, b) - cos(d, a) + cos(d, c), the answer of
    Mikolov et al. (2013); a, b and c themselves are excluded. Returns (ids, scores).
    """
    unit = _unit_rows(embeddings)
    target = unit[b] - unit[a] + unit[c]
    scores = unit @ target
    scores[[a, b, c]] = -np.inf
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


def _ranks(x):
    """Ranks 1..n, ties get the average of the ranks they span."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, group = np.unique(x, return_inverse=True)  # group[i]: which distinct value x[i] is
    group = group.reshape(-1)
    return (np.bincount(group, weights=ranks) / np.bincount(group))[group]  # each tie gets its mean rank


def spearman(x, y):
    """Spearman's rank correlation: the Pearson correlation of the ranks (ties averaged)."""
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float(np.sum(rx * ry) / math.sqrt(np.sum(rx * rx) * np.sum(ry * ry)))


def evaluate_similarity(embeddings, stoi, pairs):
    """Spearman correlation between cosine similarities and the pairs' scores.

    pairs: (word, word, score). Pairs with a word missing from `stoi` are skipped.
    Returns (rho, number of pairs used).
    """
    used = [(stoi[a], stoi[b], s) for a, b, s in pairs if a in stoi and b in stoi]
    if len(used) < 2:
        raise ValueError("fewer than two pairs have both words in the vocabulary.")
    e = np.asarray(embeddings)
    sims = [float(cosine_similarity(e[i], e[j])) for i, j, _ in used]
    return spearman(sims, [s for _, _, s in used]), len(used)


def evaluate_analogies(embeddings, stoi, questions):
    """Share of questions (a, b, c, d) where 3CosAdd's answer is d; questions with unknown words skipped.

    Returns (accuracy, number of questions used).
    """
    used = [tuple(stoi[w] for w in q) for q in questions if all(w in stoi for w in q)]
    if not used:
        raise ValueError("no question has all four words in the vocabulary.")
    unit = _unit_rows(embeddings)
    correct = 0
    for a, b, c, d in used:
        ids, _ = analogy(unit, a, b, c, k=1)
        correct += int(ids[0] == d)
    return correct / len(used), len(used)


class WordVectors:
    """Vectors with their vocabulary: look words up, list neighbours, answer analogies, evaluate.

        wv = WordVectors(embeddings, itos)
        wv.neighbours("king", k=5)           -> [("queen", 0.81), ...]
        wv.analogy("man", "king", "woman")   -> "queen"   (man : king :: woman : ?)
    """

    def __init__(self, embeddings, itos):
        self.vectors = np.asarray(embeddings, dtype=np.float64)
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.itos) != len(self.vectors):
            raise ValueError(f"{len(self.itos)} words but {len(self.vectors)} vectors.")

    def __getitem__(self, word):
        return self.vectors[self.stoi[word]]

    def __contains__(self, word):
        return word in self.stoi

    def similarity(self, a, b):
        return float(cosine_similarity(self[a], self[b]))

    def neighbours(self, word, k=5, exclude=()):
        ids, sims = nearest_neighbours(self.vectors, self.stoi[word], k,
                                       exclude=[self.stoi[w] for w in exclude if w in self.stoi])
        return [(self.itos[i], float(s)) for i, s in zip(ids, sims)]

    def analogy(self, a, b, c, k=1):
        ids, _ = analogy(self.vectors, self.stoi[a], self.stoi[b], self.stoi[c], k)
        words = [self.itos[i] for i in ids]
        return words[0] if k == 1 else words

    def evaluate_similarity(self, pairs):
        return evaluate_similarity(self.vectors, self.stoi, pairs)

    def evaluate_analogies(self, questions):
        return evaluate_analogies(self.vectors, self.stoi, questions)
