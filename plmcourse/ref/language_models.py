"""Language models in plain NumPy (float64): perplexity, n-gram baselines, the biLM loss, the scalar mix.

A language model assigns a sentence w_1..w_T the probability given by the chain rule,

    P(w_1, ..., w_T) = prod_t P(w_t | w_1, ..., w_{t-1}),

and is measured by its perplexity on held-out text: exp of the mean negative
log-likelihood per token, the effective number of words it hesitates between.

Conventions (shared with `plmcourse.nn.elmo`): logits (..., V); targets (...) with
ignore_index=-100 where a position has no target; losses are means over the
counted positions. In a biLM, forward_logits[:, t] predicts targets[:, t + 1] and
backward_logits[:, t] predicts targets[:, t - 1].
"""

from __future__ import annotations

import math

import numpy as np

from plmcourse.ref.objectives import IGNORE_INDEX, cross_entropy

__all__ = [
    "cross_entropy",
    "perplexity",
    "NGramLM",
    "bilm_loss",
    "scalar_mix",
]


def perplexity(logits, targets, ignore_index=IGNORE_INDEX):
    """exp(mean cross-entropy): 1 for a model that is always sure and right, V for a uniform guess."""
    return math.exp(cross_entropy(logits, targets, ignore_index))


class NGramLM:
    """An n-gram language model: P(w_t | the previous n-1 words), estimated by counting.

    Two kinds of smoothing, so that a word never seen after a context still gets
    some probability (else one unseen n-gram in the test text gives perplexity inf):

    * add-k (lambdas=None): P(w | h) = (count(h, w) + k) / (count(h) + k V);
    * interpolation (lambdas = (l_1, ..., l_n), summing to 1): a weighted sum of the
      add-k estimates of orders 1..n, so a context seen rarely leans on shorter ones.

    The first n-1 words of a stream are predicted from the shorter histories that exist.

        lm = NGramLM(order=3, vocab_size=V, k=0.01).fit(train_ids)
        lm.perplexity(test_ids)
    """

    def __init__(self, order, vocab_size, k=1.0, lambdas=None):
        if order < 1:
            raise ValueError(f"order must be at least 1, got {order}.")
        if lambdas is not None and (len(lambdas) != order or not math.isclose(sum(lambdas), 1.0)):
            raise ValueError(f"lambdas must be {order} weights summing to 1, got {lambdas}.")
        self.order, self.vocab_size, self.k = order, vocab_size, k
        self.lambdas = None if lambdas is None else tuple(float(x) for x in lambdas)
        self.counts = None  # counts[m]: dict history tuple (m words) -> (V,) counts of the next word

    def fit(self, token_ids):
        ids = np.asarray(token_ids, dtype=np.int64)
        self.counts = []
        for m in range(self.order):  # history length m = 0 .. order-1
            table = {}
            histories = np.stack([ids[i:len(ids) - m + i] for i in range(m)], axis=1) if m else None
            nexts = ids[m:]
            if m == 0:
                table[()] = np.bincount(nexts, minlength=self.vocab_size).astype(np.float64)
            else:
                keys, inverse = np.unique(histories, axis=0, return_inverse=True)
                grid = np.zeros((len(keys), self.vocab_size))
                np.add.at(grid, (inverse.reshape(-1), nexts), 1.0)
                table = {tuple(int(x) for x in key): row for key, row in zip(keys, grid)}
            self.counts.append(table)
        return self

    def _add_k(self, m, history):
        """Add-k estimate of P(. | history) for a history of m words, (V,)."""
        row = self.counts[m].get(history)
        if row is None:
            return np.full(self.vocab_size, 1.0 / self.vocab_size)  # a history never seen: uniform
        return (row + self.k) / (row.sum() + self.k * self.vocab_size)

    def next_distribution(self, history):
        """P(. | the last order-1 words of `history`), a (V,) distribution."""
        if self.counts is None:
            raise ValueError("call fit() first.")
        history = tuple(int(x) for x in history)[-(self.order - 1):] if self.order > 1 else ()
        n = len(history)  # shorter at the start of a stream
        if self.lambdas is None:
            return self._add_k(n, history)
        weights = np.array(self.lambdas[:n + 1])
        weights = weights / weights.sum()
        return sum(w * self._add_k(m, history[n - m:]) for m, w in zip(range(n + 1), weights))

    def log_probs(self, token_ids):
        """log P(w_t | previous words) for every position t >= 1 of the stream, (T - 1,)."""
        ids = [int(x) for x in token_ids]
        probs = np.array([self.next_distribution(ids[max(0, t - self.order + 1):t])[ids[t]]
                          for t in range(1, len(ids))])
        with np.errstate(divide="ignore"):  # an unsmoothed model gives unseen n-grams log 0 = -inf
            return np.log(probs)

    def perplexity(self, token_ids):
        """exp(mean -log P) over positions 1..T-1; inf if any of them has probability 0."""
        return float(np.exp(-np.mean(self.log_probs(token_ids))))


def _shifted_targets(targets, shift, ignore_index):
    """Targets of the predictions made at positions t, of the token at t + shift (shift = +1 or -1).

    A prediction counts only if the position it is made from and the position it
    predicts both hold real tokens; the others get ignore_index.
    """
    targets = np.asarray(targets)
    if shift == 1:
        source, target = targets[:, :-1], targets[:, 1:]
    else:
        source, target = targets[:, 1:], targets[:, :-1]
    return np.where(source == ignore_index, ignore_index, target)


def bilm_loss(forward_logits, backward_logits, targets, ignore_index=IGNORE_INDEX):
    """ELMo's objective as a loss: the forward LM's mean cross-entropy plus the backward LM's.

    forward_logits, backward_logits: (B, L, V); targets: (B, L) token ids, ignore_index
    at padding. The forward LM at position t has read tokens 0..t and predicts
    token t + 1; the backward LM at position t has read tokens t..L-1 and predicts
    token t - 1 (the reversed shift). Each direction is averaged over the
    predictions it makes from a real token to a real token; the two are summed.
    """
    forward_logits = np.asarray(forward_logits, dtype=np.float64)
    backward_logits = np.asarray(backward_logits, dtype=np.float64)
    forward = cross_entropy(forward_logits[:, :-1], _shifted_targets(targets, +1, ignore_index), ignore_index)
    backward = cross_entropy(backward_logits[:, 1:], _shifted_targets(targets, -1, ignore_index), ignore_index)
    return forward + backward


def scalar_mix(layers, weights, gamma):
    """ELMo's mix of layers: gamma * sum_j softmax(weights)_j * layers[j].

    layers: (N, ..., d), the N layers' representations stacked; weights: (N,)
    unnormalised; gamma: a number. The softmax makes the layer weights positive and
    sum to 1, so gamma alone sets the scale of the result.
    """
    layers = np.asarray(layers, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    s = np.exp(w - w.max())
    s = s / s.sum()  # (N,)
    return float(gamma) * np.tensordot(s, layers, axes=([0], [0]))
