"""Tools for looking inside a trained model (notebook 07): probes, self-similarity, attention shares.

    linear_probe       how much of a property can a *linear* classifier read off some vectors?
                       (Tenney et al. 2019, Hewitt & Liang 2019: keep the probe simple, so that
                       the accuracy measures the vectors, not the probe)
    self_similarity    how alike are one word's vectors in different sentences? (Ethayarajh 2019)
    anisotropy         how alike are the vectors of *different* words? The baseline to subtract:
                       in a narrow cone every pair of vectors looks similar
    attention_shares   where does each head look: [CLS], [SEP], the previous, the next token,
                       itself? (Clark et al. 2019, "What does BERT look at?")

Everything takes tensors on any device (or numpy arrays, or lists) and returns plain
Python floats or numpy arrays, ready to print or plot.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse.nn.device import one_cpu_thread

__all__ = ["linear_probe", "self_similarity", "anisotropy", "attention_shares"]


def _as_tensor(x):
    """A float32 tensor: tensors keep their device (and are detached), anything else lands on CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().float()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


# ----------------------------------------------------------------------------
# Linear probe


def _encode_labels(train_y, test_y):
    """Labels of any kind ("NOUN", 0, True...) -> class indices; a test label unseen in train is -1."""
    train_y, test_y = (y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
                       for y in (train_y, test_y))
    classes = np.unique(train_y)
    index = {label: i for i, label in enumerate(classes.tolist())}
    train = torch.tensor([index[y] for y in train_y.tolist()])
    test = torch.tensor([index.get(y, -1) for y in test_y.tolist()])
    return train, test, len(classes)


def linear_probe(train_x, train_y, test_x, test_y, weight_decay=1e-2, steps=100, seed=0):
    """Train a logistic-regression probe on (train_x, train_y); return its accuracy on the test set.

    train_x (N, d), test_x (M, d): features (tensor on any device, numpy array or list).
    train_y (N,), test_y (M,): labels of any hashable kind (ints, strings, bools); a test
    label that never occurs in train counts as a mistake.
    weight_decay: strength of the L2 penalty on the weights (not the biases); the loss is
        mean cross-entropy + weight_decay * sum(W ** 2). With more features than examples
        the classes are usually separable, and without it the weights would grow forever.
    steps: at most this many L-BFGS iterations, full batch.
    seed: the initial weights (small, random); the loss is convex with a unique minimum
        when weight_decay > 0, so the seed only matters if L-BFGS stops early.

    Features are standardised with the mean and standard deviation of train_x (then
    applied to test_x as well), so weight_decay means the same for every layer, however
    large that layer's vectors are. Returns a float in [0, 1]. Deterministic for a seed.
    """
    train_x, test_x = _as_tensor(train_x), _as_tensor(test_x)
    device = train_x.device
    test_x = test_x.to(device)
    train_t, test_t, n_classes = _encode_labels(train_y, test_y)
    train_t, test_t = train_t.to(device), test_t.to(device)

    # Standardise with train statistics only: the test set must not leak into the probe.
    mean = train_x.mean(dim=0)
    std = train_x.std(dim=0).clamp(min=1e-6)  # a constant feature stays 0 rather than dividing by 0
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std

    generator = torch.Generator().manual_seed(seed)
    W = (0.01 * torch.randn(train_x.shape[1], n_classes, generator=generator)).to(device)
    W.requires_grad_(True)
    b = torch.zeros(n_classes, device=device, requires_grad=True)
    optimizer = torch.optim.LBFGS([W, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(train_x @ W + b, train_t) + weight_decay * (W ** 2).sum()
        loss.backward()
        return loss

    with one_cpu_thread(device):
        optimizer.step(closure)  # one call runs up to `steps` iterations on the full batch
    with torch.no_grad():
        predictions = (test_x @ W + b).argmax(dim=-1)
    return (predictions == test_t).float().mean().item()


# ----------------------------------------------------------------------------
# Self-similarity and anisotropy


def _mean_pairwise_cosine(vectors, same=None):
    """Mean cosine similarity over pairs i < j, only pairs with same[i, j] False if given."""
    unit = F.normalize(_as_tensor(vectors), dim=-1)
    n = unit.shape[0]
    if n < 2:
        raise ValueError(f"need at least two vectors, got {n}")
    cosines = unit @ unit.T  # (n, n)
    pairs = torch.ones(n, n, dtype=torch.bool, device=unit.device).triu(diagonal=1)  # i < j
    if same is not None:
        pairs &= ~same
    if not pairs.any():
        raise ValueError("no pair of vectors to compare")
    return cosines[pairs].mean().item()


def self_similarity(vectors_by_context):
    """Mean cosine similarity between one word's vectors in different contexts (Ethayarajh 2019).

    vectors_by_context (n, d): row i is the vector of the same word in sentence i, n >= 2.
    Returns the average of cos(v_i, v_j) over the n (n - 1) / 2 pairs i < j, a float in
    [-1, 1]: 1 if the vectors all point the same way (a static embedding, or a layer that
    ignores the context), lower the more the context changes the vector.
    """
    return _mean_pairwise_cosine(vectors_by_context)


def anisotropy(vectors, words=None):
    """Mean cosine similarity between vectors of *different* words: the baseline for self_similarity.

    vectors (n, d): vectors of many tokens from many sentences (one layer).
    words: optional length-n labels (the token of each row); pairs of the same word are
        then left out. Without it every pair i < j counts.
    Ethayarajh (2019) averages over random pairs; with a few thousand vectors we can
    afford all pairs, which is that average without the sampling noise.
    If every vector points in a narrow cone (anisotropy near 1), a high self-similarity
    means little; the notebook plots self_similarity - anisotropy, layer by layer.
    """
    same = None
    if words is not None:
        words = list(words)
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
        codes = torch.as_tensor(np.unique(np.asarray(words), return_inverse=True)[1].reshape(-1))
        device = vectors.device if isinstance(vectors, torch.Tensor) else "cpu"
        codes = codes.to(device)
        same = codes[:, None] == codes[None, :]
    return _mean_pairwise_cosine(vectors, same)


# ----------------------------------------------------------------------------
# Where do heads look?


def attention_shares(weights, input_ids, attention_mask, cls_id, sep_id):
    """Per head, the average share of attention on [CLS], [SEP], the previous, the next token and itself.

    weights (B, H, T, T): one layer's attention probabilities, weights[b, h, q, k] = how much
        query q attends to key k (each row sums to 1 over the real keys).
    input_ids (B, T), attention_mask (B, T): True/1 for real tokens, False/0 for padding.
    cls_id, sep_id: the ids of [CLS] and [SEP].

    Returns a dict of numpy arrays of shape (H,):
        "cls"       sum of the weights on [CLS] keys, averaged over real queries
        "sep"       sum of the weights on [SEP] keys, averaged over real queries
        "previous"  the weight on key q - 1, averaged over real queries that have one
        "next"      the weight on key q + 1, averaged over real queries that have one
        "self"      the weight on key q, averaged over real queries
    Padding queries are left out of every average, padding keys are never counted. The
    shares overlap: the token after [CLS] has [CLS] as its previous token, so an exact
    previous-token head also puts some weight on [CLS].
    """
    weights = weights.detach().float()
    real = attention_mask.to(weights.device).bool()  # (B, T)
    ids = input_ids.to(weights.device)

    def average_over_queries(share, queries):
        """share (B, H, T) per query -> (H,) mean over the queries marked True in (B, T)."""
        q = queries[:, None, :].to(share.dtype)  # (B, 1, T), broadcast over heads
        total = (share * q).sum(dim=(0, 2))
        return (total / q.sum(dim=(0, 2)).clamp(min=1)).cpu().numpy()

    def share_on(keys):
        """Weight that each query puts on the keys marked True in keys (B, T) -> (B, H, T)."""
        return (weights * keys[:, None, None, :].to(weights.dtype)).sum(dim=-1)

    # The diagonals: weights[b, h, q, q + offset]; a (B, H, T - |offset|) tensor.
    self_share = weights.diagonal(offset=0, dim1=-2, dim2=-1)
    previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # query q = 1.., key q - 1
    following = weights.diagonal(offset=1, dim1=-2, dim2=-1)  # query q = 0..T-2, key q + 1
    both_real = real[:, 1:] & real[:, :-1]  # a real query and a real neighbour, (B, T - 1)
    return {
        "cls": average_over_queries(share_on(real & (ids == cls_id)), real),
        "sep": average_over_queries(share_on(real & (ids == sep_id)), real),
        "previous": average_over_queries(previous, both_real),
        "next": average_over_queries(following, both_real),
        "self": average_over_queries(self_share, real),
    }
