"""Prompting with little data in PyTorch (notebook 10), the same names and conventions as
`plmcourse.ref.prompting`: verbalizer_log_probs, pet_soft_labels, select_pseudo_labels.
Everything runs on the device of its inputs."""

from __future__ import annotations

import torch

__all__ = ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels"]


def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """logits (B, T, V), mask_positions (B,), C lists of label-word ids -> (B, C) log-probabilities.

    A class's score is the mean of its words' logits at the mask; log-softmax over the C classes.
    """
    at_mask = logits[torch.arange(logits.shape[0], device=logits.device), mask_positions]  # (B, V)
    scores = torch.stack([at_mask[:, list(ids)].mean(dim=-1) for ids in label_word_ids], dim=-1)  # (B, C)
    return torch.log_softmax(scores, dim=-1)


def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """(P, N, C) class log-probabilities of P patterns -> (N, C) soft targets:
    softmax(weighted mean over patterns / temperature), weights normalised (uniform when None)."""
    P = pattern_log_probs.shape[0]
    if weights is None:
        w = pattern_log_probs.new_full((P,), 1.0 / P)
    else:
        w = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
        if w.shape != (P,) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"weights must be {P} non-negative numbers with a positive sum, got {weights!r}.")
        w = w / w.sum()
    mean = torch.tensordot(w, pattern_log_probs, dims=1)  # (N, C)
    return torch.softmax(mean / temperature, dim=-1)


def select_pseudo_labels(probs, per_class):
    """(N, C) probabilities -> indices of the `per_class` most confident examples predicted as
    each class (class 0's first, most confident first, ties by lower index)."""
    confidence, predicted = probs.max(dim=-1)  # (N,), (N,)
    chosen = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        order = torch.sort(-confidence[members], stable=True).indices  # most confident first
        chosen.append(members[order[:per_class]])
    return torch.cat(chosen)
