"""BERT's pre-training objective in plain NumPy (notebook 04): masking 15% of the tokens, and the loss.

    mlm_mask   choose ~p of the ordinary tokens; 80% -> [MASK], 10% -> a random token, 10% kept
    mlm_loss   cross-entropy over the chosen positions only (labels -100 elsewhere)

Conventions as in `plmcourse.ref.objectives`: losses take logits and skip targets equal
to -100; the random function takes an explicit `numpy.random.Generator` and draws only
from it, so the same seed gives the same masking.
"""

import numpy as np

from plmcourse.ref.objectives import IGNORE_INDEX, cross_entropy

__all__ = ["mlm_loss", "mlm_mask"]


def mlm_loss(logits, labels):
    """Masked-language-model loss: cross-entropy over the positions whose label is not -100.

    logits: (..., T, V); labels: (..., T) from `mlm_mask`: the original token where
    the model must predict it, -100 elsewhere. Averaging over the predicted
    positions only (not over all T) keeps the loss's scale independent of how many
    tokens happened to be chosen.
    """
    return cross_entropy(logits, labels, IGNORE_INDEX)


# ----------------------------------------------------------------------------
# BERT's masking


def _allowed_replacements(vocab_size, special_ids, mask_id):
    banned = set(int(s) for s in special_ids) | {int(mask_id)}
    allowed = np.array([i for i in range(vocab_size) if i not in banned], dtype=np.int64)
    if allowed.size == 0:
        raise ValueError("every id is special: there is no token to use as a random replacement.")
    return allowed


def mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's masking: choose ~p of the ordinary tokens; of those 80% -> [MASK], 10% -> random, 10% kept.

    tokens: integer array of any shape, e.g. (B, T). rng: numpy.random.Generator.
    special_ids: ids that are never chosen ([CLS], [SEP], [PAD], ...); random
    replacements are drawn uniformly from the ids in 0..vocab_size-1 that are
    neither special nor `mask_id`.
    Each ordinary position is chosen independently with probability p.
    Returns (inputs, labels), both shaped like tokens: inputs is the corrupted copy;
    labels holds the original token at chosen positions and -100 everywhere else.
    """
    tokens = np.asarray(tokens)
    if tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be integer ids, got dtype {tokens.dtype}.")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}.")
    ordinary = ~np.isin(tokens, np.asarray(list(special_ids), dtype=np.int64))
    chosen = (rng.random(tokens.shape) < p) & ordinary  # the positions the model must predict
    action = rng.random(tokens.shape)  # one draw decides what a chosen position shows
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)  # and 0.9 <= action: kept as it is
    allowed = _allowed_replacements(vocab_size, special_ids, mask_id)
    random_ids = allowed[rng.integers(0, allowed.size, size=tokens.shape)]

    inputs = tokens.copy()
    inputs[to_mask] = mask_id
    inputs[to_random] = random_ids[to_random]
    labels = np.where(chosen, tokens, IGNORE_INDEX).astype(np.int64)
    return inputs, labels
