"""What an attention head does, as numbers (notebook 11): induction and previous-token scores.

    induction_score(attention, tokens)    for each head, the attention a query whose token came
                                          before pays to the position right after that earlier copy
    previous_token_score(attention)       for each head, the attention on the position just before

`attention` is one sequence's (H, T, T) weights, rows are queries and columns keys (what
`Bert.all_layers(..., return_weights=True)` and `GPT.attention_maps` give per sequence).
Both scores are averages of attention weights, so they lie in [0, 1]; a head that always
does the thing scores 1.
"""

from __future__ import annotations

import numpy as np

__all__ = ["induction_score", "previous_token_score", "latest_earlier_occurrence"]


def latest_earlier_occurrence(tokens):
    """(T,) ints: for each position t, the largest s < t with tokens[s] == tokens[t], or -1."""
    tokens = np.asarray(tokens)
    last_seen, latest = {}, np.full(len(tokens), -1)
    for t, token in enumerate(tokens.tolist()):
        latest[t] = last_seen.get(token, -1)
        last_seen[token] = t
    return latest


def induction_score(attention, tokens):
    """Mean attention from each query t whose token appeared before to s + 1, where s < t is the
    latest earlier position holding the same token: what a head that completes "... A B ... A"
    with B looks at. attention (H, T, T), tokens (T,) -> (H,); zeros when no token repeats.
    """
    attention = np.asarray(attention, dtype=np.float64)
    s = latest_earlier_occurrence(tokens)  # (T,)
    queries = np.flatnonzero(s >= 0)  # positions whose token came before
    if len(queries) == 0:
        return np.zeros(attention.shape[0])
    return attention[:, queries, s[queries] + 1].mean(axis=-1)  # (H, n) -> (H,)


def previous_token_score(attention):
    """Mean attention from each query t >= 1 to t - 1. attention (H, T, T) -> (H,)."""
    attention = np.asarray(attention, dtype=np.float64)
    T = attention.shape[-1]
    t = np.arange(1, T)
    return attention[:, t, t - 1].mean(axis=-1)
