"""The loss every objective is built on, in plain NumPy: cross-entropy that skips ignored targets.

The three families of pre-trained language models differ in what they corrupt and
what they predict; each has its own module, and all of them score with `cross_entropy`:

    BERT  (encoder)          mask 15% of the tokens, predict them     plmcourse.ref.bert: mlm_mask, mlm_loss
    GPT   (decoder)          predict every next token                 plmcourse.ref.gpt: causal_lm_loss
    BART  (encoder-decoder)  corrupt the text, regenerate all of it   plmcourse.ref.bart: token_masking,
                                                                      token_deletion, text_infilling,
                                                                      sentence_permutation, document_rotation
    T5    (encoder-decoder)  drop spans, generate only the spans      plmcourse.ref.bart: t5_span_corruption
    UniLM, XLNet             one Transformer, other attention masks   plmcourse.ref.bart: prefix_lm_mask,
                                                                      permutation_mask

Conventions (the course's): losses take logits, not probabilities, skip targets equal
to `ignore_index` (-100) and average over the targets they count. Every random
function takes an explicit `numpy.random.Generator` and draws only from it, so the
same seed gives the same corruption. Masks are bool and True where attention is allowed.
"""

import numpy as np

__all__ = [
    "IGNORE_INDEX",
    "cross_entropy",
]

IGNORE_INDEX = -100

# ----------------------------------------------------------------------------
# Losses


def _log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, stable for large logits: x - max - log(sum(exp(x - max)))."""
    x = np.asarray(x, dtype=np.float64)
    x_max = np.max(x, axis=axis, keepdims=True)
    shifted = x - x_max
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """Mean negative log-likelihood of `targets` under softmax(`logits`), over counted positions.

    logits: (..., V) unnormalised scores; targets: (...) integer class ids, or
    `ignore_index` where a position has no target. Returns a float: the mean of
    -log p(target) over the positions whose target is not `ignore_index`, or 0.0
    when there is none (torch.nn.functional.cross_entropy returns NaN there; a
    batch without a single target should not poison training).
    """
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (logits' shape without the "
                         f"last axis), got {targets.shape}.")
    if targets.dtype.kind not in "iu":
        raise ValueError(f"targets must be integer class ids, got dtype {targets.dtype}.")
    counted = targets != ignore_index
    V = logits.shape[-1]
    if np.any(counted & ((targets < 0) | (targets >= V))):
        raise ValueError(f"every counted target must lie in 0..{V - 1} (or be ignore_index={ignore_index}).")
    if not counted.any():
        return 0.0
    log_probs = _log_softmax(logits, axis=-1)  # (..., V)
    safe = np.where(counted, targets, 0)  # any valid index; ignored positions are dropped below
    picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]  # (...)
    return float(-picked[counted].mean())
