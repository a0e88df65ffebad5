"""GPT's pre-training objective in plain NumPy (notebook 05): predict every next token.

The decoding filters that notebook 05 samples with (top_k_filter, top_p_filter) live in
`plmcourse.ref.generate`; conventions as in `plmcourse.ref.objectives`.
"""

import numpy as np

from plmcourse.ref.objectives import IGNORE_INDEX, cross_entropy

__all__ = ["causal_lm_loss"]


def causal_lm_loss(logits, tokens, ignore_index=IGNORE_INDEX):
    """Next-token loss of a left-to-right language model; the shift happens inside.

    logits: (..., T, V), the model's output at each of the T input positions;
    tokens: (..., T), the input ids. Position t predicts token t + 1, so the last
    position has nothing to predict and the first token is never a target:
    cross_entropy(logits[..., :-1, :], tokens[..., 1:]). Tokens equal to
    `ignore_index` (e.g. padding replaced by -100 in a copy) are not counted.
    """
    logits = np.asarray(logits, dtype=np.float64)
    tokens = np.asarray(tokens)
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens must have shape {logits.shape[:-1]}, got {tokens.shape}.")
    return cross_entropy(logits[..., :-1, :], tokens[..., 1:], ignore_index)
