"""Static word vectors in PyTorch: word2vec (skip-gram and CBOW with negative sampling) and GloVe trainers.

Same names and conventions as `plmcourse.ref.word_vectors`:

    center_vecs (B, d)   context_vecs (B, d)   negative_vecs (B, K, d)

The trainers are written to be timed: each takes a token-id stream and returns
(embeddings, stats), embeddings a NumPy array (V, dim) and stats a dict with the
loss per epoch, the number of training pairs and the speed (words_per_second,
pairs_per_second). Every random choice (initialisation, window sizes,
subsampling, shuffling, negatives) comes from one torch.Generator seeded with
`seed`, on the CPU, so the same seed gives the same vectors on any device.

Speed notes, measured on 2 CPU cores with V ~ 250, d = 50, B = 4096, K = 5:
`W.index_select(0, ids)` is about 1.7x faster than `W[ids]`, and `index_add_`
about 8x faster than `index_put_(..., accumulate=True)`. The skip-gram trainer
therefore computes the gradients of the SGNS loss by hand (the formulas of
`plmcourse.ref.skipgram_negative_sampling_loss`), scatters them with
`index_add_` and lets Adam take the step: about 1.3x faster than autograd
(0.9 against 0.7 million pairs per second). Batches larger than 4096 were slower.

Measured again on notebook 01's Python text (89,000 tokens, V ~ 1,800), one torch
thread: drawing negatives from word2vec's unigram table is about 5x faster than
torch.multinomial; one gather, elementwise product and scatter for the context and
its K negatives together (K + 1 targets) takes a step from 1.2 to 1.8 million pairs
per second; fused Adam saves another 10%. bench/word2vec.py compares the trainer with
gensim. Two threads help little and erratically here: with OMP_WAIT_POLICY=PASSIVE
(set by `import plmcourse`) each of a step's dozen small parallel operations first
wakes a sleeping thread.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

__all__ = [
    "skipgram_negative_sampling_loss",
    "cbow_negative_sampling_loss",
    "glove_loss",
    "noise_distribution",
    "unigram_table",
    "subsample",
    "skipgram_pairs",
    "train_skipgram",
    "train_cbow",
    "train_glove",
]


# ----------------------------------------------------------------------------
# Losses


def skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs):
    """Mean over the batch of -log sigma(c.o) - sum_k log sigma(-c.n_k), a 0-d tensor.

    center_vecs (B, d), context_vecs (B, d), negative_vecs (B, K, d). Unlike the
    NumPy reference it returns the loss only: autograd supplies the gradients.
    F.logsigmoid is stable for large |scores|.
    """
    positive = (center_vecs * context_vecs).sum(-1)  # (B,)
    negative = torch.einsum("bkd,bd->bk", negative_vecs, center_vecs)  # (B, K)
    return -(F.logsigmoid(positive).sum() + F.logsigmoid(-negative).sum()) / center_vecs.shape[0]


def cbow_negative_sampling_loss(context_mean, center_vecs, negative_vecs):
    """CBOW with negative sampling: the averaged context h (B, d) must pick the center out of the negatives.

    context_mean: (B, d) the mean of the context words' input vectors; center_vecs:
    (B, d) the centers' output vectors; negative_vecs: (B, K, d). The same loss as
    skip-gram's with h in place of the center and the center in place of the context.
    """
    return skipgram_negative_sampling_loss(context_mean, center_vecs, negative_vecs)


def glove_loss(w, w_tilde, b, b_tilde, rows, cols, counts, x_max=100.0, alpha=0.75):
    """GloVe's weighted least squares over the nonzero entries (rows, cols, counts) of X.

    sum_k f(X_k) (w_rows[k] . w~_cols[k] + b_rows[k] + b~_cols[k] - log X_k)^2,
    f(x) = min(1, (x / x_max)^alpha). Passing only the nonzero entries is the point:
    log 0 is undefined and f(0) = 0, so unseen pairs never enter the sum.
    """
    # index_select, not w[rows]: its backward is index_add_, far faster than fancy indexing's.
    fit = ((w.index_select(0, rows) * w_tilde.index_select(0, cols)).sum(-1)
           + b.index_select(0, rows) + b_tilde.index_select(0, cols))
    weight = torch.clamp(counts / x_max, max=1.0) ** alpha
    return (weight * (fit - torch.log(counts)) ** 2).sum()


# ----------------------------------------------------------------------------
# Data: subsampling, pairs, negatives


def noise_distribution(counts, power=0.75):
    """P_n(w) proportional to count(w)**power (0 for unseen words), a float64 tensor (V,)."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    weights = torch.where(counts > 0, counts.clamp(min=0) ** power, torch.zeros_like(counts))
    return weights / weights.sum()


def unigram_table(noise, size=1_000_000):
    """word2vec's table for drawing negatives: word w fills about size * P_n(w) of its cells.

    An index drawn uniformly from 0..len-1 then picks w with probability P_n(w): one
    random integer and one lookup per negative, several times faster than
    torch.multinomial. Every word with P_n(w) > 0 gets at least one cell.
    """
    cells = (noise * size).round().long().clamp(min=1) * (noise > 0)
    return torch.repeat_interleave(torch.arange(len(noise)), cells)


def subsample(token_ids, counts, threshold, generator):
    """Drop frequent words at random, as word2vec does: keep w with probability sqrt(t/f) + t/f.

    f is the word's share of the corpus, t the threshold (word2vec's default 1e-3).
    Words far more frequent than t ("the", ".") are mostly dropped, which speeds up
    training and lets rarer, more informative neighbours into each window.
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)
    share = counts / counts.sum()
    keep_prob = ((threshold / share).sqrt() + threshold / share).clamp(max=1.0)
    keep_prob = torch.nan_to_num(keep_prob, nan=1.0, posinf=1.0)  # unseen words: never drawn anyway
    keep = torch.rand(len(token_ids), generator=generator, dtype=torch.float64) < keep_prob[token_ids]
    return token_ids[keep]


def skipgram_pairs(token_ids, window, generator):
    """All (center, context) pairs of a stream with word2vec's dynamic window: (centers, contexts).

    Each center draws its own window size b uniformly from 1..window and pairs with
    the words at distances 1..b on both sides, so near words are used more often
    than far ones (distance t is kept with probability (window - t + 1) / window).
    """
    ids = torch.as_tensor(token_ids, dtype=torch.int64)
    n = len(ids)
    reach = torch.randint(1, window + 1, (n,), generator=generator)  # b for each center
    centers, contexts = [], []
    for t in range(1, min(window, n - 1) + 1):
        right = torch.nonzero(reach[:-t] >= t).squeeze(1)  # center i, context i + t
        centers.append(ids[right])
        contexts.append(ids[right + t])
        left = torch.nonzero(reach[t:] >= t).squeeze(1) + t  # center i, context i - t
        centers.append(ids[left])
        contexts.append(ids[left - t])
    if not centers:
        empty = torch.zeros(0, dtype=torch.int64)
        return empty, empty
    return torch.cat(centers), torch.cat(contexts)


def _resolve_device(device):
    if device is None:
        from plmcourse.nn.device import default_device
        return default_device()
    return torch.device(device)


def _check_stream(token_ids, vocab_size):
    ids = torch.as_tensor(np.asarray(token_ids), dtype=torch.int64)
    if ids.dim() != 1:
        raise ValueError(f"token_ids must be one stream (1-D), got shape {tuple(ids.shape)}.")
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"token ids must lie in 0..{vocab_size - 1}.")
    return ids


def _init_tables(vocab_size, dim, generator, device):
    """word2vec's initialisation: input vectors uniform in +-0.5/dim, output vectors zero."""
    W = ((torch.rand(vocab_size, dim, generator=generator) - 0.5) / dim).to(device)
    C = torch.zeros(vocab_size, dim, device=device)
    return W.requires_grad_(), C.requires_grad_()


# ----------------------------------------------------------------------------
# Trainers


def train_skipgram(token_ids, vocab_size, dim=50, window=5, negatives=5, epochs=3, batch_size=4096,
                   lr=0.01, seed=0, device=None, subsample_threshold=1e-3, power=0.75, progress=True):
    """Skip-gram with negative sampling on a token stream; returns (embeddings, stats).

    token_ids: 1-D ints in 0..vocab_size-1 (sentences one after the other).
    dim: vector size; window: the largest distance of a context word (dynamic window);
    negatives: K negatives per pair from count**power; epochs: passes over the stream;
    batch_size, lr: pairs per Adam step and its learning rate; subsample_threshold:
    word2vec's t (None keeps every word); seed: everything random; device: where to train.

    embeddings: NumPy float32 (vocab_size, dim), the input ("center") vectors.
    stats: {"loss": mean loss per epoch, "pairs": pairs trained on, "seconds",
    "words_per_second" (stream tokens per second), "pairs_per_second",
    "output_embeddings": the context vectors C, "device"}.
    """
    device = _resolve_device(device)
    ids = _check_stream(token_ids, vocab_size)
    generator = torch.Generator().manual_seed(seed)
    counts = torch.bincount(ids, minlength=vocab_size)
    table = unigram_table(noise_distribution(counts, power)).to(device)
    W, C = _init_tables(vocab_size, dim, generator, device)
    # fused: one kernel updates both tables, instead of a dozen small operations per step.
    optimizer = torch.optim.Adam([W, C], lr=lr, fused=device.type in ("cpu", "cuda") or None)
    losses, n_pairs = [], 0
    start = time.perf_counter()
    bar = tqdm(total=epochs, desc="skip-gram", disable=not progress, leave=False)
    for _ in range(epochs):
        stream = subsample(ids, counts, subsample_threshold, generator) if subsample_threshold else ids
        centers, contexts = skipgram_pairs(stream, window, generator)
        order = torch.randperm(len(centers), generator=generator)
        centers, contexts = centers[order].to(device), contexts[order].to(device)
        draws = torch.randint(len(table), (len(centers) * negatives,), generator=generator).to(device)
        negs = table.index_select(0, draws).view(-1, negatives)
        total = torch.zeros((), dtype=torch.float64, device=device)
        for s in range(0, len(centers), batch_size):
            total += _skipgram_step(W, C, optimizer, centers[s:s + batch_size], contexts[s:s + batch_size],
                                    negs[s:s + batch_size])
        n_pairs += len(centers)
        losses.append(total.item() / max(1, math.ceil(len(centers) / batch_size)))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    bar.close()
    return _tables_and_stats(W, C, losses, n_pairs, epochs * len(ids), start, device)


def _tables_and_stats(W, C, losses, n_pairs, n_words, start, device):
    """What train_skipgram and train_cbow return: the input vectors as NumPy, and their stats dict
    (n_pairs: the (context, center) examples trained on; n_words: the tokens read, all epochs)."""
    seconds = time.perf_counter() - start
    stats = {"loss": losses, "pairs": n_pairs, "seconds": seconds,
             "words_per_second": n_words / seconds, "pairs_per_second": n_pairs / seconds,
             "output_embeddings": C.detach().cpu().numpy(), "device": str(device)}
    return W.detach().cpu().numpy(), stats


def _skipgram_step(W, C, optimizer, center_ids, context_ids, negative_ids):
    """One Adam step on the SGNS loss, with the gradients written out by hand; returns the loss.

    The context and the K negatives are K + 1 targets of one logistic regression on the
    score s = c.u, label 1 for the context and 0 for a negative: the loss is
    -log sigma(s) for the context and -log sigma(-s) for a negative, its gradient with
    respect to s is sigma(s) - label (the formulas of `plmcourse.ref.skipgram_negative_sampling_loss`).
    One gather and one scatter of C serve both kinds of targets.
    """
    B, d = len(center_ids), W.shape[1]
    with torch.no_grad():
        targets = torch.cat([context_ids[:, None], negative_ids], 1)  # (B, K+1), the context first
        c = W.index_select(0, center_ids)  # (B, d)
        u = C.index_select(0, targets.view(-1)).view(*targets.shape, d)  # (B, K+1, d)
        scores = (u * c[:, None, :]).sum(-1)  # (B, K+1); faster than bmm for such tiny matrices
        loss = -(F.logsigmoid(scores[:, 0]).sum() + F.logsigmoid(-scores[:, 1:]).sum()) / B
        g = torch.sigmoid(scores)  # dloss/ds = (sigma(s) - label) / B
        g[:, 0] -= 1.0
        g /= B
        grad_c = (g[:, :, None] * u).sum(1)  # (B, d)
        grad_u = g[:, :, None] * c[:, None, :]  # (B, K+1, d)
        # A word can appear many times in a batch: index_add_ sums its gradients.
        W.grad = torch.zeros_like(W).index_add_(0, center_ids, grad_c)
        C.grad = torch.zeros_like(C).index_add_(0, targets.view(-1), grad_u.view(-1, d))
    optimizer.step()
    return loss.double()


def _cbow_windows(stream, window):
    """(contexts (N, 2*window) with -1 where the window leaves the stream, centers (N,))."""
    n = len(stream)
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)])
    positions = torch.arange(n)[:, None] + offsets[None, :]  # (N, 2w)
    inside = (positions >= 0) & (positions < n)
    contexts = torch.where(inside, stream[positions.clamp(0, n - 1)], -1)
    return contexts, stream


def train_cbow(token_ids, vocab_size, dim=50, window=5, negatives=5, epochs=3, batch_size=4096,
               lr=0.01, seed=0, device=None, subsample_threshold=1e-3, power=0.75, progress=True):
    """CBOW with negative sampling: the mean of the 2*window context vectors predicts the center.

    Same arguments and return value as `train_skipgram` (here with autograd and
    F.embedding_bag for the masked mean). CBOW makes one prediction per position
    instead of one per (center, context) pair, so an epoch is several times cheaper.
    """
    device = _resolve_device(device)
    ids = _check_stream(token_ids, vocab_size)
    generator = torch.Generator().manual_seed(seed)
    counts = torch.bincount(ids, minlength=vocab_size)
    noise = noise_distribution(counts, power).float()
    W, C = _init_tables(vocab_size, dim, generator, device)
    optimizer = torch.optim.Adam([W, C], lr=lr)
    losses, n_examples = [], 0
    start = time.perf_counter()
    bar = tqdm(total=epochs, desc="CBOW", disable=not progress, leave=False)
    for _ in range(epochs):
        stream = subsample(ids, counts, subsample_threshold, generator) if subsample_threshold else ids
        contexts, centers = _cbow_windows(stream, window)
        order = torch.randperm(len(centers), generator=generator)
        contexts, centers = contexts[order].to(device), centers[order].to(device)
        negs = torch.multinomial(noise, len(centers) * negatives, replacement=True,
                                 generator=generator).view(-1, negatives).to(device)
        total, steps = 0.0, 0
        for s in range(0, len(centers), batch_size):
            ctx, cen, neg = contexts[s:s + batch_size], centers[s:s + batch_size], negs[s:s + batch_size]
            mask = ctx >= 0
            # embedding_bag's per_sample_weights with mode="sum" gives the masked mean in one call.
            weights = (mask / mask.sum(1, keepdim=True).clamp(min=1)).float()
            h = F.embedding_bag(ctx.clamp(min=0), W, per_sample_weights=weights, mode="sum")
            loss = cbow_negative_sampling_loss(h, C.index_select(0, cen),
                                               C.index_select(0, neg.reshape(-1)).view(*neg.shape, -1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
        n_examples += len(centers)
        losses.append(total / max(1, steps))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    bar.close()
    return _tables_and_stats(W, C, losses, n_examples, epochs * len(ids), start, device)


def train_glove(counts, dim=50, epochs=300, lr=0.05, x_max=100.0, alpha=0.75, seed=0, device=None,
                progress=True):
    """Fit GloVe to a (V, V) co-occurrence matrix with full-batch Adagrad; returns (embeddings, stats).

    Every step uses all nonzero entries (fine for the course's vocabularies of a few
    thousand words). embeddings = W + W~, the sum of word and context vectors, as
    the GloVe paper recommends. stats: {"loss": per step, "seconds", "nonzero"}.
    """
    device = _resolve_device(device)
    X = torch.as_tensor(np.asarray(counts), dtype=torch.float32)
    V = X.shape[0]
    rows, cols = torch.nonzero(X > 0, as_tuple=True)
    values = X[rows, cols]
    generator = torch.Generator().manual_seed(seed)
    params = [((torch.rand(V, dim, generator=generator) - 0.5) / dim).to(device).requires_grad_(),
              ((torch.rand(V, dim, generator=generator) - 0.5) / dim).to(device).requires_grad_(),
              torch.zeros(V, device=device, requires_grad=True),
              torch.zeros(V, device=device, requires_grad=True)]
    rows, cols, values = rows.to(device), cols.to(device), values.to(device)
    optimizer = torch.optim.Adagrad(params, lr=lr)
    losses = []
    start = time.perf_counter()
    for _ in tqdm(range(epochs), desc="GloVe", disable=not progress, leave=False):
        loss = glove_loss(*params, rows, cols, values, x_max, alpha)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    w, w_tilde = params[0].detach(), params[1].detach()
    stats = {"loss": losses, "seconds": seconds, "nonzero": int(len(values)), "device": str(device)}
    return (w + w_tilde).cpu().numpy(), stats
