"""GPT's pre-training loss in PyTorch (notebook 05), with the names and conventions of `plmcourse.ref.gpt`.

Decoding (top_k_filter, top_p_filter, sample_next, generate) lives in `plmcourse.nn.generate`.
"""

from plmcourse.nn.objectives import IGNORE_INDEX, cross_entropy

__all__ = ["causal_lm_loss"]


def causal_lm_loss(logits, tokens, ignore_index=IGNORE_INDEX):
    """Next-token loss: position t predicts token t + 1 (the shift is inside).

    logits: (..., T, V) for the input tokens (..., T). The last position has no
    next token and the first token is never predicted: T - 1 targets per sequence.
    """
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens must have shape {tuple(logits.shape[:-1])}, got {tuple(tokens.shape)}.")
    return cross_entropy(logits[..., :-1, :], tokens[..., 1:], ignore_index)
