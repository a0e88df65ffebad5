"""Prompting with little data in NumPy (notebook 10): cloze verbalizers, PET's soft labels, self-training.

    verbalizer_log_probs(logits, mask_positions, label_word_ids) -> (B, C)
        a masked LM's logits at the [MASK] -> one log-probability per class
    pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0) -> (N, C)
        several patterns' class scores on unlabelled examples -> PET's soft training targets
    select_pseudo_labels(probs, per_class) -> indices
        the most confident examples of each predicted class, class-balanced

plmcourse.nn.prompting has the PyTorch versions, with the same names and conventions.
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import _log_softmax  # one stable log-softmax for the references

__all__ = ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels"]


def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """Turn a cloze into a classifier: log P(class | input) from the MLM's guess at the [MASK].

    logits: (B, T, V) of the masked LM; mask_positions: (B,) where each input's [MASK] is;
    label_word_ids: C lists of token ids, the words that stand for each class
    ("great", "good" for positive). A class's score is the mean of its words' logits at the
    mask position; the result is the log-softmax over the C classes (not over the vocabulary).
    """
    logits = np.asarray(logits, dtype=np.float64)
    at_mask = logits[np.arange(len(logits)), np.asarray(mask_positions)]  # (B, V)
    scores = np.stack([at_mask[:, list(ids)].mean(axis=-1) for ids in label_word_ids], axis=-1)  # (B, C)
    return _log_softmax(scores)


def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """PET's targets for the unlabelled data: the patterns' ensemble, softened.

    pattern_log_probs: (P, N, C), each pattern's class log-probabilities (used as logits);
    weights: (P,) non-negative, e.g. each pattern's accuracy on the training set, normalised
    to sum to 1 (uniform when None). Returns softmax(weighted mean of the logits / temperature),
    (N, C): averaging logits, not probabilities, is an ensemble in log space.
    """
    scores = np.asarray(pattern_log_probs, dtype=np.float64)
    P = scores.shape[0]
    w = np.full(P, 1.0 / P) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (P,) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be {P} non-negative numbers with a positive sum, got {weights!r}.")
    w = w / w.sum()
    mean = np.tensordot(w, scores, axes=1)  # (N, C)
    return np.exp(_log_softmax(mean / temperature))


def select_pseudo_labels(probs, per_class):
    """Indices of the `per_class` most confident examples predicted as each class.

    probs: (N, C) class probabilities on unlabelled examples. An example counts for the class
    it is predicted as (its argmax), with that probability as its confidence. Taking the top
    of each class separately keeps the pseudo-labelled set balanced; a global top-k would
    fill it with the class the model is most sure of. A class with fewer predicted examples
    gives all it has. Returns int indices, class 0's first, each class's most confident
    first (ties: the lower index first).
    """
    probs = np.asarray(probs, dtype=np.float64)
    predicted = probs.argmax(axis=-1)  # (N,)
    confidence = probs.max(axis=-1)  # (N,)
    chosen = []
    for c in range(probs.shape[1]):
        members = np.flatnonzero(predicted == c)
        order = np.argsort(-confidence[members], kind="stable")  # most confident first
        chosen.append(members[order[:per_class]])
    return np.concatenate(chosen).astype(np.int64)
